//! The same with only `klaw_tools`, the core crate, as a tool crate that does not
//! depend on the facade would write it.

use klaw_tools::{State, ToolError, ToolSchema, tool};

/// Запрос
#[derive(ToolSchema, serde::Deserialize)]
struct Query {
    /// Текст
    text: String,
    /// Максимум
    #[serde(default)]
    limit: u8,
}

struct Index(Vec<&'static str>);

#[tool(name = "index_find", description_ru = "Ищет в индексе", read_only)]
async fn index_find(index: State<Index>, query: Query) -> Result<Vec<String>, ToolError> {
    let limit = if query.limit == 0 {
        usize::MAX
    } else {
        usize::from(query.limit)
    };
    let Index(entries) = &*index;
    Ok(entries
        .iter()
        .filter(|s| s.contains(&query.text))
        .take(limit)
        .map(|s| (*s).to_owned())
        .collect())
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let registry = klaw_tools::ToolRegistry::collect().unwrap();
        let spec = registry.by_name("index_find").unwrap().spec();
        let query = &spec.input_schema["properties"]["query"];
        assert_eq!(query["type"], "object");
        assert_eq!(query["required"], serde_json::json!(["text"]));
        assert_eq!(query["properties"]["limit"]["maximum"], 255);

        let ctx = klaw_tools::ToolContext::builder()
            .service(Index(vec!["кот", "котлета", "пёс"]))
            .build();
        let out = registry
            .execute(
                &ctx,
                "index_find",
                serde_json::json!({"query": {"text": "кот"}}),
            )
            .await
            .unwrap();
        assert_eq!(
            out.structured(),
            Some(&serde_json::json!({"result": ["кот", "котлета"]}))
        );
    });
}
