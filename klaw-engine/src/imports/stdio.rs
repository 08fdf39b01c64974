//! The stdio transport of an imported server: rmcp's line transport over the child's
//! stdin and a copy of its stdout in which every message nested deeper than
//! [`MAX_MESSAGE_DEPTH`] has its too-deep values cut to `null` first, and rmcp's
//! shutdown (stdin closed, then SIGTERM, then kill, to the whole process group).
//!
//! Why the copy: rmcp parses each line with `serde_json`, whose recursion limit (128)
//! makes a message nested deeper than that unreadable, and rmcp drops an unreadable
//! line without a word. A hostile server's `tools/list` with one over-deep schema was
//! then never answered, and all its tools hid behind "did not answer within 10 s". Cut
//! here (one pass over the bytes, no recursion, so bounded time and stack), the list
//! parses; the tool whose schema was cut is refused for its depth
//! ([`super::tool`]), and the server's other tools are imported.

use std::future::Future;

use process_wrap::tokio::{ChildWrapper, CommandWrap};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::{AsyncRwTransport, DEFAULT_MAX_LINE_LENGTH};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

/// How deep a message from a server may nest (objects and arrays) before its deeper
/// values are cut to `null`: below `serde_json`'s 128, and deeper than any schema an
/// imported tool may have ([`super::tool`]'s limit), so a cut always refuses its tool.
pub(crate) const MAX_MESSAGE_DEPTH: usize = 100;

/// How long the shutdown waits for the server after closing its stdin, and again
/// after SIGTERM (rmcp's own wait).
const WAIT_ON_CLOSE: std::time::Duration = std::time::Duration::from_secs(3);

/// A server on stdio: what rmcp reads and writes, and the process (group).
pub(crate) struct ChildTransport {
    inner: AsyncRwTransport<RoleClient, DuplexStream, ChildStdin>,
    /// Until it has exited or been killed; killed when dropped.
    child: Option<Box<dyn ChildWrapper>>,
}

impl ChildTransport {
    /// Starts `command` (its stdin, stdout and stderr piped) and gives the transport
    /// and its stderr.
    pub(crate) fn spawn(mut command: CommandWrap) -> std::io::Result<(Self, Option<ChildStderr>)> {
        use std::process::Stdio;
        command
            .command_mut()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin().take(), child.stdout().take()) else {
            return Err(std::io::Error::other(
                "the server's stdin or stdout is missing",
            ));
        };
        let stderr = child.stderr().take();
        // Room for a few messages; the copy waits while rmcp has not read them.
        let (reader, writer) = tokio::io::duplex(256 * 1024);
        tokio::spawn(copy_cut(stdout, writer));
        Ok((
            Self {
                inner: AsyncRwTransport::new_client(reader, stdin),
                child: Some(child),
            },
            stderr,
        ))
    }

    /// rmcp's graceful shutdown: stdin closed and a wait, then SIGTERM to the process
    /// group and a wait, then kill.
    async fn shut_down(&mut self) -> std::io::Result<()> {
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        Transport::<RoleClient>::close(&mut self.inner).await?;
        if exited(child).await {
            self.child = None;
            return Ok(());
        }
        let term = tokio::signal::unix::SignalKind::terminate().as_raw_value();
        if child.signal(term).is_ok() && exited(child).await {
            self.child = None;
            return Ok(());
        }
        let killed = Box::into_pin(child.kill()).await;
        self.child = None;
        killed
    }
}

/// Whether `child` exited within [`WAIT_ON_CLOSE`].
async fn exited(child: &mut Box<dyn ChildWrapper>) -> bool {
    matches!(
        tokio::time::timeout(WAIT_ON_CLOSE, child.wait()).await,
        Ok(Ok(_))
    )
}

impl Drop for ChildTransport {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(async move {
                let _ = Box::into_pin(child.kill()).await;
            });
        }
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.inner.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shut_down()
    }
}

/// Copies the server's stdout to rmcp line by line, each line cut by [`cut_deep`]; a
/// line longer than rmcp's limit is dropped (rmcp would drop it too). Ends at the end
/// of stdout, or when rmcp is gone.
async fn copy_cut(stdout: ChildStdout, mut to: DuplexStream) {
    let mut from = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        // Read at most one byte past the limit: a longer line is skipped to its end.
        let read = (&mut from)
            .take(DEFAULT_MAX_LINE_LENGTH as u64 + 1)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.len() > DEFAULT_MAX_LINE_LENGTH {
            tracing::warn!(target: "klaw::imports", "a message longer than {DEFAULT_MAX_LINE_LENGTH} bytes was dropped");
            if !line.ends_with(b"\n") && skip_line(&mut from).await.is_err() {
                return;
            }
            continue;
        }
        let out = cut_deep(&line, MAX_MESSAGE_DEPTH);
        if to.write_all(&out).await.is_err() {
            return;
        }
    }
}

/// Reads and drops the rest of a line.
async fn skip_line(from: &mut BufReader<ChildStdout>) -> std::io::Result<()> {
    loop {
        let buf = from.fill_buf().await?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                from.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                from.consume(n);
            }
        }
    }
}

/// `line` (JSON) with every object or array that would open deeper than `max` levels
/// replaced by `null`; the line itself when it nests no deeper (the usual case: one
/// pass, nothing copied). Strings are skipped as strings (a bracket in one is text).
/// Valid JSON stays valid; anything else is left for the parser to refuse.
pub(crate) fn cut_deep(line: &[u8], max: usize) -> std::borrow::Cow<'_, [u8]> {
    if depth_of(line) <= max {
        return std::borrow::Cow::Borrowed(line);
    }
    let mut out = Vec::with_capacity(line.len());
    let mut depth = Depth::default();
    // Inside a value being cut: the depth it opened at.
    let mut cutting: Option<usize> = None;
    for &b in line {
        match depth.step(b) {
            Step::Open if cutting.is_none() && depth.now > max => {
                cutting = Some(depth.now);
                out.extend_from_slice(b"null");
                continue;
            }
            Step::Close(closing) if cutting == Some(closing) => {
                cutting = None;
                continue;
            }
            _ => {}
        }
        if cutting.is_none() {
            out.push(b);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// How deep `json` nests objects and arrays (strings skipped).
fn depth_of(json: &[u8]) -> usize {
    let mut depth = Depth::default();
    let mut deepest = 0;
    for &b in json {
        if depth.step(b) == Step::Open {
            deepest = deepest.max(depth.now);
        }
    }
    deepest
}

/// What one byte of JSON did to the nesting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// An object or array opened (the depth is now one more).
    Open,
    /// The one opened at this depth closed.
    Close(usize),
    /// Anything else: a string's byte, a scalar, a separator.
    Other,
}

/// The nesting of JSON read a byte at a time, strings (and their escapes) skipped.
#[derive(Debug, Default)]
struct Depth {
    now: usize,
    in_string: bool,
    escaped: bool,
}

impl Depth {
    fn step(&mut self, b: u8) -> Step {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
            }
            return Step::Other;
        }
        match b {
            b'"' => {
                self.in_string = true;
                Step::Other
            }
            b'{' | b'[' => {
                self.now += 1;
                Step::Open
            }
            b'}' | b']' => {
                let closing = self.now;
                self.now = self.now.saturating_sub(1);
                Step::Close(closing)
            }
            _ => Step::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn nested(levels: usize) -> String {
        format!(
            "{}{{\"type\":\"string\"}}{}",
            "{\"type\":\"object\",\"properties\":{\"a\":".repeat(levels),
            "}}".repeat(levels)
        )
    }

    #[test]
    fn a_shallow_message_is_left_as_it_is() {
        let line = br#"{"a":[1,{"b":"[[[{{{ \" ]]"}],"c":{}}"#;
        assert!(matches!(cut_deep(line, 3), std::borrow::Cow::Borrowed(_)));
        assert_eq!(depth_of(line), 3);
    }

    #[test]
    fn only_the_deep_values_are_cut_and_the_rest_parses() {
        let deep = nested(50_000);
        let line = format!(
            r#"{{"result":{{"tools":[{{"name":"deep","inputSchema":{deep}}},{{"name":"ok","inputSchema":{{"type":"object","description":"{{[\"]"}}}}]}}}}"#
        );
        assert!(
            serde_json::from_str::<Value>(&line).is_err(),
            "too deep for serde_json"
        );
        let cut = cut_deep(line.as_bytes(), MAX_MESSAGE_DEPTH);
        assert!(depth_of(&cut) <= MAX_MESSAGE_DEPTH);
        let v: Value = serde_json::from_slice(&cut).unwrap();
        assert_eq!(
            v["result"]["tools"][1],
            json!({"name": "ok", "inputSchema": {"type": "object", "description": "{[\"]"}})
        );
        assert_eq!(v["result"]["tools"][0]["name"], "deep");
        // Arrays too, and two deep values side by side.
        let arrays = format!("[{0}1{1},{0}2{1},3]", "[".repeat(300), "]".repeat(300));
        let v: Value = serde_json::from_slice(&cut_deep(arrays.as_bytes(), 10)).unwrap();
        assert_eq!(v[2], 3);
        assert_eq!(depth_of(serde_json::to_string(&v).unwrap().as_bytes()), 10);
    }
}
