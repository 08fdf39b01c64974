//! The built-in tool groups, one module per group, each behind its cargo feature.

#[cfg(feature = "utilities")]
pub mod utilities;

#[cfg(feature = "files")]
pub mod files;

#[cfg(feature = "shell")]
pub mod shell;

#[cfg(feature = "memory")]
pub mod memory;

#[cfg(feature = "docs")]
pub mod docs;
