//! `subagent_spawn`: delegate a task to a subagent that runs on its own, in the
//! background. It has the same tools (core memory read-only), its own isolated history,
//! and optionally another model; its answer goes to a chat through the gateway
//! (`injectInto`), or to the log. An answer `{"silent": true, "reason": ...}` sends
//! nothing. Bounded: at most `agent.maxSubagents` at once, `agent.subagentTimeoutSeconds`
//! each, no deeper than `agent.maxSubagentDepth`. A failing subagent is logged; it never
//! takes the engine down.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use klaw_tools::{Caller, FnTool, ToolContext, ToolError, ToolOutput, ToolSpec};
use serde_json::{Value, json};

use super::Agent;
use crate::gateway::Gateway;
use crate::llm::Model;
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
    /// Waits until no subagent runs (each ends by its time limit at the latest).
    pub async fn wait(&self) {
        let _all = self.limit.acquire_many(self.places).await;
    }
}

/// Registers `subagent_spawn` with `agent`'s engine, and the hooks that keep core
/// memory read-only for subagents and refuse what needs approval.
pub fn register(agent: &Agent, gateway: Option<Gateway>) -> Result<Subagents, String> {
    let engine = agent.engine.clone();
    let cfg = engine.config().raw.agent.clone();
    if cfg.max_subagent_depth == 0 {
        // Off: the tool is not offered at all.
        return Ok(Subagents {
            limit: Arc::new(tokio::sync::Semaphore::new(1)),
            places: 1,
        });
    }
    let places = u32::try_from(cfg.max_subagents.clamp(1, 1024)).unwrap_or(1024);
    let limit = Arc::new(tokio::sync::Semaphore::new(places as usize));
    let handle = Subagents {
        limit: Arc::clone(&limit),
        places,
    };
    let timeout = Duration::from_secs(cfg.subagent_timeout_seconds.max(1));
    let max_depth = cfg.max_subagent_depth;
    let agent = agent.clone();
    let tool = FnTool::new(spec(), move |ctx: ToolContext, args: Value| {
        let (agent, gateway, limit) = (agent.clone(), gateway.clone(), Arc::clone(&limit));
        async move {
            let s = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_owned);
            let name = s("name").unwrap_or_default();
            let message = s("message").unwrap_or_default();
            if message.trim().is_empty() {
                return Err(ToolError::invalid_arguments(
                    "/message",
                    "the instruction is empty",
                ));
            }
            let depth = depth_of(ctx.caller()) + 1;
            if depth > max_depth {
                return Err(ToolError::refused(format!(
                    "a subagent may not start another one (agent.maxSubagentDepth is {max_depth}); do the task yourself"
                )));
            }
            let inject = s("injectInto");
            if let (Some(target), Some(g)) = (&inject, &gateway) {
                let (channel, id) = split_target(target);
                if g.channel(channel).is_none() || !g.is_allowed(channel, id) {
                    return Err(ToolError::invalid_arguments(
                        "/injectInto",
                        format!(
                            "`{target}` is not a chat the gateway may send to (a channel and gateway.allowedChatIds: telegram_123456, console_me)"
                        ),
                    ));
                }
            }
            let sub = match s("model") {
                None => agent.clone(),
                Some(m) => {
                    let model = Model::from_config(&agent.engine.config().raw.llm, Some(&m))
                        .map_err(|e| ToolError::invalid_arguments("/model", e.to_string()))?;
                    Agent {
                        model,
                        ..agent.clone()
                    }
                }
            };
            let Ok(place) = limit.try_acquire_owned() else {
                return Err(ToolError::unavailable(
                    "too many subagents are running (agent.maxSubagents); try again later or do it yourself",
                ));
            };
            // Unique across restarts too: a new subagent never finds an old one's history.
            static NEXT: AtomicU64 = AtomicU64::new(1);
            let id = format!(
                "sub-{}-{}",
                jiff::Timestamp::now().as_millisecond(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            );
            let chat = format!("subagent_{name}_{id}");
            let caller = Caller::new(CHANNEL, Some(format!("{depth}:{id}")));
            let (task_id, task_name) = (id.clone(), name.clone());
            tokio::spawn(async move {
                let _place = place;
                let outcome =
                    tokio::time::timeout(timeout, sub.turn(&chat, caller, &message, &())).await;
                deliver(
                    &task_id,
                    &task_name,
                    outcome,
                    timeout,
                    inject.as_deref(),
                    gateway.as_ref(),
                )
                .await;
            });
            Ok(ToolOutput::json(json!({
                "id": id,
                "name": name,
                "status": "started",
                "injectInto": s("injectInto"),
            })))
        }
    });
    engine
        .register(Arc::new(tool))
        .map_err(|e| format!("cannot register subagent_spawn: {e}"))?;
    engine.before_call(ReadOnlyCore);
    super::install_approval(
        &engine,
        CHANNEL,
        Arc::new(super::RefuseApproval("a subagent has nobody to ask")),
    );
    Ok(handle)
}

/// The depth of the agent that makes a call: 0, or a subagent's.
fn depth_of(caller: &Caller) -> u32 {
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
fn split_target(target: &str) -> (&str, &str) {
    target.split_once('_').unwrap_or((target, ""))
}

/// Sends a subagent's answer where it was asked to go, or logs it.
async fn deliver(
    id: &str,
    name: &str,
    outcome: Result<Result<String, super::AgentError>, tokio::time::error::Elapsed>,
    timeout: Duration,
    inject: Option<&str>,
    gateway: Option<&Gateway>,
) {
    let answer = match outcome {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => {
            tracing::error!(target: "klaw::subagent", id, name, "the subagent failed: {e}");
            return;
        }
        Err(_) => {
            tracing::error!(target: "klaw::subagent", id, name, "the subagent was stopped after {}s (agent.subagentTimeoutSeconds)", timeout.as_secs());
            return;
        }
    };
    if let Some(reason) = silent(&answer) {
        tracing::info!(target: "klaw::subagent", id, name, "the subagent has nothing to report: {reason}");
        return;
    }
    match (inject, gateway) {
        (Some(target), Some(g)) => {
            let (channel, chat) = split_target(target);
            if let Err(e) = g.send(channel, chat, &answer).await {
                tracing::error!(target: "klaw::subagent", id, name, "the answer was not delivered to {target}: {e}");
            }
        }
        _ => {
            tracing::info!(target: "klaw::subagent", id, name, "the subagent answered: {}", crate::terminal::terminal_safe(&answer))
        }
    }
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
struct ReadOnlyCore;

impl crate::PreCallHook for ReadOnlyCore {
    fn before_call<'a>(&'a self, call: &'a ToolCall, spec: &'a ToolSpec) -> HookFuture<'a> {
        let refused = call.caller.channel == CHANNEL && READ_ONLY.contains(&spec.name.as_str());
        Box::pin(std::future::ready(if refused {
            Err(
                "core memory is read-only for a subagent; report what should change in your answer"
                    .into(),
            )
        } else {
            Ok(())
        }))
    }
}

fn spec() -> ToolSpec {
    let mut spec = ToolSpec::new(
        "subagent_spawn",
        "Запускает субагента: он выполняет задачу в фоне со своей историей и теми же \
         инструментами (основная память — только чтение) и сразу возвращает id, не дожидаясь \
         конца. Ответ субагента уходит в чат injectInto (например telegram_123456) или в журнал; \
         ответ {\"silent\": true, \"reason\": \"...\"} ничего не отправляет. Для долгих задач, \
         которые не уложатся в maxToolCallRounds, и для параллельной работы.",
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Короткое имя задачи"},
                "message": {"type": "string", "description": "Полная инструкция субагенту: он не видит этот чат"},
                "model": {"type": ["string", "null"], "description": "Модель из llm.models; по умолчанию — та же"},
                "injectInto": {"type": ["string", "null"], "description": "Чат для ответа: <канал>_<id>, например telegram_123456"},
            },
            "required": ["name", "message"],
            "additionalProperties": false,
        }),
    )
    .with_description_en(
        "Start a subagent: it works on the task in the background with its own history and \
         the same tools (core memory read-only), and this returns its id at once without \
         waiting. Its answer goes to the chat injectInto (e.g. telegram_123456) or to the \
         log; an answer {\"silent\": true, \"reason\": \"...\"} sends nothing. For long tasks \
         that would not fit in maxToolCallRounds, and for parallel work.",
    )
    .with_title("Запустить субагента", Some("Start a subagent".into()))
    // It asks the model's provider, and its answer may go to a chat. Its own calls go
    // through the approval hooks (refused where approval is needed).
    .with_annotations(klaw_tools::Annotations {
        open_world: true,
        ..Default::default()
    })
    .with_origin("klaw-engine:agent");
    spec.aliases
        .push(("inject_into".into(), "injectInto".into()));
    spec
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
}
