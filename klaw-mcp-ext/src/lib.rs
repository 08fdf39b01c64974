//! # klaw-mcp-ext
//!
//! What a crate linked into the engine adds to its MCP server besides tools, registered
//! the way `#[tool]` registers a tool (with [`inventory`], collected when the server
//! lists or reads), and what its tools need to ask the client of the session that
//! called them. The engine's own resources and prompts (docs, skills, core memory) are
//! the engine's; an [`McpExtension`] is served after them, in the order the linker
//! gives.
//!
//! ```
//! use klaw_mcp_ext::{McpExtension, rmcp::model::Prompt};
//!
//! fn prompts() -> Vec<Prompt> {
//!     vec![Prompt::new("greet", Some("Says hello"), None)]
//! }
//!
//! klaw_mcp_ext::inventory::submit! {
//!     McpExtension { prompts, ..McpExtension::NONE }
//! }
//!
//! assert!(klaw_mcp_ext::extensions().any(|e| (e.prompts)().iter().any(|p| p.name == "greet")));
//! ```
//!
//! Nothing depends on the engine here: the engine depends on this crate (it serves the
//! extensions and sets [`SessionClients`]), and so may a crate of extensions, which the
//! engine's binary then links (`use my_extensions as _;`). The MCP conformance suite's
//! fixtures (`klaw-test-fixtures`) are one.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use klaw_core::{Caller, Tool, ToolError};
use rmcp::model::{
    GetPromptResponse, GetPromptResult, InputResponses, Prompt, Resource, ResourceContents,
    ResourceTemplate,
};
use rmcp::{Peer, RoleServer};
use serde_json::{Map, Value};

pub mod input;

#[doc(hidden)]
pub use inventory;
pub use rmcp;

/// Resources and prompts a linked crate adds to the MCP server: each a plain function, so
/// an extension is a constant ([`McpExtension::NONE`] for the parts it does not serve).
#[derive(Debug, Clone, Copy)]
pub struct McpExtension {
    /// Its resources (`resources/list`).
    pub resources: fn() -> Vec<Resource>,
    /// Its URI templates (`resources/templates/list`).
    pub resource_templates: fn() -> Vec<ResourceTemplate>,
    /// The resource at a URI, if it is one of its own (`resources/read`).
    pub read_resource: fn(&str) -> Option<ResourceContents>,
    /// Its prompts (`prompts/list`).
    pub prompts: fn() -> Vec<Prompt>,
    /// Its prompt of that name with those arguments, if it has one (`prompts/get`).
    pub get_prompt: fn(&str, &Map<String, Value>) -> Option<GetPromptResult>,
    /// Its prompt of that name, if it is one that asks the client first (MCP
    /// 2026-07-28's input-required result): given the answers the request brought and
    /// whether the request may be answered with a question (`in_result`). Tried before
    /// [`get_prompt`](Self::get_prompt).
    pub get_prompt_asking: AskingPrompt,
    /// Its tools described as given (`tools/list`, after the engine's, a name the
    /// engine has left out): for a schema a `#[tool]` cannot have (`$ref`, `$defs`,
    /// conditionals, `x-mcp-header`). Their arguments are the extension's to check.
    pub tools: fn() -> Vec<rmcp::model::Tool>,
    /// Its tool of that name called with those arguments, if it is one of its own.
    pub call_tool: fn(&str, &Map<String, Value>) -> Option<rmcp::model::CallToolResult>,
}

/// [`McpExtension::get_prompt_asking`]: the prompt `name`, given the client's answers and
/// whether the request may be answered with a question; `None` when not its own.
pub type AskingPrompt =
    fn(&str, Option<&InputResponses>, bool) -> Option<Result<GetPromptResponse, ToolError>>;

impl McpExtension {
    /// An extension that serves nothing; fill in what yours serves.
    pub const NONE: Self = Self {
        resources: Vec::new,
        resource_templates: Vec::new,
        read_resource: |_| None,
        prompts: Vec::new,
        get_prompt: |_, _| None,
        get_prompt_asking: |_, _, _| None,
        tools: Vec::new,
        call_tool: |_, _| None,
    };
}

inventory::collect!(McpExtension);

/// Every extension linked into the program.
pub fn extensions() -> impl Iterator<Item = &'static McpExtension> {
    inventory::iter::<McpExtension>.into_iter()
}

/// How a tool's calls may run as tasks of MCP's tasks extension (SEP-2663,
/// `io.modelcontextprotocol/tasks`): a call from a client that declares the extension
/// and is still running after the server's short grace becomes a task (the client
/// polls `tasks/get`, answers with `tasks/update`, stops it with `tasks/cancel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    /// As a task for a client that declares the extension; a plain call for another.
    Optional,
    /// Only as a task: a client that does not declare the extension is refused
    /// (-32021, missing required client capability).
    Required,
}

/// A tool whose calls may run as tasks (the long ones: a command, a sub-agent, a page
/// rendered), registered the way an [`McpExtension`] is:
///
/// ```
/// klaw_mcp_ext::inventory::submit! {
///     klaw_mcp_ext::TaskTool { name: "my_long_tool", support: klaw_mcp_ext::TaskSupport::Optional }
/// }
/// assert_eq!(klaw_mcp_ext::task_support("my_long_tool"), Some(klaw_mcp_ext::TaskSupport::Optional));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TaskTool {
    /// The tool's name.
    pub name: &'static str,
    /// How its calls may run as tasks.
    pub support: TaskSupport,
}

inventory::collect!(TaskTool);

/// How the tool `name`'s calls may run as tasks; `None`: never (a plain call).
pub fn task_support(name: &str) -> Option<TaskSupport> {
    inventory::iter::<TaskTool>
        .into_iter()
        .find(|t| t.name == name)
        .map(|t| t.support)
}

/// Whether a linked extension serves prompts (the server then declares the capability).
pub fn serves_prompts() -> bool {
    extensions().any(|e| !(e.prompts)().is_empty())
}

/// How the engine finds the client of a call's MCP session.
pub trait ClientLookup: Send + Sync {
    /// The client of the live MCP session that made a call from `caller`; `None` for a
    /// call that did not come through MCP, or whose session has ended.
    fn client_of(&self, caller: &Caller) -> Option<Peer<RoleServer>>;

    /// Tells every client (sessions and `subscriptions/listen` streams) that the
    /// prompts changed: an extension whose prompts change at run time calls it through
    /// [`SessionClients::prompts_changed`]. Nothing by default.
    fn prompts_changed(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async {})
    }

    /// Ends the HTTP response stream the call `call` (its id) is being answered on,
    /// telling the client to come back after `retry` (SSE polling, SEP-1699: the call
    /// goes on, and its result comes when the client reconnects with `Last-Event-ID`);
    /// whether there was such a stream. None by default (stdio, a stateless request).
    fn close_stream(
        &self,
        call: &str,
        retry: std::time::Duration,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        let _ = (call, retry);
        Box::pin(async { false })
    }
}

/// The engine's MCP sessions, as a tool reaches them: kept in the engine's context
/// (`ctx.shared_state::<SessionClients>()`), set by the engine's MCP server when it
/// starts; empty where no MCP server runs.
#[derive(Default)]
pub struct SessionClients {
    lookup: OnceLock<Arc<dyn ClientLookup>>,
}

impl std::fmt::Debug for SessionClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionClients")
            .field("set", &self.lookup.get().is_some())
            .finish()
    }
}

impl SessionClients {
    /// Sets how clients are found (the first call wins: one engine, one set of sessions).
    pub fn set(&self, lookup: Arc<dyn ClientLookup>) {
        let _ = self.lookup.set(lookup);
    }

    /// The client of the session that made a call from `caller` (see
    /// [`ClientLookup::client_of`]); `None` too when no MCP server runs.
    pub fn client_of(&self, caller: &Caller) -> Option<Peer<RoleServer>> {
        self.lookup.get()?.client_of(caller)
    }

    /// Ends the HTTP stream the call `call` is answered on (see
    /// [`ClientLookup::close_stream`]); `false` when there is none.
    pub async fn close_stream(&self, call: &str, retry: std::time::Duration) -> bool {
        match self.lookup.get() {
            Some(lookup) => lookup.close_stream(call, retry).await,
            None => false,
        }
    }

    /// Tells every client that the prompts changed (see
    /// [`ClientLookup::prompts_changed`]); nothing when no MCP server runs.
    pub async fn prompts_changed(&self) {
        if let Some(lookup) = self.lookup.get() {
            lookup.prompts_changed().await;
        }
    }
}

/// How a tool adds tools to the running engine, or takes them away.
pub trait ToolChanges: Send + Sync {
    /// Adds `tool` (its name must be new); the clients are told the list changed.
    fn register(&self, tool: Arc<dyn Tool>) -> Result<(), ToolError>;
    /// Takes the tool `name` away; whether there was one.
    fn unregister(&self, name: &str) -> bool;
}

/// The running engine's tool set, as a tool changes it: a service of the engine's
/// context (`ctx.service::<RuntimeTools>()`), absent where no engine runs.
#[derive(Clone)]
pub struct RuntimeTools(pub Arc<dyn ToolChanges>);

impl std::fmt::Debug for RuntimeTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RuntimeTools")
    }
}

/// Whether the client declared the elicitation capability at `initialize`.
pub fn offers_elicitation(peer: &Peer<RoleServer>) -> bool {
    peer.peer_info()
        .is_some_and(|i| i.capabilities.elicitation.is_some())
}

/// Whether the client declared the sampling capability at `initialize`.
pub fn offers_sampling(peer: &Peer<RoleServer>) -> bool {
    peer.peer_info()
        .is_some_and(|i| i.capabilities.sampling.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_serves_nothing_and_an_unset_lookup_finds_no_client() {
        let none = McpExtension::NONE;
        assert!((none.resources)().is_empty() && (none.prompts)().is_empty());
        assert!((none.read_resource)("test://x").is_none());
        assert!((none.get_prompt)("x", &Map::new()).is_none());
        assert!((none.get_prompt_asking)("x", None, true).is_none());
        let clients = SessionClients::default();
        assert!(
            clients
                .client_of(&Caller::new("mcp", Some("1".into())))
                .is_none()
        );
    }
}
