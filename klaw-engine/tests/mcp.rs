//! `klaw-engine mcp` with real MCP clients: the official Python SDK (installed by
//! `scripts/setup-test-tools.sh` into `<cache>/venv-test`) over stdio, and raw JSON-RPC
//! lines for what a well-behaved client never sends.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;

mod common;
use common::{cache, engine, stderr, stdout};

/// The test clients' Python, or `None` (said why) when setup has not installed it; under
/// CI (`CI=true`) its absence fails the test instead.
fn python() -> Option<PathBuf> {
    let py = cache().join("venv-test/bin/python");
    if py.exists() {
        return Some(py);
    }
    let why = format!(
        "{} is missing: run scripts/setup-test-tools.sh",
        py.display()
    );
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
    eprintln!("skipping: {why}");
    None
}

#[test]
fn the_python_sdk_over_stdio() {
    let Some(py) = python() else { return };
    let home = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/stdio_client.py");
    let o = std::process::Command::new(py)
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_klaw-engine"))
        .env_clear()
        .env("HOME", home.path())
        .env("KLAW_CACHE", cache())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .unwrap();
    let out = stdout(&o);
    assert!(
        o.status.success() && out.contains("ok all"),
        "stdout:\n{out}\nstderr:\n{}",
        stderr(&o)
    );
}

/// Raw lines: a line that is not JSON gets a parse error and the server keeps serving;
/// a JSON-RPC batch and a request of the wrong shape get errors, not a crash.
#[test]
fn malformed_lines_get_errors_and_the_server_goes_on() {
    let home = tempfile::tempdir().unwrap();
    let mut child = engine(home.path(), &["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "this is not json {",
        r#"[{"jsonrpc":"2.0","id":2,"method":"ping"}]"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"current_time","arguments":{"timezone":"UTC"}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"cursor":"not-a-cursor"}}"#,
    ];
    let mut stdin = child.stdin.take().unwrap();
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
    }
    // Keep stdin open until the answers are in: the server stops when it closes.
    std::thread::sleep(std::time::Duration::from_secs(2));
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    let answers: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_id = |id: Value| answers.iter().find(|a| a["id"] == id).cloned();
    assert!(
        answers
            .iter()
            .any(|a| a["id"].is_null() && a["error"]["code"] == -32700),
        "no parse error: {answers:#?}\n{}",
        stderr(&o)
    );
    assert!(
        answers
            .iter()
            .any(|a| a["id"].is_null() && a["error"]["code"] == -32600),
        "no invalid-request error for the batch: {answers:#?}"
    );
    let call = by_id(Value::from(3)).unwrap();
    assert_eq!(
        call["result"]["structuredContent"]["timezone"], "UTC",
        "{call}"
    );
    let list = by_id(Value::from(4)).unwrap();
    assert_eq!(list["error"]["code"], -32602, "{list}");
    assert!(o.status.success(), "{}", stderr(&o));
}
