//! The gateway: the channels people talk to the agent through (the console, Telegram),
//! behind one [`Channel`] trait, and the whitelist every message in and out is checked
//! against (`gateway.allowedChatIds`). `send_message` and the answers of `klaw-engine
//! run` go out through it; a chat off the whitelist gets nothing and is logged.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::Engine;

pub mod inbox;
pub mod telegram;

pub use inbox::{Begin, Claimed, InboxError, InboxStore, PgInbox, SqliteInbox};

/// A message that arrived on a channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    /// The channel's name (`telegram`).
    pub channel: String,
    /// The chat's id within the channel (`123456`).
    pub chat_id: String,
    /// Who wrote it, for logs.
    pub from: String,
    /// What they wrote.
    pub text: String,
    /// The channel's id of the message when the channel keeps it until it is handled
    /// (Telegram's `update_id`); see [`Channel::handled`].
    pub receipt: Option<i64>,
}

impl Incoming {
    /// The chat's gateway id: `<channel>_<chat id>` (`telegram_123456`), the form of
    /// `gateway.allowedChatIds` and of the agent's conversations.
    pub fn key(&self) -> String {
        chat_key(&self.channel, &self.chat_id)
    }
}

/// `<channel>_<chat id>`; a chat id that already has the prefix is kept.
pub fn chat_key(channel: &str, chat_id: &str) -> String {
    if chat_id.starts_with(&format!("{channel}_")) {
        chat_id.to_owned()
    } else {
        format!("{channel}_{chat_id}")
    }
}

/// Why a channel could not deliver (or fetch) messages. Its text never holds a secret of
/// the channel: endpoints are shown masked (`https://api.telegram.org/bot***/sendMessage`)
/// and the sources carry no URL.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChannelError {
    /// The request did not reach the service, or its answer could not be read.
    #[error("{endpoint}: {detail}")]
    Transport {
        /// The endpoint asked, masked.
        endpoint: String,
        /// What happened, from the innermost cause (refused, DNS, TLS, timed out).
        detail: String,
        /// The HTTP client's error, without its URL.
        source: reqwest::Error,
    },
    /// The service answered with something that is not JSON.
    #[error("{endpoint} answered {status} with something that is not JSON ({source}): {body}")]
    NotJson {
        /// The endpoint asked, masked.
        endpoint: String,
        /// The HTTP status.
        status: u16,
        /// The start of the body, on one line.
        body: String,
        /// Why it is not JSON.
        source: serde_json::Error,
    },
    /// The service refused the request (`ok: false`).
    #[error("{endpoint} answered {status}: {description}")]
    Refused {
        /// The endpoint asked, masked.
        endpoint: String,
        /// The HTTP status.
        status: u16,
        /// The service's description of the error.
        description: String,
    },
    /// What was received could not be kept in the gateway's inbox.
    #[error(transparent)]
    Inbox(#[from] InboxError),
}

impl ChannelError {
    /// The HTTP status the service answered with, when it answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Transport { .. } | Self::Inbox(_) => None,
            Self::NotJson { status, .. } | Self::Refused { status, .. } => Some(*status),
        }
    }
}

/// Why the gateway could not be built or could not send.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// No channel has that name.
    #[error("channel not found: `{channel}`; channels: {}", known.join(", "))]
    UnknownChannel {
        /// The name asked for.
        channel: String,
        /// The channels there are, sorted.
        known: Vec<String>,
    },
    /// The chat is not in `gateway.allowedChatIds`; nothing was sent.
    #[error("the chat `{chat}` is not in gateway.allowedChatIds; nothing was sent")]
    ChatNotAllowed {
        /// The chat's gateway id (`telegram_7`).
        chat: String,
    },
    /// A channel's HTTP client could not be built.
    #[error("cannot start the HTTP client: {source}")]
    Client {
        /// The channel (`telegram`).
        channel: String,
        /// The HTTP client's error.
        source: reqwest::Error,
    },
    /// The channel failed to deliver the message.
    #[error("failed to send the message: {source}")]
    Send {
        /// The channel (`telegram`).
        channel: String,
        /// Why.
        source: ChannelError,
    },
    /// The PostgreSQL of `storage.url`, where the inbox is shared, cannot be used.
    #[error("the gateway's inbox: {0}")]
    Storage(#[from] crate::storage::StorageError),
    /// `send_message` could not be registered with the engine.
    #[error("cannot register send_message: {0}")]
    Register(#[source] klaw_tools::RegistryError),
}

impl GatewayError {
    /// Whether the message was refused by the whitelist (`gateway.allowedChatIds`).
    pub fn is_not_allowed(&self) -> bool {
        matches!(self, Self::ChatNotAllowed { .. })
    }

    /// Whether no channel has the name asked for.
    pub fn is_unknown_channel(&self) -> bool {
        matches!(self, Self::UnknownChannel { .. })
    }
}

/// A way to reach people.
pub trait Channel: Send + Sync + 'static {
    /// Its name (`telegram`, `console`).
    fn name(&self) -> &str;

    /// Sends `text` to `chat_id` (split as the channel needs).
    fn send<'a>(
        &'a self,
        chat_id: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>>;

    /// Receives messages until `stop`, giving each to `inbox`. A channel that only sends
    /// returns at once.
    fn receive(
        self: Arc<Self>,
        inbox: tokio::sync::mpsc::Sender<Incoming>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, ()>;

    /// Sends `text` as the answer to `message`, which this channel received. A channel
    /// whose inbox is shared by several engines sends it only if no other engine
    /// answers that message (and after the chat's earlier answers); the others just
    /// send.
    fn answer<'a>(
        &'a self,
        message: &'a Incoming,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        self.send(&message.chat_id, text)
    }

    /// `message`, which this channel received, is handled: answered, or dropped (off
    /// the whitelist, no agent). A channel that keeps what it received until then
    /// ([`InboxStore`]) forgets it; what is never handled is given again after a restart.
    fn handled(&self, message: &Incoming) {
        let _ = message;
    }
}

/// The console: what is sent to it is printed on stdout, `[console <chat>] text`, with
/// the terminal's control characters removed.
#[derive(Debug, Default)]
pub struct ConsoleChannel;

impl Channel for ConsoleChannel {
    fn name(&self) -> &str {
        "console"
    }

    fn send<'a>(
        &'a self,
        chat_id: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        // The model's text: no escape sequence of its reaches the terminal.
        println!(
            "[console {}] {}",
            crate::terminal::terminal_safe(chat_id),
            crate::terminal::terminal_safe(text)
        );
        Box::pin(std::future::ready(Ok(())))
    }

    fn receive(
        self: Arc<Self>,
        _inbox: tokio::sync::mpsc::Sender<Incoming>,
        _stop: CancellationToken,
    ) -> BoxFuture<'static, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// The channels and the whitelist.
#[derive(Clone)]
pub struct Gateway {
    channels: Arc<HashMap<String, Arc<dyn Channel>>>,
    allowed: Arc<Vec<String>>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.channels.keys().collect();
        names.sort();
        f.debug_struct("Gateway")
            .field("channels", &names)
            .field("allowed", &self.allowed)
            .finish()
    }
}

impl Gateway {
    /// A gateway over `channels` letting through the chats `allowed`
    /// (`<channel>_<chat id>`; `console_*` chats are always allowed).
    pub fn new(channels: Vec<Arc<dyn Channel>>, allowed: Vec<String>) -> Self {
        Self {
            channels: Arc::new(
                channels
                    .into_iter()
                    .map(|c| (c.name().to_owned(), c))
                    .collect(),
            ),
            allowed: Arc::new(allowed),
        }
    }

    /// The gateway the configuration describes: the console, and Telegram when
    /// `gateway.telegramToken` is set.
    pub fn from_config(engine: &Engine) -> Result<Self, GatewayError> {
        let g = &engine.config().raw.gateway;
        let mut channels: Vec<Arc<dyn Channel>> = vec![Arc::new(ConsoleChannel)];
        if let Some(token) = g
            .telegram_token
            .as_ref()
            .map(crate::Secret::expose)
            .filter(|t| !t.is_empty())
        {
            let bot =
                telegram::Telegram::new(&g.telegram_base_url, token, g.telegram_poll_seconds)?;
            // One inbox for every engine given the database; else this engine's file.
            let bot = bot.named(engine.config().raw.storage.engine_id.as_deref());
            let bot = match engine.database() {
                Some(db) => bot.sharing_inbox(Arc::new(PgInbox::new(Arc::clone(db)))),
                None => bot.keeping_inbox(engine.config().data_dir.join("gateway.db")),
            };
            channels.push(Arc::new(bot));
        }
        Ok(Self::new(channels, g.allowed_chat_ids.clone()))
    }

    /// The channels, by name.
    pub fn channel(&self, name: &str) -> Option<&Arc<dyn Channel>> {
        self.channels.get(name)
    }

    /// Every channel's name, sorted.
    pub fn channel_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.channels.keys().cloned().collect();
        names.sort();
        names
    }

    /// Whether the chat `<channel>_<chat id>` may be talked to.
    pub fn is_allowed(&self, channel: &str, chat_id: &str) -> bool {
        channel == "console" || self.allowed.contains(&chat_key(channel, chat_id))
    }

    /// Tells `message`'s channel that it is handled ([`Channel::handled`]).
    pub fn handled(&self, message: &Incoming) {
        if let Some(c) = self.channels.get(&message.channel) {
            c.handled(message);
        }
    }

    /// Sends `text` as the answer to `message` ([`Channel::answer`]), if the whitelist
    /// lets it.
    pub async fn answer(&self, message: &Incoming, text: &str) -> Result<(), GatewayError> {
        let channel = message.channel.as_str();
        let Some(c) = self.channels.get(channel) else {
            return Err(GatewayError::UnknownChannel {
                channel: channel.to_owned(),
                known: self.channel_names(),
            });
        };
        if !self.is_allowed(channel, &message.chat_id) {
            tracing::warn!(target: "klaw::gateway", channel, chat_id = message.chat_id, "a message to a chat off the whitelist was not sent");
            return Err(GatewayError::ChatNotAllowed {
                chat: message.key(),
            });
        }
        c.answer(message, text)
            .await
            .map_err(|source| GatewayError::Send {
                channel: channel.to_owned(),
                source,
            })
    }

    /// Sends `text` to `chat_id` on `channel`, if the whitelist lets it.
    pub async fn send(&self, channel: &str, chat_id: &str, text: &str) -> Result<(), GatewayError> {
        let Some(c) = self.channels.get(channel) else {
            return Err(GatewayError::UnknownChannel {
                channel: channel.to_owned(),
                known: self.channel_names(),
            });
        };
        if !self.is_allowed(channel, chat_id) {
            tracing::warn!(target: "klaw::gateway", channel, chat_id, "a message to a chat off the whitelist was not sent");
            return Err(GatewayError::ChatNotAllowed {
                chat: chat_key(channel, chat_id),
            });
        }
        let id = chat_id
            .strip_prefix(&format!("{channel}_"))
            .unwrap_or(chat_id);
        c.send(id, text).await.map_err(|source| GatewayError::Send {
            channel: channel.to_owned(),
            source,
        })
    }
}

/// Splits `text` into pieces of at most `max` characters, at a line break (else a
/// space) when one is near the end.
pub fn split_message(text: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while rest.chars().count() > max {
        let cut = rest.char_indices().nth(max).map_or(rest.len(), |(i, _)| i);
        let window = &rest[..cut];
        let at = window
            .rfind('\n')
            .filter(|&i| i > cut / 2)
            .or_else(|| window.rfind(' ').filter(|&i| i > cut / 2))
            .map_or(cut, |i| i + 1);
        let piece = rest[..at].trim_end();
        if !piece.is_empty() {
            out.push(piece.to_owned());
        }
        rest = &rest[at..];
    }
    if !rest.is_empty() || out.is_empty() {
        out.push(rest.to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_split_at_line_breaks_within_the_limit() {
        let text = format!("{}\n{}", "a".repeat(3000), "b".repeat(3000));
        let parts = split_message(&text, 4096);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], "a".repeat(3000));
        assert_eq!(parts[1], "b".repeat(3000));
        let cyrillic = "я".repeat(9000);
        let parts = split_message(&cyrillic, 4096);
        assert!(parts.iter().all(|p| p.chars().count() <= 4096));
        assert_eq!(parts.concat(), cyrillic);
        assert_eq!(split_message("short", 4096), ["short"]);
    }

    #[test]
    fn chat_keys_carry_the_channel_once() {
        assert_eq!(chat_key("telegram", "42"), "telegram_42");
        assert_eq!(chat_key("telegram", "telegram_42"), "telegram_42");
        let g = Gateway::new(vec![Arc::new(ConsoleChannel)], vec!["telegram_42".into()]);
        assert!(g.is_allowed("telegram", "42") && g.is_allowed("telegram", "telegram_42"));
        assert!(!g.is_allowed("telegram", "7"));
        assert!(g.is_allowed("console", "anything"));
    }

    #[tokio::test]
    async fn sending_checks_the_channel_and_the_whitelist() {
        let g = Gateway::new(vec![Arc::new(ConsoleChannel)], vec![]);
        let e = g.send("sms", "1", "hi").await.unwrap_err().to_string();
        assert!(
            e.contains("channel not found: `sms`") && e.contains("console"),
            "{e}"
        );
        let g = Gateway::new(
            vec![
                Arc::new(ConsoleChannel),
                Arc::new(telegram::Telegram::new("http://127.0.0.1:9", "1:x", 1).unwrap()),
            ],
            vec!["telegram_42".into()],
        );
        let e = g.send("telegram", "7", "hi").await.unwrap_err().to_string();
        assert!(
            e.contains("telegram_7") && e.contains("allowedChatIds"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_failed_send_never_shows_the_token() {
        let t = telegram::Telegram::new("http://127.0.0.1:9", "1:very-secret", 1).unwrap();
        let g = Gateway::new(vec![Arc::new(t)], vec!["telegram_42".into()]);
        let e = g.send("telegram", "42", "hi").await.unwrap_err();
        assert!(matches!(e, GatewayError::Send { .. }), "{e:?}");
        assert!(!e.is_not_allowed() && !e.is_unknown_channel());
        let mut texts = vec![format!("{e:?}")];
        let mut source: Option<&dyn std::error::Error> = Some(&e);
        while let Some(s) = source {
            texts.push(s.to_string());
            source = s.source();
        }
        assert!(texts[1].contains("bot***/sendMessage"), "{texts:?}");
        assert!(
            texts.iter().all(|t| !t.contains("very-secret")),
            "{texts:?}"
        );
    }
}
