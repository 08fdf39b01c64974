//! The file group's settings.

use crate::{FromToolContext, ToolContext, ToolError};

/// What only the file tools use; the size limits every tool shares are in
/// [`Limits`](crate::Limits). The engine fills it from `engine.json` and registers it as
/// a service; without one, the defaults below apply. Tools take it as an extractor
/// (`#[ctx] files: FilesSettings`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FilesSettings {
    /// Most entries `file_list` returns (`maxListEntries`, default 1000).
    pub max_list_entries: usize,
}

impl Default for FilesSettings {
    fn default() -> Self {
        Self {
            max_list_entries: 1000,
        }
    }
}

impl FilesSettings {
    /// Sets how many entries `file_list` returns at most.
    #[must_use]
    pub fn with_max_list_entries(mut self, n: usize) -> Self {
        self.max_list_entries = n;
        self
    }
}

impl FromToolContext for FilesSettings {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        Ok(ctx.shared_state::<Self>().as_ref().clone())
    }
}
