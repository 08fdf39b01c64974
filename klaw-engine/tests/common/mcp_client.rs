//! A raw MCP client of `klaw-engine mcp` over stdio: one JSON-RPC message a line.
//! Requests wait for their answer; what arrives meanwhile (notifications, other
//! answers) is kept for [`Mcp::wait_for`].

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Generous: a loaded CI machine starts Node and Python slowly. A hung server fails the
/// test rather than hanging it; no time is asserted.
const WAIT: Duration = Duration::from_secs(60);

/// An MCP session with a `klaw-engine mcp` child.
pub(crate) struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
    next_id: u64,
    /// Messages read while waiting for another.
    seen: Vec<Value>,
}

impl Mcp {
    /// Starts `cmd` (a `klaw-engine mcp`) and initializes the session.
    pub(crate) fn start(cmd: Command) -> Self {
        Self::start_with_stderr(cmd, Stdio::null())
    }

    /// [`start`](Self::start) with the server's stderr (its log) going to `stderr`.
    pub(crate) fn start_with_stderr(mut cmd: Command, stderr: impl Into<Stdio>) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
        let mut mcp = Self {
            stdin: child.stdin.take(),
            child,
            lines,
            next_id: 1,
            seen: Vec::new(),
        };
        mcp.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "klaw-test", "version": "1"}}),
        );
        mcp.notify("notifications/initialized", json!({}));
        mcp
    }

    /// Sends one message as it is.
    pub(crate) fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a notification.
    pub(crate) fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request (with the next numeric id) and waits for its answer.
    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.wait_for(|m| m["id"] == id && m.get("method").is_none())
    }

    /// Calls `tool` and gives its result.
    pub(crate) fn call(&mut self, tool: &str, args: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": args}))["result"].clone()
    }

    /// The names `tools/list` gives.
    pub(crate) fn tool_names(&mut self) -> Vec<String> {
        self.request("tools/list", json!({}))["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The first message (seen before or arriving within a minute) that `pred` accepts;
    /// panics with every message seen when none does.
    pub(crate) fn wait_for(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        self.try_wait_for(WAIT, &pred)
            .unwrap_or_else(|| panic!("no such message; messages so far: {:#?}", self.seen))
    }

    /// Waits (up to `secs`) for a notification `method`; true when it arrived.
    pub(crate) fn wait_for_notification(&mut self, method: &str, secs: u64) -> bool {
        self.try_wait_for(Duration::from_secs(secs), &|m: &Value| {
            m["method"] == method
        })
        .is_some()
    }

    fn try_wait_for(&mut self, wait: Duration, pred: &dyn Fn(&Value) -> bool) -> Option<Value> {
        if let Some(i) = self.seen.iter().position(pred) {
            return Some(self.seen.remove(i));
        }
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let m = self.lines.recv_timeout(left).ok()?;
            if pred(&m) {
                return Some(m);
            }
            self.seen.push(m);
        }
    }

    /// Closes stdin and waits for the engine to exit.
    pub(crate) fn finish(mut self) -> ExitStatus {
        drop(self.stdin.take());
        super::wait_exit(&mut self.child)
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
