//! Every built-in context extractor, `State<T>` and a custom `#[ctx]` extractor are
//! injected, and none of them appears in the schema.

use std::time::Duration;

use klaw::{
    Caller, Cancel, DataDir, FromToolContext, Lang, Limits, Settings, State, ToolContext,
    ToolError, Workspace, tool,
};
use serde_json::json;

struct Greeter {
    greeting: &'static str,
}

/// A custom extractor: the caller's chat, or an error the model can read.
struct ChatId(String);

impl FromToolContext for ChatId {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        ctx.caller()
            .chat_id
            .clone()
            .map(ChatId)
            .ok_or_else(|| ToolError::unavailable("this tool works only inside a chat"))
    }
}

#[allow(clippy::too_many_arguments)]
#[tool(
    name = "context_report",
    description_ru = "Сообщает, что известно из контекста"
)]
async fn context_report(
    ws: Workspace,
    data: DataDir,
    limits: Limits,
    settings: Settings,
    caller: Caller,
    cancel: Cancel,
    greeter: State<Greeter>,
    ctx: ToolContext,
    #[ctx] chat: ChatId,
    /// Имя
    name: String,
) -> Result<String, ToolError> {
    Ok(json!({
        "workspace": ws.root(),
        "data": data.path(),
        "max_file": limits.max_file_size_bytes,
        "timeout_s": limits.tool_timeout.as_secs(),
        "timezone": settings.timezone,
        "channel": caller.channel,
        "chat": chat.0,
        "cancelled": cancel.0.is_cancelled(),
        "greeting": format!("{}, {name}", greeter.greeting),
        "same_workspace": ctx.workspace() == ws.root(),
    })
    .to_string())
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let registry = klaw::ToolRegistry::collect().unwrap();
        let spec = registry.by_name("context_report").unwrap().spec();
        assert_eq!(
            spec.input_schema,
            json!({
                "type": "object",
                "properties": {"name": {"type": "string", "description": "Имя"}},
                "required": ["name"],
                "additionalProperties": false,
            })
        );

        let ctx = ToolContext::builder()
            .workspace("/srv/ws")
            .data_dir("/srv/data")
            .limits(
                Limits::default()
                    .with_max_file_size_bytes(10)
                    .with_tool_timeout(Duration::from_secs(7)),
            )
            .settings(Settings::new("Europe/Moscow", Lang::Ru))
            .caller(Caller::new("telegram", Some("42".into())))
            .service(Greeter {
                greeting: "Привет"
            })
            .build();
        let out = registry
            .execute(&ctx, "context_report", json!({"name": "Аня"}))
            .await
            .unwrap();
        let got: serde_json::Value = serde_json::from_str(out.text()).unwrap();
        assert_eq!(
            got,
            json!({
                "workspace": "/srv/ws",
                "data": "/srv/data",
                "max_file": 10,
                "timeout_s": 7,
                "timezone": "Europe/Moscow",
                "channel": "telegram",
                "chat": "42",
                "cancelled": false,
                "greeting": "Привет, Аня",
                "same_workspace": true,
            })
        );

        // A missing service or a failing extractor is an error for the model, not a panic.
        let bare = ToolContext::builder()
            .workspace("/srv/ws")
            .data_dir("/srv/data")
            .caller(Caller::new("console", None))
            .build();
        let err = registry
            .execute(&bare, "context_report", json!({"name": "Аня"}))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), &klaw::ErrorKind::Unavailable, "{err}");
    });
}
