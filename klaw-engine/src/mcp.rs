//! The MCP server: the engine's tools for every MCP client, over stdio (`klaw-engine
//! mcp`) and Streamable HTTP ([`http`], `klaw-engine mcp --http`). A hand-written `rmcp` [`ServerHandler`] over [`Engine`]: our validator checks
//! the arguments, our messages are the results, calls carry ids and progress, and
//! `notifications/cancelled` cancels the call (an `exec` loses its process tree).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use klaw_tools::{Caller, ErrorKind, Format, Lang, ProgressSink, ProgressUpdate, ToolOutput};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeRequestParams, InitializeResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use crate::{Engine, ToolCall};

pub mod http;

/// The engine as an MCP server. Cheap to clone; each clone serves one session (its call
/// ids are prefixed with the session's number).
#[derive(Clone)]
pub struct McpServer {
    engine: Engine,
    lang: Lang,
    page_size: usize,
    /// Bounds the calls running at once, across sessions (`mcp.maxConcurrentCalls`).
    calls: Arc<tokio::sync::Semaphore>,
    session: u64,
    /// The clients to tell when the tool list changes.
    peers: Arc<Mutex<Vec<Peer<RoleServer>>>>,
}

impl McpServer {
    /// A server over `engine`, with descriptions in the configured language. Starts
    /// the task that turns tool-list changes into `notifications/tools/list_changed`
    /// (call it inside a Tokio runtime).
    pub fn new(engine: Engine) -> Self {
        let lang = engine.config().raw.language;
        let mcp = &engine.config().raw.mcp;
        let (page_size, max_calls) = (mcp.page_size.max(1), mcp.max_concurrent_calls.max(1));
        let server = Self {
            engine,
            lang,
            page_size,
            calls: Arc::new(tokio::sync::Semaphore::new(max_calls)),
            session: 0,
            peers: Arc::new(Mutex::new(Vec::new())),
        };
        let mut changes = server.engine.tools_changed();
        let peers = Arc::clone(&server.peers);
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                let live: Vec<Peer<RoleServer>> = {
                    let mut p = peers.lock().unwrap_or_else(PoisonError::into_inner);
                    p.retain(|peer| !peer.is_transport_closed());
                    p.clone()
                };
                for peer in live {
                    let _ = peer.notify_tool_list_changed().await;
                }
            }
        });
        server
    }

    /// A clone for a new session (its own prefix of call ids).
    pub fn session(&self) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self {
            session: NEXT.fetch_add(1, Ordering::Relaxed),
            ..self.clone()
        }
    }

    /// Every tool as MCP describes it, in name order.
    pub fn tools(&self) -> Vec<Tool> {
        let registry = self.engine.registry();
        let mut specs: Vec<_> = registry.all().map(|t| t.spec()).collect();
        specs.sort_by(|a, b| a.name.cmp(&b.name));
        specs
            .into_iter()
            .filter_map(|spec| {
                let def = klaw_tools::definition(spec, Format::Mcp, self.lang);
                match serde_json::from_value::<Tool>(def) {
                    Ok(tool) => Some(tool),
                    Err(e) => {
                        tracing::error!(target: "klaw::mcp", tool = spec.name, "cannot describe the tool for MCP: {e}");
                        None
                    }
                }
            })
            .collect()
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        let mut info = Implementation::new("klaw-engine", env!("CARGO_PKG_VERSION"));
        info.title = Some("Klaw".into());
        ServerConfig::new(capabilities)
            .with_server_info(info)
            .with_instructions(
                "Klaw's tools: files in a confined workspace, sandboxed shell commands, \
                 memory with hybrid search, the project's docs, utilities.",
            )
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        self.peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(context.peer.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.tools();
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(c) => c
                .parse::<usize>()
                .ok()
                .filter(|&n| n <= tools.len())
                .ok_or_else(|| {
                    ErrorData::invalid_params(
                        format!("invalid cursor {c:?}: use the nextCursor of the previous page"),
                        None,
                    )
                })?,
        };
        let end = (start + self.page_size).min(tools.len());
        let mut result = ListToolsResult::with_all_items(tools[start..end].to_vec());
        result.next_cursor = (end < tools.len()).then(|| end.to_string());
        Ok(result)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let args = Value::Object(request.arguments.unwrap_or_default());
        let id = format!(
            "mcp-{}-{}",
            self.session,
            serde_json::to_string(&context.id).unwrap_or_default()
        );
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| progress_sink(token, context.peer.clone()));
        let call = ToolCall::new(name, args)
            .with_id(id)
            .with_caller(Caller::new("mcp", None));
        // A cancelled request drops the call: its tool stops (an `exec` has its process
        // tree killed) and rmcp sends no response.
        let outcome = tokio::select! {
            r = async {
                // Waits for a free place among `mcp.maxConcurrentCalls`.
                let _place = self.calls.acquire().await;
                self.engine.execute(call, progress).await
            } => r,
            () = context.ct.cancelled() => {
                return Err(ErrorData::internal_error("the call was cancelled", None));
            }
        };
        match outcome {
            // An unknown tool is a protocol error, not a tool result (the spec's rule).
            Err(e) if e.kind() == &ErrorKind::UnknownTool => {
                Err(ErrorData::invalid_params(e.message().to_owned(), None))
            }
            outcome => Ok(result(outcome).into()),
        }
    }
}

/// A call's outcome as MCP's result: structured content with a text copy, or
/// `isError: true` with the message the CLI prints.
fn result(outcome: Result<ToolOutput, klaw_tools::ToolError>) -> CallToolResult {
    match outcome {
        Ok(out) => match out.structured() {
            Some(v) => {
                let mut r = CallToolResult::structured(v.clone());
                r.content = vec![ContentBlock::text(out.text())];
                r
            }
            None => CallToolResult::success(vec![ContentBlock::text(out.text())]),
        },
        Err(e) => {
            if e.kind() == &ErrorKind::Failed {
                tracing::warn!(target: "klaw::mcp", "tool failed: {}", e.message());
            }
            CallToolResult::error(vec![ContentBlock::text(e.to_model_text())])
        }
    }
}

/// Sends a call's progress reports as `notifications/progress` with the request's token,
/// in order, from a task of their own (the sink is called on the tool's thread).
fn progress_sink(
    token: rmcp::model::ProgressToken,
    peer: Peer<RoleServer>,
) -> Arc<dyn ProgressSink> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<ProgressUpdate>();
    tokio::spawn(async move {
        while let Some(u) = rx.recv().await {
            #[allow(clippy::cast_precision_loss)] // progress counts are far below 2^52
            let mut p = ProgressNotificationParam::new(token.clone(), u.done as f64)
                .with_message(u.message);
            if let Some(total) = u.total {
                #[allow(clippy::cast_precision_loss)]
                let total = total as f64;
                p = p.with_total(total);
            }
            if peer.notify_progress(p).await.is_err() {
                break;
            }
        }
    });
    Arc::new(move |u: &ProgressUpdate| {
        let _ = tx.send(u.clone());
    })
}

/// Serves `engine` over stdin and stdout until the client closes stdin or a SIGINT or
/// SIGTERM arrives, then shuts the engine down. A line that is not JSON gets a JSON-RPC
/// parse error (-32700) and the server keeps serving.
pub async fn serve_stdio(engine: Engine) -> Result<(), String> {
    use rmcp::ServiceExt;
    let server = McpServer::new(engine.clone()).session();
    // rmcp reads from and writes to in-process pipes; two tasks connect them to stdin
    // and stdout, answering lines that are not JSON on the way in.
    let (to_rmcp, rmcp_in) = tokio::io::duplex(1 << 16);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(1 << 16);
    let (errors_tx, mut errors_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let reader = tokio::spawn(async move {
        let mut to_rmcp = to_rmcp;
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Value>(&line) {
                Ok(_) => {
                    if to_rmcp.write_all(line.as_bytes()).await.is_err()
                        || to_rmcp.write_all(b"\n").await.is_err()
                    {
                        break;
                    }
                }
                Err(e) => {
                    let answer = serde_json::json!({
                        "jsonrpc": "2.0",
                        "id": null,
                        "error": {"code": -32700, "message": format!("Parse error: {e}")},
                    });
                    let _ = errors_tx.send(answer.to_string());
                }
            }
        }
        // End of stdin: rmcp sees its input end and stops.
    });
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        let mut from_rmcp = tokio::io::BufReader::new(from_rmcp).lines();
        loop {
            let line = tokio::select! {
                l = from_rmcp.next_line() => match l {
                    Ok(Some(l)) => l,
                    _ => break,
                },
                Some(e) = errors_rx.recv() => e,
            };
            if stdout.write_all(line.as_bytes()).await.is_err()
                || stdout.write_all(b"\n").await.is_err()
                || stdout.flush().await.is_err()
            {
                break;
            }
        }
    });
    let outcome = match server.serve((rmcp_in, rmcp_out)).await {
        Ok(running) => {
            tokio::select! {
                r = running.waiting() => r.map(|_| ()).map_err(|e| format!("the MCP session failed: {e}")),
                s = crate::stop_signal() => {
                    tracing::info!(target: "klaw::mcp", "stopping on {}", s.unwrap_or("a signal"));
                    Ok(())
                }
            }
        }
        // The client left before initializing: nothing to serve.
        Err(e) => Err(format!("the MCP session did not start: {e}")),
    };
    engine.shutdown().await;
    reader.abort();
    let _ = writer.await;
    outcome
}
