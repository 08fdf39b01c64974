//! Live MCP sessions, capped: rmcp's in-memory session manager behind `mcp.maxSessions`
//! slots, with sessions that end after `mcp.sessionIdleSeconds` without a message.
//!
//! The guard takes a slot for an `initialize` before rmcp sees it ([`Sessions::reserve`])
//! and answers 503 when there is none; the slot reaches [`SessionManager::create_session`]
//! through a task-local (rmcp's handler runs inside the guard's future) and is held until
//! the session closes, however it ends (DELETE, idle, the server's stop).
//!
//! With `storage.engineId` set, every session id names its engine (`e1.<uuid>`): a load
//! balancer in front of several engines sends a session's requests to the engine that
//! holds it by that prefix alone (`doc/scaling.md`, nginx's `map`).

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionHandle, LocalSessionManager, LocalSessionManagerError, SessionError,
};
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

tokio::task_local! {
    /// The slot the guard took for the `initialize` being handled.
    static RESERVED: Cell<Option<OwnedSemaphorePermit>>;
    /// Set when the request being handled found its session ended after rmcp had
    /// checked that it exists ([`Sessions::noting_ended`]).
    static ENDED: Cell<bool>;
}

/// `result`, noting (in [`ENDED`]) an error that says the session has ended: it is no
/// longer kept, or its worker has stopped (idle, closed) and it is not yet forgotten.
fn noted<T>(result: Result<T, LocalSessionManagerError>) -> Result<T, SessionsError> {
    if let Err(
        LocalSessionManagerError::SessionNotFound(_)
        | LocalSessionManagerError::SessionError(SessionError::SessionServiceTerminated),
    ) = &result
    {
        let _ = ENDED.try_with(|ended| ended.set(true));
    }
    Ok(result?)
}

/// rmcp's [`LocalSessionManager`] with at most `max` live sessions.
#[derive(Debug)]
pub(super) struct Sessions {
    inner: LocalSessionManager,
    slots: Arc<Semaphore>,
    max: usize,
    /// Each live session's slot, given back when it closes.
    held: Mutex<HashMap<SessionId, OwnedSemaphorePermit>>,
    /// `<engineId>.`, put before each session id rmcp makes (empty: bare ids).
    prefix: String,
    /// The open POST streams of requests, by session id and JSON-RPC request id (as
    /// JSON): how a call's stream is closed mid-call ([`Sessions::close_stream`]).
    streams: Arc<Streams>,
}

/// The open POST streams: (session id, JSON-RPC request id) → (the session, rmcp's id
/// of the HTTP request).
type Streams = Mutex<HashMap<(SessionId, String), (LocalSessionHandle, u64)>>;

/// Forgets a request's stream when the stream ends.
struct Forget(Arc<Streams>, Option<(SessionId, String)>);

impl Drop for Forget {
    fn drop(&mut self) {
        if let Some(key) = self.1.take() {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&key);
        }
    }
}

/// Why a session was not created or reached.
#[derive(Debug, thiserror::Error)]
pub(super) enum SessionsError {
    /// Every slot is taken (the guard answers 503 before this; this is the fallback).
    #[error("{0} MCP sessions are alive, the most mcp.maxSessions allows")]
    Full(usize),
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

impl Sessions {
    /// At most `max` sessions (`max` ≥ 1), each ending after `idle` without a message.
    pub(super) fn new(max: usize, idle: Duration) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(idle);
        Self {
            inner,
            slots: Arc::new(Semaphore::new(max)),
            max,
            held: Mutex::new(HashMap::new()),
            prefix: String::new(),
            streams: Arc::default(),
        }
    }

    /// Ends the POST stream of request `request` (its JSON-RPC id, as JSON) of session
    /// `session`, after an event telling the client to come back in `retry` (SSE
    /// polling, SEP-1699): the request goes on, the session keeps its events, and the
    /// client reconnects with `Last-Event-ID` for the rest. Whether there was one.
    pub(super) async fn close_stream(&self, session: &str, request: &str, retry: Duration) -> bool {
        let key = (SessionId::from(session), request.to_owned());
        let stream = self
            .streams
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned();
        match stream {
            Some((handle, http)) => handle.close_sse_stream(http, Some(retry)).await.is_ok(),
            None => false,
        }
    }

    /// Session ids that begin with `engine` and a dot (`e1.<uuid>`), when it is given.
    pub(super) fn named(mut self, engine: Option<&str>) -> Self {
        self.prefix = engine.map(|e| format!("{e}.")).unwrap_or_default();
        self
    }

    /// The most sessions alive at once.
    pub(super) fn max(&self) -> usize {
        self.max
    }

    /// A free slot for a new session, if there is one.
    pub(super) fn reserve(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.slots).try_acquire_owned().ok()
    }

    /// Runs `handling` (the request that will create a session) with `slot` reserved
    /// for it; a slot the request did not use is given back when it ends.
    pub(super) async fn with_slot<F: Future>(slot: OwnedSemaphorePermit, handling: F) -> F::Output {
        RESERVED.scope(Cell::new(Some(slot)), handling).await
    }

    /// Runs `handling` (a request naming a session) and tells whether its session
    /// turned out to have ended while it was handled. rmcp checks that the session
    /// exists (404 when not) and then reaches it; a session that ends in between (its
    /// worker stops when idle, and the session is forgotten only after that) fails the
    /// request, which rmcp answers 500: the guard answers it 404, as for any ended one.
    pub(super) async fn noting_ended<F: Future>(handling: F) -> (F::Output, bool) {
        ENDED
            .scope(Cell::new(false), async {
                let out = handling.await;
                (out, ENDED.try_with(Cell::get).unwrap_or(false))
            })
            .await
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, OwnedSemaphorePermit>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let slot = RESERVED
            .try_with(Cell::take)
            .ok()
            .flatten()
            .or_else(|| self.reserve())
            .ok_or(SessionsError::Full(self.max))?;
        let (id, transport) = self.inner.create_session().await?;
        let id = if self.prefix.is_empty() {
            id
        } else {
            // rmcp's id (a random uuid) under the engine's name: the session's handle
            // is kept under the named id, which the client is given and sends back.
            let named = SessionId::from(format!("{}{id}", self.prefix));
            let mut live = self.inner.sessions.write().await;
            if let Some(handle) = live.remove(&id) {
                live.insert(named.clone(), handle);
            }
            named
        };
        self.held().insert(id.clone(), slot);
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.inner.close_session(id).await;
        self.held().remove(id);
        Ok(closed?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        // rmcp's `create_stream`, keeping the request's stream to close it mid-call.
        let handle = noted(
            self.inner
                .sessions
                .read()
                .await
                .get(id)
                .cloned()
                .ok_or_else(|| LocalSessionManagerError::SessionNotFound(id.clone())),
        )?;
        let receiver = noted(
            handle
                .establish_request_wise_channel()
                .await
                .map_err(LocalSessionManagerError::from),
        )?;
        let http = receiver.http_request_id;
        let key = match (&message, http) {
            (rmcp::model::JsonRpcMessage::Request(r), Some(http)) => {
                let key = (id.clone(), serde_json::to_string(&r.id).unwrap_or_default());
                self.streams
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(key.clone(), (handle.clone(), http));
                Some(key)
            }
            _ => None,
        };
        let forget = Forget(Arc::clone(&self.streams), key);
        noted(
            handle
                .push_message(message, http)
                .await
                .map_err(LocalSessionManagerError::from),
        )?;
        Ok(futures_util::stream::unfold(
            (receiver.inner, forget),
            |(mut rx, forget)| async move { rx.recv().await.map(|m| (m, (rx, forget))) },
        ))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        noted(self.inner.accept_message(id, message).await)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        noted(self.inner.create_standalone_stream(id).await)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        noted(self.inner.resume(id, last_event_id).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_slot_is_held_while_its_session_lives() {
        let sessions = Sessions::new(2, Duration::from_secs(60));
        let slot = sessions.reserve().unwrap();
        let (a, _ta) = Sessions::with_slot(slot, sessions.create_session())
            .await
            .unwrap();
        let (b, _tb) = sessions.create_session().await.unwrap();
        assert!(sessions.reserve().is_none());
        assert!(matches!(
            sessions.create_session().await,
            Err(SessionsError::Full(2))
        ));
        sessions.close_session(&a).await.unwrap();
        let slot = sessions.reserve().unwrap();
        drop(slot);
        sessions.close_session(&b).await.unwrap();
        // A slot reserved for a request that made no session comes back.
        let slot = sessions.reserve().unwrap();
        Sessions::with_slot(slot, async {}).await;
        assert_eq!(sessions.slots.available_permits(), 2);
    }

    /// A session whose worker stopped but which is not yet forgotten (the window in
    /// which rmcp finds it, then fails to reach it): the request notes it ended, so the
    /// guard answers 404 rather than rmcp's 500.
    #[tokio::test]
    async fn a_request_to_a_session_that_just_ended_notes_it() {
        let sessions = Sessions::new(2, Duration::from_secs(60));
        let (id, _transport) = sessions.create_session().await.unwrap();
        let ping = || {
            ClientJsonRpcMessage::request(
                rmcp::model::ClientRequest::PingRequest(rmcp::model::PingRequest::default()),
                rmcp::model::NumberOrString::Number(1),
            )
        };
        // A live session is not noted.
        let (_, ended) = Sessions::noting_ended(sessions.accept_message(
            &id,
            ClientJsonRpcMessage::notification(
                rmcp::model::ClientNotification::InitializedNotification(Default::default()),
            ),
        ))
        .await;
        assert!(!ended);
        // Its worker stops (as when idle; the notification above, unexpected before an
        // initialize, may already have stopped it); the session is still kept.
        let handle = sessions
            .inner
            .sessions
            .read()
            .await
            .get(&id)
            .cloned()
            .unwrap();
        let _ = handle.close().await;
        let mut noted = None;
        for _ in 0..200 {
            let (result, ended) = Sessions::noting_ended(sessions.create_stream(&id, ping())).await;
            if result.is_err() {
                noted = Some(ended);
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            noted,
            Some(true),
            "the stopped session was reached or not noted"
        );
        assert!(sessions.has_session(&id).await.unwrap());
        let (result, ended) = Sessions::noting_ended(sessions.accept_message(
            &id,
            ClientJsonRpcMessage::notification(
                rmcp::model::ClientNotification::InitializedNotification(Default::default()),
            ),
        ))
        .await;
        assert!(result.is_err() && ended);
        // Forgotten, it is noted too (rmcp checked it before it was).
        sessions.close_session(&id).await.unwrap();
        let (result, ended) = Sessions::noting_ended(sessions.create_stream(&id, ping())).await;
        assert!(result.is_err() && ended);
        // Outside the guard's scope nothing is noted, and nothing fails for it.
        assert!(sessions.create_stream(&id, ping()).await.is_err());
    }

    #[tokio::test]
    async fn a_named_engine_puts_its_name_before_each_session_id() {
        let sessions = Sessions::new(2, Duration::from_secs(60)).named(Some("e2"));
        let (id, _t) = sessions.create_session().await.unwrap();
        assert!(id.starts_with("e2.") && id.len() > 10, "{id}");
        assert!(sessions.has_session(&id).await.unwrap());
        let bare = SessionId::from(id.strip_prefix("e2.").unwrap());
        assert!(!sessions.has_session(&bare).await.unwrap());
        sessions.close_session(&id).await.unwrap();
        assert!(!sessions.has_session(&id).await.unwrap());
        assert_eq!(sessions.slots.available_permits(), 2);
        let (plain, _t) = Sessions::new(1, Duration::from_secs(60))
            .create_session()
            .await
            .unwrap();
        assert!(!plain.contains('.'), "{plain}");
    }
}
