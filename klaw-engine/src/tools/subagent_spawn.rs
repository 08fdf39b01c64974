//! `subagent_spawn`: a task handed to a subagent that runs in the background with its
//! own history (`subagent:<name>`, kept across spawns of the name); [`register`] adds it with the hooks it needs (the runtime around it,
//! delivery and depth, is `agent::subagent`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use klaw_tools::{
    Annotations, Caller, FnTool, Tool, ToolContext, ToolError, ToolOutput, ToolSchema, ToolSpec,
};
use serde_json::json;
use tracing::Instrument;

use crate::agent::subagent::{
    CHANNEL, Lineage, ReadOnlyCore, SubagentError, Subagents, deliver, depth_of, split_target,
};
use crate::agent::{Agent, own_history_chat};
use crate::gateway::Gateway;
use crate::llm::Model;

/// The arguments of `subagent_spawn`.
#[derive(Debug, ToolSchema, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Args {
    /// Короткое имя задачи; субагент с уже бывшим именем получает последние сообщения его истории
    #[schema(
        description_en = "A short name for the task; a subagent of a name used before is given the last messages of its history"
    )]
    name: String,
    /// Полная инструкция субагенту: он не видит этот чат
    #[schema(description_en = "The whole instruction for the subagent: it does not see this chat")]
    message: String,
    /// Модель из llm.models; по умолчанию — та же
    #[schema(description_en = "A model of llm.models; by default the same one")]
    model: Option<String>,
    /// Чат для ответа: <канал>_<id>, например telegram_123456
    #[schema(description_en = "The chat for the answer: <channel>_<id>, e.g. telegram_123456")]
    #[serde(alias = "inject_into")]
    inject_into: Option<String>,
}

/// What a spawned subagent runs with.
#[derive(Clone)]
pub(crate) struct Spawner {
    /// The agent whose copy each subagent is.
    pub(crate) agent: Agent,
    /// Where answers with `injectInto` go.
    pub(crate) gateway: Option<Gateway>,
    /// One permit per subagent running (`agent.maxSubagents`).
    pub(crate) limit: Arc<tokio::sync::Semaphore>,
    /// Each subagent's time limit (`agent.subagentTimeoutSeconds`).
    pub(crate) timeout: Duration,
    /// How deep subagents may nest (`agent.maxSubagentDepth`).
    pub(crate) max_depth: u32,
    /// How many messages of its own history a subagent is given
    /// (`agent.ownHistoryMessages`).
    pub(crate) own_history: usize,
}

/// Registers `subagent_spawn` with `agent`'s engine and the hook that keeps core memory
/// read-only for subagents (the App refuses what needs approval on their channel:
/// nobody can be asked there).
pub(crate) fn register(
    agent: &Agent,
    gateway: Option<Gateway>,
) -> Result<Subagents, SubagentError> {
    let engine = agent.engine().clone();
    let cfg = engine.config().raw.agent.clone();
    if cfg.max_subagent_depth == 0 {
        // Off: the tool is not offered at all.
        return Ok(Subagents::new(1));
    }
    let places = u32::try_from(cfg.max_subagents.clamp(1, 1024)).unwrap_or(1024);
    let handle = Subagents::new(places);
    let limit = Arc::clone(handle.limit());
    let timeout = Duration::from_secs(cfg.subagent_timeout_seconds.max(1));
    let max_depth = cfg.max_subagent_depth;
    let tool = tool(Spawner {
        agent: agent.clone(),
        gateway,
        limit,
        timeout,
        max_depth,
        own_history: cfg.own_history_messages,
    });
    engine.register(tool).map_err(SubagentError::Register)?;
    engine.before_call(ReadOnlyCore);
    Ok(handle)
}

/// `subagent_spawn` with `spawner`.
pub(crate) fn tool(spawner: Spawner) -> Arc<dyn Tool> {
    Arc::new(FnTool::typed(
        spec(),
        move |ctx: ToolContext, args: Args| {
            let spawner = spawner.clone();
            async move { spawner.spawn(&ctx, args) }
        },
    ))
}

impl Spawner {
    /// Starts the subagent and answers at once with its id.
    fn spawn(&self, ctx: &ToolContext, args: Args) -> Result<ToolOutput, ToolError> {
        if args.message.trim().is_empty() {
            return Err(ToolError::invalid_arguments(
                "/message",
                "the instruction is empty",
            ));
        }
        let max_depth = self.max_depth;
        let depth = depth_of(ctx.caller()) + 1;
        if depth > max_depth {
            return Err(ToolError::refused(format!(
                "a subagent may not start another one (agent.maxSubagentDepth is {max_depth}); do the task yourself"
            )));
        }
        if let (Some(target), Some(g)) = (&args.inject_into, &self.gateway) {
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
        let sub = match &args.model {
            None => self.agent.clone(),
            Some(m) => {
                let model = Model::from_config(self.agent.engine().config(), Some(m))
                    .map_err(|e| ToolError::invalid_arguments("/model", e.to_string()))?;
                self.agent.on_model(model)
            }
        };
        let Ok(place) = Arc::clone(&self.limit).try_acquire_owned() else {
            return Err(ToolError::unavailable(
                "too many subagents are running (agent.maxSubagents); try again later or do it yourself",
            ));
        };
        // Unique across restarts too.
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = format!(
            "sub-{}-{}",
            jiff::Timestamp::now().as_millisecond(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        // Its own history, kept across spawns of the name (`subagent:<name>`): it is
        // given the last `agent.ownHistoryMessages` of it.
        let chat = own_history_chat(CHANNEL, args.name.trim());
        let sub = sub.with_own_history(self.own_history);
        let caller = Caller::new(CHANNEL, Some(format!("{depth}:{id}")));
        // Its model requests go where the work came from (the MCP session that started
        // the line, however deep), for as long as it runs.
        let lineage = ctx.shared_state::<Lineage>();
        let line = lineage.enter(&caller, lineage.origin(ctx.caller()));
        let (task_id, task_name, message) = (id.clone(), args.name.clone(), args.message);
        let (inject, gateway, timeout) =
            (args.inject_into.clone(), self.gateway.clone(), self.timeout);
        // Its own trace (it outlives the call that started it), linked to that call.
        let span = tracing::info_span!(
            target: "klaw::agent",
            parent: None,
            "subagent",
            otel.name = format!("subagent {}", args.name),
            klaw.subagent.id = id.as_str(),
            klaw.subagent.name = args.name.as_str(),
            klaw.subagent.depth = crate::telemetry::int(depth),
        );
        span.follows_from(tracing::Span::current());
        tokio::spawn(
            async move {
                let (_place, _line) = (place, line);
                let outcome =
                    tokio::time::timeout(timeout, sub.turn(&chat, caller, &message, &())).await;
                let _logged = deliver(
                    &task_id,
                    &task_name,
                    outcome,
                    timeout,
                    inject.as_deref(),
                    gateway.as_ref(),
                )
                .await;
            }
            .instrument(span),
        );
        Ok(ToolOutput::json(json!({
            "id": id,
            "name": args.name,
            "status": "started",
            "injectInto": args.inject_into,
        })))
    }
}

fn spec() -> ToolSpec {
    ToolSpec::new(
        "subagent_spawn",
        "Запускает субагента: он выполняет задачу в фоне со своей историей и теми же \
         инструментами (основная память — только чтение) и сразу возвращает id, не дожидаясь \
         конца. Ответ субагента уходит в чат injectInto (например telegram_123456) или в журнал; \
         ответ {\"silent\": true, \"reason\": \"...\"} ничего не отправляет. Для долгих задач, \
         которые не уложатся в maxToolCallRounds, и для параллельной работы.",
        serde_json::Value::Null,
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
    .with_annotations(Annotations {
        open_world: true,
        ..Default::default()
    })
    .with_origin("klaw-engine:agent")
}
