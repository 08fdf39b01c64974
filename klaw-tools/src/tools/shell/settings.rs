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
