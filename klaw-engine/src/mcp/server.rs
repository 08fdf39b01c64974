//! The MCP handler over the engine: initialize, `tools/list` (paged), `tools/call`
//! (validated, with its id, progress and log messages, cancellable), logging levels,
//! each result as MCP content blocks; resources (`resources`), prompts (`prompts`) and
//! completion (`complete`), each derived from what the engine has.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use base64::Engine as _;
use klaw_tools::{
    Attachment, ErrorKind, Format, Lang, LogLevel, ResourceContent, ToolOutput, ToolRegistry,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, GetPromptRequestParams, GetPromptResponse, Implementation,
    InitializeRequestParams, InitializeResult, InputRequiredResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ResourcesCapability,
    ServerCapabilities, ServerConfig, SubscribeRequestParams, Tool, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tracing::Instrument;

use crate::{Engine, ToolCall};

use super::forward::forwarder;
use super::input::{self, Inputs, Round};
use super::peers::{Peers, Session, caller};
use super::tasks::{self, Tasks};
use super::{complete, level_from_u8, log_level, prompts, resources, specs_by_name};

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
    /// Every session's client: told when the tool list or a subscribed resource changes.
    peers: Arc<Peers>,
    /// The URIs this session subscribed to.
    subscriptions: Arc<Mutex<HashSet<String>>>,
    /// The tools' definitions, shared by every session.
    definitions: Arc<Definitions>,
}

/// The tools as MCP describes them, rendered once for the registry they came from and
/// again only when the engine installs another: it does whenever its tool set changes
/// (imports, manifests, `tools reload`, a tool registered at run time), never
/// otherwise. `tools/list` rendered every definition on every request (31 tools, 58 KB:
/// 1.6 ms), and rmcp asks for the called tool's on every HTTP `tools/call`.
#[derive(Default)]
struct Definitions(RwLock<Option<Rendered>>);

/// A registry and its tools' definitions.
type Rendered = (Arc<ToolRegistry>, Arc<[Tool]>);

impl Definitions {
    /// The definitions of `registry`'s tools in name order, rendered if they are not
    /// yet.
    fn of(&self, registry: Arc<ToolRegistry>, lang: Lang) -> Arc<[Tool]> {
        let cached = |slot: &Option<Rendered>| {
            slot.as_ref()
                .filter(|(r, _)| Arc::ptr_eq(r, &registry))
                .map(|(_, tools)| Arc::clone(tools))
        };
        if let Some(tools) = cached(&self.0.read().unwrap_or_else(PoisonError::into_inner)) {
            return tools;
        }
        let mut slot = self.0.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(tools) = cached(&slot) {
            return tools;
        }
        let tools: Arc<[Tool]> = render(&registry, lang).into();
        *slot = Some((registry, Arc::clone(&tools)));
        tools
    }
}

/// Every tool of `registry` as MCP describes it, then those of the linked extensions
/// (`klaw_mcp_ext::McpExtension::tools`) whose names the registry has not, in name order.
fn render(registry: &ToolRegistry, lang: Lang) -> Vec<Tool> {
    let mut tools = render_registry(registry, lang);
    let own: HashSet<String> = tools.iter().map(|t| t.name.to_string()).collect();
    tools.extend(
        klaw_mcp_ext::extensions()
            .flat_map(|e| (e.tools)())
            .filter(|t| !own.contains(t.name.as_ref())),
    );
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools
}

/// Every tool of `registry` as MCP describes it, in name order.
fn render_registry(registry: &ToolRegistry, lang: Lang) -> Vec<Tool> {
    specs_by_name(registry)
        .into_iter()
        .filter_map(|spec| {
            let def = klaw_tools::definition(spec, Format::Mcp, lang);
            match mcp_tool(def) {
                Ok(tool) => Some(tool),
                Err(e) => {
                    tracing::error!(target: "klaw::mcp", tool = spec.name, "cannot describe the tool for MCP: {e}");
                    None
                }
            }
        })
        .collect()
}

/// A tool's MCP definition as rmcp's `Tool`: what `serde_json::from_value` gives, but
/// the schemas (most of a definition's bytes) are moved into it instead of rebuilt map
/// by map through serde: the render is on the way to the first `tools/list`.
fn mcp_tool(mut def: Value) -> Result<Tool, serde_json::Error> {
    fn take(def: &mut Value, key: &str) -> Option<serde_json::Map<String, Value>> {
        match def.get_mut(key) {
            // An empty object stays for serde (the input schema is required).
            Some(Value::Object(m)) => Some(std::mem::take(m)),
            _ => None,
        }
    }
    let (input, output) = (
        take(&mut def, "inputSchema"),
        take(&mut def, "outputSchema"),
    );
    let mut tool: Tool = serde_json::from_value(def)?;
    if let Some(m) = input {
        tool.input_schema = Arc::new(m);
    }
    if let Some(m) = output {
        tool.output_schema = Some(Arc::new(m));
    }
    Ok(tool)
}

impl McpServer {
    /// A server over `engine`, with descriptions in the configured language. Starts
    /// the tasks that turn tool-list changes into `notifications/tools/list_changed`
    /// and changes of core memory into `notifications/resources/updated` for its
    /// subscribers (call it inside a Tokio runtime). The tools' definitions are rendered
    /// here, once, for the first `tools/list`.
    pub fn new(engine: Engine) -> Self {
        let lang = engine.config().raw.language;
        let mcp = &engine.config().raw.mcp;
        let (page_size, max_calls) = (mcp.page_size.max(1), mcp.max_concurrent_calls.max(1));
        let server = Self {
            lang,
            page_size,
            calls: Arc::new(tokio::sync::Semaphore::new(max_calls)),
            session: 0,
            log_level: Arc::new(AtomicU8::new(LogLevel::Info as u8)),
            peers: engine_peers(&engine),
            subscriptions: Arc::default(),
            definitions: Arc::default(),
            engine,
        };
        let mut changes = server.engine.tools_changed();
        let peers = Arc::clone(&server.peers);
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                // The streams first: a session whose client reads no stream can keep
                // its send waiting.
                for sink in peers.listeners() {
                    let _ = sink.notify_tool_list_changed().await;
                }
                for s in peers.live() {
                    let _ = s.peer.notify_tool_list_changed().await;
                }
            }
        });
        // A successful memory_core_update or _delete: core memory changed. The hook only
        // wakes the task (it runs on the caller's task and must be quick).
        let changed = Arc::new(tokio::sync::Notify::new());
        let wake = Arc::clone(&changed);
        server.engine.subscribe(move |e: &klaw_tools::ToolEvent| {
            if let klaw_tools::ToolEvent::Executed { tool, .. } = e
                && resources::CORE_WRITERS.contains(&tool.as_str())
            {
                wake.notify_one();
            }
        });
        let peers = Arc::clone(&server.peers);
        tokio::spawn(async move {
            loop {
                changed.notified().await;
                for s in peers.live() {
                    let subscribed = s
                        .subscriptions
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .contains(resources::CORE_URI);
                    if subscribed {
                        let _ = s
                            .peer
                            .notify_resource_updated(
                                rmcp::model::ResourceUpdatedNotificationParam::new(
                                    resources::CORE_URI,
                                ),
                            )
                            .await;
                    }
                }
                // A stream that did not ask for core memory's updates is sent none.
                for sink in peers.listeners() {
                    let _ = sink.notify_resource_updated(resources::CORE_URI).await;
                }
            }
        });
        #[cfg(feature = "skills")]
        watch_skills(server.engine.clone(), Arc::clone(&server.peers));
        // Rendered now, on the thread that makes the server: the first `tools/list`
        // finds them ready. (Rendered on a worker while the client initialized, the
        // render's allocations grew another malloc arena and its work competed with
        // the start's: 3% more time and 5% more CPU to the first `tools/list`.)
        server.definitions.of(server.engine.registry(), lang);
        server
    }

    /// A clone for a new session (its own prefix of call ids).
    pub fn session(&self) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self {
            session: NEXT.fetch_add(1, Ordering::Relaxed),
            log_level: Arc::new(AtomicU8::new(LogLevel::Info as u8)),
            subscriptions: Arc::default(),
            ..self.clone()
        }
    }

    /// Every tool as MCP describes it, in name order.
    pub fn tools(&self) -> Vec<Tool> {
        self.definitions().to_vec()
    }

    /// The definitions of the engine's tools as they are now, rendered once per tool set.
    fn definitions(&self) -> Arc<[Tool]> {
        self.definitions.of(self.engine.registry(), self.lang)
    }
}

impl McpServer {
    /// The round a `tools/call` of MCP 2026-07-28 opens (`None` for an older session):
    /// its answers (`inputResponses`) and the state it brought back (`requestState`,
    /// refused when its seal is not good for this tool and these arguments).
    fn round(
        &self,
        name: &str,
        args: &Value,
        responses: Option<rmcp::model::InputResponses>,
        sealed: Option<&str>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<Round>, ErrorData> {
        if !stateless(context) {
            return Ok(None);
        }
        let state = match sealed {
            None => None,
            Some(sealed) => {
                input::open(name, args, sealed).map_err(|e| ErrorData::invalid_params(e, None))?
            }
        };
        Ok(Some(Round {
            in_result: true,
            capabilities: context.client_capabilities(),
            responses: responses.unwrap_or_default(),
            state,
            ..Round::default()
        }))
    }
}

/// Whether a request is of MCP 2026-07-28 or later (the stateless protocol: its own
/// `_meta` says what the client is, may ask, and how much it wants logged).
fn stateless(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str())
}

/// The methods MCP 2026-07-28 removed.
const REMOVED_IN_2026: [&str; 5] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// Method not found, for a method MCP 2026-07-28 removed.
fn removed(method: &str) -> ErrorData {
    ErrorData::new(
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        format!("method not found: {method} is not part of MCP 2026-07-28"),
        None,
    )
}

/// Closes a call's round when the call ends, however it ends (a call that became a
/// task takes it along); [`CloseRound::take`] reads it.
struct CloseRound(Arc<Inputs>, String);

impl CloseRound {
    fn take(&self) -> Option<Round> {
        self.0.end(&self.1)
    }
}

impl Drop for CloseRound {
    fn drop(&mut self) {
        self.0.end(&self.1);
    }
}

impl ServerHandler for McpServer {
    #[allow(deprecated)] // MCP logging (SEP-2577 deprecates it; clients still use it)
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_logging()
            .build();
        // Each skill is also a prompt (its SKILL.md), for clients that offer prompts;
        // skills added, changed or removed are announced.
        if prompts::served() {
            let mut prompts = rmcp::model::PromptsCapability::default();
            prompts.list_changed = Some(cfg!(feature = "skills"));
            capabilities.prompts = Some(prompts);
        }
        // Docs, skills' files, core memory (subscribable); the skills' changes announced.
        let mut resources = ResourcesCapability::default();
        resources.subscribe = Some(true);
        resources.list_changed = Some(cfg!(feature = "skills"));
        capabilities.resources = Some(resources);
        capabilities.completions = Some(Default::default());
        // Long calls become tasks (SEP-2663), for clients that declare the extension.
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(
                rmcp::model::TASKS_EXTENSION_ID.to_owned(),
                serde_json::Map::new(),
            );
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
        self.peers.insert(
            self.session,
            Session {
                peer: context.peer.clone(),
                subscriptions: Arc::clone(&self.subscriptions),
            },
        );
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let (tools, next) = page(self.tools(), request, self.page_size)?;
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = next;
        Ok(result)
    }

    /// Every resource (docs, skills' files, core memory), in pages of `mcp.pageSize`.
    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let all = Box::pin(resources::list(&self.engine)).await;
        let (items, next) = page(all, request, self.page_size)?;
        let mut result = ListResourcesResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        // Boxed, as in every handler here whose future is large: the task rmcp spawns
        // for each request holds the largest of them, and a tool call is moved with it.
        Box::pin(async move {
            tokio::select! {
                r = async {
                    // A read takes a place among `mcp.maxConcurrentCalls`, as a call does.
                    let _place = self.calls.acquire().await;
                    resources::read(&self.engine, &request.uri, self.session).await
                } => {
                    Ok(ReadResourceResult::new(vec![r?]).into())
                }
                () = context.ct.cancelled() => {
                    Err(ErrorData::internal_error("the read was cancelled", None))
                }
            }
        })
        .await
    }

    /// Subscribes the session to a resource it can read; only core memory changes
    /// while the engine runs, so only it is ever announced.
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Box::pin(resources::read(&self.engine, &request.uri, self.session)).await?;
        self.subscriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(request.uri);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&request.uri);
        Ok(())
    }

    /// Completion of a prompt's argument or a resource template's variable.
    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        Ok(CompleteResult::new(
            Box::pin(complete::complete(&self.engine, &request)).await,
        ))
    }

    /// Every skill in effect as a prompt (and the fixtures' with that feature).
    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let all = Box::pin(prompts::list(&self.engine)).await?;
        let (items, next) = page(all, request, self.page_size)?;
        let mut result = ListPromptsResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    /// A skill's prompt: its SKILL.md, its files as embedded resources, the task.
    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        // A linked extension's prompt that asks the client first (MCP 2026-07-28).
        let in_result = stateless(&context);
        for ext in klaw_mcp_ext::extensions() {
            if let Some(answer) =
                (ext.get_prompt_asking)(&request.name, request.input_responses.as_ref(), in_result)
            {
                return answer.map_err(|e| ErrorData::internal_error(e.message().to_owned(), None));
            }
        }
        let args = request.arguments.unwrap_or_default();
        let _place = self.calls.acquire().await;
        Box::pin(prompts::get(
            &self.engine,
            &request.name,
            &args,
            self.session,
        ))
        .await
        .map(Into::into)
    }

    /// `subscriptions/listen` (MCP 2026-07-28): every kind of notification asked for;
    /// rmcp keeps those this server advertises (tools and, with skills, prompts and
    /// resources changed; updates of the resources named, core memory the one that
    /// changes).
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        Some(requested.clone())
    }

    /// One `subscriptions/listen` stream: told of changes until the client cancels it
    /// or goes away.
    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), ErrorData> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        /// Forgets the stream however its future ends.
        struct Listening<'a>(&'a Peers, u64);
        impl Drop for Listening<'_> {
            fn drop(&mut self) {
                self.0.unlisten(self.1);
            }
        }
        self.peers.listen(n, context.sink().clone());
        let _listening = Listening(&self.peers, n);
        tracing::debug!(target: "klaw::mcp", stream = n, "subscriptions/listen opened");
        context.cancelled().await;
        Ok(())
    }

    /// A request rmcp could not read as the method it names (e.g. `tools/call` without
    /// `name`) arrives here: invalid params for a method we serve, else not found.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        // A method MCP 2026-07-28 removed, in a request of that version (over stdio;
        // the HTTP guard answers these before rmcp reads them).
        if stateless(&context) && REMOVED_IN_2026.contains(&request.method.as_str()) {
            return Err(removed(&request.method));
        }
        let known = [
            "initialize",
            "ping",
            "tools/list",
            "tools/call",
            "logging/setLevel",
            "resources/list",
            "resources/read",
            "resources/templates/list",
            "resources/subscribe",
            "resources/unsubscribe",
            "prompts/list",
            "prompts/get",
            "completion/complete",
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
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if stateless(&context) {
            return Err(removed("logging/setLevel"));
        }
        self.log_level
            .store(log_level(request.level) as u8, Ordering::Relaxed);
        Ok(())
    }

    /// One tool's description (rmcp asks for it on every HTTP `tools/call`, to check
    /// `Mcp-Param-*` headers), from the rendered definitions.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        let tools = self.definitions();
        let i = tools.binary_search_by(|t| (*t.name).cmp(name)).ok()?;
        tools.get(i).cloned()
    }

    /// `tasks/get`: a task's status, its questions while it waits for answers, its
    /// result (or protocol error) once it ended.
    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        let tasks = self.engine.context().shared_state::<Tasks>();
        Ok(rmcp::model::GetTaskResult::new(
            tasks.0.get_task(&request.task_id)?,
        ))
    }

    /// `tasks/update`: the client's answers to a task's questions (unknown keys and
    /// answers given already are ignored).
    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let tasks = self.engine.context().shared_state::<Tasks>();
        tasks
            .0
            .update_task(&request.task_id, request.input_responses)
    }

    /// `tasks/cancel`: the task's call is dropped (an `exec` has its process tree
    /// killed) and the task ends `cancelled`; a task that ended stays as it ended.
    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let tasks = self.engine.context().shared_state::<Tasks>();
        tasks.0.cancel_task(&request.task_id)
    }

    /// Boxed: rmcp spawns a task for every request with the handler's future inline,
    /// and a call's whole state (this server's largest future) was moved into it and
    /// again into its task on every `tools/call`; a box moves a pointer.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Box::pin(self.run_tool_call(request, context)).await
    }
}

impl McpServer {
    /// `tools/call`: the call prepared, run (or made a task), its result as MCP's.
    async fn run_tool_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        // A linked extension's own tool (one the registry has not): the extension
        // answers it.
        let arguments = request.arguments.unwrap_or_default();
        if self.engine.registry().by_name(&name).is_none()
            && let Some(r) =
                klaw_mcp_ext::extensions().find_map(|e| (e.call_tool)(&name, &arguments))
        {
            return Ok(r.into());
        }
        let mut args = Value::Object(arguments);
        let request_id = serde_json::to_string(&context.id).unwrap_or_default();
        let id = format!("mcp-{}-{request_id}", self.session);
        // Over HTTP with a session: the stream the call is answered on, which the call
        // may close (SSE polling; `klaw_mcp_ext::SessionClients::close_stream`).
        let _stream = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.headers.get(super::SESSION_ID))
            .and_then(|v| v.to_str().ok())
            .map(|session| self.peers.call_stream(&id, session.to_owned(), request_id));
        // A long tool's call may become a task (the client declares the extension);
        // one that runs only as a task is refused to a client that does not.
        let task_tools = self.engine.context().shared_state::<Tasks>();
        let client_tasks = context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks());
        let as_task = match klaw_mcp_ext::task_support(&name) {
            None => false,
            Some(klaw_mcp_ext::TaskSupport::Required) if !client_tasks => {
                return Err(tasks::tasks_required());
            }
            Some(klaw_mcp_ext::TaskSupport::Required) if !task_tools.has_room() => {
                return Err(ErrorData::internal_error(
                    format!(
                        "{} tasks are running, the most this server runs at once; retry \
                         when one has ended",
                        tasks::MAX_RUNNING
                    ),
                    None,
                ));
            }
            Some(_) => client_tasks && task_tools.has_room(),
        };
        // What the call may ask its client, and what an earlier round of it brought.
        let round = self.round(
            &name,
            &args,
            request.input_responses,
            request.request_state.as_deref(),
            &context,
        )?;
        // A 2026-07-28 call has a round (an older session's questions are requests), and
        // so has a call that may become a task (its questions become the task's).
        let round = round.or_else(|| {
            as_task.then(|| Round {
                capabilities: context.client_capabilities(),
                ..Round::default()
            })
        });
        let closing = round.map(|round| {
            let inputs = self.engine.context().shared_state::<Inputs>();
            inputs.begin(&id, round);
            CloseRound(inputs, id.clone())
        });
        // A 2026-07-28 request carries its own level (none: no log messages); older
        // ones use the session's.
        #[allow(deprecated)]
        let min_level = match context.meta.log_level() {
            Some(level) => Some(log_level(level)),
            None if stateless(&context) => None,
            None => Some(level_from_u8(self.log_level.load(Ordering::Relaxed))),
        };
        let (listener, forwarding) = forwarder(
            context.meta.get_progress_token(),
            min_level,
            name.clone(),
            context.peer.clone(),
        );
        let span = call_span(&name, self.session, &context);
        // The arguments are kept only for a round's seal (2026-07-28); else they move.
        let call_args = if closing.is_some() {
            args.clone()
        } else {
            std::mem::take(&mut args)
        };
        // Built whole: `ToolCall::new` would make an id and a caller to be replaced.
        let call = ToolCall {
            id: id.clone(),
            name: name.clone(),
            args: call_args.into(),
            caller: caller(self.session),
        };
        let (engine, calls) = (self.engine.clone(), Arc::clone(&self.calls));
        let mut run = Box::pin(
            async move {
                // Waits for a free place among `mcp.maxConcurrentCalls`.
                let _place = calls.acquire().await;
                // Boxed once it has its place: a call still waiting holds a small future,
                // not the whole call's (10,000 pipelined calls are 10,000 waiting tasks).
                Box::pin(engine.execute(call, Some(listener))).await
            }
            .instrument(span.clone()),
        );
        // A call that may become a task does when it runs past the grace.
        let grace = async {
            if as_task {
                tokio::time::sleep(tasks::GRACE).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        // A cancelled request drops the call: its tool stops (an `exec` has its process
        // tree killed) and rmcp sends no response.
        let outcome = tokio::select! {
            r = &mut run => r,
            () = grace => {
                // Its progress and log messages went to the request, which ends now.
                forwarding.stop();
                let inputs = self.engine.context().shared_state::<Inputs>();
                let task = task_tools.0.spawn(Tasks::options(), move |task| {
                    inputs.into_task(&id, klaw_mcp_ext::input::InTask(task.clone()));
                    Box::pin(async move {
                        // The round ends with the task.
                        let _closing = closing;
                        tokio::select! {
                            r = run => tasks::settle(r, result),
                            // As a cancelled request: the call is dropped (an `exec`
                            // has its process tree killed).
                            () = task.cancelled() => Err(rmcp::task_manager::TaskExit::Cancelled),
                        }
                    })
                });
                tracing::debug!(target: "klaw::mcp", task = task.task_id, tool = name, "the call became a task");
                return Ok(rmcp::model::CreateTaskResult::new(task).into());
            }
            () = context.ct.cancelled() => {
                forwarding.stop();
                crate::telemetry::failed(&span, "cancelled");
                // rmcp sends nothing for a cancelled request; a result (not an error)
                // keeps the expected end off the warnings.
                tracing::debug!(target: "klaw::mcp", call = id, "the call was cancelled");
                return Ok(CallToolResult::error(vec![ContentBlock::text("the call was cancelled")]).into());
            }
        };
        // Questions the tool asked and the request did not answer: the result asks them.
        if let Some(round) = closing.as_ref().and_then(CloseRound::take) {
            if let Some(missing) = round.missing {
                forwarding.stop();
                return Err(ErrorData::missing_required_client_capability(missing));
            }
            if !round.asked.is_empty() {
                forwarding.finish().await;
                let state = input::seal(&name, &args, &round.next_state)
                    .map_err(|e| ErrorData::internal_error(e, None))?;
                return Ok(InputRequiredResult::new(Some(round.asked), Some(state)).into());
            }
        }
        // Every progress report and log message goes out before the result (a client
        // drops progress that comes after it), and none after it.
        forwarding.finish().await;
        if let Err(e) = &outcome {
            crate::telemetry::failed(&span, e.kind().code());
        }
        match outcome {
            // An unknown tool is a protocol error, not a tool result (the spec's rule).
            Err(e) if e.kind() == &ErrorKind::UnknownTool => {
                Err(ErrorData::invalid_params(e.message().to_owned(), None))
            }
            outcome => Ok(result(outcome).into()),
        }
    }
}

/// The span of one `tools/call` (OpenTelemetry's MCP conventions: `tools/call {tool}`,
/// kind server, `mcp.method.name`, `mcp.session.id`, `jsonrpc.request.id`,
/// `gen_ai.tool.name`), a child of the client's trace when its `_meta` carries a W3C
/// `traceparent`; the engine's `execute_tool` span is its child.
fn call_span(name: &str, session: u64, context: &RequestContext<RoleServer>) -> tracing::Span {
    use tracing::field::Empty;
    let span = tracing::info_span!(
        target: "klaw::mcp",
        "mcp_call",
        otel.name = Empty,
        otel.kind = "server",
        otel.status_code = Empty,
        mcp.method.name = "tools/call",
        mcp.session.id = crate::telemetry::int(session),
        jsonrpc.request.id = Empty,
        gen_ai.tool.name = name,
        gen_ai.operation.name = "execute_tool",
        error.type = Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("tools/call {name}"));
        let id = match &context.id {
            rmcp::model::NumberOrString::Number(n) => n.to_string(),
            rmcp::model::NumberOrString::String(s) => s.to_string(),
        };
        span.record("jsonrpc.request.id", id);
        crate::telemetry::continue_from(&span, &context.meta.0.0);
    }
    span
}

/// Looks at the skills every [`WATCH_INTERVAL`](crate::manifests::WATCH_INTERVAL) (the
/// catalog reads only what changed) and tells every session when one was added,
/// removed, described anew or given other files: its prompts and resources changed.
/// Ends with the engine.
#[cfg(feature = "skills")]
fn watch_skills(engine: Engine, peers: Arc<Peers>) {
    tokio::spawn(async move {
        let mut seen = prompts::skills_seen(&engine).await;
        while !engine.is_shut_down() {
            tokio::time::sleep(crate::manifests::WATCH_INTERVAL).await;
            // Nobody to tell: no look. A change made meanwhile is told to the next
            // session (a client that lists again for nothing loses nothing).
            let live = peers.live();
            if live.is_empty() && peers.listeners().is_empty() {
                continue;
            }
            let now = prompts::skills_seen(&engine).await;
            if now != seen {
                for s in &live {
                    let _ = s.peer.notify_prompt_list_changed().await;
                    let _ = s.peer.notify_resource_list_changed().await;
                }
                for sink in peers.listeners() {
                    let _ = sink.notify_prompt_list_changed().await;
                    let _ = sink.notify_resource_list_changed().await;
                }
                seen = now;
            }
        }
    });
}

/// The engine's registry of MCP sessions, which tools of linked crates reach as
/// `klaw_mcp_ext::SessionClients`.
fn engine_peers(engine: &Engine) -> Arc<Peers> {
    let peers = engine.context().shared_state::<Peers>();
    let lookup: Arc<dyn klaw_mcp_ext::ClientLookup> = peers.clone();
    engine
        .context()
        .shared_state::<klaw_mcp_ext::SessionClients>()
        .set(lookup);
    peers
}

/// The page of `items` a request's cursor asks for (a cursor is the index of the first
/// item), and the next cursor when there is more.
fn page<T>(
    items: Vec<T>,
    request: Option<PaginatedRequestParams>,
    size: usize,
) -> Result<(Vec<T>, Option<String>), ErrorData> {
    let start = match request.and_then(|r| r.cursor) {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|&n| n <= items.len())
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    format!("invalid cursor {c:?}: use the nextCursor of the previous page"),
                    None,
                )
            })?,
    };
    let end = start.saturating_add(size).min(items.len());
    let next = (end < items.len()).then(|| end.to_string());
    Ok((
        items.into_iter().skip(start).take(end - start).collect(),
        next,
    ))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_are_rendered_once_per_registry() {
        let registry = Arc::new(ToolRegistry::collect().unwrap());
        let definitions = Definitions::default();
        let first = definitions.of(Arc::clone(&registry), Lang::En);
        assert!(!first.is_empty());
        assert!(first.windows(2).all(|w| w[0].name < w[1].name));
        // The same tool set: the same rendering, not a new one.
        let again = definitions.of(Arc::clone(&registry), Lang::En);
        assert!(Arc::ptr_eq(&first, &again));
        // Another registry (what the engine installs when its tools change): rendered
        // anew, from it.
        let mut fewer = ToolRegistry::clone(&registry);
        let gone = first[0].name.to_string();
        assert!(fewer.unregister(&gone).is_some());
        let changed = definitions.of(Arc::new(fewer), Lang::En);
        assert!(!Arc::ptr_eq(&first, &changed));
        assert_eq!(changed.len(), first.len() - 1);
        assert!(changed.iter().all(|t| t.name != gone));
    }

    /// `mcp_tool` gives what serde gives, for every tool and both languages.
    #[test]
    fn moved_schemas_give_what_serde_gives() {
        let registry = ToolRegistry::collect().unwrap();
        for spec in specs_by_name(&registry) {
            for lang in [Lang::En, Lang::Ru] {
                let def = klaw_tools::definition(spec, Format::Mcp, lang);
                let by_serde: Tool = serde_json::from_value(def.clone()).unwrap();
                assert_eq!(mcp_tool(def).unwrap(), by_serde, "{}", spec.name);
            }
        }
        // What serde refuses is refused.
        let no_schema = serde_json::json!({"name": "x", "inputSchema": 3});
        assert!(mcp_tool(no_schema).is_err());
    }
}
