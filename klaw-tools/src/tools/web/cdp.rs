//! A small DevTools protocol client over Chromium's `--remote-debugging-pipe` (the
//! browser reads JSON messages from its descriptor 3 and writes to its descriptor 4,
//! each ended by a NUL byte): no TCP port, so nothing but the engine can drive the
//! browser.
//!
//! Sessions are flattened (`Target.setAutoAttach {flatten: true}` at the browser's
//! level): a message to a page carries its `sessionId`. Every target the browser
//! creates (a call's page, its popups) is attached here before it runs a script, its
//! `Page` domain enabled, and each JavaScript dialog (`alert`, `confirm`, `prompt`,
//! `beforeunload`) is dismissed as it opens.
//!
//! Two threads per browser: one writes the queued messages, one reads and dispatches
//! (answers to their callers, events to every listener).
//!
//! A message is read up to [`MAX_MESSAGE`] bytes: a page that makes its answer larger
//! (a document of a gigabyte of text) fails the one call that asked for it, with a clear
//! error, instead of filling the engine's memory; the rest of the message is skipped
//! unread and the connection goes on.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

/// An event of the browser: its method, parameters and session (`None`: the browser's).
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub(crate) method: String,
    pub(crate) params: Value,
    pub(crate) session: Option<String>,
}

type Answer = Result<Value, String>;

/// The largest DevTools message read (64 MiB): a page's HTML is cut to `web.maxBytes`
/// before it is sent, and a full-page screenshot of a tall page stays well under it.
pub(crate) const MAX_MESSAGE: usize = 64 * 1024 * 1024;

struct Inner {
    next: AtomicU64,
    pending: Mutex<HashMap<u64, oneshot::Sender<Answer>>>,
    listeners: Mutex<Vec<mpsc::UnboundedSender<Event>>>,
    out: Mutex<Option<std::sync::mpsc::Sender<Vec<u8>>>>,
    closed: AtomicBool,
}

/// A connection to one browser over its pipe; cheap to clone.
#[derive(Clone)]
pub(crate) struct Cdp(Arc<Inner>);

impl Cdp {
    /// Talks to the browser through `to` (its descriptor 3) and `from` (its descriptor 4).
    pub(crate) fn start(to: std::io::PipeWriter, from: std::io::PipeReader) -> Self {
        Self::start_capped(to, from, MAX_MESSAGE)
    }

    /// [`Cdp::start`] with a cap other than [`MAX_MESSAGE`] (the tests use a small one).
    fn start_capped(to: std::io::PipeWriter, from: std::io::PipeReader, cap: usize) -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let cdp = Cdp(Arc::new(Inner {
            next: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            listeners: Mutex::new(Vec::new()),
            out: Mutex::new(Some(tx)),
            closed: AtomicBool::new(false),
        }));
        let _ = std::thread::Builder::new()
            .name("klaw-cdp-write".into())
            .spawn(move || {
                let mut to = to;
                while let Ok(msg) = rx.recv() {
                    if to.write_all(&msg).is_err() {
                        break;
                    }
                }
            });
        let reader = cdp.clone();
        let _ = std::thread::Builder::new()
            .name("klaw-cdp-read".into())
            .spawn(move || reader.read_all(from, cap));
        cdp
    }

    /// Closes our end of the pipe: the keeper then ends the browser.
    pub(crate) fn close(&self) {
        if let Ok(mut o) = self.0.out.lock() {
            o.take();
        }
    }

    /// Whether the browser's end of the pipe closed (the browser is gone).
    pub(crate) fn is_closed(&self) -> bool {
        self.0.closed.load(Ordering::SeqCst)
    }

    /// Every event from now on, until the browser goes.
    pub(crate) fn events(&self) -> mpsc::UnboundedReceiver<Event> {
        let (tx, rx) = mpsc::unbounded_channel();
        if !self.is_closed()
            && let Ok(mut l) = self.0.listeners.lock()
        {
            l.push(tx);
        }
        rx
    }

    /// Sends `method` (to `session`, or to the browser) and waits for its answer.
    pub(crate) async fn send(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        let (tx, rx) = oneshot::channel();
        let id = self.0.next.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut p) = self.0.pending.lock() {
            p.insert(id, tx);
        }
        if !self.queue(id, session, method, params) {
            if let Ok(mut p) = self.0.pending.lock() {
                p.remove(&id);
            }
            return Err("the browser is gone".into());
        }
        rx.await
            .unwrap_or_else(|_| Err("the browser is gone".into()))
            .map_err(|e| format!("{method}: {e}"))
    }

    /// Sends `method` without waiting for its answer (which is dropped).
    pub(crate) fn fire(&self, session: Option<&str>, method: &str, params: Value) {
        let id = self.0.next.fetch_add(1, Ordering::SeqCst);
        self.queue(id, session, method, params);
    }

    fn queue(&self, id: u64, session: Option<&str>, method: &str, params: Value) -> bool {
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = Value::String(s.to_owned());
        }
        let Ok(mut bytes) = serde_json::to_vec(&msg) else {
            return false;
        };
        bytes.push(0);
        self.0
            .out
            .lock()
            .ok()
            .and_then(|o| o.as_ref().map(|tx| tx.send(bytes).is_ok()))
            .unwrap_or(false)
    }

    /// The reading thread: answers and events until the pipe ends. A message over `cap`
    /// bytes is skipped (see the module's doc).
    fn read_all(&self, from: std::io::PipeReader, cap: usize) {
        let mut from = BufReader::new(from);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
            match (&mut from).take(limit).read_until(0, &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if buf.last() == Some(&0) {
                buf.pop();
            } else if buf.len() > cap {
                if !self.skip_oversized(&mut from, &buf, cap) {
                    break;
                }
                continue;
            }
            let Ok(msg) = serde_json::from_slice::<Value>(&buf) else {
                tracing::debug!(target: "klaw::web", "render_js: an unreadable DevTools message");
                continue;
            };
            self.dispatch(msg);
        }
        self.0.closed.store(true, Ordering::SeqCst);
        if let Ok(mut o) = self.0.out.lock() {
            o.take();
        }
        if let Ok(mut p) = self.0.pending.lock() {
            for (_, tx) in p.drain() {
                let _ = tx.send(Err("the browser is gone".into()));
            }
        }
        if let Ok(mut l) = self.0.listeners.lock() {
            l.clear();
        }
    }

    /// Skips the rest of a message over `cap` (its first bytes are `head`) and fails the
    /// call it answers (Chromium writes `{"id":N,` first). False when the pipe ended.
    fn skip_oversized(&self, from: &mut impl BufRead, head: &[u8], cap: usize) -> bool {
        let id = head
            .strip_prefix(br#"{"id":"#)
            .map(|rest| rest.iter().take_while(|b| b.is_ascii_digit()).copied())
            .and_then(|digits| String::from_utf8(digits.collect()).ok())
            .and_then(|digits| digits.parse::<u64>().ok());
        tracing::warn!(
            target: "klaw::web",
            "render_js: the browser sent a message over {} MiB; skipped",
            cap / (1024 * 1024)
        );
        let waiting = id.and_then(|id| self.0.pending.lock().ok()?.remove(&id));
        if let Some(tx) = waiting {
            let _ = tx.send(Err(format!(
                "the browser's answer is over {} bytes (the page is too large); it was not read",
                cap
            )));
        }
        matches!(from.skip_until(0), Ok(n) if n > 0)
    }

    fn dispatch(&self, mut msg: Value) {
        let session = msg
            .get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(id) = msg.get("id").and_then(Value::as_u64) {
            let answer = match msg.get_mut("error") {
                Some(e) => Err(e
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| e.to_string(), str::to_owned)),
                None => Ok(msg.get_mut("result").map(Value::take).unwrap_or_default()),
            };
            let waiting = self.0.pending.lock().ok().and_then(|mut p| p.remove(&id));
            if let Some(tx) = waiting {
                let _ = tx.send(answer);
            }
            return;
        }
        let Some(method) = msg.get("method").and_then(Value::as_str).map(str::to_owned) else {
            return;
        };
        let params = msg.get_mut("params").map(Value::take).unwrap_or_default();
        match method.as_str() {
            // A new target (a call's page, a popup, a worker), paused before its first
            // script: its dialogs reported, then let run.
            "Target.attachedToTarget" => {
                if let Some(s) = params.get("sessionId").and_then(Value::as_str) {
                    let kind = params
                        .pointer("/targetInfo/type")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    if kind == "page" {
                        self.fire(Some(s), "Page.enable", json!({}));
                    }
                    self.fire(Some(s), "Runtime.runIfWaitingForDebugger", json!({}));
                }
            }
            "Page.javascriptDialogOpening" => {
                self.fire(
                    session.as_deref(),
                    "Page.handleJavaScriptDialog",
                    json!({"accept": false}),
                );
            }
            _ => {}
        }
        let event = Event {
            method,
            params,
            session,
        };
        if let Ok(mut l) = self.0.listeners.lock() {
            l.retain(|tx| tx.send(event.clone()).is_ok());
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

    use std::io::{BufRead, BufReader, Write};

    use serde_json::json;

    use super::Cdp;

    /// A browser that answers each request with `answer(id)`; over a real pipe pair.
    fn fake_browser(answer: impl Fn(u64) -> Vec<u8> + Send + 'static, cap: usize) -> Cdp {
        let (from_engine, to_browser) = std::io::pipe().unwrap();
        let (from_browser, mut to_engine) = std::io::pipe().unwrap();
        std::thread::spawn(move || {
            let mut requests = BufReader::new(from_engine);
            let mut buf = Vec::new();
            while matches!(requests.read_until(0, &mut buf), Ok(n) if n > 0) {
                buf.pop();
                let request: serde_json::Value = serde_json::from_slice(&buf).unwrap();
                buf.clear();
                let mut message = answer(request["id"].as_u64().unwrap());
                message.push(0);
                if to_engine.write_all(&message).is_err() {
                    break;
                }
            }
        });
        Cdp::start_capped(to_browser, from_browser, cap)
    }

    /// A hostile page's answer over the cap fails that call with a clear error, is not
    /// kept in memory, and the next call on the same browser still works.
    #[tokio::test]
    async fn an_answer_over_the_cap_fails_its_call_and_the_connection_goes_on() {
        let cdp = fake_browser(
            |id| {
                let size = if id == 1 { 200_000 } else { 10 };
                serde_json::to_vec(&json!({"id": id, "result": {"html": "x".repeat(size)}}))
                    .unwrap()
            },
            64 * 1024,
        );
        let err = cdp
            .send(None, "Runtime.evaluate", json!({}))
            .await
            .unwrap_err();
        assert!(err.contains("over 65536 bytes"), "{err}");
        let next = cdp.send(None, "Runtime.evaluate", json!({})).await.unwrap();
        assert_eq!(next["html"], "x".repeat(10));
        assert!(!cdp.is_closed());
    }
}
