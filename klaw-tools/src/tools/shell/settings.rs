//! The shell group's settings.

use std::sync::Arc;
use std::time::Duration;

use crate::{FromToolContext, ToolContext, ToolError};

pub use klaw_sandbox::Mode as SandboxMode;

/// How shell commands run: their time limits, output cap, how many may run in the
/// background, the OS sandbox and the network. The engine fills it from `engine.json`
/// and registers it as a service; without one, tools use the defaults below. A tool
/// takes it as an extractor (`#[ctx] shell: ShellSettings`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShellSettings {
    /// Time limit of a command that asks for none (`execTimeoutSeconds`, default 60 s).
    pub timeout: Duration,
    /// Largest time limit a command may ask for (`execMaxTimeoutSeconds`, default 300 s).
    pub max_timeout: Duration,
    /// Most bytes kept of each output stream of a command (`execMaxOutputBytes`,
    /// default 64 KiB).
    pub max_output_bytes: usize,
    /// Most background processes at once (`maxProcesses`, default 8).
    pub max_processes: usize,
    /// Which OS sandbox commands run in (`sandbox`, default `auto`).
    pub sandbox: SandboxMode,
    /// Whether commands may use the network (`network`, default false).
    pub network: bool,
    /// When commands run through a long-lived sandbox server instead of a helper
    /// started per command (default [`SandboxServer::Auto`]).
    pub sandbox_server: SandboxServer,
}

/// When a context's commands run through a long-lived sandbox server per workspace and
/// policy ([`klaw_sandbox::Server`]: the sandbox's set-up done once, a supervisor forked
/// per command) rather than through a helper started per command. Only the Landlock
/// sandbox and mode `off` are served; bubblewrap builds its namespaces per command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SandboxServer {
    /// From a context's second command on: a one-shot process (`klaw-engine call exec`)
    /// starts no server, a serving engine keeps one.
    #[default]
    Auto,
    /// From the first command on.
    Always,
    /// Never: a helper per command.
    Never,
}

impl Default for ShellSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(60),
            max_timeout: Duration::from_secs(300),
            max_output_bytes: 65_536,
            max_processes: 8,
            sandbox: SandboxMode::Auto,
            network: false,
            sandbox_server: SandboxServer::Auto,
        }
    }
}

impl ShellSettings {
    /// Sets the sandbox mode.
    #[must_use]
    pub fn with_sandbox(mut self, sandbox: SandboxMode) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// Allows or forbids the network.
    #[must_use]
    pub fn with_network(mut self, network: bool) -> Self {
        self.network = network;
        self
    }

    /// Sets when commands run through a long-lived sandbox server.
    #[must_use]
    pub fn with_sandbox_server(mut self, server: SandboxServer) -> Self {
        self.sandbox_server = server;
        self
    }

    /// Sets the default and the largest time limit of a command.
    #[must_use]
    pub fn with_timeouts(mut self, timeout: Duration, max_timeout: Duration) -> Self {
        self.timeout = timeout;
        self.max_timeout = max_timeout;
        self
    }

    /// Sets how many bytes of each output stream are kept.
    #[must_use]
    pub fn with_max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output_bytes = bytes;
        self
    }

    /// Sets how many background processes may run at once.
    #[must_use]
    pub fn with_max_processes(mut self, n: usize) -> Self {
        self.max_processes = n;
        self
    }

    /// The settings a context carries: its service, else the defaults.
    pub fn of(ctx: &ToolContext) -> Arc<Self> {
        ctx.shared_state::<Self>()
    }
}

impl FromToolContext for ShellSettings {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        Ok(Self::of(ctx).as_ref().clone())
    }
}
