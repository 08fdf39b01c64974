//! One imported server's life: start it (within its start-up limit), import its tools,
//! follow `tools/list_changed`, restart it with backoff when it dies, and shut it down
//! gracefully at the stop.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::PaginatedRequestParams;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::client::{Connection, Link, Resolved, cut};
use super::tool::ImportedTool;
use crate::config::ImportedServer;
use crate::{Engine, FailedTool};

/// Most tools imported from one server; the rest are reported, not imported.
pub(crate) const MAX_TOOLS: usize = 1_000;
/// Most pages of one `tools/list`.
const MAX_PAGES: usize = 100;
/// The first wait before a restart; doubled after each failure up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A server up at least this long starts again from [`FIRST_BACKOFF`] when it dies.
const STABLE: Duration = Duration::from_secs(60);

/// Runs one server until `stop`.
pub(crate) struct Supervisor {
    pub(crate) name: String,
    pub(crate) config: ImportedServer,
    pub(crate) engine: Engine,
    pub(crate) link: Arc<Link>,
    pub(crate) stop: CancellationToken,
    /// The tools registered now: imported name → the server's definition (to tell
    /// which changed on a new list).
    registered: BTreeMap<String, serde_json::Value>,
    /// The tools of the last list that could not be imported (reported again, beside
    /// the server, while it is down).
    tool_failures: Vec<FailedTool>,
    /// The tools refused, by their name on the server: the definition and why. An
    /// unchanged definition is not tried again on a new list (one report, one event).
    refused: BTreeMap<String, (serde_json::Value, FailedTool)>,
}

impl Supervisor {
    pub(crate) fn new(
        name: &str,
        config: ImportedServer,
        engine: Engine,
        stop: CancellationToken,
    ) -> Self {
        Self {
            link: Link::new(name),
            name: name.to_owned(),
            config,
            engine,
            stop,
            registered: BTreeMap::new(),
            tool_failures: Vec::new(),
            refused: BTreeMap::new(),
        }
    }

    fn source(&self) -> String {
        format!("mcp:{}", self.name)
    }

    fn startup_limit(&self) -> Duration {
        Duration::from_secs(self.config.startup_timeout_seconds)
    }

    /// Starts the server and keeps it running until the stop; `ready` is told when the
    /// first attempt ended (started, failed or out of time).
    pub(crate) async fn run(mut self, ready: oneshot::Sender<()>) {
        let mut ready = Some(ready);
        let mut backoff = FIRST_BACKOFF;
        loop {
            let limit = self.startup_limit();
            let attempt = tokio::select! {
                r = tokio::time::timeout(limit, self.start()) => r,
                () = self.stop.cancelled() => break,
            };
            let why = match attempt {
                Ok(Ok((conn, tools))) => {
                    tracing::info!(target: "klaw::imports", server = self.name, tools = tools.len(), "started");
                    // Callable before its tools are registered: a call right after the
                    // start never finds it still "starting".
                    self.link.set_up(conn.peer().clone());
                    // A new start tries every tool again (a name taken before may be free).
                    self.refused.clear();
                    self.import(tools);
                    if let Some(r) = ready.take() {
                        let _ = r.send(());
                    }
                    let since = Instant::now();
                    match self.serve(conn).await {
                        None => break,
                        Some(why) => {
                            if since.elapsed() >= STABLE {
                                backoff = FIRST_BACKOFF;
                            }
                            why
                        }
                    }
                }
                Ok(Err(why)) => why,
                Err(_) => format!(
                    "it did not answer `initialize` and `tools/list` within {} s \
                     (startupTimeoutSeconds)",
                    limit.as_secs()
                ),
            };
            let stderr = self.link.last_stderr();
            let why = if stderr.is_empty() {
                why
            } else {
                format!("{why}; its last words on stderr: {}", cut(&stderr, 600))
            };
            tracing::warn!(target: "klaw::imports", server = self.name, "{why}; restarting in {} s", backoff.as_secs());
            self.link.set_down(why.clone());
            // Its tools stay listed and answer `unavailable` until it is back.
            let mut failed = vec![FailedTool::load(
                &self.name,
                self.source(),
                format!(
                    "the MCP server is not running: {why}; retrying every {} s at most",
                    MAX_BACKOFF.as_secs()
                ),
            )];
            failed.extend(self.tool_failures.iter().cloned());
            self.engine.set_failed(&self.source(), failed);
            if let Some(r) = ready.take() {
                let _ = r.send(());
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = self.stop.cancelled() => break,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        self.link.set_down("the engine is stopping".into());
    }

    /// Starts the server and lists its tools.
    async fn start(&self) -> Result<(Connection, Vec<rmcp::model::Tool>), String> {
        self.link.clear_stderr();
        let resolved = Resolved::new(&self.config, &|name| std::env::var(name).ok())?;
        let conn = resolved.connect(&self.link).await?;
        let tools = list(&conn).await?;
        Ok((conn, tools))
    }

    /// Serves calls until the server dies (why) or the stop (`None`), re-listing the
    /// tools on `tools/list_changed`.
    async fn serve(&mut self, conn: Connection) -> Option<String> {
        let peer = conn.peer().clone();
        let mut cancel = Some(conn.cancellation_token());
        let mut waiting = std::pin::pin!(conn.waiting());
        loop {
            tokio::select! {
                () = self.stop.cancelled() => {
                    self.link.set_down("the engine is stopping".into());
                    // The service closes its transport: stdin closed, then SIGTERM to
                    // the process group, then kill (rmcp's graceful shutdown).
                    if let Some(c) = cancel.take() {
                        c.cancel();
                    }
                    let _ = waiting.await;
                    return None;
                }
                quit = &mut waiting => {
                    return Some(match quit {
                        Ok(rmcp::service::QuitReason::Closed) => "the server closed the connection (it exited)".into(),
                        Ok(other) => format!("the connection ended ({other:?})"),
                        Err(e) => format!("the connection's task failed: {e}"),
                    });
                }
                () = self.link.list_changed.notified() => {
                    let limit = self.startup_limit();
                    match tokio::time::timeout(limit, list_peer(&peer)).await {
                        Ok(Ok(tools)) => {
                            tracing::info!(target: "klaw::imports", server = self.name, tools = tools.len(), "tool list changed");
                            self.import(tools);
                        }
                        Ok(Err(e)) => tracing::warn!(target: "klaw::imports", server = self.name, "cannot list the tools again: {e}"),
                        Err(_) => tracing::warn!(target: "klaw::imports", server = self.name, "tools/list took longer than {} s", limit.as_secs()),
                    }
                }
            }
        }
    }

    /// Registers the server's tools, removes those it no longer lists, replaces those
    /// whose definition changed, and reports the ones that cannot be imported.
    fn import(&mut self, mut tools: Vec<rmcp::model::Tool>) {
        let source = self.source();
        let mut failed = Vec::new();
        if tools.len() > MAX_TOOLS {
            failed.push(FailedTool::load(
                &self.name,
                &source,
                format!(
                    "the server lists {} tools; only the first {MAX_TOOLS} are imported",
                    tools.len()
                ),
            ));
            tools.truncate(MAX_TOOLS);
        }
        let timeout = Duration::from_secs(self.config.call_timeout_seconds);
        let mut wanted = BTreeMap::new();
        let mut refused = BTreeMap::new();
        for tool in &tools {
            let remote = tool.name.to_string();
            let definition = serde_json::to_value(tool).unwrap_or_default();
            if let Some((old, why)) = self.refused.remove(&remote)
                && old == definition
            {
                failed.push(why.clone());
                refused.insert(remote, (old, why));
                continue;
            }
            match ImportedTool::new(&self.link, tool, timeout) {
                Ok(imported) => {
                    wanted.insert(
                        imported_name_of(&imported),
                        (Arc::new(imported), definition, remote),
                    );
                }
                Err((name, problem)) => {
                    let why = FailedTool::load(name, &source, problem);
                    failed.push(why.clone());
                    refused.insert(remote, (definition, why));
                }
            }
        }
        let gone: Vec<String> = self
            .registered
            .keys()
            .filter(|n| !wanted.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            self.engine.unregister(&name);
            self.registered.remove(&name);
        }
        for (name, (tool, definition, remote)) in wanted {
            match self.registered.get(&name) {
                Some(old) if *old == definition => continue,
                Some(_) => {
                    self.engine.unregister(&name);
                    self.registered.remove(&name);
                }
                None => {}
            }
            match self.engine.register(tool) {
                Ok(()) => {
                    self.registered.insert(name, definition);
                }
                Err(e) => {
                    let why = FailedTool::load(e.tool, e.origin, e.problem);
                    failed.push(why.clone());
                    refused.insert(remote, (definition, why));
                }
            }
        }
        self.refused = refused;
        self.tool_failures = failed.clone();
        self.engine.set_failed(&source, failed);
    }
}

fn imported_name_of(tool: &ImportedTool) -> String {
    klaw_tools::Tool::spec(tool).name.clone()
}

async fn list(conn: &Connection) -> Result<Vec<rmcp::model::Tool>, String> {
    list_peer(conn.peer()).await
}

/// Every page of `tools/list`, bounded: at most [`MAX_PAGES`] pages and a little more
/// than [`MAX_TOOLS`] tools are read.
async fn list_peer(
    peer: &rmcp::service::Peer<rmcp::service::RoleClient>,
) -> Result<Vec<rmcp::model::Tool>, String> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let page = peer
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .map_err(|e| format!("tools/list failed: {}", cut(&e.to_string(), 500)))?;
        tools.extend(page.tools);
        cursor = page.next_cursor;
        if cursor.is_none() || tools.len() > MAX_TOOLS {
            break;
        }
    }
    Ok(tools)
}
