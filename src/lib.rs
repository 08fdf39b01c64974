//! # Klaw
//!
//! One attribute turns an async fn into a tool that an LLM agent can call; the engine
//! (`klaw-engine`) serves those tools to models and to MCP clients.
//!
//! ```
//! use klaw::{ToolError, tool};
//!
//! #[tool(name = "shout", description_ru = "Повторяет текст заглавными буквами", read_only)]
//! async fn shout(
//!     /// Текст
//!     text: String,
//! ) -> Result<String, ToolError> {
//!     Ok(text.to_uppercase())
//! }
//! # fn main() {}
//! ```
//!
//! This crate is the authoring API of [`klaw_core`], no more: what `#[tool]` and
//! `#[derive(ToolSchema)]` need, a hand-written [`Tool`], the test kit (`klaw::testing`,
//! feature `testing`) and what an engine embedding the tools needs (the registry, the
//! context's builder, events and listeners). The rest of the core (its validator, the
//! schema lock, its cache directory) is `klaw_core`'s. The built-in tool groups
//! (`klaw-tools`) are opt-in, as `klaw::tools` with the `builtins` feature. See
//! `doc/writing-tools.md` for every attribute.

extern crate self as klaw;

// Writing a tool: the attribute, the derive, the error, the output and the extractors.
pub use klaw_core::{
    Attachment, Caller, Cancel, DataDir, ErrorKind, FromToolContext, Lang, Limits, Log, LogLevel,
    Progress, ResourceContent, Settings, State, ToolContext, ToolError, ToolOutput, ToolSchema,
    Workspace, tool,
};
// A hand-written tool, and a hand-written argument type's schema.
pub use klaw_core::{
    Annotations, Description, EnumVariant, FnTool, ObjectSchema, Property, Schema, Text, Tool,
    ToolSpec, schemars_inline,
};
// Embedding the tools: the registry, the context's builder, what a call reports, the
// definitions per client format.
pub use klaw_core::{
    Args, CallListener, EventHook, Format, LogMessage, PreparedCall, ProgressUpdate, RegistryError,
    RegistryErrors, ToolContextBuilder, ToolEvent, ToolRegistry, definition,
};

/// The test kit (feature `testing`): a temporary workspace and a call-by-name helper.
#[cfg(feature = "testing")]
pub use klaw_core::testing;

/// What the code `#[tool]` and `#[derive(ToolSchema)]` generate reaches; not a public API.
#[doc(hidden)]
pub use klaw_core::__private;

/// The built-in tool groups (`klaw-tools`), linked in with the `builtins` feature.
#[cfg(feature = "builtins")]
pub use klaw_tools::tools;

/// The README's examples, compiled as doc tests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
