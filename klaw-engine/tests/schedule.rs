//! The scheduler through the real binary, real SQLite and real processes, with a
//! scripted OpenAI-compatible model server on loopback: jobs added, listed and removed
//! across processes; a per-second job fired by `run` and answered in a console chat
//! (unattended: a destructive call is refused; a silent answer sends nothing); a failing
//! run recorded and the next one run; missed runs under each misfire policy; two `run`
//! processes on one data dir firing every occurrence exactly once; an engine killed with
//! `kill -9` mid-run, whose occurrence is neither lost nor doubled after a restart.
//! Each test that uses the schedule runs twice: on SQLite in the data dir, and on a real
//! PostgreSQL (`storage.url`; skipped, saying so, where it is not installed). Three
//! engines on one PostgreSQL, one killed with `kill -9` holding a run and restarted,
//! fire each occurrence once. Bad `storage.url`s fail the start with a clear error.
//! Nothing here asserts a duration: deadlines only stop a test that would hang.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;
use crate::common::postgres::Postgres;
use common::mcp_client::Mcp;
use common::scripted::{Recorded, Reply, ScriptedServer};
use common::{engine, stderr, stdout};

/// The database a test's engines share: SQLite in the data dir, or a PostgreSQL.
type Backend = Option<Arc<Postgres>>;

/// Runs `test` on SQLite, then on a PostgreSQL of its own where one is installed.
fn each_backend(test: impl Fn(&Backend)) {
    test(&None);
    if let Some(pg) = Postgres::start() {
        test(&Some(Arc::new(pg)));
    }
}

/// A home with its data dir, the model server's URL the engine is given, and the
/// PostgreSQL database (with its URL) when the schedule is there.
struct Setup {
    home: tempfile::TempDir,
    model_url: String,
    pg: Option<(Arc<Postgres>, String)>,
}

/// The schedule's tables, read the same way on either backend (`?1` parameters, whole
/// numbers only; every value as text).
enum Db {
    Sqlite(rusqlite::Connection),
    Pg(Arc<Postgres>, String),
}

impl Db {
    fn inline(sql: &str, params: &[i64]) -> String {
        let mut sql = sql.to_owned();
        for (i, p) in params.iter().enumerate().rev() {
            sql = sql.replace(&format!("?{}", i + 1), &p.to_string());
        }
        sql
    }

    /// Runs a statement.
    fn execute(&self, sql: &str, params: &[i64]) {
        match self {
            Self::Sqlite(c) => {
                c.execute(&Self::inline(sql, params), []).unwrap();
            }
            Self::Pg(pg, url) => {
                pg.psql_url(url, &Self::inline(sql, params));
            }
        }
    }

    /// The rows of a query, each column as text (`NULL` as the empty string).
    fn rows(&self, sql: &str, params: &[i64]) -> Vec<Vec<String>> {
        let sql = Self::inline(sql, params);
        match self {
            Self::Sqlite(c) => {
                let mut st = c.prepare(&sql).unwrap();
                let n = st.column_count();
                st.query_map([], |r| {
                    (0..n)
                        .map(|i| {
                            Ok(match r.get_ref(i)? {
                                rusqlite::types::ValueRef::Integer(v) => v.to_string(),
                                rusqlite::types::ValueRef::Text(t) => {
                                    String::from_utf8_lossy(t).into_owned()
                                }
                                _ => String::new(),
                            })
                        })
                        .collect::<rusqlite::Result<Vec<String>>>()
                })
                .unwrap()
                .map(Result::unwrap)
                .collect()
            }
            Self::Pg(pg, url) => pg
                .psql_url(url, &sql)
                .lines()
                .map(|l| l.split('|').map(str::to_owned).collect())
                .collect(),
        }
    }

    /// The first column of the one row of a query.
    fn one<T: std::str::FromStr>(&self, sql: &str, params: &[i64]) -> T
    where
        T::Err: std::fmt::Debug,
    {
        self.rows(sql, params)[0][0].parse().unwrap()
    }
}

impl Setup {
    fn new(backend: &Backend, model_url: &str) -> Self {
        Self {
            home: tempfile::tempdir().unwrap(),
            model_url: model_url.to_owned(),
            pg: backend.as_ref().map(|pg| (Arc::clone(pg), pg.fresh_db())),
        }
    }

    fn data(&self) -> PathBuf {
        self.home.path().join("data")
    }

    fn db(&self) -> Db {
        match &self.pg {
            Some((pg, url)) => Db::Pg(Arc::clone(pg), url.clone()),
            None => {
                let c = rusqlite::Connection::open(self.data().join("schedule.sqlite")).unwrap();
                c.busy_timeout(Duration::from_secs(10)).unwrap();
                Db::Sqlite(c)
            }
        }
    }

    /// `klaw-engine ARGS` with this home, data dir and model.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = engine(self.home.path(), args);
        if let Some((_, url)) = &self.pg {
            c.env("KLAW_DATABASE_URL", url);
        }
        c.env("KLAW_DATA", self.data())
            .env("KLAW_LLM_BASE_URL", &self.model_url)
            .env("KLAW_LLM_MODEL", "test-model")
            .env("KLAW_LLM_API_KEY", "sk-test")
            .env("KLAW_LLM_RETRIES", "0")
            .env("KLAW_LOG_LEVEL", "warn")
            // Each run on its own (these tests count a run's messages); the own
            // history's test takes this away.
            .env("KLAW_OWN_HISTORY_MESSAGES", "0");
        c
    }

    fn run_cli(&self, args: &[&str]) -> Output {
        self.cmd(args).stdin(Stdio::null()).output().unwrap()
    }

    /// Adds a job through the command line; panics when it fails.
    fn add(&self, args: &[&str]) {
        let mut all = vec!["schedule", "add"];
        all.extend_from_slice(args);
        let o = self.run_cli(&all);
        assert!(o.status.success(), "{}", stderr(&o));
    }

    /// Starts `klaw-engine run`, its stdout lines collected.
    fn start(&self, env: &[(&str, &str)]) -> Running {
        let mut cmd = self.cmd(&["run"]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = Arc::new(Mutex::new(Vec::new()));
        let err = Arc::new(Mutex::new(String::new()));
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let seen = Arc::clone(&out);
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                seen.lock().unwrap().push(l);
            }
        });
        let lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let seen = Arc::clone(&err);
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                let mut e = seen.lock().unwrap();
                e.push_str(&l);
                e.push('\n');
            }
        });
        Running {
            child: Some(child),
            out,
            err,
        }
    }

    /// (scheduled second, status, owner, attempts) of each run of `job`.
    fn runs(&self, job: &str) -> Vec<(i64, String, String, i64)> {
        self.db()
            .rows(
                &format!(
                    "SELECT scheduled, status, owner, attempts FROM runs WHERE job = '{job}' ORDER BY scheduled"
                ),
                &[],
            )
            .into_iter()
            .map(|r| {
                (
                    r[0].parse().unwrap(),
                    r[1].clone(),
                    r[2].clone(),
                    r[3].parse().unwrap(),
                )
            })
            .collect()
    }
}

/// A running `klaw-engine run`; killed when dropped.
struct Running {
    child: Option<Child>,
    out: Arc<Mutex<Vec<String>>>,
    err: Arc<Mutex<String>>,
}

impl Running {
    fn lines(&self) -> Vec<String> {
        self.out.lock().unwrap().clone()
    }

    fn stderr(&self) -> String {
        self.err.lock().unwrap().clone()
    }

    fn pid(&self) -> String {
        self.child.as_ref().unwrap().id().to_string()
    }

    /// SIGTERM, then the exit (a clean stop is a success).
    fn terminate(&mut self) {
        let mut child = self.child.take().unwrap();
        let status = common::terminate(&mut child);
        assert!(status.success(), "{status:?}\n{}", self.stderr());
        // The readers see the end of the pipes.
        std::thread::sleep(Duration::from_millis(200));
    }

    /// `kill -9`: no chance to clean up.
    fn kill_9(&mut self) {
        let mut child = self.child.take().unwrap();
        assert!(
            Command::new("kill")
                .args(["-KILL", &child.id().to_string()])
                .status()
                .unwrap()
                .success()
        );
        let _ = common::wait_exit(&mut child);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits until `f` holds (checked every 100 ms); a test that would hang fails after
/// `secs` with `what`.
fn wait_for(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn answer(text: &str) -> Reply {
    Reply::json(json!({
        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2},
    }))
}

fn call(id: &str, name: &str, args: Value) -> Reply {
    Reply::json(json!({
        "choices": [{"message": {"role": "assistant", "content": "", "tool_calls": [{
            "id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()},
        }]}, "finish_reason": "tool_calls"}],
    }))
}

fn messages(r: &Recorded) -> Vec<Value> {
    r.body["messages"].as_array().cloned().unwrap_or_default()
}

/// The job's prompt of a request: its first user message.
fn prompt(r: &Recorded) -> String {
    messages(r)
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// The occurrence a run's prompt names (`run of 2026-...`).
fn occurrence(prompt: &str) -> String {
    prompt
        .split("run of ")
        .nth(1)
        .and_then(|s| s.split(';').next())
        .unwrap_or("?")
        .to_owned()
}

/// A model that answers each run `RAN <job> <occurrence>` (or silently for a job whose
/// message is `QUIET`).
fn ran_model() -> ScriptedServer {
    ScriptedServer::respond(|r| {
        let p = prompt(r);
        if p.ends_with("QUIET") {
            return answer(r#"{"silent": true, "reason": "nothing new"}"#);
        }
        let job = p.split('`').nth(1).unwrap_or("?");
        answer(&format!("RAN {job} {}", occurrence(&p)))
    })
}

/// The console lines `[console me] RAN <job> ...`, by occurrence, with their count.
fn delivered(lines: &[String], job: &str) -> BTreeMap<String, usize> {
    let prefix = format!("[console me] RAN {job} ");
    let mut out = BTreeMap::new();
    for l in lines {
        if let Some(occ) = l.strip_prefix(&prefix) {
            *out.entry(occ.to_owned()).or_insert(0) += 1;
        }
    }
    out
}

/// The answers delivered in `lines`, by occurrence, asserting that each of the `ok` runs
/// (`runs`, shown when it fails) was delivered exactly once: none doubled, none lost.
fn each_ok_run_delivered_once(
    lines: &[String],
    ok: usize,
    runs: &dyn std::fmt::Debug,
) -> BTreeMap<String, usize> {
    let got = delivered(lines, "tick");
    assert_eq!(got.len(), ok, "{got:?}\n{runs:?}");
    assert!(got.values().all(|&n| n == 1), "{got:?}");
    got
}

/// The model was asked about each occurrence once: nothing ran twice.
fn asked_once_each(server: &ScriptedServer) {
    let asked: Vec<String> = server
        .requests()
        .iter()
        .map(|r| occurrence(&prompt(r)))
        .collect();
    let mut unique = asked.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), asked.len(), "{asked:?}");
}

#[test]
fn jobs_are_added_listed_and_removed_across_processes() {
    each_backend(|backend| {
        let s = Setup::new(backend, "http://127.0.0.1:9/v1");
        s.add(&[
            "report",
            "0 9 * * *",
            "Write the report",
            "--timezone",
            "Europe/Berlin",
            "--inject-into",
            "console_me",
        ]);
        s.add(&["ticks", "*/10 * * * * *", "Tick", "--misfire", "skip"]);

        // Another process sees both, with their next three runs in their zone.
        let o = s.run_cli(&["schedule", "list"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let list: Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(list["count"], 2);
        let report = &list["jobs"][0];
        assert_eq!(report["name"], "report");
        assert_eq!(report["timezone"], "Europe/Berlin");
        assert_eq!(report["injectInto"], "console_me");
        assert_eq!(report["misfire"], "once");
        let next = report["nextRuns"].as_array().unwrap();
        assert_eq!(next.len(), 3);
        assert!(
            next.iter()
                .all(|t| t.as_str().unwrap().contains(" 09:00:00 CE")),
            "{next:?}"
        );
        assert_eq!(list["jobs"][1]["misfire"], "skip");

        // Mistakes, each an error that says what is wrong; nothing is added.
        for (args, expected) in [
            (
                vec!["report", "0 10 * * *", "again"],
                "a job named `report` already exists",
            ),
            (
                vec!["bad", "61 * * * *", "x"],
                "minute 61 is out of range 0-59",
            ),
            (vec!["bad", "0 0 * *", "x"], "4 fields"),
            (
                vec!["bad", "0 9 * * *", "x", "--timezone", "Mars/Olympus"],
                "unknown time zone `Mars/Olympus`",
            ),
            (
                vec!["bad", "0 9 * * *", "x", "--inject-into", "telegram_42"],
                "`telegram_42` is not a chat the gateway may send to",
            ),
            (
                vec!["bad", "0 9 * * *", "x", "--model", "nope"],
                "no model named `nope`",
            ),
        ] {
            let mut all = vec!["schedule", "add"];
            all.extend(args);
            let o = s.run_cli(&all);
            assert!(!o.status.success(), "{all:?}");
            assert!(stderr(&o).contains(expected), "{all:?}: {}", stderr(&o));
        }

        // Removing an unknown job names the existing ones.
        let o = s.run_cli(&["schedule", "remove", "reprot"]);
        assert!(!o.status.success());
        assert!(
            stderr(&o).contains("no job named `reprot`; jobs: report, ticks"),
            "{}",
            stderr(&o)
        );
        let o = s.run_cli(&["schedule", "remove", "report"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let list: Value = serde_json::from_str(&stdout(&s.run_cli(&["schedule", "list"]))).unwrap();
        assert_eq!(list["count"], 1);
        assert_eq!(list["jobs"][0]["name"], "ticks");
    });
}

/// A value past `historyMessages`' bound is refused naming the argument, alike on the
/// command line and over MCP: the model and the operator both read which argument is
/// wrong, not a bare `2000 is more than 1000`. The command line names the flag the user
/// typed (`--history-messages`), an MCP client the JSON pointer it sent; the command
/// line prints the error once (no log line repeating it), and exits 1.
#[test]
fn a_bound_error_names_its_argument_on_the_command_line_and_over_mcp() {
    let s = Setup::new(&None, "http://127.0.0.1:9/v1");
    let o = s.run_cli(&[
        "schedule",
        "add",
        "many",
        "0 9 * * *",
        "x",
        "--history-messages",
        "2000",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "Error [invalid_arguments]: --history-messages: 2000 is more than 1000\n"
    );
    // A positional argument is named as the usage line names it.
    let o = s.run_cli(&["schedule", "add", "bad", "61 * * * *", "x"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("Error [invalid_arguments]: <CRON>: "),
        "{}",
        stderr(&o)
    );
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    let expected = "Error [invalid_arguments]: /historyMessages: 2000 is more than 1000";
    let mut mcp = Mcp::start(s.cmd(&["mcp"]));
    let r = mcp.call(
        "schedule_add",
        json!({"name": "many", "cron": "0 9 * * *", "message": "x", "historyMessages": 2000}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["content"][0]["text"], expected, "{r}");
    let list = mcp.call("schedule_list", json!({}));
    let text: Value = serde_json::from_str(list["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["count"], 0, "nothing was added: {list}");
}

/// The messages of the job `chat`'s own history (`schedule:<job>`) in the agent's store.
fn own_history_rows(s: &Setup, chat: &str) -> i64 {
    let sql = format!("SELECT COUNT(*) FROM {{}} WHERE chat = '{chat}'");
    match &s.pg {
        Some((pg, url)) => {
            Db::Pg(Arc::clone(pg), url.clone()).one(&sql.replace("{}", "history_messages"), &[])
        }
        None => Db::Sqlite(rusqlite::Connection::open(s.data().join("agent.db")).unwrap())
            .one(&sql.replace("{}", "messages"), &[]),
    }
}

/// A job's runs share its own history (`schedule:<job>`): run twice, the second run's
/// request holds the first run's prompt and answer, then its own; with
/// `--history-messages 2`, a third run is given the second's two messages and not the
/// first's. A user's chat sees none of it and may not take its name. Removing the job
/// deletes its history and leaves the other job's.
#[test]
fn a_jobs_runs_share_their_own_history_apart_from_user_chats() {
    each_backend(|backend| {
        let mut n = 0;
        let server = ScriptedServer::respond(move |_| {
            n += 1;
            answer(&format!("ANSWER-{n}"))
        });
        let s = Setup::new(backend, &format!("{}/v1", server.url));
        let own = |args: &[&str], stdin: &str| {
            let mut c = s.cmd(args);
            c.env_remove("KLAW_OWN_HISTORY_MESSAGES");
            let o = common::run_with_stdin(c, stdin);
            assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        };
        own(&["schedule", "add", "daily", "0 9 * * *", "REPORT"], "");
        own(
            &[
                "schedule",
                "add",
                "short",
                "0 9 * * *",
                "SHORT",
                "--history-messages",
                "2",
            ],
            "",
        );
        let users = |r: &Recorded| -> Vec<String> {
            messages(r)
                .iter()
                .filter(|m| m["role"] == "user")
                .map(|m| m["content"].as_str().unwrap().to_owned())
                .collect()
        };
        let text = |r: &Recorded| Value::Array(messages(r)).to_string();
        own(&["schedule", "run-now", "daily"], "");
        own(&["schedule", "run-now", "daily"], "");
        let asked = server.requests();
        assert_eq!(users(&asked[0]).len(), 1, "{}", text(&asked[0]));
        let second = users(&asked[1]);
        assert_eq!(second.len(), 2, "{}", text(&asked[1]));
        assert!(second.iter().all(|u| u.ends_with("REPORT")), "{second:?}");
        assert!(text(&asked[1]).contains("ANSWER-1"), "{}", text(&asked[1]));

        // A user's chat sees none of it.
        own(&["chat", "--chat", "me"], "hello\n");
        let chat = &server.requests()[2];
        assert_eq!(users(chat), ["hello"]);
        assert!(!text(chat).contains("REPORT") && !text(chat).contains("ANSWER-"));
        let mut c = s.cmd(&["chat", "--chat", "schedule:daily"]);
        c.env_remove("KLAW_OWN_HISTORY_MESSAGES");
        let o = common::run_with_stdin(c, "hello\n");
        assert!(!o.status.success());
        assert!(stderr(&o).contains("is not a chat name"), "{}", stderr(&o));

        // At most historyMessages of the earlier runs' messages.
        for _ in 0..3 {
            own(&["schedule", "run-now", "short"], "");
        }
        let asked = server.requests();
        let third = asked.last().unwrap();
        let earlier: Vec<_> = messages(third)
            .into_iter()
            .filter(|m| m["role"] != "system")
            .collect();
        assert_eq!(earlier.len(), 3, "{}", text(third));
        assert_eq!(users(third).len(), 2, "{}", text(third));
        assert!(text(third).contains("ANSWER-5"), "{}", text(third));
        assert!(!text(third).contains("ANSWER-4"), "{}", text(third));

        // Removing a job deletes its own history, and only its.
        assert_eq!(own_history_rows(&s, "schedule:daily"), 4);
        own(&["schedule", "remove", "daily"], "");
        assert_eq!(own_history_rows(&s, "schedule:daily"), 0);
        assert_eq!(own_history_rows(&s, "schedule:short"), 6);
        assert!(own_history_rows(&s, "me") > 0);
    });
}

/// A per-second job: `run` (no channel but the console, no MCP) fires it within
/// seconds, each answer delivered to the console chat; the run is unattended, so its
/// destructive call is refused; a silent job sends nothing; `schedule list` shows the
/// last run.
#[test]
fn a_per_second_job_is_answered_in_the_console() {
    each_backend(|backend| {
        let server = ScriptedServer::respond(|r| {
            let p = prompt(r);
            let has_results = messages(r).iter().any(|m| m["role"] == "tool");
            if p.ends_with("CLEAN UP") && !has_results {
                return call("w", "file_delete", json!({"path": "notes.md"}));
            }
            if p.ends_with("QUIET") {
                return answer(r#"{"silent": true, "reason": "nothing new"}"#);
            }
            answer(&format!("RAN tick {}", occurrence(&p)))
        });
        let s = Setup::new(backend, &format!("{}/v1", server.url));
        s.add(&[
            "tick",
            "* * * * * *",
            "CLEAN UP",
            "--inject-into",
            "console_me",
        ]);
        s.add(&[
            "quiet",
            "* * * * * *",
            "QUIET",
            "--inject-into",
            "console_me",
        ]);
        let mut run = s.start(&[]);
        wait_for(60, "three answers in the console", || {
            delivered(&run.lines(), "tick").len() >= 3
        });
        run.terminate();
        assert!(run.stderr().contains("scheduler"), "{}", run.stderr());
        let lines = run.lines();
        // Each answer once, and only the tick job's.
        let got = delivered(&lines, "tick");
        assert!(got.values().all(|&n| n == 1), "{lines:?}");
        assert!(
            lines
                .iter()
                .all(|l| l.starts_with("[console me] RAN tick ")),
            "{lines:?}"
        );
        // The runs are recorded, each delivered one ok.
        let runs = s.runs("tick");
        let ok = runs.iter().filter(|r| r.1 == "ok").count();
        assert!(ok >= got.len(), "{runs:?}");
        assert!(s.runs("quiet").iter().any(|r| r.1 == "ok"));
        // Unattended: the destructive call was refused, with the reason for the model.
        let requests = server.requests();
        let refused = requests
            .iter()
            .flat_map(messages)
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .next()
            .expect("no tool result was sent back");
        assert!(
            refused.contains("refused") && refused.contains("unattended"),
            "{refused}"
        );
        // Each run has its own history: one system prompt and its own message only.
        for r in &requests {
            let users = messages(r).iter().filter(|m| m["role"] == "user").count();
            assert_eq!(users, 1, "{:?}", r.body);
        }
        let list: Value = serde_json::from_str(&stdout(&s.run_cli(&["schedule", "list"]))).unwrap();
        let tick = &list["jobs"][1];
        assert_eq!(tick["name"], "tick");
        assert_eq!(tick["lastStatus"], "ok");
        assert!(tick["lastRun"].is_string());
    });
}

/// A run whose model fails is recorded with the error; the engine goes on and the
/// next occurrence runs.
#[test]
fn a_failing_run_is_recorded_and_the_next_one_runs() {
    each_backend(|backend| {
        let failed = Arc::new(Mutex::new(false));
        let first = Arc::clone(&failed);
        let server = ScriptedServer::respond(move |r| {
            let mut f = first.lock().unwrap();
            if !*f {
                *f = true;
                return Reply::status(500, r#"{"error": {"message": "the model is down"}}"#);
            }
            answer(&format!("RAN tick {}", occurrence(&prompt(r))))
        });
        let s = Setup::new(backend, &format!("{}/v1", server.url));
        s.add(&["tick", "* * * * * *", "go", "--inject-into", "console_me"]);
        let mut run = s.start(&[]);
        wait_for(60, "a failed run, then a good one", || {
            let runs = s.runs("tick");
            runs.iter().any(|r| r.1 == "failed") && runs.iter().any(|r| r.1 == "ok")
        });
        run.terminate();
        let db = s.db();
        let error: String = db.one(
            "SELECT error FROM runs WHERE job = 'tick' AND status = 'failed'",
            &[],
        );
        assert!(error.contains("the model is down"), "{error}");
        let failed_at: i64 = db.one(
            "SELECT scheduled FROM runs WHERE job = 'tick' AND status = 'failed'",
            &[],
        );
        let ok_after: i64 = db.one(
            "SELECT COUNT(*) FROM runs WHERE job = 'tick' AND status = 'ok' AND scheduled > ?1",
            &[failed_at],
        );
        assert!(ok_after >= 1);
    });
}

/// Three daily jobs missed four runs each while no engine ran (their next run moved
/// four days back in the store, as if the engine had been down): at start, `once`
/// runs one (the latest) and skips three, `skip` runs none, `all` runs all four; each
/// job's next run is then in the future.
#[test]
fn missed_runs_follow_each_policy_at_start() {
    each_backend(|backend| {
        let server = ran_model();
        let s = Setup::new(backend, &format!("{}/v1", server.url));
        // A time of day twelve hours away: no run of it is due on time while this runs.
        let now = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC);
        let cron = format!("{} {} * * *", now.minute(), (now.hour() + 12) % 24);
        for policy in ["once", "skip", "all"] {
            s.add(&[
                policy,
                &cron,
                "report",
                "--misfire",
                policy,
                "--timezone",
                "UTC",
                "--inject-into",
                "console_me",
            ]);
        }
        s.db()
            .execute("UPDATE jobs SET next_run = next_run - 4 * 86400", &[]);
        let mut run = s.start(&[]);
        wait_for(60, "every missed run settled", || {
            ["once", "skip", "all"].iter().all(|j| {
                let runs = s.runs(j);
                runs.len() == 4 && runs.iter().all(|r| r.1 != "running")
            })
        });
        run.terminate();
        let count = |job: &str, status: &str| s.runs(job).iter().filter(|r| r.1 == status).count();
        assert_eq!((count("once", "ok"), count("once", "skipped")), (1, 3));
        assert_eq!((count("skip", "ok"), count("skip", "skipped")), (0, 4));
        assert_eq!((count("all", "ok"), count("all", "skipped")), (4, 0));
        // `once` ran the latest of them.
        assert_eq!(s.runs("once")[3].1, "ok");
        let lines = run.lines();
        assert_eq!(delivered(&lines, "once").len(), 1, "{lines:?}");
        assert_eq!(delivered(&lines, "skip").len(), 0, "{lines:?}");
        assert_eq!(delivered(&lines, "all").len(), 4, "{lines:?}");
        let now = jiff::Timestamp::now().as_second();
        let future: i64 = s
            .db()
            .one("SELECT COUNT(*) FROM jobs WHERE next_run > ?1", &[now]);
        assert_eq!(future, 3);
    });
}

/// How long the two engines share a per-second job: long enough for both to claim
/// many occurrences, short enough for every run of the suite.
const TWO_ENGINES_SECONDS: u64 = 20;

/// Two `run` processes on one data dir and a per-second job (misfire `all`, so no
/// occurrence is folded into another): every occurrence from the first to the last has
/// exactly one run, recorded ok, and its answer was delivered exactly once, by one of
/// the two engines.
#[test]
fn two_engines_fire_each_occurrence_once() {
    each_backend(|backend| {
        let server = ran_model();
        let s = Setup::new(backend, &format!("{}/v1", server.url));
        s.add(&[
            "tick",
            "* * * * * *",
            "go",
            "--inject-into",
            "console_me",
            "--misfire",
            "all",
        ]);
        let mut a = s.start(&[]);
        let mut b = s.start(&[]);
        std::thread::sleep(Duration::from_secs(TWO_ENGINES_SECONDS));
        a.terminate();
        b.terminate();
        let runs = s.runs("tick");
        assert!(runs.len() >= 5, "{runs:?}");
        // None lost: the occurrences are every second from the first to the last.
        let first = runs[0].0;
        for (i, r) in runs.iter().enumerate() {
            assert_eq!(r.0, first + i64::try_from(i).unwrap(), "{runs:?}");
            assert!(r.1 == "ok" || r.1 == "skipped", "{r:?}");
        }
        // None doubled: each ok run delivered once, across both engines.
        let mut lines = a.lines();
        lines.extend(b.lines());
        let ok = runs.iter().filter(|r| r.1 == "ok").count();
        each_ok_run_delivered_once(&lines, ok, &runs);
        // Nothing ran twice at the model either.
        asked_once_each(&server);
        let owners: std::collections::BTreeSet<&str> = runs.iter().map(|r| r.2.as_str()).collect();
        eprintln!(
            "two engines, {TWO_ENGINES_SECONDS} s: {} occurrences, {ok} run, by {} engine(s)",
            runs.len(),
            owners.len()
        );
    });
}

/// A model server that accepts requests and never answers (the connections are kept
/// open); counts them.
fn hanging_server() -> (String, Arc<Mutex<usize>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let count = Arc::new(Mutex::new(0));
    let seen = Arc::clone(&count);
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().map_while(Result::ok) {
            *seen.lock().unwrap() += 1;
            held.push(stream);
        }
    });
    (url, count)
}

/// An engine killed with `kill -9` while its run waits on the model: the run stays
/// claimed until its lease passes, then the restarted engine runs that occurrence
/// again (misfire `once`): one run row, two attempts, one answer delivered.
#[test]
fn a_run_killed_mid_turn_is_neither_lost_nor_doubled() {
    each_backend(|backend| {
        let (hang_url, asked) = hanging_server();
        let s = Setup::new(backend, &hang_url);
        // A daily job made due now.
        let now = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC);
        let cron = format!("{} {} * * *", now.minute(), (now.hour() + 12) % 24);
        s.add(&[
            "daily",
            &cron,
            "go",
            "--inject-into",
            "console_me",
            "--timezone",
            "UTC",
        ]);
        let due = jiff::Timestamp::now().as_second();
        s.db().execute("UPDATE jobs SET next_run = ?1", &[due]);
        let lease = [("KLAW_SCHEDULER_LEASE_SECONDS", "3")];
        let mut first = s.start(&lease);
        wait_for(60, "the run waiting on the model", || {
            *asked.lock().unwrap() >= 1 && s.runs("daily").len() == 1
        });
        let runs = s.runs("daily");
        assert_eq!(runs[0].1, "running");
        assert_eq!(runs[0].0, due);
        let dead_owner = runs[0].2.clone();
        let pid = first.pid();
        first.kill_9();
        assert!(first.lines().is_empty(), "{:?}", first.lines());
        assert!(dead_owner.contains(&pid), "{dead_owner}");

        let server = ran_model();
        let s = Setup {
            home: s.home,
            model_url: format!("{}/v1", server.url),
            pg: s.pg,
        };
        let mut second = s.start(&lease);
        wait_for(60, "the occurrence run again after the lease", || {
            s.runs("daily").iter().any(|r| r.1 == "ok")
        });
        second.terminate();
        let runs = s.runs("daily");
        assert_eq!(runs.len(), 1, "{runs:?}");
        assert_eq!(runs[0].0, due);
        assert_eq!(runs[0].3, 2, "{runs:?}");
        assert_ne!(runs[0].2, dead_owner);
        let got = delivered(&second.lines(), "daily");
        assert_eq!(got.len(), 1, "{:?}", second.lines());
        assert!(got.values().all(|&n| n == 1));
        assert_eq!(server.requests().len(), 1);
    });
}

/// `n` per-second jobs `<prefix>-<i>` added through one `call --jsonl` process, as the
/// cron flood was; the answer lines.
fn add_jsonl(s: &Setup, prefix: &str, n: usize, message: &str) -> Vec<Value> {
    use std::io::Write;
    let mut child = s
        .cmd(&["call", "--jsonl"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for i in 0..n {
        let line = json!({"id": i, "name": "schedule_add", "arguments": {
            "name": format!("{prefix}-{i}"), "cron": "* * * * * *", "message": message,
        }});
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn count(db: &Db, sql: &str) -> i64 {
    db.one(sql, &[])
}

/// The cron flood, cut at the source: through `call --jsonl` the 101st job is refused
/// with an error naming `scheduler.maxJobs` (default 100), as is one more through
/// `schedule add`; a cap raised in the configuration lets it in.
#[test]
fn adding_past_max_jobs_fails_naming_the_cap() {
    each_backend(|backend| {
        let s = Setup::new(backend, "http://127.0.0.1:9/v1");
        let answers = add_jsonl(&s, "flood", 101, "go");
        assert_eq!(answers.len(), 101);
        assert!(
            answers[..100].iter().all(|a| a["ok"] == true),
            "{answers:?}"
        );
        let last = &answers[100];
        assert_eq!(last["ok"], false, "{last}");
        assert_eq!(last["error"]["kind"], "refused", "{last}");
        let message = last["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("100 jobs") && message.contains("scheduler.maxJobs"),
            "{message}"
        );
        let o = s.run_cli(&["schedule", "add", "one-more", "* * * * * *", "go"]);
        assert!(!o.status.success());
        assert!(
            stderr(&o).contains("holds 100 jobs") && stderr(&o).contains("scheduler.maxJobs"),
            "{}",
            stderr(&o)
        );
        assert_eq!(count(&s.db(), "SELECT COUNT(*) FROM jobs"), 100);
        let o = s
            .cmd(&["schedule", "add", "one-more", "0 9 * * *", "go"])
            .env("KLAW_SCHEDULER_MAX_JOBS", "101")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(count(&s.db(), "SELECT COUNT(*) FROM jobs"), 101);
    });
}

/// The most runs of one job `running` (claimed: waiting for a place or running) at
/// once, and all of them.
fn going(s: &Setup) -> (i64, i64) {
    let db = s.db();
    let per_job = count(
        &db,
        "SELECT COALESCE(MAX(n), 0) FROM
           (SELECT COUNT(*) AS n FROM runs WHERE status = 'running' GROUP BY job)",
    );
    let all = count(&db, "SELECT COUNT(*) FROM runs WHERE status = 'running'");
    (per_job, all)
}

/// A per-second job whose model takes 3 s to answer: while a run goes on, the
/// occurrences that come are not queued — never more than one run of the job waiting
/// or running — and once it ends they are settled by the misfire policy (`once`: the
/// latest runs, the others are recorded skipped, saying why). Each occurrence has at
/// most one row, and the model is asked once per run recorded.
#[test]
fn a_slow_per_second_job_has_one_run_at_a_time() {
    each_backend(|backend| {
        let server = ScriptedServer::respond(|r| {
            std::thread::sleep(Duration::from_secs(3));
            answer(&format!("RAN tick {}", occurrence(&prompt(r))))
        });
        let s = Setup::new(backend, &format!("{}/v1", server.url));
        s.add(&["tick", "* * * * * *", "go", "--inject-into", "console_me"]);
        let mut run = s.start(&[]);
        let deadline = Instant::now() + Duration::from_secs(90);
        let mut most = 0;
        loop {
            most = most.max(going(&s).0);
            let ok = s.runs("tick").iter().filter(|r| r.1 == "ok").count();
            if ok >= 3 {
                break;
            }
            assert!(Instant::now() < deadline, "three runs never ended");
            std::thread::sleep(Duration::from_millis(100));
        }
        run.terminate();
        assert!(most <= 1, "{most} runs of one job going at once");
        let runs = s.runs("tick");
        let first = runs[0].0;
        let last = runs[runs.len() - 1].0;
        assert!(
            i64::try_from(runs.len()).unwrap() <= last - first + 1,
            "{runs:?}"
        );
        // Only the occurrences run were asked about: none of those skipped.
        let run_at: Vec<i64> = runs
            .iter()
            .filter(|r| r.1 != "skipped")
            .map(|r| r.0)
            .collect();
        for r in server.requests() {
            let asked: jiff::Zoned = occurrence(&prompt(&r)).parse().unwrap();
            assert!(
                run_at.contains(&asked.timestamp().as_second()),
                "{asked} was asked about: {runs:?}"
            );
        }
        assert!(runs.iter().any(|r| r.1 == "skipped"), "{runs:?}");
        let why: String = s.db().one(
            "SELECT error FROM runs WHERE job = 'tick' AND status = 'skipped' LIMIT 1",
            &[],
        );
        assert!(why.contains("still going"), "{why}");
        let got = delivered(&run.lines(), "tick");
        assert!(got.values().all(|&n| n == 1), "{got:?}");
    });
}

/// The flood under `run`: as many per-second jobs as the cap allows (100), a model
/// slower than they come. The runs waiting or running stay at one per job at most,
/// sampled throughout, however long it goes on; nothing queues behind them.
#[test]
fn many_per_second_jobs_keep_the_pending_runs_bounded() {
    each_backend(|backend| {
        let server = ScriptedServer::respond(|r| {
            std::thread::sleep(Duration::from_millis(100));
            answer(&format!("RAN {}", occurrence(&prompt(r))))
        });
        let s = Setup::new(backend, &format!("{}/v1", server.url));
        let answers = add_jsonl(&s, "flood", 100, "go");
        assert!(answers.iter().all(|a| a["ok"] == true), "{answers:?}");
        let run = s.start(&[]);
        let (mut per_job, mut all) = (0, 0);
        // Sampled until each job was claimed a few times over (many more occurrences than
        // the model could answer).
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (j, a) = going(&s);
            (per_job, all) = (per_job.max(j), all.max(a));
            let rows = count(&s.db(), "SELECT COUNT(*) FROM runs");
            if rows >= 100 * 8 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the jobs were not claimed: {rows} rows\n{}",
                run.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let rss = std::fs::read_to_string(format!("/proc/{}/status", run.pid()))
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with("VmRSS"))
            .map(str::to_owned);
        drop(run);
        assert!(per_job <= 1, "{per_job} runs of one job going at once");
        assert!(all <= 100, "{all} runs going for 100 jobs");
        let db = s.db();
        // Each occurrence once at most: what was not run is recorded skipped.
        assert_eq!(
            count(
                &db,
                "SELECT COUNT(*) FROM (SELECT job, scheduled FROM runs GROUP BY job, scheduled HAVING COUNT(*) > 1)"
            ),
            0
        );
        let ran = count(&db, "SELECT COUNT(*) FROM runs WHERE status != 'skipped'");
        eprintln!(
            "100 per-second jobs: {} rows, {ran} runs claimed, {} model requests, at most {all} going; {rss:?}",
            count(&db, "SELECT COUNT(*) FROM runs"),
            server.requests().len()
        );
    });
}

/// A scheduled run's model calls `schedule_add` with a per-second cron: the call is
/// refused with a result the model reads, and no job is added; with
/// `scheduler.unattendedChanges` on, it is added.
#[test]
fn a_scheduled_run_cannot_add_jobs_unless_the_config_allows() {
    each_backend(|backend| {
        let server = ScriptedServer::respond(|r| {
            let p = prompt(r);
            let results: Vec<String> = messages(r)
                .iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
                .collect();
            if p.ends_with("SPAWN") && results.is_empty() {
                return call(
                    "a",
                    "schedule_add",
                    json!({"name": "child", "cron": "* * * * * *", "message": "CHILD"}),
                );
            }
            answer(&format!("DONE {}", results.join(" | ")))
        });
        let s = Setup::new(backend, &format!("{}/v1", server.url));
        s.add(&["spawner", "* * * * * *", "SPAWN", "--misfire", "skip"]);
        let tool_results = || -> Vec<String> {
            server
                .requests()
                .iter()
                .flat_map(messages)
                .filter(|m| m["role"] == "tool")
                .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
                .collect()
        };
        let mut run = s.start(&[]);
        wait_for(60, "the model's schedule_add answered", || {
            !tool_results().is_empty()
        });
        run.terminate();
        let refused = tool_results()[0].clone();
        assert!(
            refused.contains("refused")
                && refused.contains("cannot add jobs")
                && refused.contains("scheduler.unattendedChanges"),
            "{refused}"
        );
        let list: Value = serde_json::from_str(&stdout(&s.run_cli(&["schedule", "list"]))).unwrap();
        assert_eq!(list["count"], 1, "{list}");
        // The run itself went on and ended.
        assert!(s.runs("spawner").iter().any(|r| r.1 == "ok"));

        // Allowed by the configuration: the same call adds the job.
        let mut run = s.start(&[("KLAW_SCHEDULER_UNATTENDED_CHANGES", "true")]);
        wait_for(60, "the job added by the scheduled run", || {
            count(&s.db(), "SELECT COUNT(*) FROM jobs WHERE name = 'child'") == 1
        });
        run.terminate();
    });
}

/// The same rule in-process, for every unattended caller: a subagent (whoever started
/// it) cannot add a job or remove one, a scheduled run cannot add one nor remove
/// another job but may remove its own; the command line can; with
/// `scheduler.unattendedChanges` on, all can.
#[tokio::test]
async fn unattended_callers_cannot_change_the_schedule() {
    use klaw_engine::ToolCall;
    use klaw_tools::Caller;
    for allowed in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_owned();
        let env = move |name: &str| match name {
            "HOME" => Some(home.display().to_string()),
            "KLAW_CONFIG" => Some(home.join("engine.json").display().to_string()),
            "KLAW_SCHEDULER_UNATTENDED_CHANGES" => Some(allowed.to_string()),
            _ => None,
        };
        // No approval asked, so that only the scheduler's own rule answers.
        std::fs::write(
            dir.path().join("engine.json"),
            r#"{"agent": {"approval": "never"}}"#,
        )
        .unwrap();
        let config = klaw_engine::Config::load_with(&env).unwrap();
        let app = klaw_engine::App::assemble(config, None).unwrap();
        let engine = app.engine();
        let call = |tool: &str, args: Value, caller: Caller| {
            engine.execute(ToolCall::new(tool, args).with_caller(caller), None)
        };
        let job = |name: &str| json!({"name": name, "cron": "* * * * * *", "message": "go"});
        let cli = || Caller::new("cli", None);
        let subagent = || Caller::new("subagent", Some("1:sub-1".into()));
        let scheduled = |job: &str| Caller::new("schedule", Some(job.into()));
        call("schedule_add", job("own"), cli()).await.unwrap();
        call("schedule_add", job("other"), cli()).await.unwrap();
        call("schedule_add", job("other2"), cli()).await.unwrap();
        for (tool, args, caller) in [
            ("schedule_add", job("new1"), subagent()),
            ("schedule_add", job("new2"), scheduled("own")),
            ("schedule_remove", json!({"name": "other"}), subagent()),
            (
                "schedule_remove",
                json!({"name": "other2"}),
                scheduled("own"),
            ),
        ] {
            let who = caller.channel.clone();
            let got = call(tool, args, caller).await;
            if allowed {
                assert!(got.is_ok(), "{tool} by {who}: {got:?}");
            } else {
                let e = got.unwrap_err();
                assert_eq!(e.kind().code(), "refused", "{tool} by {who}: {e}");
                assert!(e.message().contains("scheduler.unattendedChanges"), "{e}");
            }
        }
        // A scheduled run may end its own job.
        call("schedule_remove", json!({"name": "own"}), scheduled("own"))
            .await
            .unwrap();
        let list = call("schedule_list", json!({}), cli()).await.unwrap();
        let names: Vec<String> = serde_json::from_str::<Value>(list.text()).unwrap()["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["name"].as_str().unwrap().to_owned())
            .collect();
        if allowed {
            assert_eq!(names, ["new1", "new2"]);
        } else {
            assert_eq!(names, ["other", "other2"]);
        }
    }
}

/// A model server that answers each run `RAN <job> <occurrence>` (as [`ran_model`]),
/// but holds the `hold_at`-th request unanswered for ever (its connection kept open):
/// that run is in the middle of its turn when the test kills its engine. The
/// occurrences asked, in order, and the one held.
type Asked = Arc<Mutex<Vec<String>>>;
fn holding_model(hold_at: usize) -> (String, Asked, Arc<Mutex<Option<String>>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let asked: Asked = Arc::new(Mutex::new(Vec::new()));
    let held = Arc::new(Mutex::new(None));
    let (a, h) = (Arc::clone(&asked), Arc::clone(&held));
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let (asked, held) = (Arc::clone(&a), Arc::clone(&h));
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut stream = stream;
                loop {
                    let mut length = 0;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let line = line.trim_end();
                        if line.is_empty() {
                            break;
                        }
                        if let Some((k, v)) = line.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            length = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let p = body["messages"]
                        .as_array()
                        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
                        .and_then(|m| m["content"].as_str())
                        .unwrap_or_default()
                        .to_owned();
                    let occ = occurrence(&p);
                    let n = {
                        let mut asked = asked.lock().unwrap();
                        asked.push(occ.clone());
                        asked.len()
                    };
                    if n == hold_at {
                        *held.lock().unwrap() = Some(occ);
                        loop {
                            std::thread::park();
                        }
                    }
                    let job = p.split('`').nth(1).unwrap_or("?");
                    let answer = json!({
                        "choices": [{"message": {"role": "assistant", "content": format!("RAN {job} {occ}")}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 2},
                    })
                    .to_string();
                    let sent = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    if sent.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, asked, held)
}

/// How long the three engines run after the killed one is back.
const AFTER_RESTART_SECONDS: u64 = 12;

/// Quartz's clustering promise on one PostgreSQL: three `run` engines, a per-second
/// job (misfire `all`); the engine whose run waits on the model is killed with
/// `kill -9` and restarted. Every occurrence from the first to the last is recorded
/// once (run or, while the dead engine's lease held the job, skipped), every run
/// delivered once; the dead engine's run is taken over by another engine after its
/// lease (same row, a second attempt) and delivered once; nothing else asked twice.
#[test]
fn three_engines_on_postgres_fire_each_occurrence_once_through_a_kill_9() {
    let Some(pg) = Postgres::start() else {
        return;
    };
    let backend = Some(Arc::new(pg));
    let (url, asked, held) = holding_model(6);
    let s = Setup::new(&backend, &url);
    s.add(&[
        "tick",
        "* * * * * *",
        "go",
        "--inject-into",
        "console_me",
        "--misfire",
        "all",
    ]);
    // Each engine named (`storage.engineId`): the name begins its lease id.
    let named = |n: usize| {
        let name = format!("engine{n}");
        s.start(&[
            ("KLAW_SCHEDULER_LEASE_SECONDS", "3"),
            ("KLAW_ENGINE_ID", name.as_str()),
        ])
    };
    let mut engines: Vec<Running> = (0..3).map(named).collect();
    wait_for(120, "the held run", || held.lock().unwrap().is_some());
    let held_occ = held.lock().unwrap().clone().unwrap();
    // The engine that holds it: its run is `running`, its owner names its pid.
    let running: Vec<_> = s
        .runs("tick")
        .into_iter()
        .filter(|r| r.1 == "running")
        .collect();
    assert_eq!(running.len(), 1, "{running:?}");
    let (held_at, dead_owner) = (running[0].0, running[0].2.clone());
    let victim = engines
        .iter()
        .position(|e| dead_owner.contains(&format!("pid{}-", e.pid())))
        .unwrap_or_else(|| panic!("no engine owns {dead_owner}"));
    assert!(
        dead_owner.starts_with(&format!("engine{victim}-pid{}-", engines[victim].pid())),
        "{dead_owner}"
    );
    // `schedule list` shows which engine holds the run.
    let o = s.run_cli(&["schedule", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        listed["jobs"][0]["running"]["engine"], dead_owner,
        "{listed}"
    );
    let mut dead = engines.remove(victim);
    dead.kill_9();
    engines.push(named(3));
    wait_for(60, "the dead engine's run taken over", || {
        s.runs("tick").iter().any(|r| r.0 == held_at && r.1 == "ok")
    });
    std::thread::sleep(Duration::from_secs(AFTER_RESTART_SECONDS));
    for e in &mut engines {
        e.terminate();
    }
    let runs = s.runs("tick");
    // None lost: every second from the first occurrence to the last, each once.
    let first = runs[0].0;
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(r.0, first + i64::try_from(i).unwrap(), "{runs:?}");
        assert!(r.1 == "ok" || r.1 == "skipped", "{r:?}");
    }
    // The dead engine's lease taken over: the same row, a second attempt, another owner.
    let taken = runs.iter().find(|r| r.0 == held_at).unwrap();
    assert_eq!((taken.1.as_str(), taken.3), ("ok", 2), "{taken:?}");
    assert_ne!(taken.2, dead_owner);
    // None doubled: each ok run delivered once, across the four processes.
    let mut lines = dead.lines();
    for e in &engines {
        lines.extend(e.lines());
    }
    let ok = runs.iter().filter(|r| r.1 == "ok").count();
    let got = each_ok_run_delivered_once(&lines, ok, &runs);
    assert_eq!(got.get(&held_occ), Some(&1), "{got:?}");
    // The model was asked once per run, the held occurrence twice (the dead engine's
    // turn, then the take-over's).
    let asked = asked.lock().unwrap().clone();
    let mut per: BTreeMap<&str, usize> = BTreeMap::new();
    for a in &asked {
        *per.entry(a.as_str()).or_default() += 1;
    }
    for (occ, n) in &per {
        let want = if *occ == held_occ { 2 } else { 1 };
        assert_eq!(*n, want, "{occ}: {asked:?}");
    }
    let owners: std::collections::BTreeSet<&str> = runs.iter().map(|r| r.2.as_str()).collect();
    eprintln!(
        "three engines on PostgreSQL: {} occurrences, {ok} run, by {} engine(s), one killed",
        runs.len(),
        owners.len()
    );
}

/// A `storage.url` the engine cannot use fails the start with an error that says why
/// and names the database, never the password, and never panics: not a PostgreSQL URL,
/// nobody listening, a refused password, a schema newer than the engine.
#[test]
fn a_bad_storage_url_fails_the_start_clearly() {
    let Some(pg) = Postgres::start_with_password("right-pw") else {
        return;
    };
    let s = Setup::new(&None, "http://127.0.0.1:9/v1");
    let fails = |url: &str, wants: &[&str]| {
        let o = s
            .cmd(&["schedule", "list"])
            .env("KLAW_DATABASE_URL", url)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = stderr(&o);
        assert!(!o.status.success(), "{url}: {}", stdout(&o));
        assert!(!err.contains("panicked"), "{err}");
        for w in wants {
            assert!(err.contains(w), "{url}: wants {w:?} in {err}");
        }
        assert!(
            !err.contains("wrong-pw") && !err.contains("right-pw"),
            "{err}"
        );
    };
    fails(
        "mysql://klaw:wrong-pw@localhost/klaw",
        &["not a PostgreSQL URL", "KLAW_DATABASE_URL"],
    );
    fails(
        "postgres://klaw:wrong-pw@%2Fnonexistent%2Fklaw/klaw",
        &["cannot connect", "/nonexistent/klaw"],
    );
    let host = pg.socket_dir().display().to_string().replace('/', "%2F");
    fails(
        &format!("postgres://klaw:wrong-pw@{host}/klaw"),
        &["cannot connect", "password authentication failed"],
    );
    // A newer engine migrated the database: this one refuses it, writing nothing.
    let good = pg.url();
    let o = s
        .cmd(&["schedule", "list"])
        .env("KLAW_DATABASE_URL", &good)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // doctor: the connection, the server's version, the schema's.
    let doctor = |url: &str| {
        let o = s
            .cmd(&["doctor"])
            .env("KLAW_DATABASE_URL", url)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let out = format!("{}{}", stdout(&o), stderr(&o));
        assert!(
            !out.contains("panicked") && !out.contains("wrong-pw") && !out.contains("right-pw"),
            "{out}"
        );
        // A database it cannot use is the database's line, not blamed on the tools.
        assert!(!out.contains("fix the tool definitions"), "{out}");
        out.lines()
            .filter(|l| l.contains("database"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let line = doctor(&good);
    assert!(
        line.starts_with("ok")
            && line.contains("PostgreSQL 18")
            && line.contains(&format!(
                "schema version {}",
                klaw_engine::storage::known_version()
            )),
        "{line}"
    );
    let line = doctor(&format!("postgres://klaw:wrong-pw@{host}/klaw"));
    assert!(
        line.contains("FAIL") && line.contains("password authentication failed"),
        "{line}"
    );
    let migrations = pg.psql("SELECT COUNT(*) FROM klaw_schema_migrations");
    pg.psql("INSERT INTO klaw_schema_migrations (version) VALUES (99)");
    fails(&good, &["schema version 99", "newer than this engine"]);
    let line = doctor(&good);
    assert!(
        line.contains("FAIL") && line.contains("schema version 99"),
        "{line}"
    );
    // Nothing migrated past it: only the row just inserted was added.
    assert_eq!(
        pg.psql("SELECT COUNT(*) - 1 FROM klaw_schema_migrations"),
        migrations
    );
    assert_eq!(
        migrations,
        klaw_engine::storage::MIGRATIONS.len().to_string()
    );
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet: it runs no more).
fn process_gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// Run by [`a_killed_test_process_leaves_no_postgres`] in a process of its own: starts
/// a PostgreSQL, says where its data is, and waits to be killed.
#[test]
#[ignore = "a helper: a_killed_test_process_leaves_no_postgres runs it in a child process"]
fn postgres_held_until_killed() {
    let Some(pg) = Postgres::start() else {
        return;
    };
    println!(
        "SERVER {} {}",
        pg.server_pid().unwrap(),
        pg.socket_dir().display()
    );
    std::thread::sleep(Duration::from_secs(300));
}

/// Test hygiene: a test process killed with `kill -9` (no destructor runs) leaves no
/// `postgres` behind: the server's supervisor sees its pipe close and kills the server's
/// process group.
#[test]
fn a_killed_test_process_leaves_no_postgres() {
    if !common::postgres::available() {
        return;
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "schedule::postgres_held_until_killed",
            "--ignored",
            "--nocapture",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let (pid, sock) = loop {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the child said nothing"
        );
        if let Some(rest) = line.trim().strip_prefix("SERVER ") {
            let (pid, sock) = rest.split_once(' ').unwrap();
            break (pid.parse::<u32>().unwrap(), PathBuf::from(sock));
        }
    };
    assert!(!process_gone(pid));
    assert!(
        Command::new("kill")
            .args(["-KILL", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let _ = child.wait();
    wait_for(30, "the server of a killed test process to stop", || {
        process_gone(pid)
    });
    // Its temporary directory stays (no destructor ran): removed here.
    if let Some(dir) = sock.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// How long the database is down in [`three_engines_ride_out_a_database_restart`].
const DATABASE_DOWN_SECONDS: u64 = 4;

/// The database restarted under three running engines (a per-second job, misfire
/// `all`, a model that takes a moment so runs are in flight when it goes): the server is
/// killed, down a few seconds, and started again. The engines say clearly that they
/// cannot reach it, neither panic nor spin, reconnect by themselves, and every
/// occurrence from the first to the last is recorded once (run, or skipped while the
/// job had a run going) and each run delivered once; none is left `running`.
#[test]
fn three_engines_ride_out_a_database_restart() {
    let Some(pg) = Postgres::start() else {
        return;
    };
    let mut pg = pg;
    let url = pg.fresh_db();
    let server = ScriptedServer::respond(|r| {
        std::thread::sleep(Duration::from_millis(300));
        let p = prompt(r);
        let job = p.split('`').nth(1).unwrap_or("?");
        answer(&format!("RAN {job} {}", occurrence(&p)))
    });
    let s = Setup {
        home: tempfile::tempdir().unwrap(),
        model_url: format!("{}/v1", server.url),
        pg: None,
    };
    let with_db = |mut c: Command| {
        c.env("KLAW_DATABASE_URL", &url);
        c
    };
    let o = with_db(s.cmd(&[
        "schedule",
        "add",
        "tick",
        "* * * * * *",
        "go",
        "--inject-into",
        "console_me",
        "--misfire",
        "all",
    ]))
    .stdin(Stdio::null())
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let env = [
        ("KLAW_DATABASE_URL", url.as_str()),
        ("KLAW_SCHEDULER_LEASE_SECONDS", "6"),
    ];
    let mut engines: Vec<Running> = (0..3).map(|_| s.start(&env)).collect();
    let ok_runs = |pg: &Postgres| {
        pg.psql_url(&url, "SELECT COUNT(*) FROM runs WHERE status = 'ok'")
            .parse::<i64>()
            .unwrap()
    };
    wait_for(60, "three runs before the restart", || ok_runs(&pg) >= 3);
    pg.restart(Duration::from_secs(DATABASE_DOWN_SECONDS));
    let before = ok_runs(&pg);
    wait_for(60, "runs after the restart", || ok_runs(&pg) >= before + 5);
    for e in &mut engines {
        e.terminate();
    }
    let runs: Vec<(i64, String)> = pg
        .psql_url(
            &url,
            "SELECT scheduled, status FROM runs WHERE job = 'tick' ORDER BY scheduled",
        )
        .lines()
        .map(|l| {
            let (t, st) = l.split_once('|').unwrap();
            (t.parse().unwrap(), st.to_owned())
        })
        .collect();
    let first = runs[0].0;
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(r.0, first + i64::try_from(i).unwrap(), "{runs:?}");
        assert!(r.1 == "ok" || r.1 == "skipped", "{r:?}\n{runs:?}");
    }
    let mut lines = Vec::new();
    let mut errors = String::new();
    for e in &engines {
        lines.extend(e.lines());
        errors.push_str(&e.stderr());
    }
    let ok = runs.iter().filter(|r| r.1 == "ok").count();
    each_ok_run_delivered_once(&lines, ok, &runs);
    // Asked once each at the model.
    asked_once_each(&server);
    // Said clearly, no panic, and no spinning: a failure a second at most per engine.
    assert!(!errors.contains("panicked"), "{errors}");
    assert!(errors.contains("cannot claim due runs"), "{errors}");
    assert!(
        errors.contains("cannot connect to the PostgreSQL database"),
        "{errors}"
    );
    let failures = errors.matches("cannot claim due runs").count();
    let bound = 3 * (usize::try_from(DATABASE_DOWN_SECONDS).unwrap() + 3);
    assert!(failures <= bound, "{failures} claim failures:\n{errors}");
    eprintln!(
        "database restarted under three engines ({DATABASE_DOWN_SECONDS} s down): {} occurrences, {ok} run, {failures} claim failures logged",
        runs.len()
    );
}
