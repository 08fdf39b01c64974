//! The built-in tools against their committed schema lock (`klaw-engine/tools.lock.json`,
//! issue 33): the registry as `chat` assembles it — the groups, the engine's own tools,
//! `render_js` whether or not this machine has a browser — without the test-only
//! fixtures. Any change fails with each change in plain words (a breaking one breaks
//! prompts, MCP clients and saved conversations); `KLAW_UPDATE_LOCK=1` accepts them.

#![cfg(all(
    feature = "memory",
    feature = "docs",
    feature = "skills",
    feature = "render"
))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::sync::Arc;

use klaw_tools::ToolRegistry;

use crate::common;
use common::assembled;

#[test]
fn the_built_in_tools_match_their_lock() {
    let (_dir, engine) = assembled();
    let mut registry = ToolRegistry::new();
    for tool in engine.registry().all() {
        // Not the fixtures, nor a tool another test file of this binary defines.
        let origin = &tool.spec().origin;
        if !origin.starts_with("klaw-test-fixtures/") && !origin.starts_with("klaw-engine/tests/") {
            registry.register(Arc::clone(tool)).unwrap();
        }
    }
    // Offered only where a browser is found; its contract is the same everywhere.
    if registry.by_name("render_js").is_none() {
        registry
            .register(klaw_tools::tools::web::render_js_tool("chromium".into()))
            .unwrap();
    }
    let lock = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tools.lock.json");
    klaw_tools::testing::assert_tools_lock(&registry, lock);
}
