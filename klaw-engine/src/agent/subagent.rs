//! `subagent_spawn`: delegate a task to a subagent that runs on its own, in the
//! background. It has the same tools (core memory read-only), its own history (apart
//! from the user's chats, kept across spawns of its name: `subagent:<name>`),
//! and optionally another model; its answer goes to a chat through the gateway
//! (`injectInto`), or to the log. An answer `{"silent": true, "reason": ...}` sends
//! nothing. Bounded: at most `agent.maxSubagents` at once, `agent.subagentTimeoutSeconds`
//! each, no deeper than `agent.maxSubagentDepth`. A failing subagent is logged; it never
//! takes the engine down.

use std::sync::Arc;
use std::time::Duration;

use klaw_tools::{Caller, ToolSpec};
use serde_json::Value;

use crate::gateway::Gateway;
use crate::{HookFuture, ToolCall};

/// The caller channel of a subagent's calls; its chat id is `<depth>:<id>`.
pub const CHANNEL: &str = "subagent";

/// Tools a subagent may not call: core memory is read-only for it.
const READ_ONLY: [&str; 2] = ["memory_core_update", "memory_core_delete"];

/// The subagents started through one registration.
#[derive(Debug, Clone)]
pub struct Subagents {
    limit: Arc<tokio::sync::Semaphore>,
    places: u32,
}

impl Subagents {
    /// Room for `places` subagents at once.
    pub(crate) fn new(places: u32) -> Self {
        Self {
            limit: Arc::new(tokio::sync::Semaphore::new(places as usize)),
            places,
        }
    }

    /// The permits, one per subagent running.
    pub(crate) fn limit(&self) -> &Arc<tokio::sync::Semaphore> {
        &self.limit
    }

    /// Waits until no subagent runs (each ends by its time limit at the latest).
    pub async fn wait(&self) {
        let _all = self.limit.acquire_many(self.places).await;
    }
}

/// Who started each running subagent's line: its caller's chat id (`<depth>:<id>`) →
/// the caller that spawned the first subagent of the line (an MCP session, a channel's
/// chat, a scheduled job). Kept in the engine's context
/// ([`ToolContext::shared_state`](klaw_tools::ToolContext::shared_state)), so that a
/// subagent's model requests, however deep, go where the work came from
/// (`ChatRequest::origin`: `mcp-sampling` samples only through that session's client).
#[derive(Debug, Default)]
pub(crate) struct Lineage {
    roots: std::sync::Mutex<std::collections::HashMap<String, Caller>>,
}

impl Lineage {
    fn roots(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Caller>> {
        self.roots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Who started the work `caller` does: the root of a subagent's line, anyone else
    /// themselves. A subagent whose line is unknown (it ended) is its own root, which
    /// no MCP session is.
    pub(crate) fn origin(&self, caller: &Caller) -> Caller {
        if caller.channel != CHANNEL {
            return caller.clone();
        }
        caller
            .chat_id
            .as_deref()
            .and_then(|c| self.roots().get(c).cloned())
            .unwrap_or_else(|| caller.clone())
    }

    /// Records that the subagent `child` works for `root` until the guard is dropped.
    pub(crate) fn enter(self: &Arc<Self>, child: &Caller, root: Caller) -> LineageGuard {
        let key = child.chat_id.clone().unwrap_or_default();
        self.roots().insert(key.clone(), root);
        LineageGuard {
            lineage: Arc::clone(self),
            key,
        }
    }
}

/// A subagent's entry in the [`Lineage`], removed when it ends.
pub(crate) struct LineageGuard {
    lineage: Arc<Lineage>,
    key: String,
}

impl Drop for LineageGuard {
    fn drop(&mut self) {
        self.lineage.roots().remove(&self.key);
    }
}

/// Why the subagents could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SubagentError {
    /// `subagent_spawn` could not be registered with the engine (a tool of that name
    /// exists, or it failed validation).
    #[error("cannot register subagent_spawn: {0}")]
    Register(#[source] klaw_tools::RegistryError),
}

/// The depth of the agent that makes a call: 0, or a subagent's.
pub(crate) fn depth_of(caller: &Caller) -> u32 {
    if caller.channel != CHANNEL {
        return 0;
    }
    caller
        .chat_id
        .as_deref()
        .and_then(|c| c.split(':').next())
        .and_then(|d| d.parse().ok())
        .unwrap_or(1)
}

/// `telegram_123` → (`telegram`, `123`).
pub(crate) fn split_target(target: &str) -> (&str, &str) {
    target.split_once('_').unwrap_or((target, ""))
}

/// Sends a subagent's (or a scheduled job's) answer where it was asked to go, or logs
/// it; `Err` says why nothing was delivered (the turn failed or ran out of time, the
/// gateway refused), as it was logged.
pub(crate) async fn deliver(
    id: &str,
    name: &str,
    outcome: Result<Result<String, super::AgentError>, tokio::time::error::Elapsed>,
    timeout: Duration,
    inject: Option<&str>,
    gateway: Option<&Gateway>,
) -> Result<(), String> {
    let answer = match outcome {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => {
            tracing::error!(target: "klaw::subagent", id, name, "the subagent failed: {e}");
            return Err(e.to_string());
        }
        Err(_) => {
            tracing::error!(target: "klaw::subagent", id, name, "the subagent was stopped after {}s", timeout.as_secs());
            return Err(format!("stopped after {}s", timeout.as_secs()));
        }
    };
    if let Some(reason) = silent(&answer) {
        tracing::info!(target: "klaw::subagent", id, name, "the subagent has nothing to report: {reason}");
        return Ok(());
    }
    match (inject, gateway) {
        (Some(target), Some(g)) => {
            let (channel, chat) = split_target(target);
            if let Err(e) = g.send(channel, chat, &answer).await {
                tracing::error!(target: "klaw::subagent", id, name, "the answer was not delivered to {target}: {e}");
                return Err(format!("the answer was not delivered to {target}: {e}"));
            }
        }
        _ => {
            tracing::info!(target: "klaw::subagent", id, name, "the subagent answered: {}", crate::terminal::terminal_safe(&answer))
        }
    }
    Ok(())
}

/// The reason of a `{"silent": true, "reason": ...}` answer.
fn silent(answer: &str) -> Option<String> {
    let v: Value = serde_json::from_str(answer.trim()).ok()?;
    (v.get("silent")? == true).then(|| {
        v.get("reason")
            .and_then(Value::as_str)
            .unwrap_or("no reason given")
            .to_owned()
    })
}

/// Refuses core-memory changes from subagents.
pub(crate) struct ReadOnlyCore;

impl crate::PreCallHook for ReadOnlyCore {
    fn before_call<'a>(&'a self, call: &'a ToolCall, spec: &'a ToolSpec) -> HookFuture<'a> {
        let refused = call.caller.channel == CHANNEL && READ_ONLY.contains(&spec.name.as_str());
        Box::pin(std::future::ready(if refused {
            Err(crate::Refusal::new(
                "core memory is read-only for a subagent; report what should change in your answer",
            ))
        } else {
            Ok(())
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silent_answers_and_depths_are_read() {
        assert_eq!(
            silent(r#"{"silent": true, "reason": "nothing new"}"#).as_deref(),
            Some("nothing new")
        );
        assert_eq!(silent(r#"{"silent": false}"#), None);
        assert_eq!(silent("All done."), None);
        assert_eq!(depth_of(&Caller::new("telegram", Some("1".into()))), 0);
        assert_eq!(depth_of(&Caller::new(CHANNEL, Some("2:sub-9".into()))), 2);
        assert_eq!(split_target("telegram_123"), ("telegram", "123"));
    }

    #[test]
    fn a_subagents_line_leads_back_to_who_started_it() {
        let lineage = Arc::new(Lineage::default());
        let session = Caller::new("mcp", Some("7".into()));
        let child = Caller::new(CHANNEL, Some("1:sub-1".into()));
        let grandchild = Caller::new(CHANNEL, Some("2:sub-2".into()));
        let first = lineage.enter(&child, lineage.origin(&session));
        let second = lineage.enter(&grandchild, lineage.origin(&child));
        assert_eq!(lineage.origin(&grandchild), session);
        assert_eq!(lineage.origin(&session), session);
        drop((first, second));
        // An ended line leads to the subagent itself, never to a session.
        assert_eq!(lineage.origin(&grandchild), grandchild);
    }
}
