//! MCP over stdin and stdout: one JSON-RPC message a line, lines capped, a line that
//! is not a message answered with its JSON-RPC error while the server goes on.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::service::RxJsonRpcMessage;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::{McpError, McpServer, rpc_error};
use crate::Engine;

/// Serves `engine` over stdin and stdout until the client closes stdin or `stop` is
/// cancelled (the app's stop token: SIGINT or SIGTERM); the app then shuts the engine
/// down. A line that is not JSON gets a JSON-RPC
/// parse error (-32700) and one that is JSON but not a message (a batch, a wrong shape)
/// an invalid-request error (-32600); the server keeps serving.
pub async fn serve_stdio(engine: Engine, stop: CancellationToken) -> Result<(), McpError> {
    use rmcp::ServiceExt;
    use rmcp::service::TxJsonRpcMessage;
    let server = McpServer::new(engine.clone()).session();
    // rmcp's own loop reads this stream and writes to this sink: no task or pipe in
    // between, and each line is parsed once.
    // Non-blocking pipes when stdin and stdout are FIFOs (Python clients start servers
    // that way): no hand-off to a blocking thread per line. Otherwise (a socketpair, as
    // Node clients use; a terminal) the blocking handles.
    let (stdin, stdout) = rmcp::transport::io::stdio_pipes();
    let stdout = Arc::new(tokio::sync::Mutex::new(stdout));
    // One write a message: the line with its `\n` (two writes were two system calls).
    let write_line = |out: Arc<tokio::sync::Mutex<rmcp::transport::io::StdioWriter>>,
                      mut line: Vec<u8>| async move {
        line.push(b'\n');
        let mut out = out.lock().await;
        out.write_all(&line).await?;
        out.flush().await
    };
    let errors = Arc::clone(&stdout);
    let reader = tokio::io::BufReader::new(stdin);
    let incoming = futures_util::stream::unfold(reader, move |mut reader| {
        let errors = Arc::clone(&errors);
        async move {
            let mut line = Vec::new();
            loop {
                let too_long = match read_line_capped(&mut reader, &mut line, MAX_LINE).await {
                    Ok(None) | Err(_) => return None,
                    Ok(Some(too_long)) => too_long,
                };
                if !too_long && line.trim_ascii().is_empty() {
                    continue;
                }
                let answer = match (too_long, incoming_message(&line)) {
                    (false, Ok(message)) => return Some((message, reader)),
                    (true, _) => rpc_error(
                        Value::Null,
                        -32700,
                        format!("Parse error: the line is longer than {MAX_LINE} bytes"),
                    ),
                    (false, Err(answer)) => answer,
                };
                if write_line(Arc::clone(&errors), answer.to_string().into_bytes())
                    .await
                    .is_err()
                {
                    return None;
                }
            }
        }
    });
    let outgoing = futures_util::sink::unfold(
        stdout,
        move |out, message: TxJsonRpcMessage<RoleServer>| async move {
            // Room for the `\n` that follows.
            let mut line = Vec::with_capacity(256);
            serde_json::to_writer(&mut line, &message).map_err(std::io::Error::other)?;
            write_line(Arc::clone(&out), line).await?;
            Ok::<_, std::io::Error>(out)
        },
    );
    match server.serve((Box::pin(outgoing), Box::pin(incoming))).await {
        Ok(running) => {
            tokio::select! {
                r = running.waiting() => r.map(|_| ()).map_err(McpError::Session),
                () = stop.cancelled() => {
                    tracing::info!(target: "klaw::mcp", "stopping");
                    Ok(())
                }
            }
        }
        // The client left before initializing: nothing to serve.
        Err(e) => Err(McpError::SessionStart(Box::new(e))),
    }
}

/// The longest line read from stdin (a longer one is answered with a parse error).
const MAX_LINE: usize = 16 << 20;

/// Reads one line (up to `\n` or the end) into `line`, keeping at most `cap` bytes:
/// `None` at the end of input, else whether the line was longer than `cap`.
async fn read_line_capped<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<Option<bool>> {
    line.clear();
    let (mut read, mut too_long) = (0usize, false);
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok((read > 0).then_some(too_long));
        }
        let end = available.iter().position(|&b| b == b'\n');
        let chunk = &available[..end.map_or(available.len(), |i| i + 1)];
        if !too_long && line.len() + chunk.len() <= cap {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line.clear();
        }
        let n = chunk.len();
        reader.consume(n);
        read += n;
        if end.is_some() {
            return Ok(Some(too_long));
        }
    }
}

/// One line from a client as a JSON-RPC message, or the error to answer it with: a
/// parse error (-32700) for what is not JSON (or not UTF-8), an invalid request
/// (-32600) for a batch or what is not a message, invalid params (-32602) for a request
/// of a known shape whose params do not fit. A request's own id is kept in the answer,
/// so the client is not left waiting for it.
fn incoming_message(line: &[u8]) -> Result<RxJsonRpcMessage<RoleServer>, Value> {
    if let Some(call) = tool_call(line) {
        return Ok(call);
    }
    let e = match serde_json::from_slice(line) {
        Ok(message) => return Ok(message),
        Err(e) => e,
    };
    let value = match serde_json::from_slice::<Value>(line) {
        Ok(v) => v,
        Err(_) => return Err(rpc_error(Value::Null, -32700, format!("Parse error: {e}"))),
    };
    let id = value
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned()
        .unwrap_or(Value::Null);
    Err(match &value {
        Value::Array(_) => rpc_error(
            id,
            -32600,
            "Invalid request: JSON-RPC batches are not supported; send one message a line".into(),
        ),
        Value::Object(m) if m.contains_key("method") && !id.is_null() => {
            rpc_error(id, -32602, format!("Invalid params: {e}"))
        }
        _ => rpc_error(id, -32600, format!("Invalid request: {e}")),
    })
}

/// A `tools/call` request read straight into its type, or `None` for any other line and
/// for one this reading refuses (an escaped method name, a malformed call): the general
/// reading then decides, so a line becomes the same message either way.
///
/// rmcp's general reading buffers a message twice and tries each kind of request in
/// turn, 13 of them before a tool call: about 38,000 instructions of a call's 100,000
/// (callgrind, the bench's call), where this takes about 15,000.
fn tool_call(line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
    use rmcp::model::{CallToolRequest, ClientRequest, JsonRpcMessage, JsonRpcRequest};
    /// Which keys a line has, as rmcp's reading tells a request from the rest.
    #[derive(serde::Deserialize)]
    struct Shape<'a> {
        #[serde(borrow, default)]
        method: Option<&'a str>,
        #[serde(default)]
        id: Present,
        #[serde(default)]
        result: Present,
        #[serde(default)]
        error: Present,
    }
    /// A key that is there, whatever its value (`null` too).
    #[derive(Default)]
    struct Present(bool);
    impl<'de> serde::Deserialize<'de> for Present {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            serde::de::IgnoredAny::deserialize(d).map(|_| Present(true))
        }
    }
    let shape: Shape = serde_json::from_slice(line).ok()?;
    if shape.method != Some("tools/call") || !shape.id.0 || shape.result.0 || shape.error.0 {
        return None;
    }
    let r: JsonRpcRequest<CallToolRequest> = serde_json::from_slice(line).ok()?;
    Some(JsonRpcMessage::Request(JsonRpcRequest {
        jsonrpc: r.jsonrpc,
        id: r.id,
        request: ClientRequest::CallToolRequest(r.request),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_capped_and_split() {
        let input: &[u8] = b"short\n0123456789abcdef\nlast";
        let mut r = tokio::io::BufReader::with_capacity(4, input);
        let mut line = Vec::new();
        assert_eq!(
            read_line_capped(&mut r, &mut line, 10).await.unwrap(),
            Some(false)
        );
        assert_eq!(line, b"short\n");
        assert_eq!(
            read_line_capped(&mut r, &mut line, 10).await.unwrap(),
            Some(true)
        );
        assert!(line.is_empty());
        assert_eq!(
            read_line_capped(&mut r, &mut line, 10).await.unwrap(),
            Some(false)
        );
        assert_eq!(line, b"last");
        assert_eq!(read_line_capped(&mut r, &mut line, 10).await.unwrap(), None);
    }

    #[test]
    fn a_tool_call_read_straight_is_the_message_the_general_reading_gives() {
        let straight: &[&str] = &[
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"convert_temperature","arguments":{"value":21.5,"scale":"C","target":"F"}}}"#,
            r#"{"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"progressToken":"p1","io.modelcontextprotocol/protocolVersion":"2026-07-28"}},"id":"abc","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":2,"x":[1,{"y":null}],"method":"tools/call","params":{"name":"t","arguments":{"n":18446744073709551615,"f":1e308,"i":-9223372036854775808,"s":"\u00e9\n\"","o":{"a":[true]}}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t","task":{"ttl":1000}}}"#,
        ];
        for line in straight {
            let general: RxJsonRpcMessage<RoleServer> =
                serde_json::from_slice(line.as_bytes()).unwrap_or_else(|e| panic!("{line}: {e}"));
            let read = tool_call(line.as_bytes()).unwrap_or_else(|| panic!("not straight: {line}"));
            assert_eq!(format!("{read:?}"), format!("{general:?}"), "{line}");
            assert_eq!(
                serde_json::to_value(&read).unwrap(),
                serde_json::to_value(&general).unwrap(),
                "{line}"
            );
        }
        // Left to the general reading, which answers each as before: not a request's
        // shape (a `result` or `error` key, even null; no id), an id that is not one,
        // an escaped method name, a call whose params do not fit (a custom request,
        // answered -32602), another version, a key twice, another method.
        let general: &[&str] = &[
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"result":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"error":{}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}]"#,
        ];
        for line in general {
            assert!(tool_call(line.as_bytes()).is_none(), "{line}");
        }
        // Arguments nested past serde_json's depth limit: refused by both readings,
        // without a deep recursion, and answered with a parse error.
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{{"a":{}{}}}}}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(tool_call(deep.as_bytes()).is_none());
        assert_eq!(
            incoming_message(deep.as_bytes()).unwrap_err()["error"]["code"],
            -32700
        );
    }

    #[test]
    fn bad_lines_get_the_right_error_and_keep_their_id() {
        let code = |line: &[u8]| incoming_message(line).unwrap_err();
        assert_eq!(code(b"nope {")["error"]["code"], -32700);
        assert_eq!(code(b"\xff\xfe")["error"]["code"], -32700);
        assert_eq!(code(b"[1, 2]")["error"]["code"], -32600);
        let e = code(br#"{"jsonrpc":"2.0","id":"x","params":1}"#);
        assert_eq!(
            (e["id"].clone(), e["error"]["code"].clone()),
            (Value::from("x"), Value::from(-32600))
        );
        assert!(incoming_message(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_ok());
        // A known method with params that do not fit reaches the handler as a custom
        // request, which answers -32602 (`on_custom_request`).
        assert!(
            incoming_message(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}"#)
                .is_ok()
        );
    }
}
