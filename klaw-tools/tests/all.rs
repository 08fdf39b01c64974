//! The integration tests of `klaw-tools`, as one test binary (issue 43): one link step
//! instead of one per file. Each file of `tests/` is a module here and keeps its own
//! name as the prefix of its tests (`cargo test -p klaw-tools --test all -- shell::`).
//! Its own binary still: `duplicate.rs` (its second `current_time` makes every
//! `ToolRegistry::collect()` of this process fail, which is what it tests). The memory
//! tests are in `klaw-memory` (one binary there too).
//!
//! Tests of different files now share one process. None sets an environment variable
//! (`set_var` is unsafe, which the workspace forbids: a test re-runs this binary with the
//! variable, naming its probe by its full path, `shell::bwrap::environment_probe`),
//! changes the current directory or a resource limit of this process. `execute.rs`'s
//! `#[tool]`s are in every collected registry: `definitions.rs` snapshots the built-in
//! tools only, those not defined under `klaw-tools/tests/`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod definitions;
#[cfg(all(feature = "docs", feature = "testing"))]
mod docs;
#[cfg(feature = "testing")]
mod execute;
#[cfg(all(feature = "files", feature = "testing"))]
mod files;
#[cfg(feature = "files")]
mod files_crash;
#[cfg(feature = "files")]
mod files_hostile;
#[cfg(all(feature = "shell", feature = "testing"))]
mod shell;
#[cfg(all(feature = "web", feature = "testing"))]
mod web;
