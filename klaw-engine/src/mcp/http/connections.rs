//! The HTTP server's connections, served here rather than by `axum::serve` (which has
//! neither of these): at most `mcp.maxConnections` open at once, and each must send a
//! request's headers within `mcp.headerTimeoutSeconds` (the first request's, and each next
//! one's on a kept-alive connection, so an idle connection is closed too).
//!
//! Past the cap the server stops accepting: new connections wait in the kernel's queue,
//! in order, until one ends. Whoever fills the cap without sending requests loses each
//! connection after the header timeout, so an honest client behind it is reached; the
//! process never holds more sockets than the cap (a full table of open files stops every
//! `accept`, the honest one's too).

use std::sync::Arc;
use std::time::Duration;

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

/// Serves `app` on the connections of `listener` until `stop` is cancelled, then lets
/// open connections finish their requests for up to five seconds.
pub(super) async fn serve(
    listener: TcpListener,
    app: axum::Router,
    limits: Limits,
    stop: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    loop {
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => slot,
            () = stop.cancelled() => break,
        };
        // The semaphore is never closed.
        let Ok(slot) = slot else { break };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.cancelled() => break,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // One connection that failed (reset before it was taken): the next one.
                // Anything else (out of open files): a pause, not a busy loop.
                if !matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionAborted
                        | std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::ConnectionRefused
                ) {
                    tracing::warn!(target: "klaw::mcp", "cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                continue;
            }
        };
        // Answers go out at once, not after a delayed ACK (Nagle: 40 ms a round trip).
        let _ = tcp.set_nodelay(true);
        let conn = http.serve_connection(TokioIo::new(tcp), TowerToHyperService::new(app.clone()));
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut conn = std::pin::pin!(conn);
            // A failed connection (a header timeout, a client gone) concerns only itself.
            tokio::select! {
                _ = conn.as_mut() => {}
                () = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
            drop(slot);
        });
    }
    drop(listener);
    // Every slot back is every connection closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(GRACE, slots.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!(target: "klaw::mcp", "connections still open 5 s after the stop; closing");
    }
}
