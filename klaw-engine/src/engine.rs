//! [`Engine`]: the one runtime behind every way Klaw serves its tools (the command line,
//! the MCP server, the agent loop with its subagents, the scheduler). It owns the registry and the
//! context, gives every call an id, lets hooks see and refuse calls, cancels calls by id,
//! tells subscribers when the tool list changes, and shuts down cleanly.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, Weak};
use std::time::Duration;

use klaw_tools::{
    Args, CallListener, Caller, ErrorKind, EventHook, RegistryError, Tool, ToolContext,
    ToolContextBuilder, ToolError, ToolEvent, ToolOutput, ToolRegistry, ToolSpec,
};
use tokio_util::sync::CancellationToken;

use crate::{Config, EngineError};

/// How long [`Engine::shutdown`] waits for cancelled calls to return.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How many failed calls in a row list a tool among the failed ones.
pub const FAILURE_STREAK: u32 = 3;

/// A tool that is not working as offered: one that could not be loaded (a manifest, an
/// imported MCP server's tool, a server that did not start), or one whose last
/// [`FAILURE_STREAK`] or more calls failed on its side (`failed`, `timeout`,
/// `unavailable`; a model's bad arguments or a refusal do not count). Listed by
/// `klaw-engine tools --failed`, `doctor` and `GET /api/v1/tools` (`failed`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct FailedTool {
    /// The tool's name (for a server that did not start: the server's).
    pub name: String,
    /// Where it was defined (`manifest:<path>`, `mcp:<server>`, a source file).
    pub origin: String,
    /// Why: the load error, or the last call's error.
    pub problem: String,
    /// 0 for a tool that could not be loaded; N for N failed calls in a row.
    pub failures: u32,
}

impl FailedTool {
    /// A tool that could not be loaded.
    pub fn load(
        name: impl Into<String>,
        origin: impl Into<String>,
        problem: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            origin: origin.into(),
            problem: problem.into(),
            failures: 0,
        }
    }

    /// Whether the tool is loaded and failing at run time (not a load failure).
    pub fn is_failing_calls(&self) -> bool {
        self.failures > 0
    }
}

/// Failed calls in a row per tool, with the last error; a success ends a streak.
/// `any` spares the common case (no tool failing) the lock on every successful call.
#[derive(Default)]
struct Streaks {
    map: Mutex<HashMap<String, (u32, String)>>,
    any: std::sync::atomic::AtomicBool,
}

impl Streaks {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (u32, String)>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn end(&self, tool: &str) {
        if self.any.load(Ordering::Relaxed) {
            let mut map = self.lock();
            map.remove(tool);
            self.any.store(!map.is_empty(), Ordering::Relaxed);
        }
    }

    fn see(&self, event: &ToolEvent) {
        match event {
            ToolEvent::Executed { tool, .. } | ToolEvent::Removed { tool, .. } => self.end(tool),
            ToolEvent::Failed { tool, error, .. }
                if matches!(
                    error.kind(),
                    ErrorKind::Failed | ErrorKind::Timeout | ErrorKind::Unavailable
                ) =>
            {
                let mut map = self.lock();
                let entry = map.entry(tool.clone()).or_default();
                entry.0 = entry.0.saturating_add(1);
                entry.1 = error.message().to_owned();
                self.any.store(true, Ordering::Relaxed);
            }
            _ => {}
        }
    }
}

/// One tool call as the engine runs it: an id (in events, logs, progress reports, and
/// what [`Engine::cancel`] takes), the tool's name, its arguments and who is calling.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// Unique among the calls running at once (the MCP server prefixes its session).
    pub id: String,
    /// The tool asked for.
    pub name: String,
    /// Its arguments, as the caller sent them; what a [`PreCallHook`] sees is the
    /// prepared form (parsed, aliases mapped, validated: what the tool will get).
    pub args: Args,
    /// The channel and chat the call came from.
    pub caller: Caller,
}

impl ToolCall {
    /// A call of `name` with `args`, from the command line, with a fresh id (`call-N`).
    pub fn new(name: impl Into<String>, args: impl Into<Args>) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self {
            id: format!("call-{}", NEXT.fetch_add(1, Ordering::Relaxed)),
            name: name.into(),
            args: args.into(),
            caller: Caller::new("cli", None),
        }
    }

    /// The same call with the id `id`.
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// The same call from `caller`.
    #[must_use]
    pub fn with_caller(mut self, caller: Caller) -> Self {
        self.caller = caller;
        self
    }
}

/// Why a [`PreCallHook`] refused a call: the reason, which the model reads (the call
/// fails with kind `refused` and this message), and, when something failed on the way
/// (asking a person over a channel that broke), the error that did, for the log
/// ([`source`](std::error::Error::source)).
///
/// A `String` or `&str` converts into one (a reason without a source).
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
pub struct Refusal {
    reason: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl Refusal {
    /// A refusal for `reason` (what the model reads).
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            source: None,
        }
    }

    /// The same refusal, caused by `source` (logged, never shown to the model).
    #[must_use]
    pub fn with_source(
        mut self,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        self.source = Some(source.into());
        self
    }

    /// The reason, for the model.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The refused call's error: kind `refused`, the reason as its message, the
    /// refusal's source as its own.
    fn into_error(self, tool: &str) -> ToolError {
        let error = ToolError::refused(self.reason).with_tool(tool);
        match self.source {
            Some(source) => error.with_source(source),
            None => error,
        }
    }
}

impl From<String> for Refusal {
    fn from(reason: String) -> Self {
        Self::new(reason)
    }
}

impl From<&str> for Refusal {
    fn from(reason: &str) -> Self {
        Self::new(reason)
    }
}

/// The future a [`PreCallHook`] answers with.
pub type HookFuture<'a> = Pin<Box<dyn Future<Output = Result<(), Refusal>> + Send + 'a>>;

/// Sees every call before it runs (after its tool was found and its arguments were
/// prepared: parsed, aliases mapped, validated once; the hook sees them as the tool will
/// get them) and may refuse it: the refusal is the call's result, an error of kind
/// `refused` whose message is the [`Refusal`]'s reason, which the model reads. The agent
/// loop's approval policy is one (it may wait for a person's answer).
///
/// A closure `Fn(&ToolCall, &ToolSpec) -> Result<(), E>` is a hook, for any `E` that
/// converts into a [`Refusal`] (`String`, `&str`, `Refusal`).
pub trait PreCallHook: Send + Sync + 'static {
    /// `Ok(())` lets the call run; `Err(refusal)` refuses it.
    fn before_call<'a>(&'a self, call: &'a ToolCall, spec: &'a ToolSpec) -> HookFuture<'a>;
}

impl<F, E> PreCallHook for F
where
    F: Fn(&ToolCall, &ToolSpec) -> Result<(), E> + Send + Sync + 'static,
    E: Into<Refusal>,
{
    fn before_call<'a>(&'a self, call: &'a ToolCall, spec: &'a ToolSpec) -> HookFuture<'a> {
        let answer = self(call, spec).map_err(Into::into);
        Box::pin(std::future::ready(answer))
    }
}

/// A configured engine: the validated registry, the context tools run in, and the calls
/// running now. Cheap to clone (every clone is the same engine).
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    config: Arc<Config>,
    /// Replaced whole when tools are added or removed at run time (calls keep the
    /// snapshot they started with).
    registry: RwLock<Arc<ToolRegistry>>,
    ctx: ToolContext,
    /// Replaced whole when one is added: a call takes the list without copying it.
    hooks: RwLock<Arc<Vec<Arc<dyn PreCallHook>>>>,
    /// Every running call's cancellation, by id.
    running: Mutex<HashMap<String, CancellationToken>>,
    /// How many calls have started (for [`Engine::idle_after_calls`]).
    started: AtomicU64,
    /// Notified when the last running call ends.
    idle: tokio::sync::Notify,
    /// The parent of every call's token: cancelled by [`Engine::shutdown`].
    closing: CancellationToken,
    /// Bumped whenever the tool list changes.
    tools_changed: tokio::sync::watch::Sender<u64>,
    /// What each loader (`manifests`, `mcp:<server>`) could not load, by loader.
    load_failures: Mutex<BTreeMap<String, Vec<FailedTool>>>,
    /// Failed calls in a row, per tool.
    streaks: Arc<Streaks>,
    /// The PostgreSQL of `storage.url`, connected and migrated, that the stores share.
    database: Option<Arc<crate::storage::Postgres>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("tools", &self.registry().len())
            .field("running", &self.running_calls())
            .field("closing", &self.inner.closing.is_cancelled())
            .finish()
    }
}

impl Engine {
    /// Loads the configuration from the environment and starts.
    pub fn from_env() -> Result<Self, EngineError> {
        Self::new(Config::load()?)
    }

    /// Collects and validates every linked tool and prepares the context with each
    /// group's settings as a service; creates the workspace and data directories if they
    /// do not exist. The short form of [`EngineBuilder`] with nothing added.
    pub fn new(config: Config) -> Result<Self, EngineError> {
        EngineBuilder::new(config).build()
    }

    /// A builder: services, tools and hooks added before the engine starts.
    pub fn builder(config: Config) -> EngineBuilder {
        EngineBuilder::new(config)
    }

    /// The PostgreSQL of `storage.url` (connected and migrated when the engine was
    /// built), which every store of the engine shares; `None` without it (SQLite and
    /// files in the data dir).
    pub fn database(&self) -> Option<&Arc<crate::storage::Postgres>> {
        self.inner.database.as_ref()
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The tools as they are now (a snapshot: tools added later are not in it).
    pub fn registry(&self) -> Arc<ToolRegistry> {
        Arc::clone(
            &self
                .inner
                .registry
                .read()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// The context calls run with (each call gets its own caller, id and cancellation).
    pub fn context(&self) -> &ToolContext {
        &self.inner.ctx
    }

    /// Calls `name` with `args` from the command line (a [`ToolCall`] with a fresh id).
    pub async fn call(&self, name: &str, args: impl Into<Args>) -> Result<ToolOutput, ToolError> {
        self.execute(ToolCall::new(name, args), None).await
    }

    /// Runs `call`: the pre-call hooks, then the tool (arguments validated, time limit,
    /// cancellation by [`cancel`](Self::cancel) or [`shutdown`](Self::shutdown)), with
    /// its progress reports and log messages going to `listener`. Never panics on what a
    /// caller sends.
    ///
    /// Each call is a `tracing` span `execute_tool` (target `klaw::engine`, level info)
    /// with OpenTelemetry's GenAI attributes: `gen_ai.operation.name`,
    /// `gen_ai.tool.name`, `gen_ai.tool.call.id`, and `klaw.caller.channel`,
    /// `klaw.arguments.bytes`, `klaw.outcome` (`ok` or the error's kind), `error.type`
    /// and an error status when it failed.
    /// Arguments and results are never in it (they may hold secrets), only their size;
    /// with no subscriber interested the span costs a check.
    pub async fn execute(
        &self,
        call: ToolCall,
        listener: Option<Arc<dyn CallListener>>,
    ) -> Result<ToolOutput, ToolError> {
        use tracing::Instrument;
        use tracing::field::Empty;
        let span = tracing::info_span!(
            target: "klaw::engine",
            "execute_tool",
            otel.name = Empty,
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = call.name.as_str(),
            gen_ai.tool.call.id = call.id.as_str(),
            klaw.caller.channel = call.caller.channel.as_str(),
            klaw.arguments.bytes = Empty,
            klaw.outcome = Empty,
            error.type = Empty,
            otel.status_code = Empty,
        );
        if span.is_disabled() {
            return self.run_call(call, listener).await;
        }
        span.record("otel.name", format!("execute_tool {}", call.name));
        span.record(
            "klaw.arguments.bytes",
            crate::telemetry::int(args_size(&call.args)),
        );
        let outcome = self.run_call(call, listener).instrument(span.clone()).await;
        match &outcome {
            Ok(_) => {
                span.record("klaw.outcome", "ok");
            }
            Err(e) => {
                span.record("klaw.outcome", e.kind().code());
                crate::telemetry::failed(&span, e.kind().code());
            }
        }
        outcome
    }

    async fn run_call(
        &self,
        mut call: ToolCall,
        listener: Option<Arc<dyn CallListener>>,
    ) -> Result<ToolOutput, ToolError> {
        let registry = self.registry();
        // The id is taken first, under the same lock as the shutdown check: a call that
        // waits for a hook can already be cancelled, and a duplicate is refused before a
        // person is asked about it.
        let token = {
            let mut running = self.lock_running();
            if self.inner.closing.is_cancelled() {
                return Err(ToolError::unavailable(
                    "the engine is shutting down; the call was not run",
                ));
            }
            // One lookup: the id is hashed once to be found and taken.
            let std::collections::hash_map::Entry::Vacant(free) = running.entry(call.id.clone())
            else {
                return Err(ToolError::failed(format!(
                    "a call with the id `{}` is already running; give each call its own id",
                    call.id
                )));
            };
            let token = self.inner.closing.child_token();
            free.insert(token.clone());
            self.inner.started.fetch_add(1, Ordering::Relaxed);
            token
        };
        let _running = Running {
            engine: self,
            id: &call.id,
        };
        let mut ctx = self
            .inner
            .ctx
            .clone()
            .with_caller(call.caller.clone())
            .with_cancellation(token)
            .with_call_id(call.id.as_str());
        if let Some(listener) = listener {
            ctx = ctx.with_listener(listener);
        }
        // Prepared once (tool found, aliases mapped, validated): hooks see the arguments
        // as the tool will get them, and the tool runs without a second check. What does
        // not prepare fails here, with the event `execute` would send.
        let args = std::mem::replace(&mut call.args, Args::Json(serde_json::Value::Null));
        let prepared = match registry.prepare(&call.name, args) {
            Ok(prepared) => prepared,
            Err(e) => return Err(registry.failed(&ctx, &call.name, e)),
        };
        let hooks = Arc::clone(
            &self
                .inner
                .hooks
                .read()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let prepared = if hooks.is_empty() {
            prepared
        } else {
            // Lent to the hooks, not copied: they look at them through `&call`.
            let (args, lent) = prepared.lend_args();
            call.args = Args::Json(args);
            for hook in hooks.iter() {
                if let Err(refusal) = hook.before_call(&call, lent.spec()).await {
                    let error = refusal.into_error(&call.name);
                    tracing::info!(target: "klaw::engine", call_id = call.id, tool = call.name, cause = error.causes(), "call refused: {error}");
                    return Err(error);
                }
            }
            match std::mem::replace(&mut call.args, Args::Json(serde_json::Value::Null)) {
                Args::Json(args) => lent.give_back(args),
                // Never so (nothing changes `call` while the hooks look): checked again.
                other => match registry.prepare(&call.name, other) {
                    Ok(prepared) => prepared,
                    Err(e) => return Err(registry.failed(&ctx, &call.name, e)),
                },
            }
        };
        registry.execute_prepared(&ctx, prepared).await
    }

    /// Cancels the running call `id` (an `exec` in flight has its process tree killed);
    /// false when no call with that id is running.
    pub fn cancel(&self, id: &str) -> bool {
        match self.lock_running().get(id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// The ids of the calls running now.
    pub fn running_calls(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.lock_running().keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Resolves once calls have run and then none has for `quiet`: none running, and
    /// none started (however short) during that time. It waits for the next burst of
    /// calls to end when there has been none since the last time it resolved (the
    /// engine's long-running fronts give the allocator's free memory back then).
    pub async fn idle_after_calls(&self, quiet: Duration) {
        loop {
            self.inner.idle.notified().await;
            let seen = self.inner.started.load(Ordering::Relaxed);
            tokio::time::sleep(quiet).await;
            if self.inner.started.load(Ordering::Relaxed) == seen && self.lock_running().is_empty()
            {
                return;
            }
        }
    }

    /// Adds a hook that sees every call before it runs and may refuse it.
    pub fn before_call(&self, hook: impl PreCallHook) {
        let mut hooks = self
            .inner
            .hooks
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let mut list = Vec::clone(&hooks);
        list.push(Arc::new(hook));
        *hooks = Arc::new(list);
    }

    /// Adds a hook that sees every call's outcome and every load failure.
    pub fn subscribe(&self, hook: impl EventHook) {
        let _ = self.change_registry(|r| {
            r.subscribe(hook);
            Ok(false)
        });
    }

    /// Adds a tool at run time, validated like those collected at start-up; subscribers
    /// of [`tools_changed`](Self::tools_changed) are told, event hooks get
    /// [`ToolEvent::Created`] (or `LoadFailed`).
    pub fn register(&self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        self.change_registry(|r| {
            let (name, origin) = (tool.spec().name.clone(), tool.spec().origin.clone());
            r.register(tool)?;
            r.emit(&ToolEvent::created(name, origin));
            Ok(true)
        })
        .map(|_| ())
    }

    /// Removes a tool at run time (event hooks get [`ToolEvent::Removed`]); false when
    /// there was none by that name.
    pub fn unregister(&self, name: &str) -> bool {
        self.change_registry(|r| {
            let Some(tool) = r.unregister(name) else {
                return Ok(false);
            };
            r.emit(&ToolEvent::removed(name, tool.spec().origin.clone()));
            Ok(true)
        })
        .unwrap_or(false)
    }

    /// Replaces what `source` (a loader: `manifests`, `mcp:<server>`) reported as not
    /// loaded; an empty list clears it. Each new entry is logged and given to the event
    /// hooks as [`ToolEvent::LoadFailed`] (a failure reported again unchanged is not).
    pub fn set_failed(&self, source: &str, failed: Vec<FailedTool>) {
        let mut all = self
            .inner
            .load_failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let before = all.remove(source).unwrap_or_default();
        let registry = self.registry();
        for f in failed.iter().filter(|f| !before.contains(f)) {
            registry.emit(&ToolEvent::load_failed(&f.name, &f.origin, &f.problem));
        }
        if !failed.is_empty() {
            all.insert(source.to_owned(), failed);
        }
    }

    /// Every tool that is not working as offered, by name: those a loader could not
    /// load, then those whose last [`FAILURE_STREAK`] calls or more failed.
    pub fn failed(&self) -> Vec<FailedTool> {
        let mut out: Vec<FailedTool> = self
            .inner
            .load_failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .flatten()
            .cloned()
            .collect();
        let registry = self.registry();
        for (name, (failures, problem)) in self.inner.streaks.lock().iter() {
            if *failures >= FAILURE_STREAK {
                out.push(FailedTool {
                    name: name.clone(),
                    origin: registry
                        .by_name(name)
                        .map(|t| t.spec().origin.clone())
                        .unwrap_or_default(),
                    problem: problem.clone(),
                    failures: *failures,
                });
            }
        }
        out.sort_by(|a, b| (&a.name, a.failures).cmp(&(&b.name, b.failures)));
        out
    }

    /// A receiver that sees a new value whenever tools are added or removed (the MCP
    /// server turns it into `notifications/tools/list_changed`).
    pub fn tools_changed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.tools_changed.subscribe()
    }

    /// Stops the engine: no new call runs, running calls are cancelled (an `exec` has its
    /// process tree killed) and waited for (up to 5 s), background processes end, and the
    /// state tools opened (databases, process tables) is dropped, which closes it.
    /// Idempotent.
    pub async fn shutdown(&self) {
        self.inner.closing.cancel();
        self.inner
            .ctx
            .shared_state::<klaw_tools::tools::shell::ProcessTable>()
            .kill_all();
        let deadline = tokio::time::Instant::now() + SHUTDOWN_GRACE;
        while !self.lock_running().is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let left = self.running_calls();
        if !left.is_empty() {
            tracing::warn!(target: "klaw::engine", ?left, "calls still running after the shutdown grace period");
        }
        self.inner.ctx.clear_shared_state();
    }

    /// Whether [`shutdown`](Self::shutdown) was called.
    pub fn is_shut_down(&self) -> bool {
        self.inner.closing.is_cancelled()
    }

    fn lock_running(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.inner
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies `change` to a copy of the registry and installs it; tells subscribers
    /// when `change` says the tool list changed.
    fn change_registry(
        &self,
        change: impl FnOnce(&mut ToolRegistry) -> Result<bool, RegistryError>,
    ) -> Result<bool, RegistryError> {
        let mut slot = self
            .inner
            .registry
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let mut next = ToolRegistry::clone(&slot);
        let changed = change(&mut next)?;
        *slot = Arc::new(next);
        drop(slot);
        if changed {
            self.inner.tools_changed.send_modify(|n| *n += 1);
        }
        Ok(changed)
    }
}

/// Builds an [`Engine`]: the configuration, then services for the tools' context,
/// tools beside the collected ones, and pre-call hooks. Every context also holds a
/// [`Registrar`], bound to the engine once it is built, so a tool (or a service) made
/// before the engine exists can register tools at run time.
pub struct EngineBuilder {
    config: Config,
    services: Vec<Box<dyn FnOnce(ToolContextBuilder) -> ToolContextBuilder + Send>>,
    tools: Vec<Arc<dyn Tool>>,
    hooks: Vec<Arc<dyn PreCallHook>>,
}

impl std::fmt::Debug for EngineBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineBuilder")
            .field("services", &self.services.len())
            .field("tools", &self.tools.len())
            .field("hooks", &self.hooks.len())
            .finish_non_exhaustive()
    }
}

impl EngineBuilder {
    /// A builder for `config`.
    pub fn new(config: Config) -> Self {
        Self {
            config,
            services: Vec::new(),
            tools: Vec::new(),
            hooks: Vec::new(),
        }
    }

    /// Adds a service tools reach with `State<T>` (one per type; a later one replaces).
    #[must_use]
    pub fn service<T: Send + Sync + 'static>(mut self, service: T) -> Self {
        self.services.push(Box::new(move |b| b.service(service)));
        self
    }

    /// Adds a tool beside the collected ones, validated the same way.
    #[must_use]
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds a hook that sees every call before it runs and may refuse it.
    #[must_use]
    pub fn hook(mut self, hook: impl PreCallHook) -> Self {
        self.hooks.push(Arc::new(hook));
        self
    }

    /// Collects and validates the tools (every invalid one reported at once), creates
    /// the workspace and data directories, connects to the PostgreSQL of `storage.url`
    /// (migrating its schema; core memory is kept there then), and starts the engine.
    pub fn build(self) -> Result<Engine, EngineError> {
        let config = self.config;
        let mut registry = ToolRegistry::collect()?;
        let streaks = Arc::new(Streaks::default());
        {
            let streaks = Arc::clone(&streaks);
            registry.subscribe(move |event: &ToolEvent| streaks.see(event));
        }
        let mut errors = Vec::new();
        for tool in self.tools {
            if let Err(e) = registry.register(tool) {
                errors.push(e);
            }
        }
        if !errors.is_empty() {
            return Err(EngineError::Tools(klaw_tools::RegistryErrors(errors)));
        }
        for dir in [&config.data_dir, &config.workspace] {
            std::fs::create_dir_all(dir).map_err(|source| EngineError::Dir {
                path: dir.clone(),
                source,
            })?;
        }
        let database = match &config.raw.storage.url {
            Some(url) => Some(Arc::new(crate::storage::Postgres::connect(url)?)),
            None => None,
        };
        let registrar = Registrar::default();
        let mut builder = ToolContext::builder()
            .workspace(&config.workspace)
            .data_dir(&config.data_dir)
            .limits(config.limits())
            .settings(config.settings())
            // Each group's own settings, which its tools take as extractors.
            .service(config.shell())
            .service(config.files())
            .service(config.web())
            .service(registrar.clone())
            .service(klaw_mcp_ext::RuntimeTools(Arc::new(registrar.clone())))
            .caller(Caller::new("cli", None));
        // The memory tools read the model, runtime, weights and chunking from this service.
        #[cfg(feature = "memory")]
        {
            builder = builder.service(config.memory());
            // With `storage.url`, core memory and the agent's memory (pgvector) are in
            // that PostgreSQL, shared by every engine on it; else files in the data dir.
            if let Some(db) = &database {
                builder = builder.service(klaw_tools::tools::memory::CoreStoreService(Arc::new(
                    crate::storage::PgCoreMemory::new(Arc::clone(db)),
                )));
                let mut pg = klaw_tools::tools::memory::PgMemory::new(
                    db.pool().clone(),
                    db.handle().clone(),
                );
                pg.ef_search = config.raw.memory.ef_search;
                pg.owner = Some(Arc::clone(db) as Arc<dyn std::any::Any + Send + Sync>);
                builder = builder.service(pg);
            }
        }
        #[cfg(feature = "skills")]
        {
            builder = builder.service(config.skills());
        }
        // The small helper beside the engine's binary runs shell commands (a service the
        // embedder adds replaces it).
        if let Some(helper) = sandbox_helper() {
            builder = builder.service(klaw_tools::tools::shell::SandboxHelper::new(helper));
        }
        for add in self.services {
            builder = add(builder);
        }
        let inner = Arc::new(Inner {
            config: Arc::new(config),
            registry: RwLock::new(Arc::new(registry)),
            ctx: builder.build(),
            hooks: RwLock::new(Arc::new(self.hooks)),
            running: Mutex::new(HashMap::new()),
            started: AtomicU64::new(0),
            idle: tokio::sync::Notify::new(),
            closing: CancellationToken::new(),
            tools_changed: tokio::sync::watch::Sender::new(0),
            load_failures: Mutex::new(BTreeMap::new()),
            streaks,
            database,
        });
        let _ = registrar.0.set(Arc::downgrade(&inner));
        Ok(Engine { inner })
    }
}

/// The name of the engine's own sandbox helper binary (`src/bin/klaw-engine-sandbox.rs`).
pub(crate) const SANDBOX_HELPER: &str = "klaw-engine-sandbox";

/// The program that runs shell commands' sandbox: [`SANDBOX_HELPER`] beside the current
/// executable when it is there and trusted, else the executable itself (which plays the
/// helper too: `main` checks for it first). `None` when the executable is unknown.
pub(crate) fn sandbox_helper() -> Option<std::path::PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(klaw_sandbox::helper_beside(&exe, SANDBOX_HELPER))
}

/// Registers tools with the engine at run time, from where the engine itself cannot be
/// named: every tool context holds one (`State<Registrar>`), bound to its engine once
/// [`EngineBuilder::build`] made it. Before that, or after the engine is gone, it
/// registers nothing and says so.
#[derive(Clone, Default)]
pub struct Registrar(Arc<OnceLock<Weak<Inner>>>);

impl std::fmt::Debug for Registrar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.engine().is_some() {
            "Registrar(bound)"
        } else {
            "Registrar(unbound)"
        })
    }
}

impl klaw_mcp_ext::ToolChanges for Registrar {
    fn register(&self, tool: Arc<dyn Tool>) -> Result<(), ToolError> {
        Registrar::register(self, tool)
    }

    fn unregister(&self, name: &str) -> bool {
        Registrar::unregister(self, name)
    }
}

impl Registrar {
    fn engine(&self) -> Option<Engine> {
        let inner = self.0.get()?.upgrade()?;
        Some(Engine { inner })
    }

    /// Adds a tool to the engine, as [`Engine::register`] does.
    pub fn register(&self, tool: Arc<dyn Tool>) -> Result<(), ToolError> {
        let engine = self.engine().ok_or_else(|| {
            ToolError::unavailable("the engine is not running; no tool can be added")
        })?;
        engine
            .register(tool)
            .map_err(|e| ToolError::invalid_arguments("", e.to_string()))
    }

    /// Removes a tool from the engine, as [`Engine::unregister`] does; false when there
    /// was none by that name or the engine is gone.
    pub fn unregister(&self, name: &str) -> bool {
        self.engine().is_some_and(|e| e.unregister(name))
    }
}

/// The size of `args` as JSON text, in bytes (counted, not kept).
fn args_size(args: &Args) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    match args {
        Args::Text(t) => t.len() as u64,
        Args::Json(v) => {
            let mut n = Count(0);
            let _ = serde_json::to_writer(&mut n, v);
            n.0
        }
    }
}

/// Removes a call from the running set when it ends, however it ends (a caller that
/// drops the future cancels the call).
struct Running<'a> {
    engine: &'a Engine,
    id: &'a str,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut running = self.engine.lock_running();
        running.remove(self.id);
        if running.is_empty() {
            self.engine.inner.idle.notify_one();
        }
    }
}

/// Resolves on the first SIGINT or SIGTERM, with the signal's name; long-running commands
/// (`mcp`, later `run`) then call [`Engine::shutdown`].
pub async fn stop_signal() -> std::io::Result<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    Ok(tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    })
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn a_refusal_keeps_its_source_into_the_calls_error() {
        let asked = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the tty went away");
        let refusal = Refusal::new("the user could not be asked").with_source(asked);
        assert_eq!(refusal.source().unwrap().to_string(), "the tty went away");
        let error = refusal.into_error("file_delete");
        assert_eq!(error.kind(), &ErrorKind::Refused);
        assert_eq!(error.message(), "the user could not be asked");
        assert_eq!(error.tool(), Some("file_delete"));
        assert_eq!(error.source().unwrap().to_string(), "the tty went away");
        assert_eq!(error.causes(), "the tty went away");
        let plain: Refusal = "not on this channel".into();
        assert!(plain.into_error("exec").source().is_none());
    }
}
