//! The skills group's settings.

use std::path::{Path, PathBuf};

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
    /// More folders of skills (`skills.paths`), above the system skills and below the
    /// user's and the workspace's, in order.
    pub paths: Vec<PathBuf>,
    /// The home whose `.claude/skills/` and `.agents/skills/` hold the user's skills;
    /// `None`: no user skills (the engine sets it from `HOME`).
    pub home: Option<PathBuf>,
}

impl Default for SkillsSettings {
    fn default() -> Self {
        Self {
            prompt_budget_chars: 8000,
            enforce_allowed_tools: false,
            paths: Vec::new(),
            home: None,
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

impl SkillsSettings {
    /// Sets the folders of `skills.paths`.
    #[must_use]
    pub fn with_paths(mut self, paths: Vec<PathBuf>) -> Self {
        self.paths = paths;
        self
    }

    /// Sets the home whose `.claude/skills/` and `.agents/skills/` are read.
    #[must_use]
    pub fn with_home(mut self, home: Option<PathBuf>) -> Self {
        self.home = home;
        self
    }

    /// The skills folders of `workspace` and `data_dir` with these settings, lowest
    /// precedence first ([`sources`](super::sources)).
    pub fn sources(&self, workspace: &Path, data_dir: &Path) -> Vec<super::Source> {
        super::sources(workspace, data_dir, self.home.as_deref(), &self.paths)
    }

    /// The skills folders outside the workspace (the system one, `skills.paths`, the
    /// user's) that exist, canonical: the shell tools show them to commands read-only,
    /// at these paths, so that a skill's bundled scripts run (the workspace's own
    /// folders commands see with the workspace). Blocking.
    pub fn folders_for_commands(&self, workspace: &Path, data_dir: &Path) -> Vec<PathBuf> {
        let mut folders: Vec<PathBuf> = self
            .sources(workspace, data_dir)
            .into_iter()
            .filter(|s| s.origin != super::Origin::Workspace)
            .filter_map(|s| std::fs::canonicalize(s.path()).ok())
            .filter(|p| p.is_dir())
            .collect();
        folders.dedup();
        folders
    }
}

impl FromToolContext for SkillsSettings {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        Ok(ctx.shared_state::<Self>().as_ref().clone())
    }
}
