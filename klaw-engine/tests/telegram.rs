//! `klaw-engine run` with Telegram, against `telegram-test-api` (a fake Bot API server
//! someone else wrote, from npm; `scripts/setup-test-tools.sh` installs it with Node 22)
//! and a scripted model server: a message in an allowed chat gets the agent's answer
//! (long ones split at Telegram's limit), a chat off the whitelist gets nothing and is
//! logged, and SIGTERM stops the engine cleanly.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;
use common::fake_telegram::FakeTelegram;
use common::scripted::{Reply, ScriptedServer};
use common::{cache, engine};

const TOKEN: &str = "123:ABC";

/// Spawns `cmd` (its stderr piped), its log gathered as it comes into the string returned
/// beside it; killed when dropped.
fn spawn_logged(cmd: &mut std::process::Command) -> (Killed, Arc<Mutex<String>>) {
    let mut child = cmd.spawn().unwrap();
    let log = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&log);
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let mut l = sink.lock().unwrap();
            l.push_str(&line);
            l.push('\n');
        }
    });
    (Killed(child), log)
}

/// A child process killed when dropped.
struct Killed(Child);

impl Killed {
    /// Sends SIGTERM and waits for the exit.
    fn terminate(&mut self) -> std::process::ExitStatus {
        common::terminate(&mut self.0)
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn answer(text: &str) -> Reply {
    Reply::json(json!({
        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    }))
}

fn last_user(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// The fake Bot API server, or `None` where `telegram-test-api` is not installed (never
/// under CI, which installs it).
fn fake_telegram() -> Option<FakeTelegram> {
    let Some(fake) = FakeTelegram::start(&cache()) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "telegram-test-api is missing"
        );
        return None;
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    Some(fake)
}

/// `klaw-engine run` on `home` with Telegram at `tg` (chat 42 allowed) and the model
/// at `model`.
fn run_command(home: &std::path::Path, tg: &str, model: &str, poll_seconds: &str) -> Command {
    let mut run = engine(home, &["run"]);
    run.env("KLAW_TELEGRAM_TOKEN", TOKEN)
        .env("KLAW_TELEGRAM_BASE_URL", tg)
        .env("KLAW_TELEGRAM_POLL_SECONDS", poll_seconds)
        .env("KLAW_ALLOWED_CHAT_IDS", "telegram_42")
        .env("KLAW_LLM_BASE_URL", format!("{model}/v1"))
        .env("KLAW_LLM_MODEL", "test-model")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    run
}

/// A user of chat `chat` writes `text` to the bot.
async fn say(http: &reqwest::Client, tg: &str, chat: i64, text: &str) {
    let body = json!({
        "botToken": TOKEN,
        "from": {"id": chat, "is_bot": false, "first_name": format!("user{chat}")},
        "chat": {"id": chat, "type": "private"},
        "date": 1_700_000_000,
        "text": text,
    });
    let r = http
        .post(format!("{tg}/sendMessage"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_chats_on_the_whitelist_get_answers() {
    let Some(fake) = fake_telegram() else { return };
    let tg = fake.url.clone();

    let model = ScriptedServer::respond(|r| {
        let user = last_user(&r.body);
        if user == "long please" {
            answer(&format!("{}\n{}", "x".repeat(3000), "y".repeat(3000)))
        } else {
            answer(&format!("Echo: {user}"))
        }
    });
    let home = tempfile::tempdir().unwrap();
    let mut run = run_command(home.path(), &tg, &model.url, "2");
    run.stderr(Stdio::piped());
    let (mut run, log) = spawn_logged(&mut run);

    let http = reqwest::Client::new();

    say(&http, &tg, 7, "hello from 7").await;
    say(&http, &tg, 42, "hello from 42").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = Vec::new();
    while got.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        got = bot_said(&http, &tg, 42).await;
    }
    assert_eq!(got, ["Echo: hello from 42"], "{}", log.lock().unwrap());

    // A long answer arrives in parts within Telegram's limit.
    say(&http, &tg, 42, "long please").await;
    let mut parts = Vec::new();
    while parts.len() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        parts.extend(bot_said(&http, &tg, 42).await);
    }
    assert_eq!(parts, ["x".repeat(3000), "y".repeat(3000)]);

    // Chat 7 is off the whitelist: nothing reached the model or the chat; it is logged.
    assert!(bot_said(&http, &tg, 7).await.is_empty());
    assert!(
        model
            .requests()
            .iter()
            .all(|r| !last_user(&r.body).contains("from 7")),
        "chat 7 reached the model"
    );
    assert!(
        log.lock().unwrap().contains("off gateway.allowedChatIds"),
        "{}",
        log.lock().unwrap()
    );
    assert!(!log.lock().unwrap().contains(TOKEN));

    // SIGTERM: a clean stop.
    let status = run.terminate();
    assert!(status.success(), "{status:?}\n{}", log.lock().unwrap());
}

/// `run` with `mcp.enabled` and no channel to serve but the console: the MCP server
/// answers beside the gateway (with `send_message` among the tools), and SIGTERM stops
/// both. With nothing to run, `run` says so.
#[test]
fn run_serves_mcp_beside_the_gateway() {
    let home = tempfile::tempdir().unwrap();
    let nothing = engine(home.path(), &["run"]).output().unwrap();
    assert!(!nothing.status.success());
    assert!(
        String::from_utf8_lossy(&nothing.stderr).contains("nothing to run"),
        "{}",
        String::from_utf8_lossy(&nothing.stderr)
    );

    let mut child = engine(home.path(), &["run"])
        .env("KLAW_MCP_ENABLED", "true")
        .env("KLAW_MCP_BIND", "127.0.0.1:0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("run exited before serving").unwrap();
        if let Some(url) = line.strip_prefix("klaw-engine: MCP over HTTP at http://") {
            break url.trim_end_matches("/mcp").to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let mut run = Killed(child);
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    std::io::Write::write_all(
        &mut s,
        format!("GET /api/v1/tools HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .unwrap();
    let mut body = String::new();
    std::io::Read::read_to_string(&mut s, &mut body).unwrap();
    assert!(
        body.starts_with("HTTP/1.1 200") && body.contains("\"send_message\""),
        "{body}"
    );
    let status = run.terminate();
    assert!(status.success(), "{status:?}");
}

/// A stop lets a running turn finish even with the MCP server beside it: the app owns
/// the one stop signal and shuts the engine down after the turns' grace period. Before,
/// the MCP server caught SIGTERM itself and shut the engine down at once, so a turn's
/// running `exec` was killed and the model got an error instead of its result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_lets_a_running_turn_finish_with_mcp_beside() {
    let Some(fake) = fake_telegram() else { return };
    let tg = fake.url.clone();
    let model = ScriptedServer::respond(|r| {
        let last = r.body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .cloned()
            .unwrap_or_default();
        if last["role"] == "tool" {
            answer("done")
        } else {
            Reply::json(json!({
                "choices": [{"message": {"role": "assistant", "content": "", "tool_calls": [{
                    "id": "c1", "type": "function",
                    "function": {"name": "exec", "arguments": "{\"command\": \"sleep 3; echo slept-through\"}"},
                }]}, "finish_reason": "tool_calls"}],
            }))
        }
    });
    let home = tempfile::tempdir().unwrap();
    let mut run = run_command(home.path(), &tg, &model.url, "1");
    // exec is destructive: nobody could approve it on Telegram.
    run.env("KLAW_APPROVAL", "never")
        .env("KLAW_MCP_ENABLED", "true")
        .env("KLAW_MCP_BIND", "127.0.0.1:0")
        .stderr(Stdio::null());
    let mut run = Killed(run.spawn().unwrap());
    say(&reqwest::Client::new(), &tg, 42, "run it").await;
    // The model asked for the slow command; stop while it runs.
    let deadline = Instant::now() + Duration::from_secs(60);
    while model.requests().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the turn never reached the model"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    let status = tokio::task::spawn_blocking(move || run.terminate())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
    let requests = model.requests();
    let result = requests
        .iter()
        .filter_map(|r| r.body["messages"].as_array()?.last().cloned())
        .find(|m| m["role"] == "tool")
        .expect("the tool's result never reached the model");
    assert!(
        result["content"]
            .as_str()
            .unwrap_or_default()
            .contains("slept-through"),
        "the running call was cut short: {result}"
    );
}

/// What the bot sent to `chat` since the last look.
async fn bot_said(http: &reqwest::Client, tg: &str, chat: i64) -> Vec<String> {
    let v: Value = http
        .post(format!("{tg}/getUpdates"))
        .json(&json!({"token": TOKEN, "chatId": chat}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["result"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["message"]["text"].as_str().map(str::to_owned))
        .collect()
}

/// Collects what the bot sends to chat 42 into `answers` until `want` is among them.
async fn wait_for_answer(http: &reqwest::Client, tg: &str, want: &str, answers: &mut Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !answers.iter().any(|a| a == want) {
        assert!(Instant::now() < deadline, "no {want:?}; got {answers:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        answers.extend(bot_said(http, tg, 42).await);
    }
}

/// A restart answers each Telegram message once: one answered before a clean stop is
/// not answered again, and one whose turn was running when the engine was killed
/// (`kill -9`, after Telegram had been told it arrived) is answered after the restart.
/// The fake server confirms updates by offset as Telegram does. Before, the offset
/// lived in memory and moved on as soon as a batch arrived: the killed turn's message
/// was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_answers_each_telegram_message_once() {
    let Some(fake) = fake_telegram() else { return };
    let tg = fake.url.clone();
    let model = ScriptedServer::respond(|r| answer(&format!("Echo: {}", last_user(&r.body))));
    // A model that takes each request and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = Arc::clone(&asked);
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in silent.incoming().map_while(Result::ok) {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(s);
        }
    });
    let http = reqwest::Client::new();
    let home = tempfile::tempdir().unwrap();
    let start = |model: &str| {
        let mut run = run_command(home.path(), &tg, model, "1");
        run.stderr(Stdio::null());
        Killed(run.spawn().unwrap())
    };
    let mut answers = Vec::new();

    // Answered, then a clean stop.
    let mut first = start(&model.url);
    say(&http, &tg, 42, "one").await;
    wait_for_answer(&http, &tg, "Echo: one", &mut answers).await;
    assert!(first.terminate().success());

    // Received, its turn running, the engine killed.
    let second = start(&silent_url);
    say(&http, &tg, 42, "two").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while asked.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the turn never reached the model"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Long enough for the next poll to tell Telegram that "two" arrived.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    drop(second); // SIGKILL

    // After the restart: "two" answered, "one" not again, and new messages as usual.
    let mut third = start(&model.url);
    wait_for_answer(&http, &tg, "Echo: two", &mut answers).await;
    say(&http, &tg, 42, "three").await;
    wait_for_answer(&http, &tg, "Echo: three", &mut answers).await;
    assert!(third.terminate().success());
    answers.extend(bot_said(&http, &tg, 42).await);
    assert_eq!(answers, ["Echo: one", "Echo: two", "Echo: three"]);
    let asked_about = |text: &str| {
        model
            .requests()
            .iter()
            .filter(|r| last_user(&r.body) == text)
            .count()
    };
    assert_eq!(
        (asked_about("one"), asked_about("two"), asked_about("three")),
        (1, 1, 1)
    );
}

/// The engine holding the bot's poller, by its pid (the lease's owner is
/// `host-pid123-5f3a9c`), once its lease is live and its pid one of `pids`.
fn poller_pid(pg: &common::postgres::Postgres, url: &str, pids: &[u32]) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // No table until an engine has migrated the database.
        let migrated = pg.psql_url(
            url,
            "SELECT count(*) FROM pg_tables WHERE tablename = 'gateway_pollers'",
        ) == "1";
        let owner = if migrated {
            pg.psql_url(
                url,
                "SELECT owner FROM gateway_pollers WHERE lease_until >= \
                 (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
            )
        } else {
            String::new()
        };
        let pid = owner
            .split('-')
            .find_map(|p| p.strip_prefix("pid"))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid.filter(|p| pids.contains(p)) {
            return pid;
        }
        assert!(Instant::now() < deadline, "no live engine polls: {owner:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Three `run` engines on one PostgreSQL and one bot: 200 messages in 20 chats while
/// the engine holding the poller is killed with `kill -9` twice (and started again):
/// another engine takes the poller over, any engine answers a chat, and every message
/// is answered exactly once, each chat's answers in the order of its messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_engines_answer_each_message_once_while_the_poller_dies() {
    let Some(pg) = common::postgres::Postgres::start() else {
        return;
    };
    let Some(fake) = fake_telegram() else { return };
    let tg = fake.url.clone();
    let url = pg.fresh_db();
    // A model server per engine (shows which engines answered); turns spend their time
    // waiting on it, as real ones do.
    // Held, it keeps its engine's turns waiting on it.
    let holds: Vec<Arc<std::sync::atomic::AtomicBool>> = (0..3).map(|_| Arc::default()).collect();
    let models: Vec<ScriptedServer> = holds
        .iter()
        .map(|hold| {
            let hold = Arc::clone(hold);
            ScriptedServer::respond(move |r| {
                std::thread::sleep(Duration::from_millis(20));
                while hold.load(std::sync::atomic::Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                answer(&format!("Echo: {}", last_user(&r.body)))
            })
        })
        .collect();
    let chats: Vec<i64> = (1001..=1020).collect();
    let allowed = chats
        .iter()
        .map(|c| format!("telegram_{c}"))
        .collect::<Vec<_>>()
        .join(",");
    let homes: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let start = |i: usize| {
        let mut run = run_command(homes[i].path(), &tg, &models[i].url, "1");
        // Each process's log appended to its engine's, shown when the test fails.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(homes[i].path().join("engine.log"))
            .unwrap();
        run.env("KLAW_DATABASE_URL", &url)
            .env("KLAW_ALLOWED_CHAT_IDS", &allowed)
            .stderr(log);
        Killed(run.spawn().unwrap())
    };
    let mut engines: Vec<Killed> = (0..3).map(start).collect();
    let pids = |engines: &[Killed]| engines.iter().map(|e| e.0.id()).collect::<Vec<_>>();
    let first_poller = poller_pid(&pg, &url, &pids(&engines));

    let http = reqwest::Client::new();
    let mut killed = Vec::new();
    for round in 0..10 {
        for chat in &chats {
            say(&http, &tg, *chat, &format!("c{chat} m{round}")).await;
        }
        if round == 3 || round == 6 {
            // Whoever polls now dies, and comes back as a new process.
            let all = pids(&engines);
            let pid = poller_pid(&pg, &url, &all);
            let i = all.iter().position(|p| *p == pid).unwrap();
            // Killed while its turns wait on the model, where turns spend their time:
            // not in the instant between marking an answer `sending` and sending it,
            // where a kill leaves that message unanswered (doc/scaling.md).
            holds[i].store(true, std::sync::atomic::Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(500)).await;
            let status = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status()
                .unwrap();
            assert!(status.success());
            let _ = engines[i].0.wait();
            killed.push(pid);
            holds[i].store(false, std::sync::atomic::Ordering::SeqCst);
            engines[i] = start(i);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(killed.len(), 2);
    assert_eq!(killed[0], first_poller);
    // Another engine took the poller over after each kill.
    let now = poller_pid(&pg, &url, &pids(&engines));
    assert!(!killed.contains(&now));

    // Every message answered once, each chat in order.
    let want: BTreeMap<i64, Vec<String>> = chats
        .iter()
        .map(|c| (*c, (0..10).map(|m| format!("Echo: c{c} m{m}")).collect()))
        .collect();
    let mut got: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        for chat in &chats {
            let said = bot_said(&http, &tg, *chat).await;
            got.entry(*chat).or_default().extend(said);
        }
        let count: usize = got.values().map(Vec::len).sum();
        if count >= 200 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Late duplicates would show up here.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for chat in &chats {
        got.entry(*chat)
            .or_default()
            .extend(bot_said(&http, &tg, *chat).await);
    }
    let logs: String = homes
        .iter()
        .map(|h| std::fs::read_to_string(h.path().join("engine.log")).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n----\n");
    assert_eq!(got, want, "{logs}");
    // The chats were spread over the engines, not all served by one.
    let asked: Vec<usize> = models.iter().map(|m| m.requests().len()).collect();
    eprintln!("turns per engine: {asked:?}");
    assert!(asked.iter().filter(|n| **n > 0).count() >= 2, "{asked:?}");
    let left = pg.psql_url(&url, "SELECT count(*) FROM gateway_inbox");
    assert_eq!(left, "0", "messages left in the inbox");
    for e in &mut engines {
        assert!(e.terminate().success());
    }
}

/// The shared inbox's database lost while the engine polls (the server killed, then
/// started again): the engine says clearly that it cannot reach the inbox, confirms
/// nothing to Telegram meanwhile, and once the database is back answers what arrived
/// in between, once; no panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_database_lost_mid_poll_is_a_clear_error_and_loses_nothing() {
    let Some(mut pg) = common::postgres::Postgres::start() else {
        return;
    };
    let Some(fake) = fake_telegram() else { return };
    let tg = fake.url.clone();
    let url = pg.url();
    let model = ScriptedServer::respond(|r| answer(&format!("Echo: {}", last_user(&r.body))));
    let home = tempfile::tempdir().unwrap();
    let mut run = run_command(home.path(), &tg, &model.url, "1");
    run.env("KLAW_DATABASE_URL", &url).stderr(Stdio::piped());
    let (mut run, log) = spawn_logged(&mut run);
    let http = reqwest::Client::new();
    let mut answers = Vec::new();
    say(&http, &tg, 42, "one").await;
    wait_for_answer(&http, &tg, "Echo: one", &mut answers).await;

    pg.kill();
    say(&http, &tg, 42, "two").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !log
        .lock()
        .unwrap()
        .contains("gateway's inbox in PostgreSQL")
    {
        assert!(
            Instant::now() < deadline,
            "no error said so: {}",
            log.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    answers.extend(bot_said(&http, &tg, 42).await);
    assert_eq!(answers, ["Echo: one"], "answered without its inbox");

    pg.start_again();
    wait_for_answer(&http, &tg, "Echo: two", &mut answers).await;
    say(&http, &tg, 42, "three").await;
    wait_for_answer(&http, &tg, "Echo: three", &mut answers).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    answers.extend(bot_said(&http, &tg, 42).await);
    assert_eq!(answers, ["Echo: one", "Echo: two", "Echo: three"]);
    let status = run.terminate();
    let log = log.lock().unwrap().clone();
    assert!(status.success(), "{status:?}\n{log}");
    let error = log
        .lines()
        .find(|l| l.contains("gateway's inbox in PostgreSQL"))
        .unwrap_or_default();
    // It names the database and what failed, never a password.
    assert!(
        error.contains("the PostgreSQL database `klaw` at"),
        "{error}"
    );
    assert!(!log.contains("panicked"), "{log}");
}
