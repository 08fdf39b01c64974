//! The built-in tool groups, one module per group, each behind its cargo feature.

#[cfg(feature = "utilities")]
pub mod utilities;

#[cfg(feature = "files")]
pub mod files;

#[cfg(feature = "shell")]
pub mod shell;

/// Memory (`memory_search`, `memory_save`, core memory, and the retrieval library the
/// docs group and the engine use): the `klaw-memory` crate, re-exported under this path.
#[cfg(feature = "memory")]
pub use klaw_memory as memory;

#[cfg(feature = "docs")]
pub mod docs;

#[cfg(feature = "skills")]
pub mod skills;
#[cfg(feature = "web")]
pub mod web;

/// Runs blocking work of a tool (file system, SQLite, the embedding model) on tokio's
/// blocking pool; if it panics, the tool fails with "the {what} operation stopped
/// unexpectedly" instead of taking the engine down.
#[cfg(any(feature = "files", feature = "docs", feature = "web"))]
pub(crate) async fn run_blocking<T, F>(what: &'static str, f: F) -> Result<T, crate::ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, crate::ToolError> + Send + 'static,
{
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        crate::ToolError::failed(format!("the {what} operation stopped unexpectedly"))
            .with_source(e)
    })?
}
