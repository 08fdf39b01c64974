//! The `gateway` section of `engine.json`: the channels `klaw-engine run` serves (Telegram)
//! and the chats it may talk to.

use super::Secret;
use super::keys::{http_or_https, section};

section! {
    /// The `gateway` section of `engine.json`: the channels `klaw-engine run` serves and
    /// the chats it may talk to. Every key is optional.
    pub struct GatewaySection {
        keys {
            /// The chats the agent may receive from and send to, as `<channel>_<id>`
            /// (`telegram_123456`); others get nothing and are logged. The console is
            /// always allowed.
            allowed_chat_ids: Vec<String> = Vec::new();
                key "allowedChatIds", env "KLAW_ALLOWED_CHAT_IDS",
                type "array of strings";
            /// The Telegram bot's token (from @BotFather); Telegram is served when it is
            /// set. Never printed (`config` shows `"***"`).
            telegram_token: Option<Secret> = None;
                key "telegramToken", env "KLAW_TELEGRAM_TOKEN", type "string or `null`";
            /// The Bot API's base URL (a Bot API server of your own, or a test server).
            telegram_base_url: String = "https://api.telegram.org".into();
                key "telegramBaseUrl", env "KLAW_TELEGRAM_BASE_URL", type "string (URL)",
                check gateway_url;
            /// How long one `getUpdates` long poll waits for messages, in seconds.
            telegram_poll_seconds: u64 = 30;
                key "telegramPollSeconds", env "KLAW_TELEGRAM_POLL_SECONDS",
                type "integer, 1 to 50", check poll_range;
        }
    }
}

#[allow(clippy::ptr_arg)] // a key's check takes the field's own type
fn gateway_url(url: &String, _: &GatewaySection) -> Result<(), String> {
    http_or_https(url)
}

fn poll_range(n: &u64, _: &GatewaySection) -> Result<(), String> {
    if (1..=50).contains(n) {
        Ok(())
    } else {
        Err(format!("{n} is not between 1 and 50"))
    }
}
