//! MCP, measured against its peers (a bench binary: `cargo bench -p klaw-engine --bench
//! mcp`; `make bench` builds the rmcp peer first). Every contender serves the same tool of
//! three arguments, `convert_temperature`:
//!
//! - klaw: this binary re-run as the engine (`KLAW_BENCH_SERVE`), the tool below linked in
//!   as `examples/my-engine` links a tool crate, on the default config: what a user runs;
//! - klaw-before: the same from another build, when `KLAW_BENCH_BEFORE` names one (a copy
//!   of this bench binary built from an older commit): before/after in one run; several
//!   (`KLAW_BENCH_BEFORE=a:b:c`, copies built with other profiles) are each named by
//!   their file;
//! - rmcp: rmcp's own `#[tool_router]` server (`benches/rmcp-peer`, its own workspace, rmcp
//!   pinned to Klaw's version), non-blocking stdio pipes and `TCP_NODELAY` as Klaw;
//! - fastmcp: FastMCP (`benches/fastmcp_echo.py`) when the test venv has it
//!   (`scripts/setup-test-tools.sh`);
//! - ts-sdk: the TypeScript SDK's `McpServer` (`benches/ts_sdk_echo.cjs`) on Node 22,
//!   both installed by `scripts/setup-test-tools.sh` (`<cache>/node22`).
//!
//! A peer that is not installed is said to be skipped, and the race goes on without it.
//!
//! The rows, in `KLAW_BENCH_ROUNDS` (3) interleaved rounds, the contenders' order rotated
//! each round, each row the median of its rounds and its ratio to rmcp: cold start
//! (spawn → `initialize` → `tools/list` answered) with the RSS and the program's resident
//! code right after it, stdio `tools/call` p50 / p99, 10,000
//! pipelined calls, the RSS after 12,500 calls and again 3 s later (idle), Streamable HTTP
//! p50 with one client, calls/s
//! with 1, 4, 16 and 64 clients, and the same clients against the runtime's worker
//! threads, 1, 2 and the default (`TOKIO_WORKER_THREADS`, which Klaw and rmcp both
//! honour; the default is a worker per core). The load average is printed before and
//! after. `KLAW_BENCH_ROUNDS=1` is the quick run (about a minute on 2 cores);
//! `KLAW_BENCH_ONLY=klaw,rmcp` runs only those (and skips the sections below).
//!
//! Then Klaw alone:
//! - batch: `memory_search` calls per second through `call --jsonl` vs one process a call;
//! - the protocol beyond tools (stdio), each beside `tools/call`: `resources/read` of a
//!   100 KB file (a skill's reference) and of the largest embedded doc, `prompts/get` of a
//!   skill, and the tool made to need approval (`KLAW_APPROVAL_TOOLS`) asked through
//!   elicitation and answered at once, beside the same call from a client without
//!   elicitation (the difference is the round trip).
//!
//! Numbers are printed, never asserted: machines differ.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a bench binary

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// Set in a server's environment: this binary is then the engine, not the bench.
const SERVE: &str = "KLAW_BENCH_SERVE";

/// Converts a temperature (the bench's tool: three arguments, a little work).
#[klaw_tools::tool(
    name = "convert_temperature",
    description_ru = "Переводит температуру между шкалами Цельсия (C), Фаренгейта (F) и Кельвина (K)",
    description_en = "Convert a temperature between Celsius (C), Fahrenheit (F) and Kelvin (K)",
    read_only,
    idempotent
)]
pub async fn convert_temperature(
    /// Значение температуры
    #[arg(description_en = "The temperature value")]
    value: f64,
    /// Его шкала: C, F или K
    #[arg(description_en = "Its scale: C, F or K")]
    scale: String,
    /// Нужная шкала: C, F или K
    #[arg(description_en = "The scale wanted: C, F or K", default = String::from("C"))]
    target: String,
) -> Result<String, klaw_tools::ToolError> {
    let celsius = match parse_scale(&scale, "/scale")? {
        'C' => value,
        'F' => (value - 32.0) * 5.0 / 9.0,
        _ => value - 273.15,
    };
    if celsius < -273.15 {
        return Err(klaw_tools::ToolError::invalid_arguments(
            "/value",
            "below absolute zero",
        ));
    }
    let out = match parse_scale(&target, "/target")? {
        'C' => celsius,
        'F' => celsius * 9.0 / 5.0 + 32.0,
        _ => celsius + 273.15,
    };
    Ok(format!("{out:.2} {}", target.to_uppercase()))
}

fn parse_scale(s: &str, pointer: &str) -> Result<char, klaw_tools::ToolError> {
    match s.trim().to_uppercase().as_str() {
        "C" | "CELSIUS" => Ok('C'),
        "F" | "FAHRENHEIT" => Ok('F'),
        "K" | "KELVIN" => Ok('K'),
        other => Err(klaw_tools::ToolError::invalid_arguments(
            pointer,
            format!("unknown scale `{other}`: use C, F or K"),
        )),
    }
}

/// The `tools/call` params every contender gets.
fn tool_call() -> serde_json::Value {
    serde_json::json!({"name": "convert_temperature", "arguments": {"value": 21.5, "scale": "C", "target": "F"}})
}

/// Asserts a `tools/call` answer is the tool's right result.
fn check_answer(r: &serde_json::Value) {
    assert!(
        r["result"]["isError"] != true
            && r["result"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("70.70")),
        "{r}"
    );
}

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
    /// How many `elicitation/create` requests it sent (each answered "accept").
    elicited: usize,
}

impl Server {
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

/// `program args` with a clean environment: `HOME`, the cache, `PATH`, errors-only logs
/// (and `KLAW_BENCH_SERVE`, which makes this binary the engine and others ignore).
fn server_command(program: &Path, args: &[&str], home: &Path) -> Command {
    let mut c = Command::new(program);
    c.args(args)
        .env_clear()
        .env(SERVE, "1")
        .env("HOME", home)
        .env("KLAW_CACHE", cache())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KLAW_LOG_LEVEL", "error");
    c
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
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
    let needs_approval = Path::new("convert_temperature");
    let env = [
        ("KLAW_WORKSPACE", ws.as_path()),
        ("KLAW_APPROVAL_TOOLS", needs_approval),
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
    let echo = tool_call();
    // A client without elicitation is not asked: the call as everywhere else.
    let mut plain = Server::spawn_with(engine, &["mcp"], home.path(), &env);
    plain.initialize();
    show(
        "tools/call",
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
        "tools/call, approved by elicitation",
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

    fn call_tool(&mut self) {
        let id = self.next;
        self.next += 1;
        let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": tool_call()});
        let r = self.post(&body.to_string()).unwrap();
        check_answer(&r);
        assert!(r["id"] == id, "{r}");
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

/// One server under test and how to start it.
#[derive(Clone)]
struct Contender {
    name: &'static str,
    program: PathBuf,
    /// Arguments before the transport's (`mcp`, a script).
    args: Vec<String>,
    /// `--http PORT` (FastMCP) rather than `--http 127.0.0.1:0` with the address printed.
    port_arg: bool,
    /// Cold starts timed each round (fewer for a slow starter).
    cold_runs: usize,
    /// A Tokio runtime, whose worker threads `TOKIO_WORKER_THREADS` sets.
    tokio: bool,
}

impl Contender {
    fn stdio(&self, home: &Path, env: &[(&str, &Path)]) -> Server {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        Server::spawn_with(&self.program, &args, home, env)
    }

    /// Started over HTTP: the child and its address, once it answers.
    fn http(&self, home: &Path, env: &[(&str, &Path)]) -> (Child, String) {
        let mut args: Vec<String> = self.args.clone();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if self.port_arg {
            args.extend(["--http".into(), port.to_string()]);
        } else {
            args.extend(["--http".into(), "127.0.0.1:0".into()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut cmd = server_command(&self.program, &args, home);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        if self.port_arg {
            std::thread::spawn(move || for _ in BufReader::new(stderr).lines() {});
            let addr = format!("127.0.0.1:{port}");
            for _ in 0..600 {
                if std::net::TcpStream::connect(&addr).is_ok() {
                    return (child, addr);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} never listened on {addr}", self.name);
        }
        let mut lines = BufReader::new(stderr).lines();
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
}

/// The rows, each a number per round.
#[derive(Default)]
struct Rows {
    cold_ms: Vec<f64>,
    /// The RSS, and the part of it that is the program's own code, right after the last
    /// cold start's `tools/list` (MB).
    start_rss_mb: Vec<f64>,
    start_code_mb: Vec<f64>,
    stdio_p50_us: Vec<f64>,
    stdio_p99_us: Vec<f64>,
    pipelined_ms: Vec<f64>,
    rss_mb: Vec<f64>,
    /// The RSS [`IDLE`] after the last of those calls.
    idle_rss_mb: Vec<f64>,
    http_p50_us: Vec<f64>,
    http_p99_us: Vec<f64>,
    /// Calls/s with each number of clients of [`CLIENTS`].
    clients: Vec<Vec<f64>>,
    /// Each round's runs with each number of worker threads of [`WORKERS`] (Tokio
    /// contenders only) and then the default, each with every number of clients of
    /// [`CLIENTS`].
    probes: Vec<Vec<Vec<Probe>>>,
}

/// The worker threads (`TOKIO_WORKER_THREADS`) tried with every number of clients,
/// besides the default (a worker per core: the `HTTP n clients` rows).
const WORKERS: [usize; 2] = [1, 2];

/// One run of clients calling at once: calls/s, and the server's CPU time and context
/// switches (all its threads, voluntary or not) per call.
#[derive(Clone, Copy)]
struct Probe {
    per_s: f64,
    cpu_us: f64,
    switches: f64,
}

/// The CPU time (ns) and context switches of every thread of `pid` so far.
fn counters(pid: u32) -> (f64, f64) {
    let (mut ns, mut switches) = (0.0, 0.0);
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return (f64::NAN, f64::NAN);
    };
    for task in tasks.flatten() {
        let dir = task.path();
        let sched = std::fs::read_to_string(dir.join("schedstat")).unwrap_or_default();
        ns += sched
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        switches += status
            .lines()
            .filter_map(|l| {
                l.strip_prefix("voluntary_ctxt_switches:")
                    .or_else(|| l.strip_prefix("nonvoluntary_ctxt_switches:"))
            })
            .filter_map(|v| v.trim().parse::<f64>().ok())
            .sum::<f64>();
    }
    (ns, switches)
}

/// [`concurrent`] with the server `pid`'s CPU time and context switches per call.
fn probed(addr: &str, clients: usize, pid: u32) -> Probe {
    let calls = (clients * (4000 / clients).max(50)) as f64;
    let (ns, switches) = counters(pid);
    let per_s = concurrent(addr, clients);
    let (ns2, switches2) = counters(pid);
    // The sessions' `initialize` and first call are counted too: a few per cent of 4,000.
    Probe {
        per_s,
        cpu_us: (ns2 - ns) / 1e3 / calls,
        switches: (switches2 - switches) / calls,
    }
}

const CLIENTS: [usize; 4] = [1, 4, 16, 64];
const SEQUENTIAL: usize = 2000;
const PIPELINED: usize = 10_000;
/// How long the stdio rows wait, idle, after the pipelined calls before reading the RSS
/// again (Klaw gives its free memory back once its calls have been quiet for a second).
const IDLE: Duration = Duration::from_secs(3);
/// Warm-up calls before the timed ones; with them the RSS is read after 12,500 calls.
const WARM: usize = 500;

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The resident set of `pid`, in MB.
fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Cold start: `n` times spawn → `initialize` → `tools/list` answered.
fn cold(c: &Contender, n: usize, rows: &mut Rows) {
    let home = tempfile::tempdir().unwrap();
    let mut times = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let mut s = c.stdio(home.path(), &[]);
        s.initialize();
        let r = s.request("tools/list", serde_json::json!({}));
        assert!(r["result"]["tools"].is_array(), "{r}");
        times.push(ms(t.elapsed()));
        if times.len() == n {
            rows.start_rss_mb.push(rss_mb(s.child.id()));
            rows.start_code_mb.push(code_mb(s.child.id()));
        }
        drop(s);
    }
    rows.cold_ms.push(median(&times));
}

/// The resident pages of `pid`'s executable mappings of its own program file
/// (`/proc/<pid>/smaps`), in MB: the code the start touched, with its neighbours the
/// kernel maps around each fault.
fn code_mb(pid: u32) -> f64 {
    let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
        return f64::NAN;
    };
    let exe = exe.to_string_lossy().into_owned();
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let (mut code, mut kb) = (false, 0.0);
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or_default();
        if first.contains('-') && !first.ends_with(':') {
            // A mapping's header: range, permissions, offset, device, inode, path.
            let perms = fields.next().unwrap_or_default();
            code = perms.contains('x') && fields.nth(3) == Some(exe.as_str());
        } else if code && first == "Rss:" {
            kb += fields
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0);
        }
    }
    kb / 1024.0
}

/// stdio: sequential calls (p50, p99), then pipelined ones, then the RSS.
fn stdio_rows(c: &Contender, rows: &mut Rows) {
    let home = tempfile::tempdir().unwrap();
    let mut s = c.stdio(home.path(), &[]);
    s.initialize();
    for _ in 0..WARM {
        check_answer(&s.request("tools/call", tool_call()));
    }
    let mut times = Vec::with_capacity(SEQUENTIAL);
    for _ in 0..SEQUENTIAL {
        let t = Instant::now();
        check_answer(&s.request("tools/call", tool_call()));
        times.push(t.elapsed());
    }
    times.sort();
    rows.stdio_p50_us.push(us(percentile(&times, 0.5)));
    rows.stdio_p99_us.push(us(percentile(&times, 0.99)));
    // Pipelined: every request written by one thread while this one reads the answers.
    let first = s.next;
    s.next += PIPELINED as u64;
    let mut lines = String::new();
    for id in first..s.next {
        lines.push_str(
            &serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": tool_call()})
                .to_string(),
        );
        lines.push('\n');
    }
    let t = Instant::now();
    let Server { stdin, stdout, .. } = &mut s;
    std::thread::scope(|scope| {
        scope.spawn(|| {
            stdin.write_all(lines.as_bytes()).unwrap();
            stdin.flush().unwrap();
        });
        let mut buf = String::new();
        let mut answered = 0;
        while answered < PIPELINED {
            buf.clear();
            assert!(
                stdout.read_line(&mut buf).unwrap() > 0,
                "the server closed stdout"
            );
            let v: serde_json::Value = serde_json::from_str(&buf).unwrap();
            if v.get("id").is_some() {
                check_answer(&v);
                answered += 1;
            }
        }
    });
    rows.pipelined_ms.push(ms(t.elapsed()));
    rows.rss_mb.push(rss_mb(s.child.id()));
    // What a server that stays up keeps of the burst: the same, idle a few seconds on.
    std::thread::sleep(IDLE);
    rows.idle_rss_mb.push(rss_mb(s.child.id()));
}

/// HTTP: one client's p50 and p99, then calls/s with each number of clients.
fn http_rows(c: &Contender, rows: &mut Rows) {
    let home = tempfile::tempdir().unwrap();
    let (mut child, addr) = c.http(home.path(), &[]);
    let mut s = HttpSession::connect(&addr);
    for _ in 0..WARM {
        s.call_tool();
    }
    let mut times = Vec::with_capacity(SEQUENTIAL);
    for _ in 0..SEQUENTIAL {
        let t = Instant::now();
        s.call_tool();
        times.push(t.elapsed());
    }
    times.sort();
    rows.http_p50_us.push(us(percentile(&times, 0.5)));
    rows.http_p99_us.push(us(percentile(&times, 0.99)));
    drop(s);
    let default: Vec<Probe> = CLIENTS
        .iter()
        .map(|&n| probed(&addr, n, child.id()))
        .collect();
    rows.clients.push(default.iter().map(|p| p.per_s).collect());
    let _ = child.kill();
    let _ = child.wait();
    // Every number of clients against 1 and 2 worker threads (not FastMCP nor Node: one
    // thread anyway).
    let mut table = Vec::new();
    if c.tokio {
        for w in WORKERS {
            let n = PathBuf::from(w.to_string());
            let (mut child, addr) = c.http(home.path(), &[("TOKIO_WORKER_THREADS", &n)]);
            table.push(
                CLIENTS
                    .iter()
                    .map(|&k| probed(&addr, k, child.id()))
                    .collect(),
            );
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    table.push(default);
    rows.probes.push(table);
}

/// Calls/s of `clients` sessions calling at once (each on its own connection), about
/// 4,000 calls in all.
fn concurrent(addr: &str, clients: usize) -> f64 {
    let per_client = (4000 / clients).max(50);
    let ready = std::sync::Barrier::new(clients + 1);
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..clients)
            .map(|_| {
                let ready = &ready;
                scope.spawn(move || {
                    let mut s = HttpSession::connect(addr);
                    s.call_tool();
                    ready.wait();
                    for _ in 0..per_client {
                        s.call_tool();
                    }
                })
            })
            .collect();
        ready.wait();
        let started = Instant::now();
        for t in threads {
            t.join().unwrap();
        }
        (clients * per_client) as f64 / started.elapsed().as_secs_f64()
    })
}

/// Prints one row: each contender's median and its ratio to rmcp's.
fn row(
    what: &str,
    unit: &str,
    results: &[(&Contender, Rows)],
    value: impl Fn(&Rows) -> Option<f64>,
) {
    let rmcp = results
        .iter()
        .find(|(c, _)| c.name == "rmcp")
        .and_then(|(_, r)| value(r));
    let mut line = format!("{what:34}");
    for (c, r) in results {
        let Some(v) = value(r) else {
            line.push_str(&format!("  {:>11} {:>22}", c.name, "-"));
            continue;
        };
        let ratio = rmcp.map_or(String::new(), |m| format!("({:.2}× rmcp)", v / m));
        let v = if v >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        };
        line.push_str(&format!("  {:>11} {v:>7} {unit:5} {ratio:14}", c.name));
    }
    println!("{line}");
}

fn race(contenders: &[Contender], rounds: usize) {
    println!("load average before: {}", load_average());
    let mut results: Vec<(&Contender, Rows)> =
        contenders.iter().map(|c| (c, Rows::default())).collect();
    for round in 0..rounds {
        eprintln!("round {} of {rounds}", round + 1);
        // Each round in another order, so no contender always follows the same one.
        let k = results.len();
        for i in 0..k {
            let (c, rows) = &mut results[(i + round) % k];
            cold(c, c.cold_runs, rows);
            stdio_rows(c, rows);
            http_rows(c, rows);
        }
    }
    println!(
        "every row: the median of {rounds} rounds, beside rmcp's (lower is better unless calls/s)"
    );
    row("cold start → tools/list", "ms", &results, |r| {
        Some(median(&r.cold_ms))
    });
    row("RSS after tools/list (last start)", "MB", &results, |r| {
        Some(median(&r.start_rss_mb))
    });
    row("  of it the program's code", "MB", &results, |r| {
        Some(median(&r.start_code_mb))
    });
    row("stdio tools/call p50", "µs", &results, |r| {
        Some(median(&r.stdio_p50_us))
    });
    row("stdio tools/call p99", "µs", &results, |r| {
        Some(median(&r.stdio_p99_us))
    });
    row("stdio 10,000 pipelined", "ms", &results, |r| {
        Some(median(&r.pipelined_ms))
    });
    row("RSS after 12,500 calls", "MB", &results, |r| {
        Some(median(&r.rss_mb))
    });
    row("  and 3 s later, idle", "MB", &results, |r| {
        Some(median(&r.idle_rss_mb))
    });
    row("HTTP tools/call p50, 1 client", "µs", &results, |r| {
        Some(median(&r.http_p50_us))
    });
    row("HTTP tools/call p99, 1 client", "µs", &results, |r| {
        Some(median(&r.http_p99_us))
    });
    for (i, n) in CLIENTS.iter().enumerate() {
        let what = format!("HTTP {n} clients");
        row(&what, "/s", &results, |r| {
            Some(median(&r.clients.iter().map(|c| c[i]).collect::<Vec<_>>()))
        });
    }
    probes_table(&results);
    println!("load average after: {}", load_average());
}

/// Calls/s against clients and worker threads (1, 2, the default), each the median of
/// its rounds with its ratio to rmcp's, and the server's CPU time and context switches
/// per call (medians too).
fn probes_table(results: &[(&Contender, Rows)]) {
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    println!(
        "HTTP calls/s against clients and worker threads ({cores} cores; default: a worker \
         per core): calls/s (× rmcp), the server's CPU µs and context switches per call"
    );
    let mut head = format!("{:22}", "clients × workers");
    for (c, _) in results {
        head.push_str(&format!("  {:>36}", c.name));
    }
    println!("{head}");
    let settings: Vec<String> = WORKERS
        .iter()
        .map(ToString::to_string)
        .chain([format!("default ({cores})")])
        .collect();
    // A round's runs for setting `w` (the default is the last of each round's).
    let runs = |r: &Rows, w: usize| -> Vec<Vec<Probe>> {
        r.probes
            .iter()
            .filter_map(|t| {
                if w == settings.len() - 1 {
                    t.last().cloned()
                } else if t.len() == settings.len() {
                    Some(t[w].clone())
                } else {
                    None
                }
            })
            .collect()
    };
    let stat = |r: &Rows, w: usize, i: usize, f: fn(&Probe) -> f64| -> Option<f64> {
        let v: Vec<f64> = runs(r, w).iter().map(|t| f(&t[i])).collect();
        (!v.is_empty()).then(|| median(&v))
    };
    for (i, n) in CLIENTS.iter().enumerate() {
        for (w, setting) in settings.iter().enumerate() {
            let rmcp = results
                .iter()
                .find(|(c, _)| c.name == "rmcp")
                .and_then(|(_, r)| stat(r, w, i, |p| p.per_s));
            let mut line = format!("{:22}", format!("{n} × {setting}"));
            for (_, r) in results {
                let cell = match (
                    stat(r, w, i, |p| p.per_s),
                    stat(r, w, i, |p| p.cpu_us),
                    stat(r, w, i, |p| p.switches),
                ) {
                    (Some(v), Some(cpu), Some(cs)) => {
                        let ratio = rmcp.map_or(String::new(), |m| format!("({:.2}×)", v / m));
                        format!("{v:>6.0}/s {ratio:8} {cpu:>5.0} µs {cs:>4.1} cs")
                    }
                    _ => "-".into(),
                };
                line.push_str(&format!("  {cell:>36}"));
            }
            println!("{line}");
        }
    }
}

/// `/proc/loadavg`'s 1, 5 and 15 minute figures (the machine's other work).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn main() -> std::process::ExitCode {
    if std::env::var_os(SERVE).is_some() {
        // A server of the race: the engine with `convert_temperature` linked in.
        return klaw_engine::main();
    }
    // `cargo bench` passes `--bench`; nothing else to parse.
    let me = std::env::current_exe().unwrap();
    // The engine races from a copy of this binary, as the older builds do: served from
    // the file the harness itself runs, it measured slower (stdio p50 1.19x, HTTP p50
    // 1.12x the same build as a copy, whichever build took that place).
    let copy = tempfile::tempdir().unwrap();
    let engine = copy.path().join("klaw");
    std::fs::copy(&me, &engine).unwrap();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rounds = std::env::var("KLAW_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let only = std::env::var("KLAW_BENCH_ONLY").ok();
    let wanted = |name: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|n| n.trim() == name))
    };
    let mut contenders = vec![Contender {
        name: "klaw",
        program: engine.clone(),
        args: vec!["mcp".into()],
        port_arg: false,
        cold_runs: 20,
        tokio: true,
    }];
    // One older build (`klaw-before`), or several (`a:b:c`, each named by its file).
    let before: Vec<PathBuf> = std::env::var_os("KLAW_BENCH_BEFORE")
        .map(|b| std::env::split_paths(&b).collect())
        .unwrap_or_default();
    for program in &before {
        let name = match program.file_name() {
            Some(f) if before.len() > 1 => String::leak(f.to_string_lossy().into_owned()),
            _ => "klaw-before",
        };
        contenders.push(Contender {
            name,
            program: program.clone(),
            args: vec!["mcp".into()],
            port_arg: false,
            cold_runs: 20,
            tokio: true,
        });
    }
    // Where `make bench` builds it (the workspace's target dir).
    let peer = std::env::var_os("KLAW_BENCH_RMCP_PEER").map_or_else(
        || manifest.join("../target/rmcp-peer/release/rmcp-peer"),
        PathBuf::from,
    );
    if peer.exists() {
        contenders.push(Contender {
            name: "rmcp",
            program: peer,
            args: vec![],
            port_arg: false,
            cold_runs: 20,
            tokio: true,
        });
    } else {
        println!(
            "rmcp: skipped, {} is missing (cargo build --release --manifest-path klaw-engine/benches/rmcp-peer/Cargo.toml --target-dir target/rmcp-peer)",
            peer.display()
        );
    }
    let python = cache().join("venv-test/bin/python");
    if python.exists() {
        contenders.push(Contender {
            name: "fastmcp",
            program: python,
            args: vec![
                manifest
                    .join("benches/fastmcp_echo.py")
                    .display()
                    .to_string(),
            ],
            port_arg: true,
            cold_runs: 3,
            tokio: false,
        });
    } else {
        println!(
            "fastmcp: skipped, {} is missing (scripts/setup-test-tools.sh)",
            python.display()
        );
    }
    let node = cache().join("node22/node_modules/.bin/node");
    let sdk = cache().join("node22/node_modules/@modelcontextprotocol/sdk/package.json");
    if node.exists() && sdk.exists() {
        contenders.push(Contender {
            name: "ts-sdk",
            program: node,
            args: vec![
                manifest
                    .join("benches/ts_sdk_echo.cjs")
                    .display()
                    .to_string(),
            ],
            port_arg: false,
            cold_runs: 5,
            tokio: false,
        });
    } else {
        println!(
            "ts-sdk: skipped, {} or {} is missing (scripts/setup-test-tools.sh)",
            node.display(),
            sdk.display()
        );
    }
    contenders.retain(|c| wanted(c.name));
    race(&contenders, rounds);
    if only.is_none() {
        protocol(&me);
        batch(&me);
    }
    std::process::ExitCode::SUCCESS
}
