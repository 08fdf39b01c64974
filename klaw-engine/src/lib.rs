//! # klaw-engine
//!
//! The engine collects every tool linked into the program (the built-in groups and
//! any crate of yours that uses `#[tool]`), validates them at start-up, and serves
//! them: today through the command line (`tools`, `call`, `doctor`, `config`).
//!
//! Your own binary with your own tools is three lines:
//!
//! ```no_run
//! // use my_tools as _;   // link the crate so its #[tool]s register
//! fn main() -> std::process::ExitCode {
//!     klaw_engine::main()
//! }
//! ```

mod cli;
pub mod config;
mod doctor;

use std::sync::Arc;

use klaw_tools::{Args, Caller, ToolContext, ToolError, ToolOutput, ToolRegistry};

#[cfg(feature = "docs")]
pub use cli::DocsCommand;
pub use cli::{Cli, Command, main, run};
pub use config::{Config, ConfigError, EngineConfig, MemorySection, MemoryWeights};
pub use doctor::{Check, Status, doctor};

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
}

/// A configured engine: the validated registry and the context tools run in.
#[derive(Debug, Clone)]
pub struct Engine {
    config: Arc<Config>,
    registry: Arc<ToolRegistry>,
    ctx: ToolContext,
}

impl Engine {
    /// Loads the configuration from the environment and starts.
    pub fn from_env() -> Result<Self, EngineError> {
        Self::new(Config::load()?)
    }

    /// Collects and validates every linked tool and prepares the context; creates the
    /// workspace and data directories if they do not exist.
    pub fn new(config: Config) -> Result<Self, EngineError> {
        let registry = ToolRegistry::collect()?;
        for dir in [&config.data_dir, &config.workspace] {
            std::fs::create_dir_all(dir).map_err(|source| EngineError::Dir {
                path: dir.clone(),
                source,
            })?;
        }
        let builder = ToolContext::builder()
            .workspace(&config.workspace)
            .data_dir(&config.data_dir)
            .limits(config.limits())
            .settings(config.settings())
            // Each group's own settings, which its tools take as extractors.
            .service(config.shell())
            .service(config.files())
            .caller(Caller::new("cli", None));
        // The memory tools read the model, runtime, weights and chunking from this service.
        #[cfg(feature = "memory")]
        let builder = builder.service(config.memory());
        let ctx = builder.build();
        Ok(Self {
            config: Arc::new(config),
            registry: Arc::new(registry),
            ctx,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The tools.
    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// The context tool calls run with.
    pub fn context(&self) -> &ToolContext {
        &self.ctx
    }

    /// Calls a tool by name, validating `args` first.
    pub async fn call(&self, name: &str, args: impl Into<Args>) -> Result<ToolOutput, ToolError> {
        self.registry.execute(&self.ctx, name, args).await
    }
}
