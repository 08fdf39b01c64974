//! A call's progress reports and log messages on their way to its MCP client: in order,
//! from a task of their own, sent before the call's result and never after it.

use std::sync::{Arc, Mutex, PoisonError};

use klaw_tools::{CallListener, LogLevel, LogMessage, ProgressUpdate};
use rmcp::model::ProgressNotificationParam;
use rmcp::{Peer, RoleServer};
use serde_json::Value;

use super::mcp_level;

/// What a call tells its client while it runs.
enum Note {
    Progress(ProgressUpdate),
    Log(LogMessage),
    /// The result is going out: what came before is sent, nothing after.
    End,
}

/// Forwards one call's reports to its client, in order, from a task of its own (the
/// listener is called on the tool's thread). The task starts with the first report: a
/// call that reports nothing costs no task.
struct McpListener {
    shared: Arc<ForwardState>,
}

/// What the listener and its [`Forwarder`] share.
struct ForwardState {
    /// The sender to the task, once started; `closed` once the result is out (later
    /// reports are dropped).
    sender: Mutex<Sender>,
    /// The request's progress token: progress goes out only for a request that gave one.
    token: Option<rmcp::model::ProgressToken>,
    /// The least serious level sent; `None`: no log message (a 2026-07-28 request
    /// that names no level).
    min_level: Option<LogLevel>,
    /// The logger name of the messages: the tool's name.
    tool: String,
    peer: Peer<RoleServer>,
    /// The runtime the task starts on (a tool may report from a thread of its own).
    runtime: tokio::runtime::Handle,
}

enum Sender {
    NotStarted,
    Running(
        tokio::sync::mpsc::UnboundedSender<Note>,
        tokio::task::JoinHandle<()>,
    ),
    Closed,
}

impl ForwardState {
    fn send(&self, note: Note) {
        let mut sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(*sender, Sender::NotStarted) {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let task = self.runtime.spawn(forward(
                rx,
                self.token.clone(),
                self.tool.clone(),
                self.peer.clone(),
            ));
            *sender = Sender::Running(tx, task);
        }
        if let Sender::Running(tx, _) = &*sender {
            let _ = tx.send(note);
        }
    }
}

impl CallListener for McpListener {
    fn progress(&self, update: &ProgressUpdate) {
        if self.shared.token.is_some() {
            self.shared.send(Note::Progress(update.clone()));
        }
    }

    fn log(&self, message: &LogMessage) {
        if self
            .shared
            .min_level
            .is_some_and(|min| message.level >= min)
        {
            self.shared.send(Note::Log(message.clone()));
        }
    }
}

/// Sends one call's reports as they come: progress as `notifications/progress` with
/// the request's token, log messages as `notifications/message` from the logger `tool`.
async fn forward(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Note>,
    token: Option<rmcp::model::ProgressToken>,
    tool: String,
    peer: Peer<RoleServer>,
) {
    while let Some(note) = rx.recv().await {
        let sent = match note {
            Note::End => break,
            Note::Progress(u) => {
                let Some(token) = token.clone() else { continue };
                #[allow(clippy::cast_precision_loss)] // progress counts are far below 2^52
                let mut p =
                    ProgressNotificationParam::new(token, u.done as f64).with_message(u.message);
                if let Some(total) = u.total {
                    #[allow(clippy::cast_precision_loss)]
                    let total = total as f64;
                    p = p.with_total(total);
                }
                peer.notify_progress(p).await
            }
            #[allow(deprecated)]
            Note::Log(m) => {
                let p = rmcp::model::LoggingMessageNotificationParam::new(
                    mcp_level(m.level),
                    Value::String(m.message),
                )
                .with_logger(tool.clone());
                peer.notify_logging_message(p).await
            }
        };
        if sent.is_err() {
            break;
        }
    }
}

/// The listener of one call (progress when the request gave a `token`, log messages at
/// or above `min_level`, none without one) and the handle that ends its forwarding.
pub(super) fn forwarder(
    token: Option<rmcp::model::ProgressToken>,
    min_level: Option<LogLevel>,
    tool: String,
    peer: Peer<RoleServer>,
) -> (Arc<dyn CallListener>, Forwarder) {
    let shared = Arc::new(ForwardState {
        sender: Mutex::new(Sender::NotStarted),
        token,
        min_level,
        tool,
        peer,
        runtime: tokio::runtime::Handle::current(),
    });
    let listener = McpListener {
        shared: Arc::clone(&shared),
    };
    (Arc::new(listener), Forwarder(shared))
}

/// Ends one call's forwarding.
pub(super) struct Forwarder(Arc<ForwardState>);

impl Forwarder {
    fn close(
        &self,
    ) -> Option<(
        tokio::sync::mpsc::UnboundedSender<Note>,
        tokio::task::JoinHandle<()>,
    )> {
        let mut sender = self.0.sender.lock().unwrap_or_else(PoisonError::into_inner);
        match std::mem::replace(&mut *sender, Sender::Closed) {
            Sender::Running(tx, task) => Some((tx, task)),
            _ => None,
        }
    }

    /// No more reports: sends those already made (for up to a second), then stops,
    /// even when the tool kept its reporter.
    pub(super) async fn finish(self) {
        let Some((tx, task)) = self.close() else {
            return;
        };
        let _ = tx.send(Note::End);
        let abort = task.abort_handle();
        if tokio::time::timeout(std::time::Duration::from_secs(1), task)
            .await
            .is_err()
        {
            abort.abort();
        }
    }

    /// No more reports, and those not sent yet are dropped (the call was cancelled).
    pub(super) fn stop(self) {
        if let Some((_, task)) = self.close() {
            task.abort();
        }
    }
}
