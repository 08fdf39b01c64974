//! MCP round trips, measured (a bench binary: `cargo bench -p klaw-engine --features
//! fixtures --bench mcp`), side by side with an equivalent FastMCP server when the test
//! venv has it (`scripts/setup-test-tools.sh`):
//!
//! - stdio: sequential `tools/call` of the trivial tool `echo`: p50, p99, calls per second;
//! - HTTP: the same over one keep-alive connection, then 32 clients at once (calls/s);
//! - cold start: spawn → `initialize` → `tools/list` answered (median of 20);
//! - batch: `memory_search` calls per second through `call --jsonl` vs one process a call;
//! - the protocol beyond tools (stdio, klaw only), each beside `tools/call` of `echo`:
//!   `resources/read` of a 100 KB file (a skill's reference) and of the largest embedded
//!   doc, `prompts/get` of a skill, and `echo` made to need approval
//!   (`KLAW_APPROVAL_TOOLS=echo`) asked through elicitation and answered at once, beside
//!   the same call from a client without elicitation (the difference is the round trip).
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
    /// How many `elicitation/create` requests it sent (each answered "accept").
    elicited: usize,
}

impl Server {
    fn spawn(program: &Path, args: &[&str], home: &Path) -> Self {
        Self::spawn_with(program, args, home, &[])
    }

    fn spawn_with(program: &Path, args: &[&str], home: &Path, env: &[(&str, &Path)]) -> Self {
        let mut cmd = server_command(program, args, home);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
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
            elicited: 0,
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
            if v["method"] == "elicitation/create" {
                // The client's user says yes at once.
                self.elicited += 1;
                let answer = serde_json::json!({"jsonrpc": "2.0", "id": v["id"], "result": {"action": "accept"}});
                writeln!(self.stdin, "{answer}").unwrap();
                self.stdin.flush().unwrap();
                continue;
            }
            if v["id"] == id {
                return v;
            }
        }
    }

    fn initialize(&mut self) {
        self.initialize_with(serde_json::json!({}));
    }

    fn initialize_with(&mut self, capabilities: serde_json::Value) {
        let r = self.request(
            "initialize",
            serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": capabilities, "clientInfo": {"name": "bench", "version": "1"}}),
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

/// The cache `make setup` fills.
fn cache() -> PathBuf {
    klaw_tools::cache_dir().expect("neither KLAW_CACHE nor HOME is set")
}

/// `program args` with a clean environment: `HOME`, the cache, `PATH`, errors-only logs.
fn server_command(program: &Path, args: &[&str], home: &Path) -> Command {
    let mut c = Command::new(program);
    c.args(args)
        .env_clear()
        .env("HOME", home)
        .env("KLAW_CACHE", cache())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KLAW_LOG_LEVEL", "error");
    c
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
        let mut c = server_command(engine, args, home.path())
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

/// p50 and p99 of `n` sequential `method` requests with `params` (after 100 to warm up),
/// each checked by `ok`.
fn timed(
    s: &mut Server,
    n: usize,
    method: &str,
    params: &serde_json::Value,
    ok: impl Fn(&serde_json::Value) -> bool,
) -> (Duration, Duration) {
    for _ in 0..100 {
        let r = s.request(method, params.clone());
        assert!(ok(&r), "{r}");
    }
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = s.request(method, params.clone());
        times.push(t.elapsed());
        assert!(ok(&r), "{r}");
    }
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

fn protocol(engine: &Path) {
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join("ws");
    let skill = ws.join("skills/bench");
    std::fs::create_dir_all(skill.join("references")).unwrap();
    std::fs::create_dir_all(skill.join("scripts")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: bench\ndescription: A skill to measure\n---\n# Bench\nRun scripts/run.py.\n",
    )
    .unwrap();
    std::fs::write(skill.join("scripts/run.py"), "print('bench')\n").unwrap();
    let line = "A line of a long reference document, seventy bytes long or so......\n";
    std::fs::write(
        ws.join("skills/bench/references/big.md"),
        line.repeat(100 * 1024 / line.len()),
    )
    .unwrap();
    let echo_needs_approval = Path::new("echo");
    let env = [
        ("KLAW_WORKSPACE", ws.as_path()),
        ("KLAW_APPROVAL_TOOLS", echo_needs_approval),
    ];
    let result = |r: &serde_json::Value| r["result"].is_object() && r["result"]["isError"] != true;
    let show = |what: &str, (p50, p99): (Duration, Duration)| {
        println!(
            "{what:44}  p50 {:>8.1} µs  p99 {:>8.1} µs",
            p50.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6
        );
    };
    let n = 1000;
    let echo = serde_json::json!({"name": "echo", "arguments": {"text": "hi"}});
    // A client without elicitation is not asked: echo as everywhere else.
    let mut plain = Server::spawn_with(engine, &["mcp"], home.path(), &env);
    plain.initialize();
    show(
        "tools/call echo",
        timed(&mut plain, n, "tools/call", &echo, result),
    );
    assert_eq!(plain.elicited, 0);
    drop(plain);
    let mut s = Server::spawn_with(engine, &["mcp"], home.path(), &env);
    s.initialize_with(serde_json::json!({"elicitation": {}}));
    let big = serde_json::json!({"uri": "klaw://skills/bench/references/big.md"});
    show(
        "resources/read of a 100 KB file (a skill's)",
        timed(&mut s, n, "resources/read", &big, |r| {
            r["result"]["contents"][0]["text"]
                .as_str()
                .is_some_and(|t| t.len() > 100_000)
        }),
    );
    let doc = serde_json::json!({"uri": "klaw://docs/config/engine-json.md"});
    show(
        "resources/read of a 50 KB embedded doc",
        timed(&mut s, n, "resources/read", &doc, result),
    );
    let prompt = serde_json::json!({"name": "bench", "arguments": {"task": "measure"}});
    show(
        "prompts/get of a skill (SKILL.md + 2 files)",
        timed(&mut s, n / 4, "prompts/get", &prompt, |r| {
            r["result"]["messages"]
                .as_array()
                .is_some_and(|m| m.len() == 4)
        }),
    );
    show(
        "tools/call echo, approved by elicitation",
        timed(&mut s, n, "tools/call", &echo, result),
    );
    assert!(
        s.elicited >= n,
        "the approval was not asked: {}",
        s.elicited
    );
}

/// A minimal HTTP/1.1 keep-alive client of one MCP session (JSON or SSE answers, chunked
/// or not): enough to measure round trips without a client library's own costs.
struct HttpSession {
    reader: BufReader<std::net::TcpStream>,
    host: String,
    session: Option<String>,
    next: u64,
}

impl HttpSession {
    fn connect(addr: &str) -> Self {
        let stream = std::net::TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        let mut s = Self {
            reader: BufReader::new(stream),
            host: addr.to_owned(),
            session: None,
            next: 1,
        };
        let r = s.post(&serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}).to_string());
        assert!(r.is_some_and(|r| r["result"].is_object()));
        s.post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        s
    }

    fn call_echo(&mut self) {
        let id = self.next;
        self.next += 1;
        let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hi"}}});
        let r = self.post(&body.to_string()).unwrap();
        assert!(r["id"] == id && r["result"].is_object(), "{r}");
    }

    /// POSTs one message; the JSON-RPC answer with an id, if any.
    fn post(&mut self, body: &str) -> Option<serde_json::Value> {
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            self.host,
            body.len()
        );
        if let Some(s) = &self.session {
            head.push_str(&format!(
                "Mcp-Session-Id: {s}\r\nMcp-Protocol-Version: 2025-06-18\r\n"
            ));
        }
        head.push_str("\r\n");
        let stream = self.reader.get_mut();
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        let mut line = String::new();
        let (mut chunked, mut length) = (false, 0usize);
        loop {
            line.clear();
            self.reader.read_line(&mut line).unwrap();
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let lower = l.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("mcp-session-id:") {
                self.session = Some(l[l.len() - v.trim().len()..].to_owned());
            } else if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                chunked = true;
            } else if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.reader.read_line(&mut line).unwrap();
                let size = usize::from_str_radix(line.trim(), 16).unwrap();
                let mut chunk = vec![0; size + 2];
                std::io::Read::read_exact(&mut self.reader, &mut chunk).unwrap();
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else {
            body.resize(length, 0);
            std::io::Read::read_exact(&mut self.reader, &mut body).unwrap();
        }
        let text = String::from_utf8(body).unwrap();
        text.lines()
            .map(|l| l.strip_prefix("data: ").unwrap_or(l))
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v.get("id").is_some())
    }
}

/// `klaw-engine mcp --http 127.0.0.1:0`, or FastMCP on a free port: the child and its
/// address, once it answers.
fn http_server(program: &Path, args: &[&str], home: &Path) -> (Child, String) {
    if args.first().is_some_and(|a| a.ends_with(".py")) {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new(program)
            .args(args)
            .args(["--http", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let addr = format!("127.0.0.1:{port}");
        for _ in 0..600 {
            if std::net::TcpStream::connect(&addr).is_ok() {
                return (child, addr);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("FastMCP never listened on {addr}");
    }
    let mut child = server_command(program, args, home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("the server exits").unwrap();
        if let Some(i) = line.find("http://127.0.0.1:") {
            let rest = &line[i + 7..];
            break rest.split('/').next().unwrap().trim().to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, addr)
}

fn http_round_trips(name: &str, program: &Path, args: &[&str]) {
    let home = tempfile::tempdir().unwrap();
    let (mut child, addr) = http_server(program, args, home.path());
    let mut s = HttpSession::connect(&addr);
    for _ in 0..200 {
        s.call_echo();
    }
    let mut times = Vec::with_capacity(CALLS);
    let started = Instant::now();
    for _ in 0..CALLS {
        let t = Instant::now();
        s.call_echo();
        times.push(t.elapsed());
    }
    let total = started.elapsed();
    times.sort();
    println!(
        "HTTP round trip   {name:8}  p50 {:>8.1} µs  p99 {:>8.1} µs  {:>7.0} calls/s",
        percentile(&times, 0.5).as_secs_f64() * 1e6,
        percentile(&times, 0.99).as_secs_f64() * 1e6,
        CALLS as f64 / total.as_secs_f64()
    );
    let clients = 32;
    let per_client = 300;
    let started = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let mut s = HttpSession::connect(&addr);
                for _ in 0..per_client {
                    s.call_echo();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    println!(
        "HTTP 32 clients   {name:8}  {:>7.0} calls/s",
        (clients * per_client) as f64 / started.elapsed().as_secs_f64()
    );
    let _ = child.kill();
    let _ = child.wait();
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
    http_round_trips("klaw", &engine, &["mcp", "--http", "127.0.0.1:0"]);
    if let Some(py) = &fastmcp {
        http_round_trips("fastmcp", py, &[fastmcp_server.to_str().unwrap()]);
    }
    cold_start("klaw", &engine, &["mcp"]);
    if let Some(py) = &fastmcp {
        cold_start("fastmcp", py, &[fastmcp_server.to_str().unwrap()]);
    }
    protocol(&engine);
    batch(&engine);
}
