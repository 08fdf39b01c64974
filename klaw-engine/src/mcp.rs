//! The MCP server: the engine's tools for every MCP client, over stdio (`klaw-engine
//! mcp`) and Streamable HTTP ([`http`], `klaw-engine mcp --http`). A hand-written `rmcp` [`ServerHandler`] over [`Engine`]: our validator checks
//! the arguments, our messages are the results, calls carry ids and progress, and
//! `notifications/cancelled` cancels the call (an `exec` loses its process tree).

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine as _;
use klaw_tools::{
    Attachment, CallListener, Caller, ErrorKind, Format, Lang, LogLevel, LogMessage,
    ProgressUpdate, ResourceContent, ToolOutput,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeRequestParams, InitializeResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::{Engine, ToolCall};

pub mod http;

/// Why the MCP server could not start or stopped on a failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// A non-loopback address without `mcp.token`: refused before anything listens.
    #[error(
        "refusing to serve MCP on {bind} without a token: anyone who can reach that \
         address could run tools; set mcp.token (KLAW_MCP_TOKEN), or bind a loopback \
         address such as 127.0.0.1:8765"
    )]
    NoToken {
        /// The address asked for.
        bind: std::net::SocketAddr,
    },
    /// The address could not be listened on (taken, not ours, no permission).
    #[error("cannot listen on {bind}: {source}")]
    Listen {
        /// The address asked for.
        bind: std::net::SocketAddr,
        /// The system's error.
        source: std::io::Error,
    },
    /// The client left (or spoke out of turn) before the session was initialized.
    #[error("the MCP session did not start: {0}")]
    SessionStart(#[source] Box<rmcp::service::ServerInitializeError>),
    /// The session's task failed (panicked or was cancelled).
    #[error("the MCP session failed: {0}")]
    Session(#[source] tokio::task::JoinError),
}

impl McpError {
    /// Whether the server was refused for binding a non-loopback address without a
    /// token (a configuration to fix, not a failure of the system).
    pub fn is_refused_bind(&self) -> bool {
        matches!(self, Self::NoToken { .. })
    }
}

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
    /// The least serious level of the log messages this session receives, as a
    /// `LogLevel` (`logging/setLevel`; `info` until set).
    log_level: Arc<AtomicU8>,
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
            log_level: Arc::new(AtomicU8::new(LogLevel::Info as u8)),
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
            log_level: Arc::new(AtomicU8::new(LogLevel::Info as u8)),
            ..self.clone()
        }
    }

    /// Every tool as MCP describes it, in name order.
    pub fn tools(&self) -> Vec<Tool> {
        let registry = self.engine.registry();
        specs_by_name(&registry)
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
    #[allow(deprecated)] // MCP logging (SEP-2577 deprecates it; clients still use it)
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_logging()
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
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        peers.retain(|peer| !peer.is_transport_closed());
        peers.push(context.peer.clone());
        drop(peers);
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
        let end = start.saturating_add(self.page_size).min(tools.len());
        let mut result = ListToolsResult::with_all_items(tools[start..end].to_vec());
        result.next_cursor = (end < tools.len()).then(|| end.to_string());
        Ok(result)
    }

    /// A request rmcp could not read as the method it names (e.g. `tools/call` without
    /// `name`) arrives here: invalid params for a method we serve, else not found.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        let known = [
            "initialize",
            "ping",
            "tools/list",
            "tools/call",
            "logging/setLevel",
        ];
        if known.contains(&request.method.as_str()) {
            return Err(ErrorData::invalid_params(
                format!(
                    "the params of {} do not fit its schema{}",
                    request.method,
                    if request.method == "tools/call" {
                        ": expected {\"name\": string, \"arguments\": object}"
                    } else {
                        ""
                    }
                ),
                None,
            ));
        }
        Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!("method not found: {}", request.method),
            None,
        ))
    }

    /// The least serious level of log messages the session's calls send from now on.
    #[allow(deprecated)] // MCP logging (SEP-2577 deprecates it; clients still use it)
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.log_level
            .store(log_level(request.level) as u8, Ordering::Relaxed);
        Ok(())
    }

    /// One tool's description (rmcp asks for it on every HTTP `tools/call`, to check
    /// `Mcp-Param-*` headers): only that tool is rendered.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        let registry = self.engine.registry();
        let spec = registry.by_name(name)?.spec();
        serde_json::from_value(klaw_tools::definition(spec, Format::Mcp, self.lang)).ok()
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
        // A 2026-07-28 request carries its own level; older ones use the session's.
        #[allow(deprecated)]
        let min_level = context.meta.log_level().map_or_else(
            || level_from_u8(self.log_level.load(Ordering::Relaxed)),
            log_level,
        );
        let (listener, forwarding) = forwarder(
            context.meta.get_progress_token(),
            min_level,
            name.clone(),
            context.peer.clone(),
        );
        let call = ToolCall::new(name, args)
            .with_id(id)
            .with_caller(Caller::new("mcp", None));
        // A cancelled request drops the call: its tool stops (an `exec` has its process
        // tree killed) and rmcp sends no response.
        let outcome = tokio::select! {
            r = async {
                // Waits for a free place among `mcp.maxConcurrentCalls`.
                let _place = self.calls.acquire().await;
                self.engine.execute(call, Some(listener)).await
            } => r,
            () = context.ct.cancelled() => {
                forwarding.stop();
                return Err(ErrorData::internal_error("the call was cancelled", None));
            }
        };
        // Every progress report and log message goes out before the result (a client
        // drops progress that comes after it), and none after it.
        forwarding.finish().await;
        match outcome {
            // An unknown tool is a protocol error, not a tool result (the spec's rule).
            Err(e) if e.kind() == &ErrorKind::UnknownTool => {
                Err(ErrorData::invalid_params(e.message().to_owned(), None))
            }
            outcome => Ok(result(outcome).into()),
        }
    }
}

/// A call's outcome as MCP's result: structured content with a text copy (and the
/// attachments after it), or `isError: true` with the message the CLI prints.
fn result(outcome: Result<ToolOutput, klaw_tools::ToolError>) -> CallToolResult {
    match outcome {
        Ok(out) => {
            let mut content = Vec::with_capacity(1 + out.attachments().len());
            // A tool that returns only attachments has no empty text block before them.
            if !out.text().is_empty() || out.attachments().is_empty() {
                content.push(ContentBlock::text(out.text()));
            }
            content.extend(out.attachments().iter().filter_map(content_block));
            match out.structured() {
                Some(v) => {
                    let mut r = CallToolResult::structured(v.clone());
                    r.content = content;
                    r
                }
                None => CallToolResult::success(content),
            }
        }
        Err(e) => {
            if e.kind() == &ErrorKind::Failed {
                tracing::warn!(target: "klaw::mcp", "tool failed: {}", e.message());
            }
            CallToolResult::error(vec![ContentBlock::text(e.to_model_text())])
        }
    }
}

/// An attachment as MCP's content block (bytes in base64).
fn content_block(a: &Attachment) -> Option<ContentBlock> {
    let b64 = |data: &[u8]| base64::engine::general_purpose::STANDARD.encode(data);
    Some(match a {
        Attachment::Image { mime_type, data } => ContentBlock::image(b64(data), mime_type),
        Attachment::Audio { mime_type, data } => ContentBlock::audio(b64(data), mime_type),
        Attachment::Resource {
            uri,
            mime_type,
            content,
        } => {
            let (uri, mime_type) = (uri.clone(), Some(mime_type.clone()));
            ContentBlock::resource(match content {
                ResourceContent::Text(text) => {
                    rmcp::model::ResourceContents::TextResourceContents {
                        uri,
                        mime_type,
                        text: text.clone(),
                        meta: None,
                    }
                }
                ResourceContent::Bytes(bytes) => {
                    rmcp::model::ResourceContents::BlobResourceContents {
                        uri,
                        mime_type,
                        blob: b64(bytes),
                        meta: None,
                    }
                }
            })
        }
        // A kind added later and not yet described to MCP clients.
        #[allow(unreachable_patterns)]
        _ => return None,
    })
}

#[allow(deprecated)] // MCP logging (SEP-2577 deprecates it; clients still use it)
fn log_level(level: rmcp::model::LoggingLevel) -> LogLevel {
    use rmcp::model::LoggingLevel as L;
    match level {
        L::Debug => LogLevel::Debug,
        L::Info => LogLevel::Info,
        L::Notice => LogLevel::Notice,
        L::Warning => LogLevel::Warning,
        L::Error => LogLevel::Error,
        L::Critical => LogLevel::Critical,
        L::Alert => LogLevel::Alert,
        L::Emergency => LogLevel::Emergency,
    }
}

#[allow(deprecated)]
fn mcp_level(level: LogLevel) -> rmcp::model::LoggingLevel {
    use rmcp::model::LoggingLevel as L;
    match level {
        LogLevel::Debug => L::Debug,
        LogLevel::Info => L::Info,
        LogLevel::Notice => L::Notice,
        LogLevel::Warning => L::Warning,
        LogLevel::Error => L::Error,
        LogLevel::Critical => L::Critical,
        LogLevel::Alert => L::Alert,
        LogLevel::Emergency => L::Emergency,
    }
}

/// The level stored as a number in a session (`LogLevel as u8`).
fn level_from_u8(n: u8) -> LogLevel {
    [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Notice,
        LogLevel::Warning,
        LogLevel::Error,
        LogLevel::Critical,
        LogLevel::Alert,
        LogLevel::Emergency,
    ]
    .get(usize::from(n))
    .copied()
    .unwrap_or(LogLevel::Info)
}

/// What a call tells its client while it runs.
enum Note {
    Progress(ProgressUpdate),
    Log(LogMessage),
    /// The result is going out: what came before is sent, nothing after.
    End,
}

/// Forwards one call's reports to its client, in order, from a task of its own (the
/// listener is called on the tool's thread). The task starts with the first report: a
/// call that reports nothing costs no task.
struct McpListener {
    shared: Arc<ForwardState>,
}

/// What the listener and its [`Forwarder`] share.
struct ForwardState {
    /// The sender to the task, once started; `closed` once the result is out (later
    /// reports are dropped).
    sender: Mutex<Sender>,
    /// The request's progress token: progress goes out only for a request that gave one.
    token: Option<rmcp::model::ProgressToken>,
    min_level: LogLevel,
    /// The logger name of the messages: the tool's name.
    tool: String,
    peer: Peer<RoleServer>,
    /// The runtime the task starts on (a tool may report from a thread of its own).
    runtime: tokio::runtime::Handle,
}

enum Sender {
    NotStarted,
    Running(
        tokio::sync::mpsc::UnboundedSender<Note>,
        tokio::task::JoinHandle<()>,
    ),
    Closed,
}

impl ForwardState {
    fn send(&self, note: Note) {
        let mut sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(*sender, Sender::NotStarted) {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let task = self.runtime.spawn(forward(
                rx,
                self.token.clone(),
                self.tool.clone(),
                self.peer.clone(),
            ));
            *sender = Sender::Running(tx, task);
        }
        if let Sender::Running(tx, _) = &*sender {
            let _ = tx.send(note);
        }
    }
}

impl CallListener for McpListener {
    fn progress(&self, update: &ProgressUpdate) {
        if self.shared.token.is_some() {
            self.shared.send(Note::Progress(update.clone()));
        }
    }

    fn log(&self, message: &LogMessage) {
        if message.level >= self.shared.min_level {
            self.shared.send(Note::Log(message.clone()));
        }
    }
}

/// Sends one call's reports as they come: progress as `notifications/progress` with
/// the request's token, log messages as `notifications/message` from the logger `tool`.
async fn forward(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Note>,
    token: Option<rmcp::model::ProgressToken>,
    tool: String,
    peer: Peer<RoleServer>,
) {
    while let Some(note) = rx.recv().await {
        let sent = match note {
            Note::End => break,
            Note::Progress(u) => {
                let Some(token) = token.clone() else { continue };
                #[allow(clippy::cast_precision_loss)] // progress counts are far below 2^52
                let mut p =
                    ProgressNotificationParam::new(token, u.done as f64).with_message(u.message);
                if let Some(total) = u.total {
                    #[allow(clippy::cast_precision_loss)]
                    let total = total as f64;
                    p = p.with_total(total);
                }
                peer.notify_progress(p).await
            }
            #[allow(deprecated)]
            Note::Log(m) => {
                let p = rmcp::model::LoggingMessageNotificationParam::new(
                    mcp_level(m.level),
                    Value::String(m.message),
                )
                .with_logger(tool.clone());
                peer.notify_logging_message(p).await
            }
        };
        if sent.is_err() {
            break;
        }
    }
}

/// The listener of one call (progress when the request gave a `token`, log messages at
/// or above `min_level`) and the handle that ends its forwarding.
fn forwarder(
    token: Option<rmcp::model::ProgressToken>,
    min_level: LogLevel,
    tool: String,
    peer: Peer<RoleServer>,
) -> (Arc<dyn CallListener>, Forwarder) {
    let shared = Arc::new(ForwardState {
        sender: Mutex::new(Sender::NotStarted),
        token,
        min_level,
        tool,
        peer,
        runtime: tokio::runtime::Handle::current(),
    });
    let listener = McpListener {
        shared: Arc::clone(&shared),
    };
    (Arc::new(listener), Forwarder(shared))
}

/// Ends one call's forwarding.
struct Forwarder(Arc<ForwardState>);

impl Forwarder {
    fn close(
        &self,
    ) -> Option<(
        tokio::sync::mpsc::UnboundedSender<Note>,
        tokio::task::JoinHandle<()>,
    )> {
        let mut sender = self.0.sender.lock().unwrap_or_else(PoisonError::into_inner);
        match std::mem::replace(&mut *sender, Sender::Closed) {
            Sender::Running(tx, task) => Some((tx, task)),
            _ => None,
        }
    }

    /// No more reports: sends those already made (for up to a second), then stops,
    /// even when the tool kept its reporter.
    async fn finish(self) {
        let Some((tx, task)) = self.close() else {
            return;
        };
        let _ = tx.send(Note::End);
        let abort = task.abort_handle();
        if tokio::time::timeout(std::time::Duration::from_secs(1), task)
            .await
            .is_err()
        {
            abort.abort();
        }
    }

    /// No more reports, and those not sent yet are dropped (the call was cancelled).
    fn stop(self) {
        if let Some((_, task)) = self.close() {
            task.abort();
        }
    }
}

/// Serves `engine` over stdin and stdout until the client closes stdin or `stop` is
/// cancelled (the app's stop token: SIGINT or SIGTERM); the app then shuts the engine
/// down. A line that is not JSON gets a JSON-RPC
/// parse error (-32700) and one that is JSON but not a message (a batch, a wrong shape)
/// an invalid-request error (-32600); the server keeps serving.
pub async fn serve_stdio(engine: Engine, stop: CancellationToken) -> Result<(), McpError> {
    use rmcp::ServiceExt;
    use rmcp::service::TxJsonRpcMessage;
    let server = McpServer::new(engine.clone()).session();
    // rmcp's own loop reads this stream and writes to this sink: no task or pipe in
    // between, and each line is parsed once.
    // Non-blocking pipes when stdin and stdout are FIFOs (Python clients start servers
    // that way): no hand-off to a blocking thread per line. Otherwise (a socketpair, as
    // Node clients use; a terminal) the blocking handles.
    let (stdin, stdout) = rmcp::transport::io::stdio_pipes();
    let stdout = Arc::new(tokio::sync::Mutex::new(stdout));
    let write_line = |out: Arc<tokio::sync::Mutex<rmcp::transport::io::StdioWriter>>,
                      line: String| async move {
        let mut out = out.lock().await;
        out.write_all(line.as_bytes()).await?;
        out.write_all(b"\n").await?;
        out.flush().await
    };
    let errors = Arc::clone(&stdout);
    let reader = tokio::io::BufReader::new(stdin);
    let incoming = futures_util::stream::unfold(reader, move |mut reader| {
        let errors = Arc::clone(&errors);
        async move {
            let mut line = Vec::new();
            loop {
                let too_long = match read_line_capped(&mut reader, &mut line, MAX_LINE).await {
                    Ok(None) | Err(_) => return None,
                    Ok(Some(too_long)) => too_long,
                };
                if !too_long && line.trim_ascii().is_empty() {
                    continue;
                }
                let answer = match (too_long, incoming_message(&line)) {
                    (false, Ok(message)) => return Some((message, reader)),
                    (true, _) => rpc_error(
                        Value::Null,
                        -32700,
                        format!("Parse error: the line is longer than {MAX_LINE} bytes"),
                    ),
                    (false, Err(answer)) => answer,
                };
                if write_line(Arc::clone(&errors), answer.to_string())
                    .await
                    .is_err()
                {
                    return None;
                }
            }
        }
    });
    let outgoing = futures_util::sink::unfold(
        stdout,
        move |out, message: TxJsonRpcMessage<RoleServer>| async move {
            let line = serde_json::to_string(&message).map_err(std::io::Error::other)?;
            write_line(Arc::clone(&out), line).await?;
            Ok::<_, std::io::Error>(out)
        },
    );
    match server.serve((Box::pin(outgoing), Box::pin(incoming))).await {
        Ok(running) => {
            tokio::select! {
                r = running.waiting() => r.map(|_| ()).map_err(McpError::Session),
                () = stop.cancelled() => {
                    tracing::info!(target: "klaw::mcp", "stopping");
                    Ok(())
                }
            }
        }
        // The client left before initializing: nothing to serve.
        Err(e) => Err(McpError::SessionStart(Box::new(e))),
    }
}

/// The longest line read from stdin (a longer one is answered with a parse error).
const MAX_LINE: usize = 16 << 20;

/// Reads one line (up to `\n` or the end) into `line`, keeping at most `cap` bytes:
/// `None` at the end of input, else whether the line was longer than `cap`.
async fn read_line_capped<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<Option<bool>> {
    line.clear();
    let (mut read, mut too_long) = (0usize, false);
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok((read > 0).then_some(too_long));
        }
        let end = available.iter().position(|&b| b == b'\n');
        let chunk = &available[..end.map_or(available.len(), |i| i + 1)];
        if !too_long && line.len() + chunk.len() <= cap {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line.clear();
        }
        let n = chunk.len();
        reader.consume(n);
        read += n;
        if end.is_some() {
            return Ok(Some(too_long));
        }
    }
}

/// One line from a client as a JSON-RPC message, or the error to answer it with: a
/// parse error (-32700) for what is not JSON (or not UTF-8), an invalid request
/// (-32600) for a batch or what is not a message, invalid params (-32602) for a request
/// of a known shape whose params do not fit. A request's own id is kept in the answer,
/// so the client is not left waiting for it.
fn incoming_message(line: &[u8]) -> Result<rmcp::service::RxJsonRpcMessage<RoleServer>, Value> {
    let e = match serde_json::from_slice(line) {
        Ok(message) => return Ok(message),
        Err(e) => e,
    };
    let value = match serde_json::from_slice::<Value>(line) {
        Ok(v) => v,
        Err(_) => return Err(rpc_error(Value::Null, -32700, format!("Parse error: {e}"))),
    };
    let id = value
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned()
        .unwrap_or(Value::Null);
    Err(match &value {
        Value::Array(_) => rpc_error(
            id,
            -32600,
            "Invalid request: JSON-RPC batches are not supported; send one message a line".into(),
        ),
        Value::Object(m) if m.contains_key("method") && !id.is_null() => {
            rpc_error(id, -32602, format!("Invalid params: {e}"))
        }
        _ => rpc_error(id, -32600, format!("Invalid request: {e}")),
    })
}

/// Every tool's spec, in name order (the order of `tools/list` and `/api/v1/tools`).
fn specs_by_name(registry: &klaw_tools::ToolRegistry) -> Vec<&klaw_tools::ToolSpec> {
    let mut specs: Vec<_> = registry.all().map(|t| t.spec()).collect();
    specs.sort_by(|a, b| a.name.cmp(&b.name));
    specs
}

/// A JSON-RPC error response.
fn rpc_error(id: Value, code: i32, message: String) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_capped_and_split() {
        let input: &[u8] = b"short\n0123456789abcdef\nlast";
        let mut r = tokio::io::BufReader::with_capacity(4, input);
        let mut line = Vec::new();
        assert_eq!(
            read_line_capped(&mut r, &mut line, 10).await.unwrap(),
            Some(false)
        );
        assert_eq!(line, b"short\n");
        assert_eq!(
            read_line_capped(&mut r, &mut line, 10).await.unwrap(),
            Some(true)
        );
        assert!(line.is_empty());
        assert_eq!(
            read_line_capped(&mut r, &mut line, 10).await.unwrap(),
            Some(false)
        );
        assert_eq!(line, b"last");
        assert_eq!(read_line_capped(&mut r, &mut line, 10).await.unwrap(), None);
    }

    #[test]
    fn bad_lines_get_the_right_error_and_keep_their_id() {
        let code = |line: &[u8]| incoming_message(line).unwrap_err();
        assert_eq!(code(b"nope {")["error"]["code"], -32700);
        assert_eq!(code(b"\xff\xfe")["error"]["code"], -32700);
        assert_eq!(code(b"[1, 2]")["error"]["code"], -32600);
        let e = code(br#"{"jsonrpc":"2.0","id":"x","params":1}"#);
        assert_eq!(
            (e["id"].clone(), e["error"]["code"].clone()),
            (Value::from("x"), Value::from(-32600))
        );
        assert!(incoming_message(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_ok());
        // A known method with params that do not fit reaches the handler as a custom
        // request, which answers -32602 (`on_custom_request`).
        assert!(
            incoming_message(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}"#)
                .is_ok()
        );
    }
}
