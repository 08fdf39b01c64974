//! `klaw::testing::Kit` (feature `testing`): a temporary workspace and a call by name
//! that goes through the same validation and dispatch as the engine.

use klaw::{ToolError, Workspace, tool};
use serde_json::json;

#[tool(
    name = "word_count",
    description_ru = "Считает слова в файле",
    read_only
)]
async fn word_count(ws: Workspace, path: String) -> Result<String, ToolError> {
    let text = std::fs::read_to_string(ws.root().join(&path))?;
    Ok(text.split_whitespace().count().to_string())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let kit = klaw::testing::Kit::new()?;
    kit.write("notes/today.md", "купить хлеб и молоко")?;
    let out = kit
        .call("word_count", json!({"path": "notes/today.md"}))
        .await?;
    assert_eq!(out.text(), "4");

    let err = kit
        .call("word_count", json!({"path": "missing.md"}))
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
    let err = kit
        .call_text("word_count", r#"{"path": 5}"#)
        .await
        .unwrap_err();
    assert_eq!(err.pointer(), Some("/path"));
    Ok(())
}
