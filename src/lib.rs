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
//! This crate re-exports [`klaw_core`], the authoring API; the built-in tool groups
//! (`klaw-tools`) are opt-in, as [`tools`] with the `builtins` feature. See
//! `doc/writing-tools.md` for every attribute.

extern crate self as klaw;

pub use klaw_core::*;

/// The built-in tool groups (`klaw-tools`), linked in with the `builtins` feature.
#[cfg(feature = "builtins")]
pub use klaw_tools::tools;

/// The README's examples, compiled as doc tests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
