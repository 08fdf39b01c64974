//! The integration tests of `klaw-engine`, as one test binary (issue 43): one link step
//! instead of one per file. Each file of `tests/` is a module here and keeps its own
//! name as the prefix of its tests (`cargo test -p klaw-engine --test all -- mcp::`);
//! what they share is `common` (`tests/common/`), declared once.
//!
//! Tests of different files now share one process. None sets an environment variable
//! (`set_var` is unsafe, which the workspace forbids: a test re-runs the binary with the
//! variable instead), changes the current directory or installs a global tracing
//! subscriber (`set_default` is per thread). `engine.rs`'s `#[tool]` is linked into
//! every in-process registry: `annotations.rs` and `lock.rs` leave out the tools defined
//! under `klaw-engine/tests/`, as they leave out the test fixtures (`klaw-test-fixtures`,
//! linked here and into the engine's binary by the feature `fixtures`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

// The test fixtures register their tools, resources and prompts when linked.
#[cfg(feature = "fixtures")]
use klaw_test_fixtures as _;

mod common;

mod agent;
mod annotations;
mod cli;
mod doc_drift;
mod engine;
mod imports;
mod llm;
mod lock;
mod manifests;
mod mcp;
#[cfg(feature = "memory")]
mod memory;
mod nginx;
#[cfg(feature = "render")]
mod render_remote;
mod schedule;
mod skills;
mod storage;
mod telegram;
#[cfg(feature = "telemetry")]
mod telemetry;
