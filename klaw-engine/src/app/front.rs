//! A front end's life on an [`App`]: its runtime, the app assembled and started (the
//! imported servers, the manifests' watch), the front end itself, then the one shutdown
//! ([`run_front`], [`run_front_on_worker`]); and what the serving front ends run on the
//! app: the MCP server over stdio or HTTP ([`App::serve_mcp_stdio`],
//! [`App::serve_mcp_http`]) and the parts of `klaw-engine run` ([`App::start_running`],
//! [`Running::serve`]). The command line parses, calls these and prints.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::{App, AppError};
use crate::Config;
use crate::llm::Model;
use crate::mcp::McpError;

/// Why a front end could not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrontError {
    /// The async runtime could not be built.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The app could not be assembled.
    #[error(transparent)]
    Assemble(#[from] AppError),
    /// The front end's task ended without an answer (cancelled; a panic goes on as one).
    #[error("the front end stopped: {0}")]
    Stopped(#[source] tokio::task::JoinError),
}

/// Runs a front end: the log (and telemetry), a runtime of two worker threads, the app
/// assembled with `model` and started, then `f`; the app is shut down whatever `f`
/// returned.
pub(crate) fn run_front<F, Fut, T>(
    config: Config,
    model: Option<Model>,
    f: F,
) -> Result<T, FrontError>
where
    F: FnOnce(Arc<App>) -> Fut,
    Fut: Future<Output = T>,
{
    run_front_with(Some(2), config, model, f)
}

/// [`run_front`] on a runtime with a worker thread per core (Tokio's default;
/// `TOKIO_WORKER_THREADS` sets another number), for the front ends that serve many
/// clients at once (`mcp --http`, `run`). Two workers held the HTTP server to two cores
/// whatever the machine had (issue 48: a third of rmcp's calls/s on 16 cores).
pub(crate) fn run_front_serving<F, Fut, T>(
    config: Config,
    model: Option<Model>,
    f: F,
) -> Result<T, FrontError>
where
    F: FnOnce(Arc<App>) -> Fut,
    Fut: Future<Output = T>,
{
    run_front_with(None, config, model, f)
}

/// [`run_front`] with `workers` threads (`None`: Tokio's default).
fn run_front_with<F, Fut, T>(
    workers: Option<usize>,
    config: Config,
    model: Option<Model>,
    f: F,
) -> Result<T, FrontError>
where
    F: FnOnce(Arc<App>) -> Fut,
    Fut: Future<Output = T>,
{
    crate::telemetry::init(&config);
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = workers {
        builder.worker_threads(n);
    }
    let runtime = builder.enable_all().build().map_err(FrontError::Runtime)?;
    let result = runtime.block_on(async {
        let app = Arc::new(App::assemble(config, model)?);
        app.start_imports().await;
        app.watch_manifests();
        let out = f(Arc::clone(&app)).await;
        app.shutdown().await;
        Ok(out)
    });
    // A read of stdin on a blocking thread cannot be cancelled: do not wait for it.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

/// [`run_front`] with `f` run as a task on one of the runtime's workers, for the front
/// ends that run agent turns themselves (`chat`, `schedule run-now`). Awaited on
/// `block_on`'s thread, a turn hands each step over between threads (the HTTP client's
/// connection task and the I/O driver are on the workers), and every hand-over to a
/// sleeping core waits for it to wake up; on a worker the steps follow each other on one
/// thread (issue 32: about 8 voluntary context switches per round of the loop from
/// `block_on`, 2 to 3 on a worker). `run` needs no such thing: each chat's conversation
/// is a task already.
pub(crate) fn run_front_on_worker<F, Fut, T>(
    config: Config,
    model: Option<Model>,
    f: F,
) -> Result<T, FrontError>
where
    F: FnOnce(Arc<App>) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    run_front(config, model, |app| async move {
        match tokio::spawn(f(app)).await {
            Ok(out) => Ok(out),
            // A panic of the front end goes on as it did on this thread.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(FrontError::Stopped(e)),
        }
    })?
}

/// The parts `klaw-engine run` started beside the channels ([`App::start_running`]).
pub(crate) struct Running {
    mcp: Option<JoinHandle<Result<(), McpError>>>,
    scheduler: Option<JoinHandle<()>>,
}

impl App {
    /// Installs the approval of the `mcp` channel: calls that need approval are put to
    /// the calling client's user through elicitation, where the client offers it
    /// ([`ElicitApproval`](crate::mcp::ElicitApproval)). Every MCP front end calls it
    /// before it serves.
    pub(crate) fn ask_through_clients(&self) {
        self.approve_on(
            crate::mcp::CHANNEL,
            Arc::new(crate::mcp::ElicitApproval::new(self.engine())),
        );
    }

    /// `klaw-engine mcp`: stops on SIGINT or SIGTERM, warms memory, asks the clients
    /// for approvals, and serves the engine over stdio until the client leaves.
    pub(crate) async fn serve_mcp_stdio(&self) -> Result<(), McpError> {
        self.watch_signals("stopping");
        self.warm_memory();
        self.release_memory_when_idle();
        let stop = self.stop_token().child_token();
        self.ask_through_clients();
        crate::mcp::serve_stdio(self.engine().clone(), stop).await
    }

    /// `klaw-engine mcp --http`: as [`App::serve_mcp_stdio`], over HTTP on `bind` until
    /// the stop.
    pub(crate) async fn serve_mcp_http(&self, bind: SocketAddr) -> Result<(), McpError> {
        self.watch_signals("stopping");
        self.warm_memory();
        self.release_memory_when_idle();
        let stop = self.stop_token().child_token();
        self.ask_through_clients();
        crate::mcp::http::serve(self.engine().clone(), bind, stop).await
    }

    /// `klaw-engine run`: stops on SIGINT or SIGTERM, warms memory, starts the MCP
    /// server over HTTP on `mcp` (when given) and the scheduler (when it fires jobs).
    pub(crate) fn start_running(&self, mcp: Option<SocketAddr>) -> Running {
        self.watch_signals("stopping");
        self.warm_memory();
        self.release_memory_when_idle();
        let mcp = mcp.map(|b| self.spawn_mcp_http(b));
        let scheduler = self.spawn_scheduler();
        Running { mcp, scheduler }
    }
}

impl Running {
    /// Whether the scheduler fires jobs.
    pub(crate) fn has_scheduler(&self) -> bool {
        self.scheduler.is_some()
    }

    /// Serves the gateway's channels until the stop (serving on without a channel when
    /// the MCP server or the scheduler runs), then waits for the scheduler and the MCP
    /// server to stop; the MCP server's error, if it ended with one.
    pub(crate) async fn serve(self, app: &App) -> Option<McpError> {
        app.serve_channels(self.mcp.is_some() || self.scheduler.is_some())
            .await;
        // The scheduler stopped with the token (its runs had their grace period).
        if let Some(s) = self.scheduler
            && tokio::time::timeout(Duration::from_secs(12), s)
                .await
                .is_err()
        {
            tracing::warn!(target: "klaw::scheduler", "the scheduler did not stop in time");
        }
        // The MCP server stopped with the token (its connections had 5 s to finish).
        if let Some(m) = self.mcp {
            match tokio::time::timeout(Duration::from_secs(6), m).await {
                Ok(Ok(Err(e))) => return Some(e),
                Ok(_) => {}
                Err(_) => {
                    tracing::warn!(target: "klaw::mcp", "the MCP server did not stop in time")
                }
            }
        }
        None
    }
}
