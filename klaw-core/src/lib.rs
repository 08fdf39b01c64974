//! # klaw-core
//!
//! The core of Klaw: one attribute turns an async fn into a tool an LLM agent can call.
//! This crate is the authoring API alone (no built-in tool, no C dependency); the
//! built-in groups live in `klaw-tools`, and the `klaw` facade re-exports this crate.
//!
//! ```
//! use klaw_core::{ToolError, tool};
//!
//! /// Greets someone.
//! #[tool(name = "greet", description_ru = "Приветствует человека по имени", read_only)]
//! async fn greet(
//!     /// Имя
//!     name: String,
//! ) -> Result<String, ToolError> {
//!     Ok(format!("Привет, {name}!"))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let registry = klaw_core::ToolRegistry::collect().unwrap();
//! let ctx = klaw_core::ToolContext::builder().build();
//! let out = registry.execute(&ctx, "greet", r#"{"name": "Аня"}"#).await.unwrap();
//! assert_eq!(out.text(), "Привет, Аня!");
//! # }
//! ```
//!
//! The pieces: [`Tool`] (a spec and a call), [`ToolRegistry`] (collects every
//! `#[tool]` through `inventory`, validates, renders definitions per [`Format`],
//! dispatches), [`ToolContext`] and its extractors ([`Workspace`], [`State`], ...), and
//! [`ToolError`]. Built-in tool groups are cargo features.

extern crate self as klaw_core;

mod cache;
mod context;
mod error;
mod events;
mod lang;
mod listen;
pub mod lock;
mod registry;
mod render;
mod schema;
mod similar;
mod tool;
mod validate;

#[cfg(feature = "testing")]
pub mod testing;

pub use cache::{cache_dir, cache_dir_from};
pub use context::{
    Caller, Cancel, DataDir, FromToolContext, Limits, Settings, State, ToolContext,
    ToolContextBuilder, Workspace,
};
pub use error::{ErrorKind, ToolError};
pub use events::{EventHook, ToolEvent};
pub use klaw_macros::{ToolSchema, tool};
pub use lang::Lang;
pub use listen::{CallListener, Log, LogLevel, LogMessage, Progress, ProgressUpdate};
pub use registry::{Args, ArgsLent, PreparedCall, RegistryError, RegistryErrors, ToolRegistry};
pub use render::{Format, definition};
pub use schema::{
    Description, EnumVariant, ObjectSchema, Property, Schema, ToolSchema, schemars_inline,
};
pub use similar::by_similarity;
pub use tool::{
    Annotations, Attachment, FnTool, ResourceContent, Text, Tool, ToolOutput, ToolSpec,
};
pub use validate::{Validator, Violation, check_schema, validate};

/// What generated code and the built-in groups (`klaw-tools`) reach; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::schema::{
        Description, EnumVariant, ObjectSchema, Property, Schema, ToolSchema, bounds_error,
        schemars_inline,
    };
    pub use crate::tool::{Annotations, ToolRegistration};
    pub use crate::{FromToolContext, ToolContext, ToolError, ToolOutput};
    pub use futures_util::future::BoxFuture;
    pub use inventory;
    pub use schemars;
    pub use serde;
    pub use serde_json;
    pub use serde_json::Value;

    /// A workspace rooted at `root`, for the built-in groups (`klaw-tools`) that confine
    /// paths beneath a root other than the context's workspace.
    pub fn workspace_at(root: &std::path::Path) -> crate::Workspace {
        crate::Workspace::at(root)
    }

    /// Converts a text return value.
    pub fn text_output<T: Into<String>>(r: Result<T, ToolError>) -> Result<ToolOutput, ToolError> {
        r.map(|t| ToolOutput::plain(t))
    }

    /// Passes a `ToolOutput` through.
    pub fn output(r: Result<ToolOutput, ToolError>) -> Result<ToolOutput, ToolError> {
        r
    }

    /// Converts a structured return value.
    pub fn structured_output<T: serde::Serialize>(
        r: Result<T, ToolError>,
    ) -> Result<ToolOutput, ToolError> {
        let v = r?;
        ToolOutput::serialized(&v).map_err(|e| {
            ToolError::failed("the tool's result could not be serialized")
                .with_detail(&e)
                .with_source(e)
        })
    }
}
