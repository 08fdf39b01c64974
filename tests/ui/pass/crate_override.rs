//! `crate = "..."` on `#[tool]` and `#[schema(crate = "...")]` on the derive point the
//! generated code at another path to the framework, here the `klaw` facade through a
//! re-export, as a crate that re-exports klaw would do.

mod framework {
    pub use klaw::*;
}

use framework::{ToolError, ToolSchema, tool};

#[derive(ToolSchema, serde::Deserialize)]
#[schema(crate = "crate::framework")]
enum Level {
    Low,
    High,
}

#[tool(name = "level", description_ru = "Уровень", crate = "crate::framework")]
async fn level(level: Level) -> Result<String, ToolError> {
    Ok(match level {
        Level::Low => "low".into(),
        Level::High => "high".into(),
    })
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let registry = framework::ToolRegistry::collect().unwrap();
    let ctx = framework::ToolContext::builder().build();
    let out = rt
        .block_on(registry.execute(&ctx, "level", r#"{"level": "High"}"#))
        .unwrap();
    assert_eq!(out.text(), "high");
}
