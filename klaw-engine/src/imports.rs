//! Imported MCP servers: Klaw as an MCP client. Each enabled server of `mcpServers` is
//! started with rmcp's client (a program on stdio in its own process group, or
//! Streamable HTTP), and its tools are registered as ordinary tools named
//! `<server>__<tool>` (origin `mcp:<server>`), so the agent, Klaw's MCP clients, `call`,
//! hooks and approval see them like any other.
//!
//! - Start: every server at once; [`Imports::start`] returns when each has answered
//!   `initialize` and `tools/list` or used up its `startupTimeoutSeconds`, so the
//!   engine never waits longer than the largest limit. A server that failed is reported
//!   ([`Engine::failed`], source `mcp:<server>`) and retried in the background.
//! - A tool whose definition Klaw refuses (a bad schema, a name taken) is reported
//!   failed; the server's other tools load.
//! - Calls are forwarded with the caller's cancellation (`notifications/cancelled`), the
//!   server's progress reports, and `callTimeoutSeconds` as the tool's time limit.
//! - `notifications/tools/list_changed`: the tools are listed again and the difference
//!   registered, which tells Klaw's own MCP clients.
//! - A server that dies keeps its tools registered; they answer `unavailable` at once
//!   until it is back (restarted after 1 s, 2 s, 4 s ... at most 60 s apart), so a
//!   client's tool list does not flap.
//! - [`Imports::stop`]: stdin closed, then SIGTERM to the process group, then kill.
//!
//! See `doc/mcp-import.md`.

mod client;
mod naming;
mod stdio;
mod supervisor;
mod tool;

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::ImportedServer;
use crate::{Config, Engine};

/// The server of `servers` (the names in `mcpServers`) whose imported tools could be
/// called `name` (`<server>__...`), if any: such a name is the server's, whether or not
/// it lists that tool now, so a manifest cannot take it.
pub(crate) fn owner<'a>(servers: impl IntoIterator<Item = &'a str>, name: &str) -> Option<&'a str> {
    servers
        .into_iter()
        .find(|server| naming::owned_by(server, name))
}

/// How long [`Imports::stop`] waits for every server to shut down (rmcp's own shutdown
/// of a program takes at most 3 s after stdin is closed and 3 s after SIGTERM).
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The imported servers of one engine: started by [`start`](Self::start), stopped by
/// [`stop`](Self::stop).
#[derive(Debug)]
pub struct Imports {
    servers: BTreeMap<String, ImportedServer>,
    running: Mutex<Option<Running>>,
}

#[derive(Debug)]
struct Running {
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Imports {
    /// The enabled servers of `config`'s `mcpServers`, not started.
    pub fn from_config(config: &Config) -> Self {
        Self {
            servers: config
                .raw
                .mcp_servers
                .iter()
                .filter(|(_, s)| s.enabled)
                .map(|(n, s)| (n.clone(), s.clone()))
                .collect(),
            running: Mutex::new(None),
        }
    }

    /// Whether no server is to be started.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The names of the enabled servers.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.servers.keys().map(String::as_str)
    }

    /// Starts every server at once and registers their tools with `engine`; returns
    /// when each has started or failed to within its start-up limit (the failures are
    /// in [`Engine::failed`] and retried in the background). A second call does
    /// nothing. Call it on the runtime the engine serves on.
    pub async fn start(&self, engine: &Engine) {
        let mut ready = Vec::new();
        {
            let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
            if running.is_some() || self.servers.is_empty() {
                return;
            }
            let stop = CancellationToken::new();
            let mut tasks = Vec::new();
            for (name, server) in &self.servers {
                let (tx, rx) = tokio::sync::oneshot::channel();
                let supervisor = supervisor::Supervisor::new(
                    name,
                    server.clone(),
                    engine.clone(),
                    stop.child_token(),
                );
                tasks.push(tokio::spawn(supervisor.run(tx)));
                ready.push(rx);
            }
            *running = Some(Running { stop, tasks });
        }
        // Each supervisor answers within its own limit; the bound is a safety net.
        let longest = self
            .servers
            .values()
            .map(|s| s.startup_timeout_seconds)
            .max()
            .unwrap_or(0);
        let all = futures_util::future::join_all(ready);
        let _ = tokio::time::timeout(Duration::from_secs(longest + 1), all).await;
    }

    /// Shuts every server down (stdin closed, then SIGTERM to its process group, then
    /// kill) and waits for them, at most 10 s. Their tools stay registered (the engine
    /// is stopping) and answer `unavailable`. Idempotent.
    pub async fn stop(&self) {
        let running = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(running) = running else {
            return;
        };
        running.stop.cancel();
        let all = futures_util::future::join_all(running.tasks);
        if tokio::time::timeout(STOP_GRACE, all).await.is_err() {
            tracing::warn!(target: "klaw::imports", "imported MCP servers still stopping after {} s", STOP_GRACE.as_secs());
        }
    }
}
