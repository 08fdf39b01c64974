//! The `skills` section of `engine.json`; [`Config::skills`] gives the skills group its
//! settings.

use super::Config;
use super::keys::section;

section! {
    /// The `skills` section of `engine.json`: Agent Skills (`SKILL.md` folders in
    /// `<dataDir>/skills/` and `<workspace>/skills/`). Every key is optional.
    pub struct SkillsSection {
        keys {
            /// Most characters of skill names and descriptions in the agent's system
            /// prompt; past it the prompt says how many skills were left out and that
            /// `skill_list` shows them. 0 lists none.
            prompt_budget_chars: usize = 8000;
                key "promptBudgetChars", env "KLAW_SKILLS_PROMPT_BUDGET_CHARS",
                type "integer ≥ 0";
            /// Once a conversation has loaded a skill whose `allowed-tools` lists tools,
            /// refuse its calls of any other tool (the `skill_*` tools stay allowed).
            enforce_allowed_tools: bool = false;
                key "enforceAllowedTools", env "KLAW_SKILLS_ENFORCE_ALLOWED_TOOLS",
                type "`true` or `false`";
        }
    }
}

impl Config {
    /// The skills group's settings; the engine registers them as a service.
    #[cfg(feature = "skills")]
    pub fn skills(&self) -> klaw_tools::tools::skills::SkillsSettings {
        klaw_tools::tools::skills::SkillsSettings::default()
            .with_prompt_budget_chars(self.raw.skills.prompt_budget_chars)
            .with_enforce_allowed_tools(self.raw.skills.enforce_allowed_tools)
    }
}
