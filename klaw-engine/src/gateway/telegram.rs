//! Telegram through the Bot API: long-polling `getUpdates` for messages in, `sendMessage`
//! for answers out (split at Telegram's 4096 characters), over our reqwest client. The
//! base URL is configurable (a Bot API server of your own, or a test server). The few
//! Bot API types these two methods need are below (`bot_api`); a crate of every Bot
//! API type cost more build time than the rest of the gateway for five of them.
//!
//! An update is confirmed to Telegram (the next poll's offset) only once it is kept in
//! the gateway's inbox ([`InboxStore`]), and leaves the inbox once it is handled: after a
//! restart nothing is answered twice and nothing is lost. Telegram allows one long poll
//! per bot: the engine that holds the inbox's poller lease polls; every engine claims
//! chats that have messages and answers them, one turn at a time per chat, in order
//! (one engine alone holds both; with `storage.url` the engines share the inbox).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use self::bot_api::{ChatRef, GetUpdates, SendMessage, Update};
use super::{
    Begin, Channel, ChannelError, GatewayError, InboxError, InboxStore, Incoming, SqliteInbox,
    split_message,
};

/// Telegram's longest message, in characters.
pub const MAX_MESSAGE_CHARS: usize = 4096;

/// The channel's name in the inbox.
const CHANNEL: &str = "telegram";

/// How long the poller's and a chat's lease last unless renewed: how soon another
/// engine takes over from a dead one.
const LEASE: Duration = Duration::from_secs(5);

/// How often the leases are renewed and chats with new messages claimed.
const TICK: Duration = Duration::from_millis(500);

/// Chats an engine takes at most per [`TICK`] (the others are left to other engines).
const TAKE: usize = 4;

/// How long an answer waits for the chat's earlier answers to go out.
const IN_ORDER_WAIT: Duration = Duration::from_secs(60);

/// Where a message this engine was given stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Given to the conversation, no answer begun.
    Given,
    /// Its answer is being sent by this engine.
    Sending,
    /// Not this engine's to forget: another engine answers it, or the answer could not
    /// begin (it is given again).
    Left,
}

/// The Telegram channel of one bot.
pub struct Telegram {
    base: String,
    /// `<base>/bot<token>`; never logged.
    bot_url: String,
    poll_seconds: u64,
    http: reqwest::Client,
    /// Where the inbox is kept (`<dataDir>/gateway.db`) when it is opened at the first
    /// receive; without it (nor a shared one), the offset lives in memory only.
    inbox_path: Option<PathBuf>,
    /// The inbox.
    inbox: OnceLock<Arc<dyn InboxStore>>,
    /// This engine's name in the inbox's leases (`host-pid123-5f3a9c`).
    engine: String,
    /// The messages given to the conversations and not handled yet.
    given: Mutex<HashMap<i64, Stage>>,
    /// Told when the poller kept new messages: claim now.
    wake: tokio::sync::Notify,
}

impl std::fmt::Debug for Telegram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telegram")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// Runs `f` (the inbox: SQLite, or PostgreSQL waited on) on the blocking pool.
async fn off_thread<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, InboxError> + Send + 'static,
) -> Result<T, InboxError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or(Err(InboxError::Stopped))
}

/// Sleeps `d`; `false` when `stop` came first.
async fn pause(stop: &CancellationToken, d: Duration) -> bool {
    tokio::select! {
        () = stop.cancelled() => false,
        () = tokio::time::sleep(d) => true,
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
            engine: crate::storage::engine_id(None),
            given: Mutex::new(HashMap::new()),
            wake: tokio::sync::Notify::new(),
        })
    }

    /// The same bot, its engine named `name` among the engines sharing its inbox
    /// (`storage.engineId`: it begins the id under which this engine polls and answers
    /// chats; `None`, the host's name).
    #[must_use]
    pub fn named(mut self, name: Option<&str>) -> Self {
        self.engine = crate::storage::engine_id(name);
        self
    }

    /// The same bot, keeping what it receives in the inbox at `path` until it is handled.
    #[must_use]
    pub fn keeping_inbox(mut self, path: PathBuf) -> Self {
        self.inbox_path = Some(path);
        self
    }

    /// The same bot, keeping what it receives in `inbox`, which other engines share.
    #[must_use]
    pub fn sharing_inbox(self, inbox: Arc<dyn InboxStore>) -> Self {
        let _ = self.inbox.set(inbox);
        self
    }

    /// The inbox, opened once; `None` when none is configured.
    fn open_inbox(&self) -> Result<Option<Arc<dyn InboxStore>>, InboxError> {
        if let Some(inbox) = self.inbox.get() {
            return Ok(Some(Arc::clone(inbox)));
        }
        let Some(path) = &self.inbox_path else {
            return Ok(None);
        };
        let _ = self.inbox.set(Arc::new(SqliteInbox::open(path)?));
        Ok(self.inbox.get().cloned())
    }

    fn given(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Stage>> {
        self.given
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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

    fn answer<'a>(
        &'a self,
        message: &'a Incoming,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            let (Some(store), Some(receipt)) = (self.inbox.get(), message.receipt) else {
                return self.send(&message.chat_id, text).await;
            };
            let deadline = tokio::time::Instant::now() + IN_ORDER_WAIT;
            loop {
                let (store, engine) = (Arc::clone(store), self.engine.clone());
                let begun = off_thread(move || store.begin_answer(CHANNEL, receipt, &engine)).await;
                match begun {
                    Ok(Begin::Go) => break,
                    Ok(Begin::Gone) => {
                        self.given().insert(receipt, Stage::Left);
                        tracing::info!(target: "klaw::telegram", receipt, "another engine answers this message; this answer is dropped");
                        return Ok(());
                    }
                    Ok(Begin::Wait) if tokio::time::Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Ok(Begin::Wait) => {
                        self.given().insert(receipt, Stage::Left);
                        return Err(ChannelError::Inbox(InboxError::OutOfOrder { receipt }));
                    }
                    Err(e) => {
                        self.given().insert(receipt, Stage::Left);
                        return Err(ChannelError::Inbox(e));
                    }
                }
            }
            // From here a crash leaves the message `sending`: not answered again.
            self.given().insert(receipt, Stage::Sending);
            self.send(&message.chat_id, text).await
        })
    }

    fn handled(&self, message: &Incoming) {
        let Some(receipt) = message.receipt else {
            return;
        };
        let stage = self.given().remove(&receipt);
        if stage == Some(Stage::Left) {
            return;
        }
        let Some(store) = self.inbox.get() else {
            return;
        };
        // On a thread of its own: PostgreSQL is waited on, and this is called from an
        // async task.
        let forgot = std::thread::scope(|s| {
            s.spawn(|| store.done(CHANNEL, receipt, &self.engine))
                .join()
                .unwrap_or(Err(InboxError::Stopped))
        });
        if let Err(e) = forgot {
            tracing::error!(target: "klaw::telegram", "{e}; the message may be answered again");
        }
    }

    fn receive(
        self: Arc<Self>,
        inbox: tokio::sync::mpsc::Sender<Incoming>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let opened = {
                let me = Arc::clone(&self);
                tokio::task::spawn_blocking(move || me.open_inbox())
                    .await
                    .unwrap_or(Err(InboxError::Stopped))
            };
            let store = match opened {
                Ok(Some(store)) => store,
                Ok(None) => return self.receive_unkept(inbox, stop).await,
                Err(e) => {
                    tracing::error!(target: "klaw::telegram", "{e}; Telegram is not served");
                    return;
                }
            };
            let poller = tokio::spawn(
                Arc::clone(&self).poll_while_holding(Arc::clone(&store), stop.clone()),
            );
            self.claim_and_give(&store, &inbox, &stop).await;
            poller.abort();
            // A clean stop: another engine takes the poller and the chats at once.
            let engine = self.engine.clone();
            if let Err(e) = off_thread(move || store.release(CHANNEL, &engine)).await {
                tracing::warn!(target: "klaw::telegram", "{e}; another engine takes over once the leases run out");
            }
        })
    }
}

impl Telegram {
    /// Polls while this engine holds the poller (checked and renewed every [`TICK`],
    /// during the long poll too), keeping each batch in the inbox and moving the offset
    /// in one transaction before Telegram hears of it; until `stop`.
    async fn poll_while_holding(
        self: Arc<Self>,
        store: Arc<dyn InboxStore>,
        stop: CancellationToken,
    ) {
        let hold = |store: &Arc<dyn InboxStore>| {
            let (store, engine) = (Arc::clone(store), self.engine.clone());
            off_thread(move || store.hold_poller(CHANNEL, &engine, LEASE))
        };
        let mut backoff = Duration::from_secs(1);
        let mut polling = false;
        loop {
            match hold(&store).await {
                Ok(true) => {
                    if !polling {
                        tracing::info!(target: "klaw::telegram", engine = self.engine, "this engine polls Telegram");
                        polling = true;
                    }
                }
                Ok(false) => {
                    polling = false;
                    if !pause(&stop, TICK).await {
                        return;
                    }
                    continue;
                }
                Err(e) => {
                    polling = false;
                    tracing::error!(target: "klaw::telegram", "{e}; polling waits {}s", backoff.as_secs());
                    if !pause(&stop, backoff).await {
                        return;
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                    continue;
                }
            }
            let read = Arc::clone(&store);
            let offset = match off_thread(move || read.cursor(CHANNEL)).await {
                Ok(o) => o,
                Err(e) => {
                    tracing::error!(target: "klaw::telegram", "{e}; polling waits {}s", backoff.as_secs());
                    if !pause(&stop, backoff).await {
                        return;
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                    continue;
                }
            };
            let poll = self.poll(offset);
            tokio::pin!(poll);
            let polled = loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    p = &mut poll => break Some(p),
                    () = tokio::time::sleep(TICK) => {
                        if !matches!(hold(&store).await, Ok(true)) {
                            break None;
                        }
                    }
                }
            };
            // The lease was lost meanwhile: whatever that poll had brought is asked for
            // again by the engine that holds it now.
            let Some(polled) = polled else { continue };
            let failed = match polled {
                Ok((messages, next)) => {
                    let keep = Arc::clone(&store);
                    let any = !messages.is_empty();
                    match off_thread(move || keep.accept(CHANNEL, &messages, next)).await {
                        Ok(()) => {
                            if any {
                                self.wake.notify_one();
                            }
                            None
                        }
                        // Not confirmed to Telegram: the next poll gets them again.
                        Err(e) => Some(format!(
                            "{e}; the updates received are not confirmed to Telegram and are asked for again"
                        )),
                    }
                }
                Err(e) => Some(format!("receiving failed: {e}")),
            };
            match failed {
                None => backoff = Duration::from_secs(1),
                Some(why) => {
                    tracing::warn!(target: "klaw::telegram", "{why}; retrying in {}s", backoff.as_secs());
                    if !pause(&stop, backoff).await {
                        return;
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                }
            }
        }
    }

    /// Every [`TICK`] (at once when the poller kept something): renews this engine's
    /// chats, claims more, and gives their messages not given yet to `inbox`, in the
    /// order they arrived; until `stop`.
    async fn claim_and_give(
        &self,
        store: &Arc<dyn InboxStore>,
        inbox: &tokio::sync::mpsc::Sender<Incoming>,
        stop: &CancellationToken,
    ) {
        let mut first = true;
        loop {
            let (claim, engine) = (Arc::clone(store), self.engine.clone());
            match off_thread(move || claim.claim(CHANNEL, &engine, LEASE, TAKE)).await {
                Ok(claimed) => {
                    for m in &claimed.abandoned {
                        tracing::warn!(
                            target: "klaw::telegram",
                            chat_id = m.chat_id,
                            receipt = m.receipt,
                            "the engine answering this message died while sending the answer: it may not have been answered, and is not answered again"
                        );
                    }
                    let fresh: Vec<Incoming> = {
                        let mut given = self.given();
                        claimed
                            .messages
                            .into_iter()
                            .filter(|m| {
                                m.receipt.is_some_and(|r| match given.entry(r) {
                                    std::collections::hash_map::Entry::Vacant(v) => {
                                        v.insert(Stage::Given);
                                        true
                                    }
                                    std::collections::hash_map::Entry::Occupied(_) => false,
                                })
                            })
                            .collect()
                    };
                    if first && !fresh.is_empty() {
                        tracing::info!(target: "klaw::telegram", "{} message(s) received before and not answered yet are answered now", fresh.len());
                    }
                    first = false;
                    for m in fresh {
                        if inbox.send(m).await.is_err() {
                            return;
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(target: "klaw::telegram", "{e}; claiming chats again in {}ms", TICK.as_millis());
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(TICK) => {}
            }
        }
    }

    /// Without an inbox: polls and gives what arrives, the offset in memory only.
    async fn receive_unkept(
        self: Arc<Self>,
        inbox: tokio::sync::mpsc::Sender<Incoming>,
        stop: CancellationToken,
    ) {
        let mut offset = 0;
        let mut backoff = Duration::from_secs(1);
        loop {
            let polled = tokio::select! {
                () = stop.cancelled() => return,
                p = self.poll(offset) => p,
            };
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
                    if !pause(&stop, backoff).await {
                        return;
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                }
            }
        }
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
