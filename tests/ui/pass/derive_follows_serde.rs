//! `#[derive(ToolSchema)]` follows the type's serde attributes, so whatever the schema
//! accepts, serde reads: rename, rename_all, default, skip, on structs and enums.

use klaw::{ToolError, ToolSchema, tool};
use serde_json::json;

/// Настройки заметки
#[derive(Debug, ToolSchema, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct NoteOptions {
    /// Заголовок
    #[schema(description_en = "Title")]
    title_text: String,
    /// Метки
    #[serde(default)]
    tag_list: Vec<String>,
    /// Важность
    #[serde(rename = "prio")]
    priority: Priority,
    #[serde(skip)]
    cache: Option<String>,
}

/// Важность
#[derive(Debug, ToolSchema, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
enum Priority {
    /// Низкая
    Low,
    /// Высокая
    #[serde(rename = "URGENT")]
    High,
    #[serde(skip)]
    #[allow(dead_code)]
    Internal,
}

/// Всё необязательно
#[derive(Debug, Default, ToolSchema, serde::Deserialize)]
#[serde(default)]
struct Paging {
    offset: u32,
    limit: Option<u32>,
}

#[tool(name = "note_create", description_ru = "Создаёт заметку")]
async fn note_create(options: NoteOptions, paging: Paging) -> Result<String, ToolError> {
    assert!(options.cache.is_none());
    Ok(format!("{options:?} {paging:?}"))
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let registry = klaw::ToolRegistry::collect().unwrap();
        let schema = &registry.by_name("note_create").unwrap().spec().input_schema;
        let options = &schema["properties"]["options"];
        assert_eq!(
            options["properties"].as_object().unwrap().keys().collect::<Vec<_>>(),
            ["titleText", "tagList", "prio"]
        );
        assert_eq!(options["required"], json!(["titleText", "prio"]));
        assert_eq!(options["properties"]["titleText"]["description"], "Заголовок");
        // Variant doc comments reach the schema: one described `const` per value.
        assert_eq!(
            options["properties"]["prio"]["oneOf"],
            json!([
                {"const": "LOW", "description": "Низкая"},
                {"const": "URGENT", "description": "Высокая"},
            ])
        );
        assert_eq!(schema["properties"]["paging"]["required"], json!([]));

        let ctx = klaw::ToolContext::builder().build();
        let out = registry
            .execute(
                &ctx,
                "note_create",
                json!({"options": {"titleText": "План", "prio": "URGENT"}, "paging": {}}),
            )
            .await
            .unwrap();
        assert_eq!(
            out.text(),
            r#"NoteOptions { title_text: "План", tag_list: [], priority: High, cache: None } Paging { offset: 0, limit: None }"#
        );
        let err = registry
            .execute(
                &ctx,
                "note_create",
                json!({"options": {"titleText": "План", "prio": "High"}, "paging": {}}),
            )
            .await
            .unwrap_err();
        assert_eq!(err.pointer(), Some("/options/prio"), "{err}");
    });
}
