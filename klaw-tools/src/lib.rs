//! # klaw-tools
//!
//! Klaw's built-in tool groups (files, shell, web, skills, docs, memory, utilities), one
//! cargo feature each, written on `klaw-core`, which this crate re-exports whole: a path
//! such as `klaw_tools::ToolRegistry` names the same item as `klaw_core::ToolRegistry`.
//!
//! ```
//! let registry = klaw_tools::ToolRegistry::collect().unwrap();
//! # let _ = registry;
//! ```
//!
//! A tool author needs none of this: depend on `klaw` (or `klaw-core`) alone.

extern crate self as klaw_tools;

pub use klaw_core::*;

pub mod tools;
