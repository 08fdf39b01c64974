//! `#[arg(schemars)]` takes the schema of a `schemars::JsonSchema` type, produced at
//! start-up with every `$ref` inlined, next to ordinary compile-time arguments.

use klaw::{ToolError, tool};
use serde_json::json;

#[derive(schemars::JsonSchema, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Shape {
    Circle { radius: f64 },
    Rect { size: Size },
}

#[derive(schemars::JsonSchema, serde::Deserialize)]
struct Size {
    width: f64,
    height: f64,
}

#[tool(name = "area", description_ru = "Площадь фигуры")]
async fn area(
    /// Фигура
    #[arg(schemars)]
    shape: Shape,
    #[arg(schemars)] scale: Option<Size>,
    /// Точность
    digits: Option<u8>,
) -> Result<String, ToolError> {
    let a = match shape {
        Shape::Circle { radius } => std::f64::consts::PI * radius * radius,
        Shape::Rect { size } => size.width * size.height,
    };
    let k = scale.map_or(1.0, |s| s.width * s.height);
    Ok(format!("{:.*}", usize::from(digits.unwrap_or(1)), a * k))
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let registry = klaw::ToolRegistry::collect().unwrap();
        let spec = registry.by_name("area").unwrap().spec();
        let text = spec.input_schema.to_string();
        assert!(!text.contains("$ref"), "{text}");
        assert!(!text.contains("$defs"), "{text}");
        assert_eq!(spec.input_schema["required"], json!(["shape"]));
        assert_eq!(
            spec.input_schema["properties"]["shape"]["description"],
            "Фигура"
        );
        assert!(text.contains("\"circle\""), "{text}");

        let ctx = klaw::ToolContext::builder().build();
        let out = registry
            .execute(
                &ctx,
                "area",
                json!({"shape": {"kind": "rect", "size": {"width": 2.0, "height": 3.0}}}),
            )
            .await
            .unwrap();
        assert_eq!(out.text(), "6.0");
        let out = registry
            .execute(
                &ctx,
                "area",
                json!({
                    "shape": {"kind": "circle", "radius": 1.0},
                    "scale": {"width": 1.0, "height": 2.0},
                    "digits": 3,
                }),
            )
            .await
            .unwrap();
        assert_eq!(out.text(), "6.283");
    });
}
