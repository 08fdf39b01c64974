//! A tool crate that names only `klaw`: the attribute, the derive and the generated
//! code need nothing else; then the tool is found by the registry and called by name.

use klaw::{ToolError, ToolSchema, tool};

/// Единица
#[derive(ToolSchema, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Unit {
    /// Градусы Цельсия
    Celsius,
    /// Градусы Фаренгейта
    Fahrenheit,
}

#[tool(
    name = "convert",
    description_ru = "Переводит температуру",
    read_only,
    idempotent
)]
async fn convert(
    /// Значение
    value: f64,
    /// В какую шкалу
    to: Unit,
) -> Result<String, ToolError> {
    Ok(match to {
        Unit::Celsius => format!("{:.1}", (value - 32.0) * 5.0 / 9.0),
        Unit::Fahrenheit => format!("{:.1}", value * 9.0 / 5.0 + 32.0),
    })
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let registry = klaw::ToolRegistry::collect().unwrap();
        let spec = registry.by_name("convert").unwrap().spec();
        assert_eq!(
            spec.input_schema,
            serde_json::json!({
                "type": "object",
                "properties": {
                    "value": {"type": "number", "description": "Значение"},
                    "to": {
                        "type": "string",
                        "oneOf": [
                            {"const": "celsius", "description": "Градусы Цельсия"},
                            {"const": "fahrenheit", "description": "Градусы Фаренгейта"},
                        ],
                        "description": "В какую шкалу",
                    },
                },
                "required": ["value", "to"],
                "additionalProperties": false,
            })
        );
        assert!(spec.annotations.read_only && spec.annotations.idempotent);

        let ctx = klaw::ToolContext::builder().build();
        let out = registry
            .execute(&ctx, "convert", r#"{"value": 100, "to": "celsius"}"#)
            .await
            .unwrap();
        assert_eq!(out.text(), "37.8");

        let err = registry
            .execute(&ctx, "convert", r#"{"value": 100, "to": "kelvin"}"#)
            .await
            .unwrap_err();
        assert_eq!(err.pointer(), Some("/to"), "{err}");
    });
}
