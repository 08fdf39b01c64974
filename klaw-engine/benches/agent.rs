//! The agent, measured (a bench binary: `cargo bench -p klaw-engine --bench agent`):
//!
//! - loop overhead per round: turns of one tool call (`current_time`) and an answer
//!   against a scripted model server on loopback; our time per round, the server's
//!   handling excluded (HTTP, JSON, the tool, the history in SQLite included), with the
//!   threads' voluntary context switches per round (a thread sleeping until another
//!   wakes it: the hand-overs, which the machine's load does not change) and the
//!   involuntary ones (preempted: the load); turns awaited on a runtime worker as the
//!   front ends do, then from `block_on`'s thread; then (`loop-postgres`) on a worker
//!   with the history and core memory in a real PostgreSQL (`storage.url`, a unix
//!   socket, the tests' server) beside the same on SQLite, for a turn's overhead of
//!   the shared database;
//! - a turn's start at a full history (200 messages, tool results of a few KB, as file
//!   and web tools give): through the decoded window the history keeps, beside a read
//!   of the same window afresh, in turns;
//! - `chat` cold start: spawn → the model server receives the first request (median);
//! - memory of `klaw-engine run` with 10 Telegram chats that have each talked once and
//!   are now idle (resident set size), against telegram-test-api when installed.
//!
//! Numbers are printed, never asserted: machines differ. Arguments pick parts by name
//! (`loop`, or `loop-worker` / `loop-block-on` for one of its two; `turn-start`,
//! `cold-start`, `memory`): `cargo bench -p klaw-engine --bench agent -- loop` measures
//! the loop alone.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a bench binary

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use klaw_engine::agent::{Agent, History};
use klaw_engine::llm::{
    Arguments, AssistantMessage, Message, Model, ToolCallRequest, ToolResult, Usage,
};
use klaw_engine::{Config, Engine};
use serde_json::{Value, json};

#[path = "../tests/common/fake_telegram.rs"]
mod fake_telegram;
#[path = "../tests/common/postgres.rs"]
mod postgres;
#[path = "../tests/common/scripted.rs"]
#[allow(dead_code)]
mod scripted;
use fake_telegram::FakeTelegram;
use scripted::{Reply, ScriptedServer};

fn cache() -> PathBuf {
    klaw_tools::cache_dir().expect("neither KLAW_CACHE nor HOME is set")
}

fn tool_call() -> Reply {
    Reply::json(json!({
        "choices": [{"message": {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "current_time", "arguments": "{\"timezone\":\"UTC\"}"}}
        ]}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }))
}

fn answer(text: &str) -> Reply {
    Reply::json(json!({
        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }))
}

/// A model that calls `current_time` once per turn, then answers.
fn model_server() -> ScriptedServer {
    ScriptedServer::respond(|r| {
        let last = r.body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .cloned()
            .unwrap_or(Value::Null);
        if last["role"] == "tool" {
            answer("It is noon.")
        } else {
            tool_call()
        }
    })
}

/// Where the turns are awaited: in a task on a runtime worker, as the front ends run
/// them (`app::run_front_on_worker` spawns the front end; `run` spawns a task per
/// chat), or on the thread of `Runtime::block_on`, as a program that awaits
/// `Agent::turn` in `#[tokio::main]`'s body does.
#[derive(Clone, Copy, PartialEq)]
enum Driven {
    OnWorker,
    InBlockOn,
}

fn loop_overhead(driven: Driven) {
    loop_overhead_on(driven, None);
}

fn loop_overhead_on(driven: Driven, database: Option<String>) {
    let dir = tempfile::tempdir().unwrap();
    let server = model_server();
    let on_postgres = database.is_some();
    let vars = [
        ("KLAW_DATABASE_URL", database.unwrap_or_default()),
        ("HOME", dir.path().display().to_string()),
        ("KLAW_DATA", dir.path().join("data").display().to_string()),
        (
            "KLAW_WORKSPACE",
            dir.path().join("ws").display().to_string(),
        ),
        ("KLAW_LLM_BASE_URL", format!("{}/v1", server.url)),
        ("KLAW_LLM_MODEL", "bench".into()),
        ("KLAW_LLM_TOOLS", "current_time".into()),
    ];
    let env = move |name: &str| {
        vars.iter()
            .find(|(k, v)| *k == name && !v.is_empty())
            .map(|(_, v)| v.clone())
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let measure = async move {
        let config = Config::load_with(&env).unwrap();
        let engine = Engine::new(config).unwrap();
        let model = Model::from_config(engine.config(), None).unwrap();
        let history = Arc::new(History::from_config(engine.config(), engine.database()).unwrap());
        let agent = Agent::with_model(engine.clone(), model, history);
        let caller = klaw_tools::Caller::new("bench", None);
        for i in 0..20 {
            agent
                .turn(&format!("warm{i}"), caller.clone(), "time?", &())
                .await
                .unwrap();
        }
        const TURNS: usize = 300;
        let busy_before = server.busy();
        let mut per_round = Vec::with_capacity(TURNS);
        let (waits_before, preempted_before) = context_switches();
        let started = Instant::now();
        for i in 0..TURNS {
            let busy = server.busy();
            let t = Instant::now();
            agent
                .turn(&format!("c{}", i % 10), caller.clone(), "time?", &())
                .await
                .unwrap();
            let ours = t.elapsed().saturating_sub(server.busy() - busy);
            per_round.push(ours / 2);
        }
        let total = started
            .elapsed()
            .saturating_sub(server.busy() - busy_before);
        let (waits, preempted) = context_switches();
        let per_round_of = |n: u64| n as f64 / (TURNS * 2) as f64;
        per_round.sort();
        let place = match (driven, on_postgres) {
            (Driven::OnWorker, false) => "on a worker",
            (Driven::InBlockOn, false) => "in block_on",
            (Driven::OnWorker, true) => "PostgreSQL",
            (Driven::InBlockOn, true) => "PostgreSQL, block_on",
        };
        println!(
            "loop round (ours, {place:<11})  p50 {:>8.1} µs  p99 {:>8.1} µs  mean {:>8.1} µs  context switches {:>4.1} voluntary {:>4.1} involuntary  ({} turns of 2 rounds, server time excluded)",
            per_round[TURNS / 2].as_secs_f64() * 1e6,
            per_round[TURNS * 99 / 100].as_secs_f64() * 1e6,
            total.as_secs_f64() * 1e6 / (TURNS * 2) as f64,
            per_round_of(waits - waits_before),
            per_round_of(preempted - preempted_before),
            TURNS
        );
        engine.shutdown().await;
        drop((server, dir));
    };
    match driven {
        Driven::OnWorker => rt.block_on(rt.spawn(measure)).unwrap(),
        Driven::InBlockOn => rt.block_on(measure),
    }
}

/// The context switches of every live thread of this process so far: voluntary (the
/// thread slept until another woke it) and involuntary (it was preempted).
fn context_switches() -> (u64, u64) {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return (0, 0);
    };
    let mut sums = (0, 0);
    for status in tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
    {
        for line in status.lines() {
            let count = |prefix: &str| {
                line.strip_prefix(prefix)
                    .and_then(|n| n.trim().parse::<u64>().ok())
                    .unwrap_or(0)
            };
            sums.0 += count("voluntary_ctxt_switches:");
            sums.1 += count("nonvoluntary_ctxt_switches:");
        }
    }
    sums
}

fn turn_start_at_a_full_history() {
    let dir = tempfile::tempdir().unwrap();
    let history = History::open(&dir.path().join("agent.db")).unwrap();
    let page = "Lorem ipsum dolor sit amet, \"quoted\"\n".repeat(100); // ~3.7 KB
    let round = |i: usize| {
        let id = format!("call_{i}");
        [
            Message::Assistant(AssistantMessage {
                text: String::new(),
                tool_calls: vec![ToolCallRequest {
                    id: id.clone(),
                    name: "file_read".into(),
                    arguments: Arguments::Json(json!({"path": format!("notes/{i}.md")})),
                }],
            }),
            Message::Tool(ToolResult {
                call_id: id,
                name: "file_read".into(),
                content: page.clone(),
                is_error: false,
            }),
        ]
    };
    const LIMIT: usize = 200;
    for i in 0..LIMIT / 4 {
        history
            .append(chat(), &Message::User(format!("question {i}")))
            .unwrap();
        history.append_all(chat(), &round(i)).unwrap();
        history
            .append_answer(
                chat(),
                &Message::Assistant(AssistantMessage {
                    text: "Here it is.".into(),
                    tool_calls: vec![],
                }),
                "m",
                Usage::default(),
            )
            .unwrap();
    }
    fn chat() -> &'static str {
        "full"
    }
    let (mut cached, mut afresh) = (Vec::new(), Vec::new());
    for i in 0..200 {
        let t = Instant::now();
        let loaded = history
            .begin_turn(
                chat(),
                &Message::User(format!("more {i}")),
                LIMIT * 5,
                LIMIT,
            )
            .unwrap();
        cached.push(t.elapsed());
        let t = Instant::now();
        let again = history.load(chat(), LIMIT).unwrap();
        afresh.push(t.elapsed());
        assert_eq!(loaded, again);
        history.append_all(chat(), &round(1000 + i)).unwrap();
    }
    cached.sort();
    afresh.sort();
    let ms = |v: &[Duration]| v[v.len() / 2].as_secs_f64() * 1e3;
    println!(
        "turn start, 200-message history  p50 {:.3} ms (a read afresh of the same window {:.3} ms; {:.1}x)",
        ms(&cached),
        ms(&afresh),
        ms(&afresh) / ms(&cached)
    );
}

fn chat_cold_start() {
    let engine = PathBuf::from(env!("CARGO_BIN_EXE_klaw-engine"));
    let mut times = Vec::new();
    for _ in 0..10 {
        let server = ScriptedServer::script(vec![answer("hi")]);
        let home = tempfile::tempdir().unwrap();
        let t = Instant::now();
        let mut child = Command::new(&engine)
            .arg("chat")
            .env_clear()
            .env("HOME", home.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("KLAW_LLM_BASE_URL", format!("{}/v1", server.url))
            .env("KLAW_LLM_MODEL", "bench")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
        while server.requests().is_empty() {
            std::thread::sleep(Duration::from_micros(200));
        }
        times.push(t.elapsed());
        child.wait().unwrap();
    }
    times.sort();
    println!(
        "chat cold start    median {:>6.1} ms  (spawn → first request at the model server)",
        times[times.len() / 2].as_secs_f64() * 1e3
    );
}

fn run_memory() {
    let Some(fake) = FakeTelegram::start(&cache()) else {
        println!("run memory: telegram-test-api is missing (scripts/setup-test-tools.sh)");
        return;
    };
    let tg = fake.url.clone();
    let model = ScriptedServer::respond(|_| answer("ok"));
    let home = tempfile::tempdir().unwrap();
    let chats: Vec<String> = (1..=10).map(|i| format!("telegram_{i}")).collect();
    let mut run = Command::new(env!("CARGO_BIN_EXE_klaw-engine"))
        .arg("run")
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KLAW_TELEGRAM_TOKEN", "1:bench")
        .env("KLAW_TELEGRAM_BASE_URL", &tg)
        .env("KLAW_TELEGRAM_POLL_SECONDS", "2")
        .env("KLAW_ALLOWED_CHAT_IDS", chats.join(","))
        .env("KLAW_LLM_BASE_URL", format!("{}/v1", model.url))
        .env("KLAW_LLM_MODEL", "bench")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::new();
        for i in 1..=10 {
            http.post(format!("{tg}/sendMessage"))
                .json(&json!({"botToken": "1:bench", "from": {"id": i, "is_bot": false, "first_name": "u"},
                    "chat": {"id": i, "type": "private"}, "date": 1_700_000_000, "text": "hi"}))
                .send()
                .await
                .unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while model.requests().len() < 10 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    std::thread::sleep(Duration::from_secs(2));
    let status = std::fs::read_to_string(format!("/proc/{}/status", run.id())).unwrap_or_default();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .unwrap_or("VmRSS: ?")
        .trim_start_matches("VmRSS:")
        .trim()
        .to_owned();
    println!(
        "run memory         RSS {rss}  (10 Telegram chats answered once, then idle; {} model requests)",
        model.requests().len()
    );
    let _ = run.kill();
    let _ = run.wait();
    drop(fake);
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument names the parts to run.
    let picked: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let run = |name: &str| picked.is_empty() || picked.iter().any(|p| p == name);
    if run("loop") || run("loop-worker") {
        loop_overhead(Driven::OnWorker);
    }
    if run("loop") || run("loop-block-on") {
        loop_overhead(Driven::InBlockOn);
    }
    if run("loop-postgres") {
        // The same turns, the history and core memory in PostgreSQL, beside SQLite's.
        if let Some(pg) = postgres::Postgres::start() {
            loop_overhead(Driven::OnWorker);
            loop_overhead_on(Driven::OnWorker, Some(pg.url()));
        }
    }
    if run("turn-start") {
        turn_start_at_a_full_history();
    }
    if run("cold-start") {
        chat_cold_start();
    }
    if run("memory") {
        run_memory();
    }
}
