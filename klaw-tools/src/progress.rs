//! Progress of a long call: a tool reports with the [`Progress`] extractor, and whoever
//! started the call (the CLI's progress bar, an MCP client's `notifications/progress`)
//! receives it through the [`ProgressSink`] it gave the call's context.

use std::sync::Arc;

use crate::{FromToolContext, ToolContext, ToolError};

/// One progress report of a call.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressUpdate {
    /// The id of the call that reports (see [`ToolContext::call_id`]), if it has one.
    pub call_id: Option<String>,
    /// How much is done, in the tool's own unit (chunks, files, bytes).
    pub done: u64,
    /// How much there is in all, when known.
    pub total: Option<u64>,
    /// What is being done, for a person.
    pub message: String,
}

/// Receives the progress reports of the calls whose context carries it
/// ([`ToolContext::with_progress`]). Called on the tool's task: keep it quick.
pub trait ProgressSink: Send + Sync + 'static {
    /// One report.
    fn report(&self, update: &ProgressUpdate);
}

impl<F: Fn(&ProgressUpdate) + Send + Sync + 'static> ProgressSink for F {
    fn report(&self, update: &ProgressUpdate) {
        self(update);
    }
}

/// Reports the progress of the current call, injected into a tool like any extractor:
///
/// ```
/// use klaw_tools::{Progress, ToolError, tool};
///
/// #[tool(name = "slow_count", description_ru = "Считает медленно")]
/// async fn slow_count(progress: Progress, /// До скольких
/// to: u64) -> Result<String, ToolError> {
///     for i in 1..=to {
///         progress.report(i, Some(to), format!("counted {i}"));
///     }
///     Ok(format!("counted to {to}"))
/// }
/// ```
///
/// Reporting costs nothing when nobody listens (a call without a sink).
#[derive(Clone, Default)]
pub struct Progress {
    sink: Option<Arc<dyn ProgressSink>>,
    call_id: Option<Arc<str>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("listened", &self.sink.is_some())
            .field("call_id", &self.call_id)
            .finish()
    }
}

impl Progress {
    pub(crate) fn new(sink: Option<Arc<dyn ProgressSink>>, call_id: Option<Arc<str>>) -> Self {
        Self { sink, call_id }
    }

    /// Whether anyone receives the reports (to skip building costly messages).
    pub fn is_listened(&self) -> bool {
        self.sink.is_some()
    }

    /// Reports that `done` of `total` (when known) is done, and what is being done.
    pub fn report(&self, done: u64, total: Option<u64>, message: impl Into<String>) {
        if let Some(sink) = &self.sink {
            sink.report(&ProgressUpdate {
                call_id: self.call_id.as_deref().map(str::to_owned),
                done,
                total,
                message: message.into(),
            });
        }
    }
}

impl FromToolContext for Progress {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        Ok(ctx.progress())
    }
}
