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

/// The live MCP sessions of an engine, by number.
#[derive(Default)]
pub struct Peers {
    by_session: Mutex<HashMap<u64, Session>>,
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

    /// The live sessions.
    pub(crate) fn live(&self) -> Vec<Session> {
        let mut all = self.lock();
        all.retain(|_, s| !s.peer.is_transport_closed());
        all.values().cloned().collect()
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

    /// The most recently started live session whose client offers sampling (the model a
    /// call made elsewhere, a scheduled job, runs on with `llm.provider: "mcp-sampling"`).
    pub fn sampling_peer(&self) -> Option<Peer<RoleServer>> {
        let all = self.lock();
        all.iter()
            .filter(|(_, s)| !s.peer.is_transport_closed() && offers_sampling(&s.peer))
            .max_by_key(|(n, _)| **n)
            .map(|(_, s)| s.peer.clone())
    }
}

/// The caller of calls made in session `n`.
pub(crate) fn caller(n: u64) -> Caller {
    Caller::new(CHANNEL, Some(n.to_string()))
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
