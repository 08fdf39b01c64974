//! A tool that takes every kind of argument the schema knows, called through the
//! registry: the schema says what each parameter is, and the values arrive intact.

use klaw::{ToolError, ToolSchema, tool};
use serde_json::{Value, json};

/// Сортировка
#[derive(Debug, PartialEq, ToolSchema, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
enum Order {
    /// По возрастанию
    Ascending,
    /// По убыванию
    Descending,
}

/// Окно выборки
#[derive(Debug, PartialEq, ToolSchema, serde::Deserialize, serde::Serialize)]
struct Window {
    /// Смещение
    offset: u32,
    /// Размер
    size: Option<u16>,
}

#[allow(clippy::too_many_arguments)]
#[tool(name = "every_kind", description_ru = "Принимает аргументы всех видов")]
async fn every_kind(
    s: String,
    b: bool,
    i8_: i8,
    i16_: i16,
    i32_: i32,
    i64_: i64,
    i128_: i128,
    isize_: isize,
    u8_: u8,
    u16_: u16,
    u32_: u32,
    u64_: u64,
    u128_: u128,
    usize_: usize,
    f32_: f32,
    f64_: f64,
    maybe: Option<String>,
    list: Vec<u8>,
    nested: Vec<Option<bool>>,
    any: Value,
    order: Order,
    window: Window,
    path: std::path::PathBuf,
    boxed: Box<i32>,
) -> Result<String, ToolError> {
    let v = json!([
        s,
        b,
        i8_,
        i16_,
        i32_,
        i64_,
        i128_ as i64,
        isize_,
        u8_,
        u16_,
        u32_,
        u64_,
        u128_ as u64,
        usize_,
        f32_,
        f64_,
        maybe,
        list,
        nested,
        any,
        order,
        window,
        path,
        *boxed
    ]);
    Ok(v.to_string())
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let registry = klaw::ToolRegistry::collect().unwrap();
        let spec = registry.by_name("every_kind").unwrap().spec().clone();
        let schema = &spec.input_schema;
        let props = &schema["properties"];
        let ty = |name: &str| props[name]["type"].clone();

        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(ty("s"), "string");
        assert_eq!(ty("b"), "boolean");
        for int in [
            "i8_", "i16_", "i32_", "i64_", "i128_", "isize_", "u8_", "u16_", "u32_", "u64_",
            "u128_", "usize_",
        ] {
            assert_eq!(ty(int), "integer", "{int}");
        }
        assert_eq!(props["u8_"]["minimum"], 0);
        assert_eq!(props["u8_"]["maximum"], 255);
        assert_eq!(props["i8_"]["minimum"], -128);
        assert_eq!(ty("f32_"), "number");
        assert_eq!(ty("f64_"), "number");
        assert_eq!(ty("maybe"), json!(["string", "null"]));
        assert_eq!(ty("list"), "array");
        assert_eq!(props["list"]["items"]["type"], "integer");
        assert_eq!(props["nested"]["items"]["type"], json!(["boolean", "null"]));
        assert_eq!(props["any"], json!({}));
        assert_eq!(
            props["order"]["oneOf"],
            json!([
                {"const": "ascending", "description": "По возрастанию"},
                {"const": "descending", "description": "По убыванию"},
            ])
        );
        assert_eq!(props["window"]["type"], "object");
        assert_eq!(props["window"]["properties"]["offset"]["type"], "integer");
        assert_eq!(
            props["window"]["properties"]["offset"]["description"],
            "Смещение"
        );
        assert_eq!(props["window"]["required"], json!(["offset"]));
        assert_eq!(ty("path"), "string");
        assert_eq!(ty("boxed"), "integer");

        // Everything but the Option is required, in declaration order.
        let required: Vec<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(required.len(), 23);
        assert!(!required.contains(&"maybe"));
        assert_eq!(required[0], "s");
        assert_eq!(required[22], "boxed");

        let ctx = klaw::ToolContext::builder().build();
        let args = json!({
            "s": "текст", "b": true, "i8_": -8, "i16_": -16, "i32_": -32, "i64_": -64,
            "i128_": 128, "isize_": -1, "u8_": 8, "u16_": 16, "u32_": 32, "u64_": 64,
            "u128_": 128, "usize_": 1, "f32_": 0.5, "f64_": 2.25,
            "list": [1, 2], "nested": [true, null], "any": {"k": [1]},
            "order": "descending", "window": {"offset": 3}, "path": "a/b.txt", "boxed": 7
        });
        let out = registry.execute(&ctx, "every_kind", args).await.unwrap();
        let got: Value = serde_json::from_str(out.text()).unwrap();
        assert_eq!(
            got,
            json!([
                "текст", true, -8, -16, -32, -64, 128, -1, 8, 16, 32, 64, 128, 1, 0.5, 2.25,
                null, [1, 2], [true, null], {"k": [1]}, "descending",
                {"offset": 3, "size": null}, "a/b.txt", 7
            ])
        );
        assert!(out.structured().is_none());

        // The schema is enforced before the function runs.
        let err = registry
            .execute(&ctx, "every_kind", json!({"s": 1}))
            .await
            .unwrap_err();
        assert!(err.is_invalid_arguments(), "{err}");
    });
}
