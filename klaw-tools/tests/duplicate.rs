//! Two tools with one name (say, from two crates) stop start-up with a message that
//! names the tool and both places it is defined.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use klaw_tools::{ToolError, ToolRegistry, tool};

#[tool(
    name = "current_time",
    description_ru = "Второй инструмент с занятым именем"
)]
async fn another_clock() -> Result<String, ToolError> {
    Ok("tick".into())
}

#[test]
fn a_duplicate_name_fails_collection_naming_both_definitions() {
    let err = ToolRegistry::collect().expect_err("duplicate names must not load");
    assert_eq!(err.0.len(), 1, "{err}");
    let e = &err.0[0];
    assert_eq!(e.tool, "current_time");
    let text = err.to_string();
    assert!(
        text.starts_with("1 tool(s) failed validation:\n  tool `current_time` ("),
        "{text}"
    );
    assert!(
        text.contains("the name is already taken by the tool defined at"),
        "{text}"
    );
    assert!(
        text.contains("klaw-tools/src/tools/utilities.rs")
            && text.contains("klaw-tools/tests/duplicate.rs"),
        "{text}"
    );
}
