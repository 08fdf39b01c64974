//! Telegram through the Bot API: long-polling `getUpdates` for messages in, `sendMessage`
//! for answers out (split at Telegram's 4096 characters), over our reqwest client. The
//! base URL is configurable (a Bot API server of your own, or a test server). The few
//! Bot API types these two methods need are below (`bot_api`); a crate of every Bot
//! API type cost more build time than the rest of the gateway for five of them.
//!
//! An update is confirmed to Telegram (the next poll's offset) only once it is kept in
//! the gateway's inbox ([`InboxStore`]), and leaves the inbox once it is handled: after a
//! restart nothing is answered twice and nothing is lost.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use self::bot_api::{ChatRef, GetUpdates, SendMessage, Update};
use super::{Channel, ChannelError, GatewayError, InboxStore, Incoming, split_message};

/// Telegram's longest message, in characters.
pub const MAX_MESSAGE_CHARS: usize = 4096;

/// The Telegram channel of one bot.
pub struct Telegram {
    base: String,
    /// `<base>/bot<token>`; never logged.
    bot_url: String,
    poll_seconds: u64,
    http: reqwest::Client,
    /// Where the inbox is kept (`<dataDir>/gateway.db`); without one, the offset lives in
    /// memory only.
    inbox_path: Option<PathBuf>,
    /// The inbox, opened when receiving starts.
    inbox: OnceLock<InboxStore>,
}

impl std::fmt::Debug for Telegram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telegram")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl Telegram {
    /// The bot with `token` at `base_url` (`https://api.telegram.org`), long-polling
    /// for `poll_seconds`.
    pub fn new(base_url: &str, token: &str, poll_seconds: u64) -> Result<Self, GatewayError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let base = base_url.trim_end_matches('/').to_owned();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|source| GatewayError::Client {
                channel: "telegram".into(),
                source,
            })?;
        Ok(Self {
            bot_url: format!("{base}/bot{token}"),
            base,
            poll_seconds,
            http,
            inbox_path: None,
            inbox: OnceLock::new(),
        })
    }

    /// The same bot, keeping what it receives in the inbox at `path` until it is handled.
    #[must_use]
    pub fn keeping_inbox(mut self, path: PathBuf) -> Self {
        self.inbox_path = Some(path);
        self
    }

    /// Opens the inbox (once): where to start polling and what a previous run left
    /// unhandled. `Err` when an inbox is configured and cannot be opened.
    fn open_inbox(&self) -> Result<(i64, Vec<Incoming>), super::InboxError> {
        let Some(path) = &self.inbox_path else {
            return Ok((0, Vec::new()));
        };
        if self.inbox.get().is_none() {
            let _ = self.inbox.set(InboxStore::open(path)?);
        }
        let Some(inbox) = self.inbox.get() else {
            return Ok((0, Vec::new()));
        };
        Ok((inbox.cursor("telegram")?, inbox.pending("telegram")?))
    }

    /// Calls `method` with `params`; its `result`, or the error Telegram gave (the
    /// token never appears in it).
    async fn call(
        &self,
        method: &str,
        params: &impl serde::Serialize,
        timeout: Duration,
    ) -> Result<Value, ChannelError> {
        let url = format!("{}/{method}", self.bot_url);
        let shown = format!("{}/bot***/{method}", self.base);
        // reqwest's own errors carry the URL, and so the token: shown without it.
        let transport = |e: reqwest::Error| ChannelError::Transport {
            endpoint: shown.clone(),
            detail: crate::llm::innermost(&e),
            source: e.without_url(),
        };
        let response = self
            .http
            .post(&url)
            .timeout(timeout)
            .json(params)
            .send()
            .await
            .map_err(transport)?;
        let status = response.status().as_u16();
        // Read and parsed here: reqwest's own errors carry the URL, and so the token.
        let bytes = crate::llm::read_capped(response, crate::llm::MAX_BODY_BYTES)
            .await
            .map_err(transport)?;
        let body: Value =
            serde_json::from_slice(&bytes).map_err(|source| ChannelError::NotJson {
                endpoint: shown.clone(),
                status,
                body: crate::llm::preview(&String::from_utf8_lossy(&bytes)),
                source,
            })?;
        if body["ok"] == true {
            return Ok(body["result"].clone());
        }
        Err(ChannelError::Refused {
            endpoint: shown,
            status,
            description: body["description"]
                .as_str()
                .or_else(|| body["message"].as_str())
                .unwrap_or("no description")
                .to_owned(),
        })
    }

    /// One long poll from `offset`: the messages with text, and the next offset.
    async fn poll(&self, offset: i64) -> Result<(Vec<Incoming>, i64), ChannelError> {
        let params = GetUpdates {
            offset,
            timeout: u32::try_from(self.poll_seconds).unwrap_or(30),
            allowed_updates: &["message"],
        };
        let result = self
            .call(
                "getUpdates",
                &params,
                Duration::from_secs(self.poll_seconds + 15),
            )
            .await?;
        let mut next = offset;
        let mut messages = Vec::new();
        for raw in result.as_array().cloned().unwrap_or_default() {
            if let Some(id) = raw.get("update_id").and_then(Value::as_i64) {
                next = next.max(id.saturating_add(1));
            }
            // An update this client cannot read is skipped, not fatal.
            let update: Update = match serde_json::from_value(raw) {
                Ok(u) => u,
                Err(e) => {
                    tracing::warn!(target: "klaw::telegram", "an update cannot be read: {e}; skipped");
                    continue;
                }
            };
            if let Some(m) = update.message
                && let Some(text) = m.text
            {
                let from = m
                    .from
                    .as_ref()
                    .map(|u| u.username.clone().unwrap_or_else(|| u.first_name.clone()))
                    .unwrap_or_default();
                messages.push(Incoming {
                    channel: "telegram".into(),
                    chat_id: m.chat.id.to_string(),
                    from,
                    text,
                    receipt: Some(update.update_id),
                });
            }
        }
        Ok((messages, next))
    }
}

impl Channel for Telegram {
    fn name(&self) -> &str {
        "telegram"
    }

    fn send<'a>(
        &'a self,
        chat_id: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            let chat = match chat_id.parse::<i64>() {
                Ok(n) => ChatRef::Id(n),
                Err(_) => ChatRef::Username(chat_id),
            };
            for part in split_message(text, MAX_MESSAGE_CHARS) {
                let params = SendMessage {
                    chat_id: chat,
                    text: &part,
                };
                self.call("sendMessage", &params, Duration::from_secs(30))
                    .await?;
            }
            Ok(())
        })
    }

    fn handled(&self, message: &Incoming) {
        if let (Some(store), Some(receipt)) = (self.inbox.get(), message.receipt)
            && let Err(e) = store.done("telegram", receipt)
        {
            tracing::error!(target: "klaw::telegram", "{e}; the message may be answered again after a restart");
        }
    }

    fn receive(
        self: Arc<Self>,
        inbox: tokio::sync::mpsc::Sender<Incoming>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let (mut offset, unhandled) = match self.open_inbox() {
                Ok(start) => start,
                Err(e) => {
                    tracing::error!(target: "klaw::telegram", "{e}; Telegram is not served");
                    return;
                }
            };
            if !unhandled.is_empty() {
                tracing::info!(target: "klaw::telegram", "{} message(s) received before the restart and not answered yet are answered now", unhandled.len());
            }
            for m in unhandled {
                if inbox.send(m).await.is_err() {
                    return;
                }
            }
            let mut backoff = Duration::from_secs(1);
            loop {
                let polled = tokio::select! {
                    () = stop.cancelled() => return,
                    p = self.poll(offset) => p,
                };
                // Kept before Telegram hears of the new offset (the next poll confirms them).
                let polled = polled.and_then(|(messages, next)| {
                    match self.inbox.get() {
                        Some(store) => store.accept("telegram", &messages, next),
                        None => Ok(()),
                    }
                    .map_err(ChannelError::Inbox)?;
                    Ok((messages, next))
                });
                match polled {
                    Ok((messages, next)) => {
                        backoff = Duration::from_secs(1);
                        offset = next;
                        for m in messages {
                            if inbox.send(m).await.is_err() {
                                return;
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(target: "klaw::telegram", "receiving failed: {e}; retrying in {}s", backoff.as_secs());
                        tokio::select! {
                            () = stop.cancelled() => return,
                            () = tokio::time::sleep(backoff) => {}
                        }
                        backoff = (backoff * 2).min(Duration::from_secs(30));
                    }
                }
            }
        })
    }
}

/// The parts of the Bot API (<https://core.telegram.org/bots/api>) this channel reads and
/// writes, named as Telegram names them; every other field is ignored.
mod bot_api {
    use serde::{Deserialize, Serialize};

    /// `getUpdates`' parameters.
    #[derive(Debug, Serialize)]
    pub(super) struct GetUpdates<'a> {
        /// The first update to return (the last confirmed one + 1).
        pub(super) offset: i64,
        /// Seconds to wait for an update (long polling).
        pub(super) timeout: u32,
        /// The kinds of update wanted.
        pub(super) allowed_updates: &'a [&'a str],
    }

    /// `sendMessage`'s parameters.
    #[derive(Debug, Serialize)]
    pub(super) struct SendMessage<'a> {
        /// The chat.
        pub(super) chat_id: ChatRef<'a>,
        /// The text (at most 4096 characters).
        pub(super) text: &'a str,
    }

    /// A chat: its numeric id, or a channel's `@username`.
    #[derive(Debug, Clone, Copy, Serialize)]
    #[serde(untagged)]
    pub(super) enum ChatRef<'a> {
        /// A numeric chat id.
        Id(i64),
        /// `@channelusername`.
        Username(&'a str),
    }

    /// One update of `getUpdates`: a new message, or a kind this channel skips.
    #[derive(Debug, Deserialize)]
    pub(super) struct Update {
        /// Its id (increasing).
        pub(super) update_id: i64,
        /// A new message, when that is what it is.
        pub(super) message: Option<Message>,
    }

    /// A message.
    #[derive(Debug, Deserialize)]
    pub(super) struct Message {
        /// Where it was sent.
        pub(super) chat: Chat,
        /// Who sent it (none in channels).
        pub(super) from: Option<User>,
        /// Its text, for a text message.
        pub(super) text: Option<String>,
    }

    /// A chat.
    #[derive(Debug, Deserialize)]
    pub(super) struct Chat {
        /// Its id.
        pub(super) id: i64,
    }

    /// A user.
    #[derive(Debug, Deserialize)]
    pub(super) struct User {
        /// The first name (always there).
        pub(super) first_name: String,
        /// The `@username`, if any.
        pub(super) username: Option<String>,
    }

    #[cfg(test)]
    mod tests {
        #![allow(clippy::unwrap_used)]
        use super::*;
        use serde_json::json;

        #[test]
        fn requests_and_updates_read_and_write_as_the_bot_api_says() {
            let p = GetUpdates {
                offset: 7,
                timeout: 30,
                allowed_updates: &["message"],
            };
            assert_eq!(
                serde_json::to_value(&p).unwrap(),
                json!({"offset": 7, "timeout": 30, "allowed_updates": ["message"]})
            );
            for (chat, want) in [
                (ChatRef::Id(-100), json!(-100)),
                (ChatRef::Username("@news"), json!("@news")),
            ] {
                let m = SendMessage {
                    chat_id: chat,
                    text: "hi",
                };
                assert_eq!(
                    serde_json::to_value(&m).unwrap(),
                    json!({"chat_id": want, "text": "hi"})
                );
            }
            let u: Update = serde_json::from_value(json!({
                "update_id": 10,
                "message": {"message_id": 1, "date": 1, "chat": {"id": 42, "type": "private"},
                            "from": {"id": 5, "is_bot": false, "first_name": "Ann"}, "text": "hello",
                            "entities": []}
            }))
            .unwrap();
            let m = u.message.unwrap();
            assert_eq!(
                (u.update_id, m.chat.id, m.text.as_deref()),
                (10, 42, Some("hello"))
            );
            let from = m.from.unwrap();
            assert_eq!((from.first_name.as_str(), from.username), ("Ann", None));
            // Another kind of update: no message; a photo: no text.
            let u: Update =
                serde_json::from_value(json!({"update_id": 11, "edited_message": {}})).unwrap();
            assert!(u.message.is_none());
            let u: Update = serde_json::from_value(json!({
                "update_id": 12, "message": {"chat": {"id": 1}, "photo": []}
            }))
            .unwrap();
            assert!(u.message.unwrap().text.is_none());
        }
    }
}
