//! `#[arg(minimum, maximum)]`: the schema shows the bounds instead of the type's own,
//! and a call outside them is refused before the function runs.

use klaw::{ToolError, tool};
use serde_json::json;

#[tool(name = "search", description_ru = "Ищет в памяти", rename_all = "camelCase")]
async fn search(
    #[arg(default = 10, minimum = 1, maximum = 50)] top_k: u32,
    #[arg(minimum = 0, maximum = 1)] min_score: Option<f64>,
    #[arg(minimum = -90, maximum = 90)] latitude: Option<i16>,
    #[arg(maximum = 1000)] offset: u64,
) -> Result<String, ToolError> {
    assert!((1..=50).contains(&top_k), "the registry lets {top_k} through");
    Ok(format!("{top_k} {min_score:?} {latitude:?} {offset}"))
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let registry = klaw::ToolRegistry::collect().unwrap();
        let schema = &registry.by_name("search").unwrap().spec().input_schema;
        let props = &schema["properties"];
        assert_eq!(
            props["topK"],
            json!({"type": "integer", "minimum": 1, "maximum": 50, "default": 10})
        );
        assert_eq!(
            props["minScore"],
            json!({"type": ["number", "null"], "minimum": 0, "maximum": 1})
        );
        assert_eq!(
            props["latitude"],
            json!({"type": ["integer", "null"], "minimum": -90, "maximum": 90})
        );
        // Only `maximum` given: the type's minimum stays.
        assert_eq!(
            props["offset"],
            json!({"type": "integer", "minimum": 0, "maximum": 1000})
        );

        let ctx = klaw::ToolContext::builder().build();
        let call = |args| registry.execute(&ctx, "search", args);
        let out = call(json!({"topK": 50, "minScore": 0.5, "offset": 0}))
            .await
            .unwrap();
        assert_eq!(out.text(), "50 Some(0.5) None 0");
        for (args, says) in [
            (json!({"topK": 0, "offset": 0}), "/topK: expected a number ≥ 1, got 0"),
            (json!({"topK": 51, "offset": 0}), "/topK: expected a number ≤ 50, got 51"),
            (json!({"minScore": 1.5, "offset": 0}), "/minScore: expected a number ≤ 1, got 1.5"),
            (json!({"latitude": -91, "offset": 0}), "/latitude: expected a number ≥ -90, got -91"),
            (json!({"offset": 1001}), "/offset: expected a number ≤ 1000, got 1001"),
        ] {
            let e = call(args).await.unwrap_err();
            assert!(e.is_invalid_arguments(), "{e}");
            assert_eq!(e.message(), says);
        }
    });
}
