//! MCP over Streamable HTTP behind a real nginx (Debian's package, started here with
//! `-p <tmp> -c <conf>`): three named engines (`storage.engineId`), a session routed by
//! its id's prefix, the official Python SDK as the client (`tests/mcp/sdk_nginx.py`).
//! One engine killed with SIGKILL while a call is in flight there: that call and the
//! session's next fail cleanly, the client's next session works on another engine.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common;
use common::nginx::{Engine, Nginx};
use common::{cache, test_python as python};

#[test]
fn three_engines_behind_nginx_keep_sessions_and_survive_a_kill_9() {
    let Some(py) = python() else { return };
    if !common::nginx::available() {
        return;
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_klaw-engine"));
    let cache = cache();
    let cache = cache.to_str().unwrap();
    let mut engines: Vec<Engine> = (0..3)
        .map(|i| Engine::start(bin, &format!("e{i}"), &[("KLAW_CACHE", cache)]))
        .collect();
    let nginx = Nginx::start(&engines.iter().collect::<Vec<_>>());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/sdk_nginx.py");
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(&py)
        .arg(&script)
        .arg(nginx.url())
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = String::new();
    let mut killed = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        out.push_str(&line);
        out.push('\n');
        if let Some(sid) = line.strip_prefix("INFLIGHT ") {
            let name = sid.split('.').next().unwrap();
            let victim = engines.iter().position(|e| e.name == name);
            let victim = victim.unwrap_or_else(|| panic!("no engine named by {sid}"));
            // The call reaches the engine, then the engine dies under it.
            std::thread::sleep(Duration::from_millis(1500));
            engines[victim].kill_9();
            killed = Some(name.to_owned());
        }
    }
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && out.contains("ok all"),
        "stdout:\n{out}\nstderr:\n{err}\nnginx:\n{}",
        nginx.error_log()
    );
    assert!(killed.is_some(), "{out}");
    eprint!("{out}");
    for e in &engines {
        let log = e.log.lock().unwrap().clone();
        assert!(!log.contains("panicked"), "{}: {log}", e.name);
    }
}
