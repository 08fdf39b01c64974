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
    ///
    /// Each starts from its configured path, not a resolved one: a folder that lies
    /// inside the workspace, on paper or through a link on its way (one of its parents
    /// resolves into the workspace), is left out. Commands see it through the
    /// workspace already, and may replace it (or a parent) with a link to anywhere,
    /// which must not make that place visible to the next command.
    pub fn folders_for_commands(&self, workspace: &Path, data_dir: &Path) -> Vec<PathBuf> {
        let ws = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
        let mut configured = vec![data_dir.join(super::SKILLS_DIR)];
        configured.extend(self.paths.iter().map(|p| workspace.join(p)));
        if let Some(home) = &self.home {
            configured.extend(super::USER_DIRS.iter().map(|d| home.join(d)));
        }
        let mut folders: Vec<PathBuf> = Vec::new();
        for path in configured {
            if super::catalog::in_workspace(&path, workspace, &ws) {
                continue;
            }
            let Ok(real) = std::fs::canonicalize(&path) else {
                continue;
            };
            if real.is_dir() && !real.starts_with(&ws) && !folders.contains(&real) {
                folders.push(real);
            }
        }
        folders
    }
}

impl FromToolContext for SkillsSettings {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        Ok(ctx.shared_state::<Self>().as_ref().clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder inside the workspace, on paper or through a linked parent, is never one
    /// of the folders shown apart from the workspace, wherever its link leads.
    #[test]
    fn folders_for_commands_leave_out_what_lies_in_the_workspace() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        let data = tmp.path().join("data");
        let outside = tmp.path().join("outside");
        let home = tmp.path().join("home");
        for d in [
            &ws,
            &data.join("skills"),
            &outside.join("skills"),
            &home.join(".agents/skills"),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        let secret = tmp.path().join("secret");
        std::fs::create_dir_all(secret.join("skills")).unwrap();
        std::os::unix::fs::symlink(&secret, ws.join("my-skills")).unwrap();
        std::os::unix::fs::symlink(&secret, ws.join("a")).unwrap();
        // A path outside on paper whose parent is a link into the workspace.
        std::os::unix::fs::symlink(&ws, tmp.path().join("via")).unwrap();
        let settings = SkillsSettings::default()
            .with_home(Some(home.clone()))
            .with_paths(vec![
                ws.join("my-skills"),
                PathBuf::from("a/skills"),
                tmp.path().join("via/a/skills"),
                outside.join("skills"),
            ]);
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap();
        assert_eq!(
            settings.folders_for_commands(&ws, &data),
            vec![
                canon(&data.join("skills")),
                canon(&outside.join("skills")),
                canon(&home.join(".agents/skills")),
            ]
        );
        // The user's skills folder inside the workspace (a workspace in the home) too.
        let settings = SkillsSettings::default().with_home(Some(ws.clone()));
        std::fs::create_dir_all(ws.join(".claude/skills")).unwrap();
        assert_eq!(
            settings.folders_for_commands(&ws, &data),
            vec![canon(&data.join("skills"))]
        );
    }
}
