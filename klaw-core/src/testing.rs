//! Test helpers for tool authors (feature `testing`): a context over a temporary
//! workspace and data dir, and calls by name that go through the same validation and
//! dispatch as the engine.
//!
//! ```
//! use klaw_core::{ToolError, tool};
//!
//! /// Repeats a text in capitals.
//! #[tool(name = "kit_shout", description_ru = "Повторяет текст заглавными буквами", read_only)]
//! async fn kit_shout(
//!     /// Текст
//!     text: String,
//! ) -> Result<String, ToolError> {
//!     Ok(text.to_uppercase())
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
//! let kit = klaw_core::testing::Kit::new()?;
//! let out = kit.call("kit_shout", serde_json::json!({"text": "klaw"})).await?;
//! assert_eq!(out.text(), "KLAW");
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{Limits, Settings, ToolContext, ToolError, ToolOutput, ToolRegistry};

/// A temporary workspace and data dir, a context over them, and the registry of every
/// linked `#[tool]`. Both directories are removed when the kit is dropped.
#[derive(Debug)]
pub struct Kit {
    dir: tempfile::TempDir,
    workspace: PathBuf,
    data_dir: PathBuf,
    registry: ToolRegistry,
    ctx: ToolContext,
}

/// Errors of the kit itself (not of the tools it calls).
#[derive(Debug, thiserror::Error)]
pub enum KitError {
    /// Creating or writing the temporary directories failed.
    #[error("test kit I/O: {0}")]
    Io(#[from] std::io::Error),
    /// A linked tool is invalid.
    #[error(transparent)]
    Registry(#[from] crate::RegistryErrors),
    /// A tool added with [`Kit::with_tool`] is invalid or its name is taken.
    #[error(transparent)]
    Register(#[from] crate::RegistryError),
}

impl Kit {
    /// A kit with default limits and settings (time zone UTC, language ru).
    pub fn new() -> Result<Self, KitError> {
        Self::with_limits(Limits::default(), Settings::default())
    }

    /// A kit with the given limits and settings.
    pub fn with_limits(limits: Limits, settings: Settings) -> Result<Self, KitError> {
        let dir = tempfile::tempdir()?;
        let workspace = dir.path().join("workspace");
        let data_dir = dir.path().join("data");
        std::fs::create_dir_all(&workspace)?;
        std::fs::create_dir_all(&data_dir)?;
        let registry = ToolRegistry::collect()?;
        let ctx = ToolContext::builder()
            .workspace(&workspace)
            .data_dir(&data_dir)
            .limits(limits)
            .settings(settings)
            .build();
        Ok(Self {
            dir,
            workspace,
            data_dir,
            registry,
            ctx,
        })
    }

    /// Changes the context (to add services, say), keeping what it has: the
    /// directories, limits, settings and the services added before.
    pub fn with_context(
        mut self,
        f: impl FnOnce(crate::ToolContextBuilder) -> crate::ToolContextBuilder,
    ) -> Self {
        self.ctx = f(self.ctx.to_builder()).build();
        self
    }

    /// Registers `tool` (one made at run time) beside the linked ones.
    pub fn with_tool(mut self, tool: std::sync::Arc<dyn crate::Tool>) -> Result<Self, KitError> {
        self.registry.register(tool)?;
        Ok(self)
    }

    /// The workspace directory.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The temporary root holding both.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The registry.
    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// The context calls run with.
    pub fn context(&self) -> &ToolContext {
        &self.ctx
    }

    /// Writes a file in the workspace (creating parent directories).
    pub fn write(&self, rel: impl AsRef<Path>, content: impl AsRef<[u8]>) -> Result<(), KitError> {
        let path = self.workspace.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, content)?;
        Ok(())
    }

    /// Reads a workspace file as text.
    pub fn read(&self, rel: impl AsRef<Path>) -> Result<String, KitError> {
        Ok(std::fs::read_to_string(self.workspace.join(rel))?)
    }

    /// Calls a tool by name, as the engine would.
    pub async fn call(&self, name: &str, args: Value) -> Result<ToolOutput, ToolError> {
        self.registry.execute(&self.ctx, name, args).await
    }

    /// Calls a tool with raw JSON text, as a model would send it.
    pub async fn call_text(&self, name: &str, args: &str) -> Result<ToolOutput, ToolError> {
        self.registry.execute(&self.ctx, name, args).await
    }

    /// Calls a tool that must succeed with a structured answer, and returns that answer.
    ///
    /// # Panics
    /// When the call fails or its answer is plain text: the test fails, naming the tool,
    /// the arguments and the error.
    pub async fn call_ok(&self, name: &str, args: Value) -> Value {
        match self.call(name, args.clone()).await {
            Ok(out) => match out.structured() {
                Some(v) => v.clone(),
                None => panic!(
                    "{name} {args}: plain text, not a structured answer: {}",
                    out.text()
                ),
            },
            Err(e) => panic!("{name} {args}: {}", e.to_model_text()),
        }
    }

    /// Calls a tool that must fail, and returns its error.
    ///
    /// # Panics
    /// When the call succeeds: the test fails, naming the tool, the arguments and the answer.
    pub async fn call_err(&self, name: &str, args: Value) -> ToolError {
        match self.call(name, args.clone()).await {
            Ok(out) => panic!("{name} {args} succeeded: {}", out.text()),
            Err(e) => e,
        }
    }
}

/// Checks `registry`'s tools against the schema lock at `path` (`tools.lock.json`, see
/// [`crate::lock`]), as a test: any change — breaking or compatible — fails with each
/// change in plain words, so the lock always says what the tools promise. With
/// `KLAW_UPDATE_LOCK=1` the lock is written instead; a missing lock is written too,
/// except under CI (`CI=true`), where it fails.
///
/// ```no_run
/// # fn main() {
/// let kit = klaw_core::testing::Kit::new().unwrap();
/// klaw_core::testing::assert_tools_lock(kit.registry(), "tools.lock.json");
/// # }
/// ```
#[track_caller]
pub fn assert_tools_lock(registry: &ToolRegistry, path: impl AsRef<Path>) {
    use crate::lock::SchemaLock;
    let path = path.as_ref();
    let now = SchemaLock::of(registry);
    let update = std::env::var("KLAW_UPDATE_LOCK").as_deref() == Ok("1");
    let locked = match SchemaLock::read(path) {
        Ok(locked) => locked,
        Err(e) if !update => panic!("{e}"),
        Err(_) => None,
    };
    let Some(locked) = locked.filter(|_| !update) else {
        assert!(
            update || std::env::var("CI").as_deref() != Ok("true"),
            "{} is missing: write it with KLAW_UPDATE_LOCK=1 and commit it",
            path.display()
        );
        if let Err(e) = now.write(path) {
            panic!("cannot write {}: {e}", path.display());
        }
        return;
    };
    let changes = locked.compare(&now);
    if !changes.is_empty() {
        let list: Vec<String> = changes.iter().map(ToString::to_string).collect();
        panic!(
            "the tools no longer match {}:\n  {}\n{}",
            path.display(),
            list.join("\n  "),
            if crate::lock::has_breaking(&changes) {
                "a BREAKING change breaks prompts, MCP clients and saved conversations that \
                 use the tool; if it is meant, say so in the release notes and run with \
                 KLAW_UPDATE_LOCK=1"
            } else {
                "only compatible changes: accept them with KLAW_UPDATE_LOCK=1"
            }
        );
    }
}
