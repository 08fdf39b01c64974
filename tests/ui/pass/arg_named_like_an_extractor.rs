//! `#[arg]` makes a parameter an argument even when its type is named like a built-in
//! extractor (here a `Settings` struct of the tool's own), and `#[ctx]` makes a type of
//! any name an extractor; unmarked built-in extractors are still injected.

use klaw::{FromToolContext, ToolContext, ToolError, ToolSchema, Workspace, tool};
use serde_json::json;

mod report {
    /// The tool's own settings, sent by the model.
    #[derive(serde::Deserialize, klaw::ToolSchema)]
    pub struct Settings {
        /// Заголовок
        pub title: String,
        /// Сколько строк
        pub lines: Option<u32>,
    }
}

/// A custom extractor: the caller's channel, upper-cased.
struct Channel(String);

impl FromToolContext for Channel {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        Ok(Channel(ctx.caller().channel.to_uppercase()))
    }
}

#[derive(serde::Deserialize, ToolSchema)]
struct Limits {
    /// Предел
    most: u32,
}

#[tool(name = "report_render", description_ru = "Строит отчёт")]
async fn report_render(
    /// Настройки отчёта
    #[arg]
    settings: report::Settings,
    #[ctx] channel: Channel,
    ws: Workspace,
    #[arg(rename = "limit")] limits: Limits,
) -> Result<String, ToolError> {
    let _ = ws;
    Ok(format!(
        "{} ({} lines, at most {}) via {}",
        settings.title,
        settings.lines.unwrap_or(1),
        limits.most,
        channel.0
    ))
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let registry = klaw::ToolRegistry::collect().unwrap();
        let spec = registry.by_name("report_render").unwrap().spec();
        let props = &spec.input_schema["properties"];
        assert_eq!(spec.input_schema["required"], json!(["settings", "limit"]));
        assert_eq!(props["settings"]["description"], "Настройки отчёта");
        assert_eq!(
            props["settings"]["properties"]["title"],
            json!({"type": "string", "description": "Заголовок"})
        );
        assert_eq!(props["limit"]["properties"]["most"]["description"], "Предел");
        assert!(props.get("channel").is_none() && props.get("ws").is_none());

        let ctx = ToolContext::builder()
            .workspace("/srv/ws")
            .caller(klaw::Caller::new("telegram", None))
            .build();
        let out = registry
            .execute(
                &ctx,
                "report_render",
                json!({"settings": {"title": "Итоги", "lines": 3}, "limit": {"most": 9}}),
            )
            .await
            .unwrap();
        assert_eq!(out.text(), "Итоги (3 lines, at most 9) via TELEGRAM");
    });
}
