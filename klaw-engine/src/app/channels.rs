//! Serving the gateway's channels: each allowed chat's messages go to the agent in
//! order, one conversation per chat, and each answer goes back through the gateway.
//! After the stop no new turn starts; running ones get a grace period. A message is
//! marked handled ([`Gateway::handled`]) once answered or dropped: what a stop or a
//! crash leaves unhandled, the channel gives again at the next start.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use klaw_tools::Caller;
use tokio_util::sync::CancellationToken;

use super::App;
use crate::agent::Agent;
use crate::gateway::{Gateway, Incoming};

/// How long running turns get to finish after the stop.
pub(crate) const GRACE: Duration = Duration::from_secs(10);

impl App {
    /// Serves the gateway's channels until the app stops (or, without `keep_serving`,
    /// until every channel stops receiving), then lets running turns finish for
    /// [`GRACE`]. A message from a chat off `gateway.allowedChatIds` is logged and
    /// dropped; without an agent, messages are read and dropped.
    pub(crate) async fn serve_channels(&self, keep_serving: bool) {
        let gateway = self.gateway().clone();
        // No new turn after the stop; running ones get the grace period below.
        let stop = self.stop_token().child_token();
        let (inbox, mut incoming) = tokio::sync::mpsc::channel::<Incoming>(256);
        let mut receivers = Vec::new();
        for name in gateway.channel_names() {
            if let Some(c) = gateway.channel(&name) {
                receivers.push(tokio::spawn(
                    Arc::clone(c).receive(inbox.clone(), stop.clone()),
                ));
            }
        }
        drop(inbox);
        let agent = self.agent().cloned();
        let mut chats: HashMap<String, tokio::sync::mpsc::UnboundedSender<Incoming>> =
            HashMap::new();
        let mut workers = Vec::new();
        loop {
            let message = tokio::select! {
                m = incoming.recv() => m,
                () = stop.cancelled() => break,
            };
            let Some(message) = message else {
                // Every channel stopped receiving; serve the rest until a signal.
                if keep_serving {
                    stop.cancelled().await;
                }
                break;
            };
            if !gateway.is_allowed(&message.channel, &message.chat_id) {
                tracing::warn!(
                    target: "klaw::gateway",
                    channel = message.channel,
                    chat_id = message.chat_id,
                    from = message.from,
                    "a message from a chat off gateway.allowedChatIds was ignored"
                );
                gateway.handled(&message);
                continue;
            }
            let Some(agent) = agent.clone() else {
                gateway.handled(&message);
                continue;
            };
            let key = message.key();
            let worker = chats.entry(key.clone()).or_insert_with(|| {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                workers.push(tokio::spawn(converse(
                    agent,
                    gateway.clone(),
                    key,
                    rx,
                    stop.clone(),
                )));
                tx
            });
            let _ = worker.send(message);
        }
        self.stop();
        drop(chats);
        let all = futures_util::future::join_all(workers);
        if tokio::time::timeout(GRACE, all).await.is_err() {
            eprintln!(
                "klaw-engine: turns still running after {}s were stopped",
                GRACE.as_secs()
            );
        }
        for r in receivers {
            r.abort();
        }
    }

    /// Starts the MCP server over HTTP on `bind`, stopping with the app.
    pub(crate) fn spawn_mcp_http(
        &self,
        bind: std::net::SocketAddr,
    ) -> tokio::task::JoinHandle<Result<(), crate::mcp::McpError>> {
        let stop = self.stop_token().child_token();
        self.ask_through_clients();
        tokio::spawn(crate::mcp::http::serve(self.engine().clone(), bind, stop))
    }
}

/// One chat's conversation: its messages in order, each answer sent back; after `stop`,
/// no new turn starts (the one running finishes within the grace period).
async fn converse(
    agent: Agent,
    gateway: Gateway,
    key: String,
    mut messages: tokio::sync::mpsc::UnboundedReceiver<Incoming>,
    stop: CancellationToken,
) {
    loop {
        let m = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            m = messages.recv() => match m {
                Some(m) => m,
                None => return,
            },
        };
        let caller = Caller::new(m.channel.clone(), Some(m.chat_id.clone()));
        match agent.turn(&key, caller, &m.text, &()).await {
            Ok(answer) if answer.trim().is_empty() => {}
            Ok(answer) => {
                if let Err(e) = gateway.answer(&m, &answer).await {
                    tracing::error!(target: "klaw::gateway", chat = key, "the answer was not sent: {e}");
                }
            }
            Err(e) => {
                tracing::error!(target: "klaw::agent", chat = key, "the turn failed: {e}");
                let _ = gateway
                    .answer(&m, &format!("Sorry, I could not answer: {e}"))
                    .await;
            }
        }
        // Answered (or told why not): not to be answered again after a restart.
        gateway.handled(&m);
    }
}
