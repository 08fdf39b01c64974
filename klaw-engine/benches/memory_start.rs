//! The first `memory_search` of a freshly started `klaw-engine mcp` (stdio) on a memory
//! of 100k chunks, beside the warm searches that follow (a bench binary: `cargo bench -p
//! klaw-engine --bench memory_start`). The engine warms its memory at start-up
//! (`App::warm_memory`: the model, the vectors' in-memory copy, one search); the target
//! is a first search within 2× a warm one once the engine has been up for the warm-up.
//!
//! Three rows, each over fresh processes (`ROUNDS`, medians):
//! - `first search, asked at once`: the search is the first request after `initialize`,
//!   so it waits for the warm-up still running (what a client that asks at once sees);
//! - `first search after the warm-up`: asked once the log says `memory warmed`;
//! - `warm search`: the next `WARM` searches of that process (p50).
//!
//! The store is the one the klaw-memory benches build and cache in
//! `CARGO_TARGET_TMPDIR` (the retrieval set's notes plus filler with random vectors),
//! hard-linked into each run's data directory. Numbers are printed, never asserted.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a bench binary

#[path = "../../klaw-memory/benches/support/memory.rs"]
#[allow(dead_code)]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const CHUNKS: usize = 100_000;
const ROUNDS: usize = 5;
const WARM: usize = 30;

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Server {
    /// `klaw-engine mcp` on `data`, its log (memory at info) in `log`.
    fn start(home: &Path, data: &Path, log: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_klaw-engine"))
            .arg("mcp")
            .env_clear()
            .env("HOME", home)
            .env("KLAW_DATA", data)
            .env("KLAW_CACHE", klaw_tools::cache_dir().unwrap())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("KLAW_LOG_LEVEL", "klaw::memory=info,error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        let mut s = Self {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            next: 1,
        };
        let r = s.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}),
        );
        assert!(r["result"].is_object(), "{r}");
        writeln!(
            s.stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .unwrap();
        s
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        let mut buf = String::new();
        loop {
            buf.clear();
            assert!(
                self.stdout.read_line(&mut buf).unwrap() > 0,
                "stdout closed"
            );
            let v: Value = serde_json::from_str(&buf).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }

    /// One `memory_search`, timed.
    fn search(&mut self, query: &str) -> Duration {
        let t = Instant::now();
        let r = self.request(
            "tools/call",
            json!({"name": "memory_search", "arguments": {"query": query}}),
        );
        let took = t.elapsed();
        assert_eq!(r["result"]["isError"], false, "{r}");
        took
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let e = support::embedder();
    let store = {
        drop(support::big_store(CHUNKS, &e));
        support::big_index(CHUNKS, &e).path().to_owned()
    };
    drop(e);
    let set = support::test_set();
    let questions: Vec<&str> = set.questions.iter().map(|q| q.q.as_str()).collect();
    let (mut at_once, mut after, mut warm, mut warmed_in) = (vec![], vec![], vec![], vec![]);
    for round in 0..ROUNDS {
        for wait in [false, true] {
            let home = tempfile::tempdir().unwrap();
            let data = home.path().join("data");
            std::fs::create_dir_all(&data).unwrap();
            let db = data.join(klaw_tools::tools::memory::MEMORY_DB);
            if std::fs::hard_link(&store, &db).is_err() {
                std::fs::copy(&store, &db).unwrap();
            }
            let log = home.path().join("mcp.log");
            let started = Instant::now();
            let mut s = Server::start(home.path(), &data, &log);
            let q = questions[round % questions.len()];
            if !wait {
                at_once.push(s.search(q));
                continue;
            }
            while !std::fs::read_to_string(&log)
                .unwrap()
                .contains("memory warmed")
            {
                assert!(started.elapsed() < Duration::from_secs(120), "no warm-up");
                std::thread::sleep(Duration::from_millis(5));
            }
            warmed_in.push(started.elapsed());
            after.push(s.search(q));
            let times: Vec<Duration> = (1..=WARM)
                .map(|i| s.search(questions[(round + i) % questions.len()]))
                .collect();
            warm.push(median(times));
        }
    }
    let warm = median(warm);
    let row = |what: &str, d: Duration, note: &str| println!("{what:<40} {:>9.2} ms{note}", ms(d));
    let times_warm = |d: Duration| d.as_secs_f64() / warm.as_secs_f64();
    println!("memory_search in a fresh `mcp`, {CHUNKS} chunks, medians of {ROUNDS} processes");
    row("start to `memory warmed`", median(warmed_in), "");
    let at_once = median(at_once);
    let note = format!(" ({:.1}× warm)", times_warm(at_once));
    row("first search, asked at once", at_once, &note);
    let after = median(after);
    let note = format!(" ({:.2}× warm; target ≤ 2×)", times_warm(after));
    row("first search after the warm-up", after, &note);
    row("warm search (p50)", warm, "");
}
