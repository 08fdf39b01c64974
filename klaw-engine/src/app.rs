//! The one place the engine is put together for a front end (`call`, `chat`, `run`,
//! `mcp`, and `tools` and `doctor`, which read the registry of what is assembled here);
//! each front end runs on it through `front.rs` (`run_front`: its runtime, the start,
//! the one shutdown; the MCP server and `run`'s parts).
//!
//! [`App::assemble`] builds the [`Engine`], then the parts every front end shares: the
//! gateway and `send_message`, and, when a model is given, the agent with its subagents
//! (`subagent_spawn`) and the approval policy of every channel (refused where nobody can
//! be asked; a front end that can ask installs its own approver for its channel).
//! The app owns the one stop token: SIGINT or SIGTERM cancel it, components take a
//! child of it, and only [`App::shutdown`] shuts the engine down — so a part that
//! stops (the MCP server over HTTP) never cuts another part's grace period short.

mod channels;
mod front;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::agent::subagent::{SubagentError, Subagents};
use crate::agent::{Agent, AgentError, Approvals, Approver, RefuseApproval};
use crate::gateway::{Gateway, GatewayError};
use crate::imports::Imports;
use crate::llm::Model;
use crate::manifests::Manifests;
use crate::scheduler::Scheduler;
use crate::{Config, Engine, EngineError};

pub(crate) use front::{run_front, run_front_on_worker, run_front_serving};

/// Why an app could not be assembled: the error of the part that failed, shown as it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppError {
    /// The engine could not start (configuration, tools, directories).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The gateway could not be built, or `send_message` registered.
    #[error(transparent)]
    Gateway(#[from] GatewayError),
    /// The agent could not be set up (its history).
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// `subagent_spawn` could not be registered.
    #[error(transparent)]
    Subagent(#[from] SubagentError),
    /// An engine-assembled tool (`render_js`) could not be registered.
    #[error("cannot register {tool}: {source}")]
    Register {
        /// The tool.
        tool: &'static str,
        /// Why.
        source: klaw_tools::RegistryError,
    },
    /// The schedule tools could not be registered.
    #[error("cannot register the schedule tools: {0}")]
    Scheduler(#[source] klaw_tools::RegistryError),
    /// The database of `storage.url` could not be used.
    #[error(transparent)]
    Storage(#[from] crate::storage::StorageError),
    /// `tool_create` and `tool_delete` could not be registered.
    #[error("cannot register tool_create and tool_delete: {0}")]
    Manifests(#[source] klaw_tools::RegistryError),
}

impl AppError {
    /// Whether a tool failed validation (the engine does not start with an invalid
    /// tool): the tool definitions are to fix, not the system.
    pub fn is_invalid_tool(&self) -> bool {
        matches!(self, Self::Engine(EngineError::Tools(_)))
    }
}

/// An engine assembled for one front end.
pub struct App {
    engine: Engine,
    gateway: Gateway,
    agent: Option<Agent>,
    subagents: Option<Subagents>,
    scheduler: Scheduler,
    manifests: Arc<Manifests>,
    approvals: Arc<Approvals>,
    imports: Imports,
    stop: CancellationToken,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("engine", &self.engine)
            .field("agent", &self.agent.is_some())
            .field("stopped", &self.stop.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl App {
    /// Builds the engine for `config` and the shared parts: the gateway with
    /// `send_message`, and with `model` the agent and `subagent_spawn`. Every gateway
    /// channel and the subagents refuse calls that need approval until a front end
    /// installs an approver ([`App::approve_on`]).
    pub fn assemble(config: Config, model: Option<Model>) -> Result<Self, AppError> {
        let engine = Engine::new(config).map_err(|e| match e {
            EngineError::Storage(e) => AppError::Storage(e),
            e => AppError::Engine(e),
        })?;
        let gateway = Gateway::from_config(&engine)?;
        engine
            .register(crate::tools::send_message::tool(gateway.clone()))
            .map_err(crate::gateway::GatewayError::Register)?;
        // Pages that need JavaScript: with a browser on the machine, else through
        // Cloudflare's Browser Rendering where its token and account are set.
        #[cfg(feature = "render")]
        {
            let render_js = match engine.config().browser() {
                Some(browser) => Some(klaw_tools::tools::web::render_js_tool(browser)),
                None => engine
                    .config()
                    .remote_browser()
                    .map(klaw_tools::tools::web::render_js_remote_tool),
            };
            if let Some(tool) = render_js {
                engine.register(tool).map_err(|source| AppError::Register {
                    tool: "render_js",
                    source,
                })?;
            }
        }
        let scheduler = Scheduler::from_config(engine.config(), engine.database())?;
        crate::tools::schedule::register(&engine, &scheduler, &gateway)
            .map_err(AppError::Scheduler)?;
        let (agent, subagents) = match model {
            Some(model) => {
                let agent = Agent::new(engine.clone(), model)?;
                let subagents =
                    crate::tools::subagent_spawn::register(&agent, Some(gateway.clone()))?;
                (Some(agent), Some(subagents))
            }
            None => (None, None),
        };
        // Manifest tools last: one named like an engine tool fails, never the engine's.
        let manifests = Arc::new(Manifests::new(engine.config()));
        crate::tools::tool_create::register(&engine, &manifests).map_err(AppError::Manifests)?;
        manifests.sync(&engine);
        // A loaded skill's allowed-tools (when enforced) refuses before anyone is asked.
        #[cfg(feature = "skills")]
        {
            let ctx = engine.context().clone();
            engine.before_call(move |call: &crate::ToolCall, spec: &klaw_tools::ToolSpec| {
                klaw_tools::tools::skills::check_allowed(&ctx, &call.caller, &spec.name)
                    .map_err(|e| crate::Refusal::new(e.to_string()))
            });
        }
        // After the subagents' own hook (core memory read-only), which answers first.
        let approvals = Approvals::install(&engine);
        for channel in gateway.channel_names() {
            approvals.set(
                &channel,
                Arc::new(RefuseApproval("nobody can be asked on this channel yet")),
            );
        }
        if subagents.is_some() {
            approvals.set(
                crate::agent::subagent::CHANNEL,
                Arc::new(RefuseApproval("a subagent has nobody to ask")),
            );
        }
        approvals.set(
            crate::scheduler::CHANNEL,
            Arc::new(RefuseApproval(
                "a scheduled job runs unattended: nobody to ask",
            )),
        );
        let imports = Imports::from_config(engine.config());
        Ok(Self {
            engine,
            gateway,
            agent,
            subagents,
            scheduler,
            manifests,
            approvals,
            imports,
            stop: CancellationToken::new(),
        })
    }

    /// The app a command that only looks at the tools sees (`tools`, `doctor`): with the
    /// agent when a model is configured, so every tool a front end would offer is there.
    ///
    /// The imported MCP servers are started (on a runtime of its own, within their
    /// start-up limits) so their tools and failures are listed, then stopped again: the
    /// imported tools stay in the registry, answering `unavailable`.
    pub fn for_listing(config: Config) -> Result<Self, AppError> {
        let model = Model::from_config(&config, None).ok();
        let app = Self::assemble(config, model)?;
        if !app.imports.is_empty() && tokio::runtime::Handle::try_current().is_err() {
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt.block_on(async {
                    app.start_imports().await;
                    app.imports.stop().await;
                }),
                Err(e) => {
                    tracing::warn!(target: "klaw::imports", "cannot start the imported MCP servers: {e}")
                }
            }
        }
        Ok(app)
    }

    /// Starts the imported MCP servers (`mcpServers`) and registers their tools;
    /// returns once each has started or used up its start-up limit (those that failed
    /// are in [`Engine::failed`] and retried in the background). `run_front` calls
    /// it for every front end; a second call does nothing.
    pub async fn start_imports(&self) {
        self.imports.start(&self.engine).await;
    }

    /// The imported MCP servers.
    pub fn imports(&self) -> &Imports {
        &self.imports
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The gateway's channels and whitelist.
    pub fn gateway(&self) -> &Gateway {
        &self.gateway
    }

    /// The agent, when the app was assembled with a model.
    pub fn agent(&self) -> Option<&Agent> {
        self.agent.as_ref()
    }

    /// The subagents, when the app was assembled with a model.
    pub fn subagents(&self) -> Option<&Subagents> {
        self.subagents.as_ref()
    }

    /// The scheduled jobs (`schedule_*`, fired by `run`).
    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// The manifest tools (`<workspace>/tools`, `<dataDir>/tools`).
    pub fn manifests(&self) -> &Arc<Manifests> {
        &self.manifests
    }

    /// Keeps the manifest tools in step with their files while the app runs (every
    /// [`WATCH_INTERVAL`](crate::manifests::WATCH_INTERVAL), and at once on SIGHUP), until
    /// the stop. Call it on the app's runtime.
    pub(crate) fn watch_manifests(&self) {
        Arc::clone(&self.manifests).watch(self.engine.clone(), self.stop.child_token());
    }

    /// Warms the agent's memory in the background (on the blocking pool): opens the
    /// index, loads the model and the vectors' in-memory copy, runs one search — so the
    /// first `memory_search` of a serving engine costs about what the next ones do
    /// (`Memory::warm`). Only when `memory_search` is offered and the memory exists; a
    /// search that arrives first waits for the warm-up. `mcp` and `run` call it.
    #[cfg(feature = "memory")]
    pub(crate) fn warm_memory(&self) {
        use klaw_tools::tools::memory::Memory;
        if self.engine.registry().by_name("memory_search").is_none() {
            return;
        }
        let ctx = self.engine.context().clone();
        tokio::task::spawn_blocking(move || {
            let start = std::time::Instant::now();
            match ctx.shared_state::<Memory>().warm(&ctx) {
                Ok(true) => tracing::info!(
                    target: "klaw::memory",
                    ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
                    "memory warmed"
                ),
                Ok(false) => {}
                // The first search reports it (to the model) and tries again.
                Err(e) => tracing::warn!(target: "klaw::memory", "cannot warm the memory: {e}"),
            }
        });
    }

    /// Without the memory, nothing to warm.
    #[cfg(not(feature = "memory"))]
    pub(crate) fn warm_memory(&self) {}

    /// Until the stop, gives the memory the allocator holds free back to the system
    /// each time the engine's calls have been quiet for a second after some ran: glibc
    /// otherwise keeps all a burst of calls freed (10,000 pipelined calls over MCP left
    /// 13 MB of it, given back in one release) for as long as the engine runs.
    pub(crate) fn release_memory_when_idle(&self) {
        const QUIET: std::time::Duration = std::time::Duration::from_secs(1);
        let engine = self.engine.clone();
        let stop = self.stop.child_token();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = engine.idle_after_calls(QUIET) => {}
                    () = stop.cancelled() => return,
                }
                if klaw_sandbox::release_free_memory() {
                    tracing::debug!(target: "klaw::engine", "free memory given back to the system");
                }
            }
        });
    }

    /// Starts firing due jobs (with a child of the stop token) when there is an agent and
    /// `scheduler.enabled`; the task ends after the stop, its running jobs given a grace
    /// period.
    pub(crate) fn spawn_scheduler(&self) -> Option<tokio::task::JoinHandle<()>> {
        let agent = self.agent.clone()?;
        if !self.scheduler.enabled() {
            return None;
        }
        let (scheduler, gateway) = (self.scheduler.clone(), self.gateway.clone());
        let stop = self.stop.child_token();
        Some(tokio::spawn(async move {
            scheduler.run(agent, gateway, stop).await;
        }))
    }

    /// Calls on `channel` that need approval are asked of `approver` (in place of the
    /// refusal [`assemble`](Self::assemble) installed).
    pub fn approve_on(&self, channel: &str, approver: Arc<dyn Approver>) {
        self.approvals.set(channel, approver);
    }

    /// The stop token: cancelled by SIGINT or SIGTERM (once [`watch_signals`] runs) or
    /// by [`stop`](Self::stop). Components take a child of it.
    ///
    /// [`watch_signals`]: Self::watch_signals
    pub fn stop_token(&self) -> &CancellationToken {
        &self.stop
    }

    /// Asks every part to stop.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Cancels the stop token on the first SIGINT or SIGTERM, saying which on stderr
    /// (`klaw-engine: SIGTERM: <what>`). Call it on the app's runtime.
    pub fn watch_signals(&self, what: &'static str) {
        let stop = self.stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                s = crate::stop_signal() => {
                    if let Ok(name) = s {
                        eprintln!("klaw-engine: {name}: {what}");
                    }
                    stop.cancel();
                }
                () = stop.cancelled() => {}
            }
        });
    }

    /// Stops every part and shuts the engine down (running calls cancelled and waited
    /// for, background processes ended, open stores closed). The only place the engine
    /// is shut down.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.engine.shutdown().await;
        // After the calls: a cancelled imported call tells its server first.
        self.imports.stop().await;
    }
}
