//! Tool events: every call and every load failure goes to `tracing` and to the
//! subscribed [`EventHook`]s.

use std::time::Duration;

use crate::ToolError;

/// Something that happened to a tool.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ToolEvent {
    /// A call finished successfully.
    #[non_exhaustive]
    Executed {
        /// The tool.
        tool: String,
        /// The call's id ([`ToolContext::call_id`](crate::ToolContext::call_id)).
        call_id: Option<String>,
        /// How long the call took.
        elapsed: Duration,
    },
    /// A call failed (including unknown tools and invalid arguments).
    #[non_exhaustive]
    Failed {
        /// The tool that was asked for.
        tool: String,
        /// The call's id ([`ToolContext::call_id`](crate::ToolContext::call_id)).
        call_id: Option<String>,
        /// How long until it failed.
        elapsed: Duration,
        /// What the caller was told.
        error: ToolError,
    },
    /// A tool could not be registered.
    #[non_exhaustive]
    LoadFailed {
        /// The tool.
        tool: String,
        /// Where it was defined.
        origin: String,
        /// Why it was refused.
        problem: String,
    },
}

impl ToolEvent {
    /// Logs the event through `tracing` (target `klaw::tools`).
    pub(crate) fn trace(&self) {
        match self {
            ToolEvent::Executed {
                tool,
                call_id,
                elapsed,
            } => {
                tracing::debug!(target: "klaw::tools", tool, call_id, elapsed_us = elapsed.as_micros() as u64, "tool executed");
            }
            ToolEvent::Failed {
                tool,
                call_id,
                elapsed,
                error,
            } => {
                tracing::warn!(
                    target: "klaw::tools",
                    tool,
                    call_id,
                    elapsed_us = elapsed.as_micros() as u64,
                    kind = error.kind().code(),
                    detail = error.detail().unwrap_or(""),
                    "tool failed: {}", error.message()
                );
            }
            ToolEvent::LoadFailed {
                tool,
                origin,
                problem,
            } => {
                tracing::error!(target: "klaw::tools", tool, origin, "tool failed to load: {problem}");
            }
        }
    }
}

/// A subscriber to tool events. Closures `Fn(&ToolEvent)` are hooks.
pub trait EventHook: Send + Sync + 'static {
    /// Called for every event, on the task that caused it; keep it quick.
    fn on_event(&self, event: &ToolEvent);
}

impl<F: Fn(&ToolEvent) + Send + Sync + 'static> EventHook for F {
    fn on_event(&self, event: &ToolEvent) {
        self(event);
    }
}
