//! The MCP server: the engine's tools for every MCP client, over stdio (`klaw-engine
//! mcp`) and Streamable HTTP ([`http`], `klaw-engine mcp --http`). A hand-written `rmcp`
//! [`ServerHandler`](rmcp::ServerHandler) over [`Engine`](crate::Engine): our validator checks
//! the arguments, our messages are the results, calls carry ids and progress, and
//! `notifications/cancelled` cancels the call (an `exec` loses its process tree).
//!
//! The parts: `server` (the handler: listing, calls, logging levels, results as
//! content blocks), `resources` (docs, skills' files, core memory), `prompts` (the
//! skills), `complete` (completion), `peers` (the sessions' clients, by number),
//! `approve` (the approval policy asking the client's user: elicitation), [`input`]
//! (what a call asks its client: in the result in MCP 2026-07-28), `forward` (a
//! call's progress and log messages to its client, in order), `stdio` (the stdio
//! transport: capped lines, JSON-RPC errors for bad ones), `tasks` (long calls as tasks
//! of MCP's tasks extension: `tasks/get`, `tasks/update`, `tasks/cancel`) and [`http`]
//! (Streamable HTTP behind its guard).

use klaw_tools::LogLevel;
use serde_json::Value;

mod approve;
mod complete;
mod forward;
pub mod http;
pub mod input;
mod peers;
mod prompts;
mod resources;
mod server;
mod stdio;
mod tasks;

pub use approve::{ASK_TIMEOUT, ElicitApproval};
pub use peers::{CHANNEL, Peers, offers_elicitation, offers_sampling, sampled_text};
pub use server::McpServer;
pub use stdio::serve_stdio;

/// The header naming a Streamable HTTP session. A `HeaderName` made once: a lookup by
/// `&str` parses and lowercases the name on every request.
const SESSION_ID: axum::http::HeaderName = axum::http::HeaderName::from_static("mcp-session-id");

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
    /// `mcp-sampling` with no `mcp.token`: refused before anything listens.
    #[error(
        "refusing to serve MCP over HTTP on {bind} without a token while the model is the \
         MCP client's (llm.provider or a model of llm.models is mcp-sampling): any local \
         process could connect as the client and answer for the model; set mcp.token \
         (KLAW_MCP_TOKEN, at least 16 characters)"
    )]
    SamplingNoToken {
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
        matches!(self, Self::NoToken { .. } | Self::SamplingNoToken { .. })
    }
}

/// Every tool's spec, in name order (the order of `tools/list` and `/api/v1/tools`).
pub(crate) fn specs_by_name(registry: &klaw_tools::ToolRegistry) -> Vec<&klaw_tools::ToolSpec> {
    let mut specs: Vec<_> = registry.all().map(|t| t.spec()).collect();
    specs.sort_by(|a, b| a.name.cmp(&b.name));
    specs
}

/// A JSON-RPC error response.
pub(crate) fn rpc_error(id: Value, code: i32, message: String) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[allow(deprecated)] // MCP logging (SEP-2577 deprecates it; clients still use it)
pub(crate) fn log_level(level: rmcp::model::LoggingLevel) -> LogLevel {
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
pub(crate) fn mcp_level(level: LogLevel) -> rmcp::model::LoggingLevel {
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
pub(crate) fn level_from_u8(n: u8) -> LogLevel {
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
