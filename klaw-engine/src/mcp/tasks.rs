//! MCP's tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) over rmcp's
//! [`TaskManager`]: a call of a tool declared for tasks ([`klaw_mcp_ext::TaskTool`]: the
//! engine's long ones, `exec`, `code_execute`, `render_js`, `subagent_spawn`), from a
//! client that declares the extension (in its capabilities or the request's `_meta`),
//! that has not ended within [`GRACE`] becomes a task: the request is answered with
//! its handle (`resultType: "task"`), the call runs on; `tasks/get` gives its status
//! and, once it ended, its result inlined; its questions are the task's
//! (`input_required`, answered by `tasks/update`); `tasks/cancel` drops the call as a
//! cancelled request does (an `exec` loses its process tree) and the task ends
//! `cancelled`. A call that ends within the grace is answered as usual (the
//! extension's immediate result), so are the questions it asks in that time (an
//! input-required result, then a task on the round that runs long).
//!
//! Bounded: at most [`MAX_RUNNING`] tasks run at once (a call beyond runs as a plain
//! call; a tool that requires a task is refused); a task is kept [`TTL`] after it
//! started, its result as long again after it ended (rmcp's retention), and one
//! still running at its TTL is stopped and ends `failed`.

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ClientCapabilities};
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};

use klaw_mcp_ext::{TaskSupport, TaskTool};
use klaw_tools::{ErrorKind, ToolError, ToolOutput};

/// How long a call of a task tool may take before it becomes a task.
pub(super) const GRACE: Duration = Duration::from_millis(100);

/// The most tasks running at once, per engine (MCP 2026-07-28 has no sessions: a task is
/// reached by its id, a random UUID).
pub(super) const MAX_RUNNING: usize = 64;

/// How long a task is kept after it started (`ttlMs`), and its result after it ended.
pub(super) const TTL: Duration = Duration::from_secs(3600);

/// The interval a client is asked to poll `tasks/get` at (`pollIntervalMs`).
const POLL_INTERVAL: Duration = Duration::from_millis(500);

// The engine's long tools: a command, code, a page rendered, a sub-agent's run.
klaw_mcp_ext::inventory::submit! { TaskTool { name: "exec", support: TaskSupport::Optional } }
klaw_mcp_ext::inventory::submit! { TaskTool { name: "code_execute", support: TaskSupport::Optional } }
klaw_mcp_ext::inventory::submit! { TaskTool { name: "render_js", support: TaskSupport::Optional } }
klaw_mcp_ext::inventory::submit! { TaskTool { name: "subagent_spawn", support: TaskSupport::Optional } }

/// The engine's tasks (a shared state of its context: every session and stateless
/// request reaches the same).
#[derive(Default)]
pub(super) struct Tasks(pub(super) TaskManager);

impl Tasks {
    /// Whether another task may start now.
    pub(super) fn has_room(&self) -> bool {
        self.0.running_task_count() < MAX_RUNNING
    }

    /// The options every task starts with.
    pub(super) fn options() -> TaskOptions {
        TaskOptions::new()
            .with_ttl_ms(u64::try_from(TTL.as_millis()).unwrap_or(u64::MAX))
            .with_poll_interval_ms(u64::try_from(POLL_INTERVAL.as_millis()).unwrap_or(1000))
    }
}

/// The capability a client lacks when it calls a tool that runs only as a task.
pub(super) fn tasks_required() -> ErrorData {
    ErrorData::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}

/// A task's end from its call's outcome: a tool's error is a result (`completed`,
/// `isError: true`), as in a plain call; a tool that crashed (panicked) or a tool that
/// is not there is a protocol error (`failed`, the error inlined).
pub(super) fn settle(
    outcome: Result<ToolOutput, ToolError>,
    result: impl FnOnce(Result<ToolOutput, ToolError>) -> CallToolResult,
) -> Result<CallToolResult, TaskExit> {
    match outcome {
        Err(e) if e.kind() == &ErrorKind::UnknownTool => Err(TaskExit::Error(
            ErrorData::invalid_params(e.message().to_owned(), None),
        )),
        Err(e) if e.detail().is_some_and(|d| d.starts_with("panic: ")) => Err(TaskExit::Error(
            ErrorData::internal_error(e.message().to_owned(), None),
        )),
        outcome => Ok(result(outcome)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_long_tools_may_run_as_tasks_and_the_quick_ones_not() {
        for long in ["exec", "code_execute", "render_js", "subagent_spawn"] {
            assert_eq!(
                klaw_mcp_ext::task_support(long),
                Some(TaskSupport::Optional)
            );
        }
        assert_eq!(klaw_mcp_ext::task_support("current_time"), None);
    }

    #[test]
    fn a_crash_fails_the_task_and_a_tool_error_completes_it() {
        let ok = |o: Result<ToolOutput, ToolError>| {
            let mut r = CallToolResult::success(vec![]);
            r.is_error = Some(o.is_err());
            r
        };
        let crashed = ToolError::failed("`x` failed").with_detail("panic: boom");
        assert!(matches!(settle(Err(crashed), ok), Err(TaskExit::Error(_))));
        assert!(settle(Err(ToolError::failed("no")), ok).is_ok());
        assert!(matches!(
            settle(Err(ToolError::unknown_tool("none")), ok),
            Err(TaskExit::Error(_))
        ));
    }
}
