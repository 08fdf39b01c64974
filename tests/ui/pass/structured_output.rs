//! A tool that returns a value gets an output schema, and its result carries both text
//! and structured content; a non-object value is wrapped as `{"result": ...}`.

use klaw::{ToolError, ToolSchema, tool};
use serde::Serialize;
use serde_json::json;

/// Погода
#[derive(Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
struct Weather {
    /// Температура, °C
    temperature_c: f64,
    /// Описание
    summary: String,
    #[serde(skip)]
    #[allow(dead_code)]
    internal: u8,
}

#[tool(
    name = "weather_now",
    description_ru = "Текущая погода",
    read_only,
    open_world
)]
async fn weather_now(
    /// Город
    city: String,
) -> Result<Weather, ToolError> {
    Ok(Weather {
        temperature_c: -3.5,
        summary: format!("снег в городе {city}"),
        internal: 0,
    })
}

#[tool(name = "primes", description_ru = "Первые простые числа")]
async fn primes(count: usize) -> Result<Vec<u32>, ToolError> {
    Ok([2, 3, 5, 7, 11].into_iter().take(count).collect())
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let registry = klaw::ToolRegistry::collect().unwrap();
        let ctx = klaw::ToolContext::builder().build();

        let spec = registry.by_name("weather_now").unwrap().spec();
        let out_schema = spec.output_schema.as_ref().unwrap();
        assert_eq!(out_schema["type"], "object");
        assert_eq!(out_schema["properties"]["temperatureC"]["type"], "number");
        assert_eq!(
            out_schema["properties"]["temperatureC"]["description"],
            "Температура, °C"
        );
        assert!(out_schema["properties"].get("internal").is_none());
        assert_eq!(out_schema["required"], json!(["temperatureC", "summary"]));
        assert!(spec.annotations.read_only && spec.annotations.open_world);
        assert!(!spec.annotations.destructive && !spec.annotations.idempotent);

        let out = registry
            .execute(&ctx, "weather_now", json!({"city": "Тверь"}))
            .await
            .unwrap();
        let expected = json!({"temperatureC": -3.5, "summary": "снег в городе Тверь"});
        assert_eq!(out.structured(), Some(&expected));
        let text: serde_json::Value = serde_json::from_str(out.text()).unwrap();
        assert_eq!(text, expected);

        let spec = registry.by_name("primes").unwrap().spec();
        assert_eq!(
            spec.output_schema.as_ref().unwrap()["properties"]["result"]["type"],
            "array"
        );
        let out = registry
            .execute(&ctx, "primes", json!({"count": 3}))
            .await
            .unwrap();
        assert_eq!(out.structured(), Some(&json!({"result": [2, 3, 5]})));
    });
}
