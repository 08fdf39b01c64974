//! What a running call tells whoever started it: progress ([`Progress`]) and log
//! messages ([`Log`]), both extractors. The caller (the CLI's progress bar, an MCP
//! client's `notifications/progress` and `notifications/message`) receives them through
//! the [`CallListener`] it gave the call's context ([`ToolContext::with_listener`](crate::ToolContext::with_listener)).

use std::sync::Arc;

/// One progress report of a call.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressUpdate {
    /// The id of the call that reports (see [`ToolContext::call_id`](crate::ToolContext::call_id)), if it has one.
    pub call_id: Option<String>,
    /// How much is done, in the tool's own unit (chunks, files, bytes).
    pub done: u64,
    /// How much there is in all, when known.
    pub total: Option<u64>,
    /// What is being done, for a person.
    pub message: String,
}

/// How serious a log message is: the syslog levels MCP uses, least serious first.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Detail for whoever debugs the tool.
    Debug,
    /// What the tool is doing.
    Info,
    /// Normal but worth noticing.
    Notice,
    /// Something may be wrong.
    Warning,
    /// Something failed.
    Error,
    /// A part stopped working.
    Critical,
    /// Someone must act now.
    Alert,
    /// Nothing works.
    Emergency,
}

/// One log message of a call.
#[derive(Debug, Clone, PartialEq)]
pub struct LogMessage {
    /// The id of the call that logs, if it has one.
    pub call_id: Option<String>,
    /// How serious it is.
    pub level: LogLevel,
    /// The message, for a person.
    pub message: String,
}

/// Receives what the calls whose context carries it report
/// ([`ToolContext::with_listener`](crate::ToolContext::with_listener)). Called on the tool's task: keep it quick. Both
/// methods do nothing unless implemented.
///
/// A closure `Fn(&ProgressUpdate)` is a listener that receives the progress reports.
pub trait CallListener: Send + Sync + 'static {
    /// One progress report.
    fn progress(&self, update: &ProgressUpdate) {
        let _ = update;
    }

    /// One log message.
    fn log(&self, message: &LogMessage) {
        let _ = message;
    }
}

impl<F: Fn(&ProgressUpdate) + Send + Sync + 'static> CallListener for F {
    fn progress(&self, update: &ProgressUpdate) {
        self(update);
    }
}

/// Reports the progress of the current call, injected into a tool like any extractor:
///
/// ```
/// use klaw_core::{Progress, ToolError, tool};
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
/// Reporting costs nothing when nobody listens (a call without a listener).
#[derive(Clone, Default)]
pub struct Progress {
    listener: Option<Arc<dyn CallListener>>,
    call_id: Option<Arc<str>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("listened", &self.listener.is_some())
            .field("call_id", &self.call_id)
            .finish()
    }
}

impl Progress {
    pub(crate) fn new(listener: Option<Arc<dyn CallListener>>, call_id: Option<Arc<str>>) -> Self {
        Self { listener, call_id }
    }

    /// Whether anyone receives the reports (to skip building costly messages).
    pub fn is_listened(&self) -> bool {
        self.listener.is_some()
    }

    /// Reports that `done` of `total` (when known) is done, and what is being done.
    pub fn report(&self, done: u64, total: Option<u64>, message: impl Into<String>) {
        if let Some(listener) = &self.listener {
            listener.progress(&ProgressUpdate {
                call_id: self.call_id.as_deref().map(str::to_owned),
                done,
                total,
                message: message.into(),
            });
        }
    }
}

/// Logs from the current call, injected into a tool like any extractor: every message
/// goes to the engine's log (target `klaw::tool`, with the call's id) and to whoever
/// started the call (an MCP client receives `notifications/message` at the level it
/// asked for).
///
/// ```
/// use klaw_core::{Log, ToolError, tool};
///
/// #[tool(name = "import_notes", description_ru = "Импортирует заметки")]
/// async fn import_notes(log: Log) -> Result<String, ToolError> {
///     log.info("reading the export");
///     log.warning("3 notes without a date: dated today");
///     Ok("imported".into())
/// }
/// ```
#[derive(Clone, Default)]
pub struct Log {
    listener: Option<Arc<dyn CallListener>>,
    call_id: Option<Arc<str>>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("listened", &self.listener.is_some())
            .field("call_id", &self.call_id)
            .finish()
    }
}

impl Log {
    pub(crate) fn new(listener: Option<Arc<dyn CallListener>>, call_id: Option<Arc<str>>) -> Self {
        Self { listener, call_id }
    }

    /// Logs `message` at `level`.
    pub fn log(&self, level: LogLevel, message: impl Into<String>) {
        let message = message.into();
        let id = self.call_id.as_deref().unwrap_or("");
        match level {
            LogLevel::Debug => tracing::debug!(target: "klaw::tool", call_id = id, "{message}"),
            LogLevel::Info | LogLevel::Notice => {
                tracing::info!(target: "klaw::tool", call_id = id, "{message}");
            }
            LogLevel::Warning => tracing::warn!(target: "klaw::tool", call_id = id, "{message}"),
            _ => tracing::error!(target: "klaw::tool", call_id = id, "{message}"),
        }
        if let Some(listener) = &self.listener {
            listener.log(&LogMessage {
                call_id: self.call_id.as_deref().map(str::to_owned),
                level,
                message,
            });
        }
    }

    /// Logs a detail for whoever debugs the tool.
    pub fn debug(&self, message: impl Into<String>) {
        self.log(LogLevel::Debug, message);
    }

    /// Logs what the tool is doing.
    pub fn info(&self, message: impl Into<String>) {
        self.log(LogLevel::Info, message);
    }

    /// Logs something that may be wrong.
    pub fn warning(&self, message: impl Into<String>) {
        self.log(LogLevel::Warning, message);
    }

    /// Logs a failure the tool goes on after.
    pub fn error(&self, message: impl Into<String>) {
        self.log(LogLevel::Error, message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_ordered_and_named_as_mcp_names_them() {
        assert!(LogLevel::Debug < LogLevel::Info && LogLevel::Alert < LogLevel::Emergency);
        assert_eq!(serde_json::to_value(LogLevel::Warning).unwrap(), "warning");
        let l: LogLevel = serde_json::from_value("emergency".into()).unwrap();
        assert_eq!(l, LogLevel::Emergency);
    }
}
