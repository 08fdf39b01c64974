//! MCP round trips, measured (a bench binary: `cargo bench -p klaw-engine --features
//! fixtures --bench mcp`), side by side with an equivalent FastMCP server when the test
//! venv has it (`scripts/setup-test-tools.sh`):
//!
//! - stdio: sequential `tools/call` of the trivial tool `echo`: p50, p99, calls per second;
//! - cold start: spawn → `initialize` → `tools/list` answered (median of 20);
//! - batch: `memory_search` calls per second through `call --jsonl` vs one process a call.
//!
//! Numbers are printed, never asserted: machines differ.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a bench binary

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const CALLS: usize = 3000;

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Server {
    fn spawn(program: &Path, args: &[&str], home: &Path) -> Self {
        let mut child = Command::new(program)
            .args(args)
            .env_clear()
            .env("HOME", home)
            .env("KLAW_CACHE", cache())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("KLAW_LOG_LEVEL", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Self {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            next: 1,
        }
    }

    /// Sends a request and waits for the response with its id.
    fn request(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let id = self.next;
        self.next += 1;
        let line =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        let mut buf = String::new();
        loop {
            buf.clear();
            assert!(
                self.stdout.read_line(&mut buf).unwrap() > 0,
                "the server closed stdout"
            );
            let v: serde_json::Value = serde_json::from_str(&buf).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }

    fn initialize(&mut self) {
        let r = self.request(
            "initialize",
            serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}),
        );
        assert!(r["result"].is_object(), "{r}");
        writeln!(
            self.stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cache() -> PathBuf {
    std::env::var_os("KLAW_CACHE")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/klaw"))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn round_trips(name: &str, program: &Path, args: &[&str]) {
    let home = tempfile::tempdir().unwrap();
    let mut s = Server::spawn(program, args, home.path());
    s.initialize();
    let call = |s: &mut Server| {
        let r = s.request(
            "tools/call",
            serde_json::json!({"name": "echo", "arguments": {"text": "hi"}}),
        );
        assert!(
            r["result"]["isError"] != true && r["result"].is_object(),
            "{r}"
        );
    };
    for _ in 0..200 {
        call(&mut s);
    }
    let mut times = Vec::with_capacity(CALLS);
    let started = Instant::now();
    for _ in 0..CALLS {
        let t = Instant::now();
        call(&mut s);
        times.push(t.elapsed());
    }
    let total = started.elapsed();
    times.sort();
    println!(
        "stdio round trip  {name:8}  p50 {:>8.1} µs  p99 {:>8.1} µs  {:>7.0} calls/s",
        percentile(&times, 0.5).as_secs_f64() * 1e6,
        percentile(&times, 0.99).as_secs_f64() * 1e6,
        CALLS as f64 / total.as_secs_f64()
    );
}

fn cold_start(name: &str, program: &Path, args: &[&str]) {
    let home = tempfile::tempdir().unwrap();
    let mut times = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let mut s = Server::spawn(program, args, home.path());
        s.initialize();
        let r = s.request("tools/list", serde_json::json!({}));
        assert!(r["result"]["tools"].is_array(), "{r}");
        times.push(t.elapsed());
    }
    times.sort();
    println!(
        "cold start        {name:8}  median {:>7.1} ms  (spawn → initialize → tools/list)",
        percentile(&times, 0.5).as_secs_f64() * 1e3
    );
}

fn batch(engine: &Path) {
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str], input: &str| {
        let mut c = Command::new(engine)
            .args(args)
            .env_clear()
            .env("HOME", home.path())
            .env("KLAW_CACHE", cache())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success());
        String::from_utf8(o.stdout).unwrap()
    };
    run(
        &[
            "call",
            "memory_save",
            r#"{"content": "Anna drinks green tea without sugar."}"#,
        ],
        "",
    );
    let n = 200;
    let lines: String = (0..n)
        .map(|i| format!("{{\"id\": {i}, \"name\": \"memory_search\", \"arguments\": {{\"query\": \"what tea does Anna drink {i}\"}}}}\n"))
        .collect();
    let t = Instant::now();
    let out = run(&["call", "--jsonl"], &lines);
    let batch = t.elapsed();
    assert_eq!(
        out.lines().filter(|l| l.contains("\"ok\":true")).count(),
        n,
        "{out}"
    );
    let per_process = 10;
    let t = Instant::now();
    for i in 0..per_process {
        run(
            &[
                "call",
                "memory_search",
                &format!(r#"{{"query": "what tea does Anna drink {i}"}}"#),
            ],
            "",
        );
    }
    let single = t.elapsed();
    println!(
        "batch memory_search  call --jsonl {:>7.1} calls/s   one process a call {:>5.2} calls/s",
        n as f64 / batch.as_secs_f64(),
        per_process as f64 / single.as_secs_f64()
    );
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let engine = PathBuf::from(env!("CARGO_BIN_EXE_klaw-engine"));
    let python = cache().join("venv-test/bin/python");
    let fastmcp_server = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/fastmcp_echo.py");
    let fastmcp = python.exists().then(|| python.clone());
    round_trips("klaw", &engine, &["mcp"]);
    match &fastmcp {
        Some(py) => round_trips("fastmcp", py, &[fastmcp_server.to_str().unwrap()]),
        None => println!(
            "fastmcp: {} is missing (scripts/setup-test-tools.sh)",
            python.display()
        ),
    }
    cold_start("klaw", &engine, &["mcp"]);
    if let Some(py) = &fastmcp {
        cold_start("fastmcp", py, &[fastmcp_server.to_str().unwrap()]);
    }
    batch(&engine);
}
