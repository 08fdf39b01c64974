//! The shell tools' side of the sandbox (`klaw-sandbox`): which helper a context uses,
//! and the sandbox's errors as tool errors.

use std::path::{Path, PathBuf};

use crate::{ToolContext, ToolError};

/// The program that plays the sandbox helper (`<program> __klaw-sandbox ...`).
///
/// The default is the current executable: `klaw-engine` (and any binary that calls
/// `klaw_engine::main`, or [`klaw_sandbox::run_helper_if_requested`] first thing)
/// handles [`HELPER_ARG`](klaw_sandbox::HELPER_ARG). Register this service to use
/// another program, e.g. the `klaw-sandbox` binary of this crate in tests. (No
/// environment variable can name one: whatever it named would be trusted with every
/// command once it printed the probe's answer.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxHelper(PathBuf);

impl SandboxHelper {
    /// A helper at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self(path.into())
    }

    /// The helper's path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The helper a context uses: its service, else the current executable.
    pub fn for_context(ctx: &ToolContext) -> Option<PathBuf> {
        if let Some(h) = ctx.service::<SandboxHelper>() {
            return Some(h.0.clone());
        }
        std::env::current_exe().ok()
    }
}

/// The sandbox's refusal as the model reads it.
pub(crate) fn tool_error(e: klaw_sandbox::Error) -> ToolError {
    match e {
        klaw_sandbox::Error::Unavailable(why) => ToolError::unavailable(why),
        klaw_sandbox::Error::EmptyCommand => ToolError::invalid_arguments("/command", "empty"),
        e @ klaw_sandbox::Error::Policy(_) => {
            ToolError::failed("cannot encode the sandbox policy").with_source(e)
        }
        e => ToolError::failed(e.to_string()),
    }
}
