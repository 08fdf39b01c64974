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
    /// A tool was added while the engine runs (a manifest, `tool_create`, an imported
    /// MCP server's tool).
    #[non_exhaustive]
    Created {
        /// The tool.
        tool: String,
        /// Where it was defined.
        origin: String,
    },
    /// A tool was removed while the engine runs.
    #[non_exhaustive]
    Removed {
        /// The tool.
        tool: String,
        /// Where it was defined.
        origin: String,
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
    /// A tool added while the engine runs.
    pub fn created(tool: impl Into<String>, origin: impl Into<String>) -> Self {
        Self::Created {
            tool: tool.into(),
            origin: origin.into(),
        }
    }

    /// A tool removed while the engine runs.
    pub fn removed(tool: impl Into<String>, origin: impl Into<String>) -> Self {
        Self::Removed {
            tool: tool.into(),
            origin: origin.into(),
        }
    }

    /// A tool that could not be loaded (outside the registry's own checks: a manifest
    /// that does not parse, an imported server that did not start).
    pub fn load_failed(
        tool: impl Into<String>,
        origin: impl Into<String>,
        problem: impl Into<String>,
    ) -> Self {
        Self::LoadFailed {
            tool: tool.into(),
            origin: origin.into(),
            problem: problem.into(),
        }
    }

    /// Logs the event through `tracing` (target `klaw::tools`).
    pub fn trace(&self) {
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
                // A detail or a cause only when there is one (no `detail="" cause=""`).
                let causes = error.causes();
                tracing::warn!(
                    target: "klaw::tools",
                    tool,
                    call_id,
                    elapsed_us = elapsed.as_micros() as u64,
                    kind = error.kind().code(),
                    detail = error.detail(),
                    cause = (!causes.is_empty()).then_some(causes.as_str()),
                    "tool failed: {}", error.message()
                );
            }
            ToolEvent::Created { tool, origin } => {
                tracing::info!(target: "klaw::tools", tool, origin, "tool added");
            }
            ToolEvent::Removed { tool, origin } => {
                tracing::info!(target: "klaw::tools", tool, origin, "tool removed");
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
