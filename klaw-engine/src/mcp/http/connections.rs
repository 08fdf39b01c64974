//! The HTTP server's connections, served here rather than by `axum::serve` (which has
//! none of this): at most `mcp.maxConnections` open at once (fewer when the process may
//! not open that many files and keep a reserve for its own work), and each must send a
//! request's headers within `mcp.headerTimeoutSeconds` (the first request's, and each
//! next one's on a kept-alive connection, so an idle connection is closed too).
//!
//! The server never stops accepting while a connection it holds is only waiting for
//! headers: when every slot is taken (or the process is out of open files), the
//! connection that has waited longest without a request in flight (a request counts
//! once its headers and body are in, until its response is sent) is closed, and the
//! new one takes its slot. A crowd of half-sent requests (slowloris), however it
//! reconnects, thus only ever pushes out its own oldest members, and an honest client,
//! whose headers come in one packet, is served as soon as it is accepted. Only when
//! every slot serves a request does a new connection wait for one to end.
//!
//! An event stream answering a POST keeps its head and first event (rmcp's priming
//! event) for up to a millisecond, until the answer follows: a short call's response
//! is then one write (one packet) instead of two. The head of a longer call goes out
//! after that millisecond, its answer when it comes. Measured beside rmcp (doc/engine.md):
//! 15–20% less of the server's CPU per HTTP call, half the context switches.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// How long open connections get to finish once `stop` is cancelled.
const GRACE: Duration = Duration::from_secs(5);

/// The limits of [`serve`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// Most connections open at once (≥ 1).
    pub(super) max_connections: usize,
    /// Time to send a request's headers.
    pub(super) header_timeout: Duration,
}

/// The open connections in the order they were accepted: each one's count of requests
/// in flight (a request counts from its headers until its response is sent, a stream
/// for as long as it is open) and the token that closes it.
#[derive(Default)]
struct Table {
    open: Mutex<BTreeMap<u64, Open>>,
}

struct Open {
    in_flight: Arc<AtomicUsize>,
    close: CancellationToken,
}

impl Table {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Open>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Closes the oldest connection with no request in flight (it has not sent its
    /// headers yet, or sits idle between requests); whether there was one.
    fn close_oldest_waiting(&self) -> bool {
        let mut open = self.lock();
        let oldest = open
            .iter()
            .find(|(_, o)| o.in_flight.load(Ordering::Acquire) == 0)
            .map(|(n, _)| *n);
        match oldest.and_then(|n| open.remove(&n)) {
            Some(o) => {
                o.close.cancel();
                true
            }
            None => false,
        }
    }
}

/// One request on its connection: counted as in flight once it is all in (its body
/// received, or its answer begun), until it is dropped (its response sent).
struct InFlight {
    count: Arc<AtomicUsize>,
    counted: AtomicBool,
}

impl InFlight {
    fn new(count: &Arc<AtomicUsize>) -> Arc<Self> {
        Arc::new(Self {
            count: Arc::clone(count),
            counted: AtomicBool::new(false),
        })
    }

    /// Counts the request (once).
    fn begin(&self) {
        if !self.counted.swap(true, Ordering::AcqRel) {
            self.count.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if *self.counted.get_mut() {
            self.count.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A request's body, counting its request once the whole body is in: a request whose
/// body trickles in is as unfinished as one whose headers do.
struct Received {
    body: Incoming,
    request: Arc<InFlight>,
}

impl hyper::body::Body for Received {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let frame = Pin::new(&mut this.body).poll_frame(cx);
        if matches!(frame, Poll::Ready(None)) || this.body.is_end_stream() {
            this.request.begin();
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A response's body, keeping its request counted until the body is sent (or dropped),
/// with the frames [`gather`] read ahead given first.
struct Counted {
    body: Body,
    ahead: Gathered,
    _request: Arc<InFlight>,
}

/// The frames of a body read before its head went out, and whether the body ended.
#[derive(Default)]
struct Gathered {
    frames: VecDeque<Result<Frame<Bytes>, axum::Error>>,
    ended: bool,
}

/// How long an event stream answering a POST may keep its head and first event (rmcp's
/// priming event) waiting for the next one, the answer: at most this, and the answer
/// of a short call then goes out with them in one write instead of two.
const GATHER: Duration = Duration::from_millis(1);

/// Reads ahead the frames of `body` that come within [`GATHER`]: until a second frame
/// (the first after the priming event), the body's end or an error.
async fn gather(body: &mut Body) -> Gathered {
    let mut ahead = Gathered::default();
    let mut wait = std::pin::pin!(tokio::time::sleep(GATHER));
    std::future::poll_fn(|cx| {
        loop {
            match hyper::body::Body::poll_frame(Pin::new(&mut *body), cx) {
                Poll::Ready(None) => {
                    ahead.ended = true;
                    return Poll::Ready(());
                }
                Poll::Ready(Some(Err(e))) => {
                    ahead.frames.push_back(Err(e));
                    return Poll::Ready(());
                }
                Poll::Ready(Some(Ok(frame))) => {
                    ahead.frames.push_back(Ok(frame));
                    if ahead.frames.len() >= 2 {
                        return Poll::Ready(());
                    }
                }
                Poll::Pending => return wait.as_mut().poll(cx),
            }
        }
    })
    .await;
    ahead
}

impl hyper::body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if let Some(frame) = this.ahead.frames.pop_front() {
            return Poll::Ready(Some(frame));
        }
        if this.ahead.ended {
            return Poll::Ready(None);
        }
        Pin::new(&mut this.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.ahead.frames.is_empty() && (self.ahead.ended || self.body.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        if self.ahead.frames.is_empty() && !self.ahead.ended {
            self.body.size_hint()
        } else {
            SizeHint::default()
        }
    }
}

/// Raises the soft limit of open files towards the hard one as far as `wanted` needs,
/// and returns the limit then in force (`None`: unlimited or unknown).
fn open_files_limit(wanted: u64) -> Option<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if let Some(current) = limit.current
        && current < wanted
    {
        let raised = limit.maximum.map_or(wanted, |max| max.min(wanted));
        if raised > current {
            limit.current = Some(raised);
            if let Err(e) = setrlimit(Resource::Nofile, limit) {
                tracing::warn!(target: "klaw::mcp", "cannot raise the open-file limit to {raised}: {e}");
            }
        }
    }
    getrlimit(Resource::Nofile).current
}

/// The most connections to hold: `max`, or fewer when the open-file limit would not
/// leave a quarter of itself (at least 32) to the engine's own files.
fn connection_cap(max: usize) -> usize {
    let reserve = |limit: u64| (limit / 4).max(32);
    let max64 = u64::try_from(max).unwrap_or(u64::MAX);
    // The least limit whose reserve still leaves `max`.
    let wanted = max64
        .saturating_add(max64 / 3 + 1)
        .max(max64.saturating_add(32));
    match open_files_limit(wanted) {
        None => max,
        Some(limit) => {
            let room = usize::try_from(limit.saturating_sub(reserve(limit))).unwrap_or(usize::MAX);
            max.min(room).max(1)
        }
    }
}

/// Whether accepting failed for want of open files (the process's or the system's).
fn out_of_files(e: &std::io::Error) -> bool {
    e.raw_os_error().is_some_and(|c| {
        c == rustix::io::Errno::MFILE.raw_os_error() || c == rustix::io::Errno::NFILE.raw_os_error()
    })
}

/// Serves `app` on the connections of `listener` until `stop` is cancelled, then lets
/// open connections finish their requests for up to five seconds.
pub(super) async fn serve(
    listener: TcpListener,
    app: axum::Router,
    limits: Limits,
    stop: CancellationToken,
) {
    let cap = connection_cap(limits.max_connections);
    if cap < limits.max_connections {
        tracing::warn!(target: "klaw::mcp", "at most {cap} connections at once (mcp.maxConnections is {}): the open-file limit leaves no more", limits.max_connections);
    }
    let slots = Arc::new(Semaphore::new(cap));
    let table = Arc::new(Table::default());
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let mut next: u64 = 0;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.cancelled() => break,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) if out_of_files(&e) => {
                // Make room: the longest-waiting connection without a request goes.
                if table.close_oldest_waiting() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                } else {
                    tracing::warn!(target: "klaw::mcp", "cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                continue;
            }
            Err(e) => {
                // One connection that failed (reset before it was taken): the next one.
                // Anything else: a pause, not a busy loop.
                if !matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionAborted
                        | std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::ConnectionRefused
                ) {
                    tracing::warn!(target: "klaw::mcp", "cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                continue;
            }
        };
        let slot = match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                // Full: the oldest connection still waiting for headers makes room; when
                // every one serves a request, this one waits for a slot.
                table.close_oldest_waiting();
                let slot = tokio::select! {
                    slot = Arc::clone(&slots).acquire_owned() => slot,
                    () = stop.cancelled() => break,
                };
                // The semaphore is never closed.
                let Ok(slot) = slot else { break };
                slot
            }
        };
        // Answers go out at once, not after a delayed ACK (Nagle: 40 ms a round trip).
        let _ = tcp.set_nodelay(true);
        let in_flight = Arc::new(AtomicUsize::new(0));
        let close = CancellationToken::new();
        let n = next;
        next += 1;
        table.lock().insert(
            n,
            Open {
                in_flight: Arc::clone(&in_flight),
                close: close.clone(),
            },
        );
        let inner = TowerToHyperService::new(app.clone());
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let counted = InFlight::new(&in_flight);
            if hyper::body::Body::is_end_stream(request.body()) {
                counted.begin();
            }
            let request = request.map(|body| Received {
                body,
                request: Arc::clone(&counted),
            });
            let post = request.method() == hyper::Method::POST;
            let response = hyper::service::Service::call(&inner, request);
            async move {
                let response = response.await?;
                // Answered: in flight until the response is sent, whatever its body.
                counted.begin();
                let (head, mut body) = response.into_parts();
                // An event stream answering a POST: its head and priming event wait
                // (briefly) for the answer, to go out in one write.
                let events = head
                    .headers
                    .get(hyper::header::CONTENT_TYPE)
                    .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
                let ahead = if post && events {
                    gather(&mut body).await
                } else {
                    Gathered::default()
                };
                Ok::<_, Infallible>(hyper::Response::from_parts(
                    head,
                    Counted {
                        body,
                        ahead,
                        _request: counted,
                    },
                ))
            }
        });
        let conn = http.serve_connection(TokioIo::new(tcp), service);
        let (stop, table) = (stop.clone(), Arc::clone(&table));
        tokio::spawn(async move {
            // The connection is dropped (its socket closed) before its slot is given back.
            async move {
                let mut conn = std::pin::pin!(conn);
                // A failed connection (a header timeout, a client gone) concerns only
                // itself; one closed to make room is dropped.
                tokio::select! {
                    _ = conn.as_mut() => {}
                    () = close.cancelled() => {}
                    () = stop.cancelled() => {
                        conn.as_mut().graceful_shutdown();
                        tokio::select! {
                            _ = conn.as_mut() => {}
                            () = close.cancelled() => {}
                        }
                    }
                }
            }
            .await;
            table.lock().remove(&n);
            drop(slot);
        });
    }
    drop(listener);
    // Every slot back is every connection closed.
    let all = u32::try_from(cap).unwrap_or(u32::MAX);
    if tokio::time::timeout(GRACE, slots.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!(target: "klaw::mcp", "connections still open 5 s after the stop; closing");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt as _;
    use tokio::sync::mpsc;

    /// A body whose frames are what the test sends, ending when the sender is dropped.
    fn body(frames: mpsc::UnboundedReceiver<Result<&'static str, std::io::Error>>) -> Body {
        let stream = futures_util::stream::unfold(frames, |mut rx| async move {
            rx.recv().await.map(|frame| (frame, rx))
        });
        Body::from_stream(stream.map(|f| f.map(|s| Bytes::from_static(s.as_bytes()))))
    }

    /// Every frame a response body gives, as text (an error as `!`), until its end.
    async fn drain(mut body: Counted) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(frame) =
            std::future::poll_fn(|cx| hyper::body::Body::poll_frame(Pin::new(&mut body), cx)).await
        {
            out.push(match frame {
                Ok(f) => String::from_utf8_lossy(&f.into_data().unwrap_or_default()).into(),
                Err(_) => "!".into(),
            });
        }
        out
    }

    fn counted(body: Body, ahead: Gathered) -> Counted {
        Counted {
            body,
            ahead,
            _request: InFlight::new(&Arc::new(AtomicUsize::new(0))),
        }
    }

    #[tokio::test]
    async fn an_answer_ready_goes_out_with_its_head_and_nothing_is_lost() {
        let (tx, rx) = mpsc::unbounded_channel();
        for frame in ["prime", "answer", "after"] {
            tx.send(Ok(frame)).unwrap();
        }
        drop(tx);
        let mut body = body(rx);
        let ahead = gather(&mut body).await;
        // The priming event and the answer, read ahead; what follows stays in the body.
        assert_eq!(ahead.frames.len(), 2);
        assert!(!ahead.ended);
        assert_eq!(
            drain(counted(body, ahead)).await,
            ["prime", "answer", "after"]
        );
    }

    #[tokio::test]
    async fn a_short_body_is_gathered_to_its_end() {
        let (tx, rx) = mpsc::unbounded_channel();
        tx.send(Ok("only")).unwrap();
        drop(tx);
        let mut body = body(rx);
        let ahead = gather(&mut body).await;
        assert_eq!(ahead.frames.len(), 1);
        assert!(ahead.ended);
        let mut body = counted(body, ahead);
        // It says it has ended only once its last frame is given.
        assert!(!hyper::body::Body::is_end_stream(&body));
        let only =
            std::future::poll_fn(|cx| hyper::body::Body::poll_frame(Pin::new(&mut body), cx));
        assert!(only.await.is_some_and(|f| f.is_ok()));
        assert!(hyper::body::Body::is_end_stream(&body));
        assert!(drain(body).await.is_empty());
    }

    #[tokio::test]
    async fn a_late_answer_does_not_hold_the_head() {
        // The answer is sent only once `gather` has returned: were it to wait for it,
        // the test would never end (the timeout is the failure, not a measure).
        let (tx, rx) = mpsc::unbounded_channel();
        tx.send(Ok("prime")).unwrap();
        let mut body = body(rx);
        let ahead = tokio::time::timeout(Duration::from_secs(30), gather(&mut body))
            .await
            .expect("gather waits for the answer no longer than its bound");
        assert_eq!(ahead.frames.len(), 1);
        assert!(!ahead.ended);
        let body = counted(body, ahead);
        assert!(!hyper::body::Body::is_end_stream(&body));
        tx.send(Ok("answer")).unwrap();
        drop(tx);
        assert_eq!(drain(body).await, ["prime", "answer"]);
    }

    #[tokio::test]
    async fn an_error_read_ahead_is_given_in_its_place() {
        let (tx, rx) = mpsc::unbounded_channel();
        tx.send(Ok("prime")).unwrap();
        tx.send(Err(std::io::Error::other("gone"))).unwrap();
        tx.send(Ok("never read ahead")).unwrap();
        let mut body = body(rx);
        let ahead = gather(&mut body).await;
        assert_eq!(ahead.frames.len(), 2);
        drop(tx);
        let out = drain(counted(body, ahead)).await;
        assert_eq!(out[..2], ["prime", "!"]);
    }
}
