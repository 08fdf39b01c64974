//! The MCP sessions the engine serves, by number: each one's client (to notify it, or to
//! ask it: elicitation, sampling) and the resources it subscribed to. Kept in the
//! engine's context ([`ToolContext::shared_state`](klaw_tools::ToolContext::shared_state)),
//! so the server, the approver of the `mcp` channel and the fixtures find the client of a
//! call from its caller (`mcp`, chat id = the session's number).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use klaw_tools::Caller;
use rmcp::{Peer, RoleServer};

/// The channel of calls made through MCP.
pub const CHANNEL: &str = "mcp";

/// One session: its client and the URIs it subscribed to.
#[derive(Clone)]
pub(crate) struct Session {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) subscriptions: Arc<Mutex<HashSet<String>>>,
}

/// The live MCP sessions of an engine, by number, and the open `subscriptions/listen`
/// streams (MCP 2026-07-28), by number.
#[derive(Default)]
pub struct Peers {
    by_session: Mutex<HashMap<u64, Session>>,
    listening: Mutex<HashMap<u64, rmcp::service::SubscriptionSink>>,
    /// The HTTP stream each running call of a session is answered on: its session id
    /// and JSON-RPC request id, by call id.
    streams: Mutex<HashMap<String, (String, String)>>,
    /// Closes a session's stream of a request (set by the HTTP server).
    closer: std::sync::OnceLock<Closer>,
}

/// Closes the stream of request `(session id, JSON-RPC id)`, asking the client to come
/// back after the duration; whether there was one.
pub(crate) type Closer = Arc<
    dyn Fn(
            String,
            String,
            std::time::Duration,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>>
        + Send
        + Sync,
>;

/// Forgets a call's stream when the call ends.
pub(crate) struct CallStream<'a>(&'a Peers, String);

impl Drop for CallStream<'_> {
    fn drop(&mut self) {
        self.0
            .streams
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.1);
    }
}

impl std::fmt::Debug for Peers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peers")
            .field("sessions", &self.lock().len())
            .finish()
    }
}

impl Peers {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Session>> {
        self.by_session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Records session `n`'s client (at its `initialize`), forgetting sessions whose
    /// transport has closed.
    pub(crate) fn insert(&self, n: u64, session: Session) {
        let mut all = self.lock();
        all.retain(|_, s| !s.peer.is_transport_closed());
        all.insert(n, session);
    }

    /// Sets how a request's HTTP stream is closed (the HTTP server, once).
    pub(crate) fn set_closer(&self, closer: Closer) {
        let _ = self.closer.set(closer);
    }

    /// Records that call `call` is answered on the stream of request `request` of the
    /// HTTP session `session`, until the guard it returns is dropped.
    pub(crate) fn call_stream(
        &self,
        call: &str,
        session: String,
        request: String,
    ) -> CallStream<'_> {
        self.streams
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(call.to_owned(), (session, request));
        CallStream(self, call.to_owned())
    }

    /// The live sessions.
    pub(crate) fn live(&self) -> Vec<Session> {
        let mut all = self.lock();
        all.retain(|_, s| !s.peer.is_transport_closed());
        all.values().cloned().collect()
    }

    /// Records an open `subscriptions/listen` stream (until [`Peers::unlisten`]).
    pub(crate) fn listen(&self, n: u64, sink: rmcp::service::SubscriptionSink) {
        self.listening
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(n, sink);
    }

    /// Forgets the stream `n` (it ended).
    pub(crate) fn unlisten(&self, n: u64) {
        self.listening
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&n);
    }

    /// The open `subscriptions/listen` streams (each sends only what its client asked).
    pub(crate) fn listeners(&self) -> Vec<rmcp::service::SubscriptionSink> {
        self.listening
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// Tells every client (sessions and `subscriptions/listen` streams that asked) that
    /// the prompts changed.
    pub(crate) async fn prompts_changed(&self) {
        for sink in self.listeners() {
            let _ = sink.notify_prompt_list_changed().await;
        }
        for s in self.live() {
            let _ = s.peer.notify_prompt_list_changed().await;
        }
    }

    /// The client of the session that made a call, from its caller (`mcp`, chat id =
    /// the session's number); `None` for another channel or a session gone.
    pub fn peer_of(&self, caller: &Caller) -> Option<Peer<RoleServer>> {
        if caller.channel != CHANNEL {
            return None;
        }
        let n: u64 = caller.chat_id.as_deref()?.parse().ok()?;
        let all = self.lock();
        all.get(&n)
            .filter(|s| !s.peer.is_transport_closed())
            .map(|s| s.peer.clone())
    }

    /// The client that samples (`sampling/createMessage`) for work started by `origin`
    /// (the turn's caller, or for a subagent the caller that started its line), with
    /// `llm.samplingClient` as `named`:
    ///
    /// - work an MCP session started: that session's client, and no other one;
    /// - work no session started (a channel, the scheduler): the most recently started
    ///   live session whose client calls itself `named` (`clientInfo.name`), only when
    ///   the configuration names one.
    ///
    /// `Err` says why there is none (for the model's error).
    pub(crate) fn sampling_peer(
        &self,
        origin: &Caller,
        named: Option<&str>,
    ) -> Result<Peer<RoleServer>, String> {
        let all = self.lock();
        let live = |s: &&Session| !s.peer.is_transport_closed();
        if origin.channel == CHANNEL {
            let n = origin.chat_id.as_deref().unwrap_or_default();
            let session = n.parse::<u64>().ok().and_then(|n| all.get(&n)).filter(live);
            return match session {
                None => Err(format!(
                    "the MCP session {n} that started this work has ended; its work is \
                     sampled only through its own client"
                )),
                Some(s) if !offers_sampling(&s.peer) => Err(format!(
                    "the client of MCP session {n}, which started this work, does not offer \
                     sampling; its work is sampled only through its own client"
                )),
                Some(s) => Ok(s.peer.clone()),
            };
        }
        let Some(name) = named.filter(|n| !n.is_empty()) else {
            return Err(format!(
                "work no MCP session started (here: {}) is not sampled through any MCP \
                 client unless llm.samplingClient (KLAW_LLM_SAMPLING_CLIENT) names one",
                origin.channel
            ));
        };
        all.iter()
            .filter(|(_, s)| {
                live(s) && offers_sampling(&s.peer) && client_name(&s.peer).as_deref() == Some(name)
            })
            .max_by_key(|(n, _)| **n)
            .map(|(_, s)| s.peer.clone())
            .ok_or_else(|| {
                format!(
                    "no MCP client named {name:?} (llm.samplingClient) that offers sampling \
                     is connected"
                )
            })
    }
}

/// The name a client gave itself at `initialize` (`clientInfo.name`).
fn client_name(peer: &Peer<RoleServer>) -> Option<String> {
    peer.peer_info().map(|i| i.client_info.name.clone())
}

/// The caller of calls made in session `n`.
pub(crate) fn caller(n: u64) -> Caller {
    Caller::new(CHANNEL, Some(n.to_string()))
}

impl klaw_mcp_ext::ClientLookup for Peers {
    fn client_of(&self, caller: &Caller) -> Option<Peer<RoleServer>> {
        self.peer_of(caller)
    }

    fn prompts_changed(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(Peers::prompts_changed(self))
    }

    fn close_stream(
        &self,
        call: &str,
        retry: std::time::Duration,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + '_>> {
        let stream = self
            .streams
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(call)
            .cloned();
        match (stream, self.closer.get()) {
            (Some((session, request)), Some(close)) => close(session, request, retry),
            _ => Box::pin(async { false }),
        }
    }
}

/// Whether the client declared the elicitation capability at `initialize`.
pub fn offers_elicitation(peer: &Peer<RoleServer>) -> bool {
    peer.peer_info()
        .is_some_and(|i| i.capabilities.elicitation.is_some())
}

/// Whether the client declared the sampling capability at `initialize`.
pub fn offers_sampling(peer: &Peer<RoleServer>) -> bool {
    peer.peer_info()
        .is_some_and(|i| i.capabilities.sampling.is_some())
}

/// The text of a client's sampling answer (its text blocks, joined).
#[allow(deprecated)] // sampling (SEP-2577 deprecates it; clients still offer it)
pub fn sampled_text(result: &rmcp::model::CreateMessageResult) -> String {
    let content = serde_json::to_value(&result.message.content).unwrap_or_default();
    let blocks = match content {
        serde_json::Value::Array(blocks) => blocks,
        one => vec![one],
    };
    blocks
        .iter()
        .filter_map(|b| b.get("text").and_then(serde_json::Value::as_str))
        .collect::<Vec<_>>()
        .join("")
}
