//! `allowed-tools`: once a caller (a channel's chat) has loaded a skill that lists the
//! tools it may use, and `skills.enforceAllowedTools` is on, that caller's other calls
//! are refused with a reason the model reads. The `skill_*` tools stay allowed. The
//! engine installs [`check_allowed`] as a pre-call hook.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use super::SkillsSettings;
use crate::{Caller, ToolContext};

/// The skills each caller has loaded that list `allowed-tools`: caller → skill → tools.
/// Shared by every call on a context (`ctx.shared_state::<LoadedSkills>()`); kept for as
/// long as the engine runs.
#[derive(Debug, Default)]
pub struct LoadedSkills {
    by_caller: Mutex<HashMap<CallerKey, BTreeMap<String, Vec<String>>>>,
}

/// A caller: its channel and chat.
type CallerKey = (String, Option<String>);

fn key(caller: &Caller) -> CallerKey {
    (caller.channel.clone(), caller.chat_id.clone())
}

impl LoadedSkills {
    /// Records that `caller` loaded `skill`, which allows `tools`.
    pub fn record(&self, caller: &Caller, skill: &str, tools: &[String]) {
        self.by_caller
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key(caller))
            .or_default()
            .insert(skill.to_owned(), tools.to_vec());
    }

    /// The skills `caller` loaded that list `allowed-tools`, with their tools.
    pub fn of(&self, caller: &Caller) -> BTreeMap<String, Vec<String>> {
        self.by_caller
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key(caller))
            .cloned()
            .unwrap_or_default()
    }
}

/// Whether the entry `allowed` of an `allowed-tools` list allows the tool `tool`: the
/// same name, or the name before a parenthesis (`exec(git:*)` allows `exec`; what the
/// parenthesis narrows is not checked).
pub fn allows(allowed: &str, tool: &str) -> bool {
    allowed == tool
        || allowed
            .split_once('(')
            .is_some_and(|(name, _)| name == tool)
}

/// A call the skills a caller loaded do not allow: the tool, the skills and what they
/// allow; its text is the reason the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{tool}` is not in the allowed-tools of the skill(s) loaded in this conversation ({}); \
     use only: {} (or the skill_* tools). skills.enforceAllowedTools is on",
    .skills.join(", "),
    tool_list(.allowed)
)]
#[non_exhaustive]
pub struct NotAllowed {
    /// The tool refused.
    pub tool: String,
    /// The skills loaded that list `allowed-tools`, by name.
    pub skills: Vec<String>,
    /// Every tool they allow, sorted.
    pub allowed: Vec<String>,
}

/// The tools of a [`NotAllowed`], for its text.
fn tool_list(allowed: &[String]) -> String {
    if allowed.is_empty() {
        "no tool".to_owned()
    } else {
        allowed.join(", ")
    }
}

/// Whether `caller` may call `tool` under the skills it loaded: `Ok` when enforcement is
/// off, the tool is a `skill_*` tool, no loaded skill lists `allowed-tools`, or one of
/// them allows it; else why not ([`NotAllowed`], whose text the model reads).
pub fn check_allowed(ctx: &ToolContext, caller: &Caller, tool: &str) -> Result<(), NotAllowed> {
    let settings = ctx.shared_state::<SkillsSettings>();
    if !settings.enforce_allowed_tools || tool.starts_with("skill_") {
        return Ok(());
    }
    let loaded = ctx.shared_state::<LoadedSkills>().of(caller);
    if loaded.is_empty()
        || loaded
            .values()
            .flatten()
            .any(|allowed| allows(allowed, tool))
    {
        return Ok(());
    }
    let skills: Vec<String> = loaded.keys().cloned().collect();
    let mut allowed: Vec<String> = loaded.values().flatten().cloned().collect();
    allowed.sort_unstable();
    allowed.dedup();
    Err(NotAllowed {
        tool: tool.to_owned(),
        skills,
        allowed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_listed_tools_pass_once_enforced() {
        let on = ToolContext::builder()
            .service(SkillsSettings::default().with_enforce_allowed_tools(true))
            .build();
        let off = ToolContext::builder().build();
        let chat = Caller::new("telegram", Some("1".into()));
        let other = Caller::new("telegram", Some("2".into()));
        for ctx in [&on, &off] {
            ctx.shared_state::<LoadedSkills>().record(
                &chat,
                "pdf",
                &["file_read".into(), "exec(python3:*)".into()],
            );
        }
        assert!(check_allowed(&on, &chat, "file_read").is_ok());
        assert!(check_allowed(&on, &chat, "exec").is_ok());
        assert!(check_allowed(&on, &chat, "skill_load").is_ok());
        let why = check_allowed(&on, &chat, "file_delete")
            .unwrap_err()
            .to_string();
        assert!(
            why.contains("`file_delete`") && why.contains("pdf"),
            "{why}"
        );
        assert!(why.contains("exec(python3:*), file_read"), "{why}");
        assert!(check_allowed(&on, &other, "file_delete").is_ok());
        assert!(check_allowed(&off, &chat, "file_delete").is_ok());
        // A second skill adds its tools.
        on.shared_state::<LoadedSkills>()
            .record(&chat, "web", &["web_fetch".into()]);
        assert!(check_allowed(&on, &chat, "web_fetch").is_ok());
        assert!(!allows("exec(", "exe"));
        // Claude Code's entries, mapped, allow what they mean.
        let (tools, _) = super::super::map_allowed(&["Bash(git add:*)".into(), "Read".into()]);
        assert!(tools.iter().any(|a| allows(a, "exec")));
        assert!(tools.iter().any(|a| allows(a, "file_read")));
        assert!(!tools.iter().any(|a| allows(a, "file_delete")));
    }
}
