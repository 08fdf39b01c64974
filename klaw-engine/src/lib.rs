//! # klaw-engine
//!
//! The engine collects every tool linked into the program (the built-in groups, any
//! crate of yours that uses `#[tool]`, manifest tools and the tools of imported MCP
//! servers), validates them at start-up, and serves them: through the command line
//! (`tools`, `call`, `doctor`, `config`), to MCP clients (`mcp`, over stdio or HTTP), to
//! the agent loop (`chat`; `run` with the gateway's channels such as Telegram, and the
//! scheduler's jobs). Every way of serving shares one runtime, [`Engine`] (calls with
//! ids, hooks that may refuse a call, cancellation, tools added at run time, shutdown),
//! assembled for each front end by [`App`]; see `doc/engine.md`.
//!
//! Your own binary with your own tools is three lines:
//!
//! ```no_run
//! // use my_tools as _;   // link the crate so its #[tool]s register
//! fn main() -> std::process::ExitCode {
//!     klaw_engine::main()
//! }
//! ```
//!
//! [`main`] first checks whether the process was started as the shell tools' sandbox
//! helper (`__klaw-sandbox`) or a serving engine's sandbox server
//! (`__klaw-sandbox-serve`) and, if so, acts as it. (Shell commands use the small
//! `klaw-engine-sandbox` binary beside the engine's when it is there: it starts faster;
//! else a copy of the running binary.) A binary that builds an [`Engine`]
//! without calling [`main`] must call `klaw_sandbox::run_helper_if_requested()` first
//! thing itself, or its shell commands are refused.

pub mod agent;
pub mod app;
mod cli;
pub mod config;
mod doctor;
mod engine;
pub mod gateway;
pub mod imports;
pub mod llm;
pub mod manifests;
pub mod mcp;
/// The tests' PostgreSQL, shared with the integration tests (`tests/common/postgres.rs`).
#[cfg(test)]
#[path = "../tests/common/postgres.rs"]
mod pg_harness;
pub mod scheduler;
mod sqlite;
pub mod storage;
pub mod telemetry;
mod terminal;
mod tools;

pub use app::{App, AppError};
#[cfg(feature = "docs")]
pub use cli::DocsCommand;
pub use cli::{Cli, Command, ToolsAction, ToolsFormat, main, run};
pub use config::{
    AgentSection, Config, ConfigError, EngineConfig, GatewaySection, ImportedServer, LlmSection,
    McpSection, MemoryModels, MemorySection, MemoryWeights, NamedModel, SchedulerSection, Secret,
    TelemetrySection,
};
pub use doctor::{Check, Status, doctor};
pub use engine::{
    Engine, EngineBuilder, FAILURE_STREAK, FailedTool, HookFuture, PreCallHook, Refusal, Registrar,
    ToolCall, stop_signal,
};

/// Why the engine cannot start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The configuration is unusable.
    #[error("configuration: {0}")]
    Config(#[from] ConfigError),
    /// One or more tools are invalid.
    #[error("{0}")]
    Tools(#[from] klaw_tools::RegistryErrors),
    /// A directory could not be created.
    #[error("cannot create {path}: {source}")]
    Dir {
        /// The directory.
        path: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The database of `storage.url` could not be used.
    #[error(transparent)]
    Storage(#[from] storage::StorageError),
}
