//! `send_message`: a message to a chat of a gateway channel, if the whitelist
//! (`gateway.allowedChatIds`) lets it; otherwise an error, and nothing is sent.

use std::sync::Arc;

use klaw_tools::{Annotations, FnTool, Tool, ToolError, ToolOutput, ToolSchema, ToolSpec};
use serde_json::json;

use crate::gateway::Gateway;

/// The arguments of `send_message`.
#[derive(Debug, ToolSchema, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Args {
    /// Канал: telegram или console
    #[schema(description_en = "The channel: telegram or console")]
    #[serde(
        alias = "chanId",
        alias = "chan_id",
        alias = "channelId",
        alias = "channel_id"
    )]
    channel: String,
    /// Чат: id в канале (123456) или telegram_123456
    #[schema(description_en = "The chat: its id in the channel (123456) or telegram_123456")]
    #[serde(alias = "chat_id")]
    chat_id: String,
    /// Текст сообщения
    #[schema(description_en = "The message's text")]
    #[serde(alias = "content", alias = "message")]
    text: String,
}

/// `send_message` over `gateway`.
pub(crate) fn tool(gateway: Gateway) -> Arc<dyn Tool> {
    let spec = ToolSpec::new(
        "send_message",
        "Отправляет сообщение в чат канала (telegram, console). Чат должен быть в белом \
         списке gateway.allowedChatIds; иначе — ошибка, и ничего не отправляется.",
        serde_json::Value::Null,
    )
    .with_description_en(
        "Send a message to a chat of a channel (telegram, console). The chat must be in \
         the gateway.allowedChatIds whitelist; otherwise an error, and nothing is sent.",
    )
    .with_title("Отправить сообщение", Some("Send a message".into()))
    .with_annotations(Annotations {
        open_world: true,
        ..Default::default()
    })
    .with_origin("klaw-engine:gateway");
    Arc::new(FnTool::typed(spec, move |_ctx, args: Args| {
        let gateway = gateway.clone();
        async move {
            if args.text.trim().is_empty() {
                return Err(ToolError::invalid_arguments("/text", "empty"));
            }
            gateway
                .send(&args.channel, &args.chat_id, &args.text)
                .await
                .map_err(|e| ToolError::failed(e.to_string()))?;
            Ok(ToolOutput::json(json!({
                "success": true,
                "channel": args.channel,
                "chatId": args.chat_id,
            })))
        }
    }))
}
