//! The `skills` section of `engine.json`; [`Config::skills`] gives the skills group its
//! settings.

use super::Config;
use super::keys::section;

section! {
    /// The `skills` section of `engine.json`: Agent Skills (`SKILL.md` folders in
    /// `<dataDir>/skills/`, `skills.paths`, `~/.claude/skills/`, `~/.agents/skills/`
    /// and the workspace's `.claude/skills/`, `.agents/skills/`, `skills/`). Every key
    /// is optional.
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
            /// More folders of skills (each holding skill folders), above the data
            /// dir's and below the user's and the workspace's, a later one winning; `~/`
            /// is the home, a relative path is relative to the workspace.
            paths: Vec<String> = Vec::new();
                key "paths", env "KLAW_SKILLS_PATHS",
                type "array of strings (paths)";
        }
    }
}

impl Config {
    /// The skills group's settings; the engine registers them as a service.
    #[cfg(feature = "skills")]
    pub fn skills(&self) -> klaw_tools::tools::skills::SkillsSettings {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(std::path::PathBuf::from);
        let paths = self
            .raw
            .skills
            .paths
            .iter()
            .map(|p| match (p.strip_prefix("~/"), &home) {
                (Some(rest), Some(h)) => h.join(rest),
                _ => self.workspace.join(p),
            })
            .collect();
        klaw_tools::tools::skills::SkillsSettings::default()
            .with_prompt_budget_chars(self.raw.skills.prompt_budget_chars)
            .with_enforce_allowed_tools(self.raw.skills.enforce_allowed_tools)
            .with_paths(paths)
            .with_home(home)
    }
}
