//! `ToolOutput` is passed through untouched; `timeout` bounds a call; annotations reach
//! the spec.

use std::time::Duration;

use klaw::{ToolError, ToolOutput, tool};
use serde_json::json;

#[tool(
    name = "note_delete",
    description_ru = "Удаляет заметку",
    destructive,
    idempotent,
    timeout = "2m"
)]
async fn note_delete(title: String) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::json(json!({"deleted": title})))
}

#[tool(
    name = "slow",
    description_ru = "Долго думает",
    read_only,
    timeout = "50ms"
)]
async fn slow() -> Result<&'static str, ToolError> {
    tokio::time::sleep(Duration::from_secs(5)).await;
    Ok("никогда")
}

#[tool(name = "fails", description_ru = "Всегда отказывает")]
async fn fails(path: String) -> Result<String, ToolError> {
    Err(ToolError::not_found(format!("нет файла {path}")).with_detail("ENOENT"))
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let registry = klaw::ToolRegistry::collect().unwrap();
        let ctx = klaw::ToolContext::builder().build();

        let spec = registry.by_name("note_delete").unwrap().spec();
        assert_eq!(spec.timeout, Some(Duration::from_secs(120)));
        assert!(spec.annotations.destructive && spec.annotations.idempotent);
        assert!(!spec.annotations.read_only);
        // A ToolOutput is not a schema'd value: no output schema.
        assert!(spec.output_schema.is_none());
        let out = registry
            .execute(&ctx, "note_delete", json!({"title": "план"}))
            .await
            .unwrap();
        assert_eq!(out.structured(), Some(&json!({"deleted": "план"})));

        let spec = registry.by_name("slow").unwrap().spec();
        assert_eq!(spec.timeout, Some(Duration::from_millis(50)));
        assert_eq!(spec.input_schema["properties"], json!({}));
        let err = registry.execute(&ctx, "slow", "").await.unwrap_err();
        assert!(err.is_timeout(), "{err}");

        let err = registry
            .execute(&ctx, "fails", json!({"path": "a.md"}))
            .await
            .unwrap_err();
        assert!(err.is_not_found());
        assert_eq!(err.message(), "нет файла a.md");
        assert_eq!(err.detail(), Some("ENOENT"));
        assert_eq!(err.tool(), Some("fails"));
    });
}
