//! The skills group's settings.

use crate::{FromToolContext, ToolContext, ToolError};

/// What only the skills group uses. The engine fills it from `engine.json` (the `skills`
/// section) and registers it as a service; without one, the defaults below apply.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SkillsSettings {
    /// Most characters of skill names and descriptions in the agent's system prompt
    /// (`skills.promptBudgetChars`, default 8000); past it the prompt says how many were
    /// left out.
    pub prompt_budget_chars: usize,
    /// Whether a loaded skill's `allowed-tools` limits the tools its caller may call
    /// (`skills.enforceAllowedTools`, default off).
    pub enforce_allowed_tools: bool,
}

impl Default for SkillsSettings {
    fn default() -> Self {
        Self {
            prompt_budget_chars: 8000,
            enforce_allowed_tools: false,
        }
    }
}

impl SkillsSettings {
    /// Sets the system prompt's budget for skills, in characters.
    #[must_use]
    pub fn with_prompt_budget_chars(mut self, chars: usize) -> Self {
        self.prompt_budget_chars = chars;
        self
    }

    /// Turns the enforcement of `allowed-tools` on or off.
    #[must_use]
    pub fn with_enforce_allowed_tools(mut self, on: bool) -> Self {
        self.enforce_allowed_tools = on;
        self
    }
}

impl FromToolContext for SkillsSettings {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        Ok(ctx.shared_state::<Self>().as_ref().clone())
    }
}
