//! Defaults, renames, aliases, `rename_all`, and descriptions from doc comments and
//! from `#[arg]`, as the schema shows them and as a call uses them.

use klaw::{ToolError, tool};
use serde_json::json;

#[tool(
    name = "notes_search",
    description_ru = "Ищет в памяти",
    description_en = "Searches memory",
    rename_all = "camelCase"
)]
async fn notes_search(
    /// Что искать
    ///
    /// Несколько слов.
    query: String,
    /// Сколько результатов вернуть
    #[arg(default = 5, description_en = "How many results to return")]
    top_k: u32,
    #[arg(rename = "min_score", alias = "threshold", description_ru = "Порог")] min_score: Option<
        f64,
    >,
    #[arg(default = vec!["notes".to_owned()])] in_sections: Vec<String>,
) -> Result<String, ToolError> {
    Ok(format!(
        "{query}|{top_k}|{min_score:?}|{}",
        in_sections.join(",")
    ))
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let registry = klaw::ToolRegistry::collect().unwrap();
        let spec = registry.by_name("notes_search").unwrap().spec();
        assert_eq!(spec.description.ru, "Ищет в памяти");
        assert_eq!(spec.description.en.as_deref(), Some("Searches memory"));
        let schema = &spec.input_schema;
        let props = schema["properties"].as_object().unwrap();
        let names: Vec<&str> = props.keys().map(String::as_str).collect();
        for n in ["query", "topK", "min_score", "inSections"] {
            assert!(names.contains(&n), "{n} in {names:?}");
        }
        assert_eq!(props.len(), 4);
        assert_eq!(schema["required"], json!(["query"]));
        assert_eq!(
            props["query"]["description"],
            "Что искать\n\nНесколько слов."
        );
        assert_eq!(props["topK"]["description"], "Сколько результатов вернуть");
        assert_eq!(props["topK"]["default"], 5);
        assert_eq!(props["min_score"]["description"], "Порог");
        assert_eq!(props["inSections"]["default"], json!(["notes"]));

        // English descriptions appear in English renderings.
        let en = klaw::definition(spec, klaw::Format::Anthropic, klaw::Lang::En);
        assert_eq!(en["description"], "Searches memory");
        assert_eq!(
            en["input_schema"]["properties"]["topK"]["description"],
            "How many results to return"
        );

        let ctx = klaw::ToolContext::builder().build();
        let call = |args| registry.execute(&ctx, "notes_search", args);

        // Defaults fill in what is left out.
        let out = call(json!({"query": "кот"})).await.unwrap();
        assert_eq!(out.text(), "кот|5|None|notes");

        // The snake_case name survives rename_all as an alias; `threshold` is an alias.
        let out = call(json!({"query": "кот", "top_k": 2, "threshold": 0.5, "inSections": []}))
            .await
            .unwrap();
        assert_eq!(out.text(), "кот|2|Some(0.5)|");

        // Sending a name and its alias together is refused.
        let err = call(json!({"query": "кот", "topK": 1, "top_k": 2}))
            .await
            .unwrap_err();
        assert!(err.is_invalid_arguments(), "{err}");
    });
}
