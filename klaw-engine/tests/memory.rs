//! Memory through the `klaw-engine` binary, as a user runs it: tools that persist across
//! processes, `memory import`, `memory search`, core memory under concurrent processes,
//! and the doctor's look at the index. The real model is needed (`make setup`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::common;
use common::mcp_client::Mcp;
use common::{cache, engine, eventually, stderr, stdout};

struct Env {
    dir: tempfile::TempDir,
    cache: PathBuf,
}

impl Env {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            cache: cache(),
        }
    }

    fn without_model() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("empty-cache");
        Self { dir, cache }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = engine(self.dir.path(), args);
        c.env("KLAW_CACHE", &self.cache)
            .env("KLAW_DATA", self.data());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// Runs a command that must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "{args:?}: {}\n{}\n(run `make setup` if the model is missing)",
            stdout(&o),
            stderr(&o)
        );
        stdout(&o)
    }

    fn call(&self, tool: &str, args: &Value) -> Value {
        serde_json::from_str(&self.ok(&["call", tool, &args.to_string()])).unwrap()
    }

    /// The content of `memory search`'s first hit for `query` by meaning (`--mode
    /// vector`), which must succeed.
    fn first_by_meaning(&self, query: &str) -> Value {
        let out = self.ok(&["memory", "search", query, "--mode", "vector", "--json"]);
        let found: Value = serde_json::from_str(&out).unwrap();
        found["results"][0]["content"].clone()
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn home(&self) -> &Path {
        self.dir.path()
    }
}

/// Issue 47: `memory_get` through `call` and MCP: the chunk `memory_search` found gives its
/// whole document back.
#[test]
fn memory_get_gives_the_document_of_a_found_chunk_through_call_and_mcp() {
    let env = Env::new();
    let content = "# Dacha\n\nThe Wi-Fi password at the dacha is 'sunflower-42'.\n\nThe key is under the blue pot.";
    let saved = env.call(
        "memory_save",
        &json!({"content": content, "source": "notes/dacha.md"}),
    );
    assert_eq!(saved["inserted"], 1, "{saved}");
    let found = env.call(
        "memory_search",
        &json!({"query": "sunflower-42", "mode": "text"}),
    );
    let id = found["results"][0]["chunkId"].clone();
    assert!(id.is_i64(), "{found}");
    let got = env.call("memory_get", &json!({"chunkId": id}));
    assert_eq!(got["content"], content, "{got}");
    assert_eq!(
        (&got["source"], &got["totalLines"]),
        (&json!("notes/dacha.md"), &json!(5))
    );
    let mut mcp = Mcp::start(env.cmd(&["mcp"]));
    let got = mcp.call(
        "memory_get",
        json!({"source": "notes/dacha.md", "startLine": 3, "maxLines": 1}),
    );
    assert_eq!(got["isError"], false, "{got}");
    let doc = &got["structuredContent"];
    assert_eq!(
        doc["content"], "The Wi-Fi password at the dacha is 'sunflower-42'.",
        "{got}"
    );
    assert_eq!(doc["nextStartLine"], 4, "{got}");
    // How it ended, if not well (a signal or an exit code): once, in CI under load, it
    // was not, and the bare assertion did not say how.
    let status = mcp.finish();
    assert!(status.success(), "the engine ended with {status}");
}

#[test]
fn a_saved_memory_is_found_by_a_new_process_and_not_stored_twice() {
    let env = Env::new();
    let content = "The Wi-Fi password at the dacha is 'sunflower-42'.";
    let saved = env.call("memory_save", &json!({"content": content}));
    assert_eq!(saved["inserted"], 1, "{saved}");
    assert_eq!(saved["alreadyStored"], false);

    let found = env.call(
        "memory_search",
        &json!({"query": "пароль от вайфая на даче", "topK": 3}),
    );
    let first = &found["results"][0];
    assert_eq!(first["content"], content, "{found}");
    assert_eq!(first["source"], "manual");
    assert!(
        first["foundBy"] == "vector" || first["foundBy"] == "both",
        "{found}"
    );

    let again = env.call("memory_save", &json!({"content": content}));
    assert_eq!(again["alreadyStored"], true, "{again}");
    assert_eq!(again["duplicates"], 1);

    // The doctor sees the index without loading the model.
    let out = env.ok(&["doctor"]);
    assert!(out.contains("ok    memory db"), "{out}");
    assert!(out.contains("1 chunk; model sha256:"), "{out}");
}

#[test]
fn import_files_directories_and_jsonl_then_search() {
    let env = Env::new();
    let notes = env.home().join("notes");
    std::fs::create_dir_all(notes.join("deep")).unwrap();
    std::fs::write(
        notes.join("servers.md"),
        "# Servers\n\nThe staging database runs on srv-db-07 in Frankfurt.\n",
    )
    .unwrap();
    std::fs::write(
        notes.join("deep/tea.txt"),
        "Anna drinks green tea without sugar.\n",
    )
    .unwrap();
    std::fs::write(notes.join("ignored.bin"), [0u8, 1, 2]).unwrap();
    let jsonl = env.home().join("history.jsonl");
    std::fs::write(
        &jsonl,
        [
            r#"{"content": "Meeting with Boris moved to Thursday 15:00.", "source": "chat", "created_at": "2021-03-04"}"#,
            r#"{"content": "The invoice number is INV-99812.", "created_at": 1700000000}"#,
            r#"{"content": "broken"#,
            "",
            r#"{"content": "Parking is on level -2.", "created_at": "2024-02-30T00:00:00Z"}"#,
            r#"{"content": "The cat is called Barsik.", "created_at": "2022-05-06T07:08:09+03:00"}"#,
        ]
        .join("\n"),
    )
    .unwrap();

    let o = env.run(&[
        "memory",
        "import",
        notes.to_str().unwrap(),
        jsonl.to_str().unwrap(),
    ]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains(
            "imported 3 files: 5 documents, 5 chunks (5 inserted, 0 duplicates), 2 skipped lines"
        ),
        "{out}"
    );
    assert!(out.contains("chunks/s"), "{out}");
    assert!(err.contains("history.jsonl:3: "), "{err}");
    assert!(err.contains("history.jsonl:5: created_at"), "{err}");
    // stderr is not a terminal here: plain progress lines, no bar.
    assert!(err.contains("progress: "), "{err}");
    assert!(!err.contains('\r'), "{err}");

    let found: Value =
        serde_json::from_str(&env.ok(&["memory", "search", "Boris", "--json", "--mode", "text"]))
            .unwrap();
    assert_eq!(found["count"], 1, "{found}");
    let hit = &found["results"][0];
    assert_eq!(hit["source"], "chat");
    assert_eq!(hit["date"], "2021-03-04");
    assert_eq!(hit["foundBy"], "text");

    let found: Value =
        serde_json::from_str(&env.ok(&["memory", "search", "INV-99812", "--json"])).unwrap();
    let hit = &found["results"][0];
    assert_eq!(hit["source"], jsonl.display().to_string(), "{found}");
    assert_eq!(hit["date"], "2023-11-14");
    let found: Value =
        serde_json::from_str(&env.ok(&["memory", "search", "Barsik", "--json", "--mode", "text"]))
            .unwrap();
    assert_eq!(found["results"][0]["date"], "2022-05-06", "{found}");

    // A list for people: rank, score, side, date, source, then the text on one line.
    let out = env.ok(&[
        "memory",
        "search",
        "where is the staging database?",
        "--top-k",
        "2",
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with(" 1. "), "{out}");
    assert!(lines[0].ends_with("servers.md"), "{out}");
    assert!(lines[1].contains("srv-db-07"), "{out}");
    assert_eq!(lines.len(), 4, "{out}");

    // Importing again stores nothing new.
    let out = env.ok(&[
        "memory",
        "import",
        notes.to_str().unwrap(),
        jsonl.to_str().unwrap(),
    ]);
    assert!(out.contains("(0 inserted, 5 duplicates)"), "{out}");
}

#[test]
fn import_conversations_and_exports_then_search_by_date() {
    let env = Env::new();
    let dir = env.home().join("chats");
    std::fs::create_dir_all(dir.join("tg")).unwrap();
    // JSON Lines turns: the short reply is found with the question it answers.
    std::fs::write(
        dir.join("friends.jsonl"),
        [
            r#"{"id": "b1.01", "session": "b1", "speaker": "Sam", "text": "Which jacket did you buy in the end?", "created_at": "2024-03-02T19:05:00+00:00"}"#,
            r#"{"id": "b1.02", "session": "b1", "speaker": "Priya", "text": "Yes, the blue one, 38 euros.", "created_at": "2024-03-02T19:06:00+00:00"}"#,
            r#"{"speaker": "Sam", "text": ""}"#,
            r#"{"id": "b2.01", "session": "b2", "speaker": "Priya", "text": "The Lisbon trip moved to June.", "created_at": "2024-05-10T10:00:00+00:00"}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("conversations.json"),
        r#"[{"title": "Plants", "conversation_id": "c9", "create_time": 1700000000, "current_node": "n2",
            "mapping": {"n1": {"parent": null, "message": {"id": "m1", "author": {"role": "user"}, "content": {"parts": ["How often should I water a ficus?"]}}},
                        "n2": {"parent": "n1", "message": {"id": "m2", "author": {"role": "assistant"}, "content": {"parts": ["Once a week, when the top soil is dry."]}}}}}]"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("tg/result.json"),
        r#"{"name": "Oleg", "type": "personal_chat", "id": 7, "messages": [
            {"id": 1, "type": "message", "date": "2023-08-01T09:00:00", "date_unixtime": "1690880400", "from": "Oleg", "text": ["Код от домофона ", {"type": "code", "text": "4417"}]}]}"#,
    )
    .unwrap();
    // a .json file that is no export is left alone by a walk, and one with an export's
    // name (an OpenAI request saved as result.json) is a note, not a failure ...
    std::fs::write(dir.join("settings.json"), "{}").unwrap();
    std::fs::create_dir_all(dir.join("api")).unwrap();
    std::fs::write(
        dir.join("api/result.json"),
        r#"{"messages": [{"role": "user", "content": "hi"}]}"#,
    )
    .unwrap();
    let o = env.run(&["memory", "import", dir.to_str().unwrap()]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains(
            "imported 4 files: 6 documents, 6 chunks (6 inserted, 0 duplicates), 1 skipped lines, 0 unreadable files"
        ),
        "{out}"
    );
    assert!(
        err.contains("api/result.json: not a chat export; left out"),
        "{err}"
    );
    // ... and refused when named
    let o = env.run(&[
        "memory",
        "import",
        dir.join("settings.json").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("not a chat export"), "{}", stderr(&o));

    let search = |args: &[&str]| -> Value {
        let mut all = vec!["memory", "search"];
        all.extend_from_slice(args);
        all.push("--json");
        serde_json::from_str(&env.ok(&all)).unwrap()
    };
    let found = search(&["which jacket did Priya buy?", "--top-k", "2"]);
    let sources: Vec<&str> = found["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["source"].as_str().unwrap())
        .collect();
    assert!(
        sources.iter().any(|s| s.ends_with("friends.jsonl#b1.02")),
        "{found}"
    );
    let reply = found["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["source"].as_str().unwrap().ends_with("#b1.02"))
        .unwrap();
    assert_eq!(reply["content"], "Priya: Yes, the blue one, 38 euros.");
    assert_eq!(reply["date"], "2024-03-02");

    let found = search(&["ficus", "--mode", "text"]);
    assert_eq!(
        found["results"][0]["source"]
            .as_str()
            .unwrap()
            .rsplit('#')
            .next(),
        Some("m1")
    );
    let found = search(&["домофон", "--mode", "text"]);
    assert_eq!(
        found["results"][0]["content"], "Oleg: Код от домофона 4417",
        "{found}"
    );
    assert_eq!(found["results"][0]["date"], "2023-08-01");

    // a period: only May 2024 has the trip, nothing in 2022
    let found = search(&["trip", "--from", "2024-05-01", "--to", "2024-05-31"]);
    assert_eq!(found["count"], 1, "{found}");
    let found = search(&["trip", "--from", "2022-01-01", "--to", "2022-12-31"]);
    assert_eq!(found["count"], 0, "{found}");
    let o = env.run(&["memory", "search", "trip", "--from", "May"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("YYYY-MM-DD"), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("error: --from: "), "{}", stderr(&o));
}

#[test]
fn memory_command_errors_and_exit_codes() {
    let env = Env::new();
    // Usage errors: 2.
    assert_eq!(env.run(&["memory", "search"]).status.code(), Some(2));
    assert_eq!(env.run(&["memory", "import"]).status.code(), Some(2));
    let o = env.run(&["memory", "search", "x", "--mode", "fuzzy"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("expected hybrid, text or vector"),
        "{}",
        stderr(&o)
    );
    let o = env.run(&["memory", "search", "  "]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "error: <QUERY>: empty: say what to look for\n",
        "{}",
        stderr(&o)
    );
    // An argument's error names the flag the user typed, once (no log line repeating
    // it).
    let o = env.run(&["memory", "search", "x", "--top-k", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "error: --top-k: expected a number ≥ 1, got 0\n",
        "{}",
        stderr(&o)
    );
    // Failures: 1.
    let o = env.run(&["memory", "import", "/no/such/dir"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("/no/such/dir"), "{}", stderr(&o));
    let other = env.home().join("a.pdf");
    std::fs::write(&other, "x").unwrap();
    let o = env.run(&["memory", "import", other.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("not a .md, .markdown, .txt, .jsonl or .json (chat export) file"),
        "{}",
        stderr(&o)
    );

    // Without the model: 1, with the setup hint.
    let bare = Env::without_model();
    let o = bare.run(&["memory", "search", "tea"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("make setup"), "{}", stderr(&o));
    let notes = bare.home().join("n.md");
    std::fs::write(&notes, "tea").unwrap();
    let o = bare.run(&["memory", "import", notes.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("make setup"), "{}", stderr(&o));
    let o = bare.run(&["call", "memory_save", r#"{"content": "tea"}"#]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("make setup"), "{}", stderr(&o));
}

#[test]
fn concurrent_core_memory_updates_from_many_processes_lose_nothing() {
    let env = Env::new();
    let children: Vec<_> = (0..8)
        .map(|i| {
            let args = json!({"section": "user", "key": format!("k{i}"), "value": format!("v{i}")});
            env.cmd(&["call", "memory_core_update", &args.to_string()])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let got = env.call("memory_core_get", &json!({}));
    let user = got["user"].as_object().unwrap();
    assert_eq!(user.len(), 8, "{got}");
    for i in 0..8 {
        assert_eq!(user[&format!("k{i}")], format!("v{i}"));
    }
    let file: Value = serde_json::from_str(
        &std::fs::read_to_string(env.data().join("core_memory.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(file["user"], got["user"]);

    let o = env.run(&[
        "call",
        "memory_core_delete",
        r#"{"section": "agent", "key": "k1"}"#,
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no key `k1` in core memory section `agent`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn doctor_reports_a_missing_and_a_broken_index() {
    let env = Env::without_model();
    let out = env.ok(&["doctor"]);
    assert!(out.contains("ok    memory db   "), "{out}");
    assert!(out.contains("not created yet"), "{out}");
    if cfg!(feature = "docs") {
        assert!(
            out.contains("ok    docs        ") && out.contains("docs.sqlite not built yet (built on first docs_search, or run `klaw-engine docs index`)"),
            "{out}"
        );
    }
    std::fs::create_dir_all(env.data()).unwrap();
    std::fs::write(
        env.data().join("memory.sqlite"),
        "not a database at all, just text",
    )
    .unwrap();
    let o = env.run(&["doctor"]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.contains("FAIL  memory db"), "{out}");
    assert!(out.contains("cannot be read"), "{out}");
}

/// The docs index is a cache: one that cannot be read is a warning, not a failure.
#[cfg(feature = "docs")]
#[test]
fn doctor_warns_about_a_broken_docs_index() {
    let env = Env::without_model();
    std::fs::create_dir_all(env.data()).unwrap();
    std::fs::write(env.data().join("docs.sqlite"), "not a database either").unwrap();
    let out = env.ok(&["doctor"]);
    assert!(out.contains("warn  docs        "), "{out}");
    assert!(out.contains("docs.sqlite cannot be read"), "{out}");
    assert!(out.contains("and run `klaw-engine docs index`"), "{out}");
}

/// An index built by another model (the default changed, or `memory.model` did) is
/// re-embedded on the first memory call; doctor says so before, and is quiet after.
#[test]
fn doctor_warns_about_an_index_of_another_model_until_it_is_reembedded() {
    let env = Env::new();
    let o = env
        .cmd(&[
            "call",
            "memory_save",
            r#"{"content": "Anna drinks green tea."}"#,
        ])
        .env("KLAW_MEMORY_MODEL", "all-minilm-l6-v2")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = env.ok(&["doctor"]);
    assert!(out.contains("warn  memory db"), "{out}");
    assert!(
        out.contains("not the configured use-multilingual-v3"),
        "{out}"
    );
    assert!(
        out.contains("the first memory call re-embeds its 1 chunk"),
        "{out}"
    );
    // a search re-embeds (with the warning in the log) and finds it by meaning
    assert_eq!(
        env.first_by_meaning("какой чай пьёт Анна?"),
        "Anna drinks green tea."
    );
    let out = env.ok(&["doctor"]);
    assert!(out.contains("ok    memory db"), "{out}");
}

/// A serving engine warms its memory at start-up (the model, the vectors' in-memory
/// copy, one search) and says so in its log; a search that arrives before the warm-up
/// ends waits for it and answers as usual.
#[test]
fn mcp_warms_the_memory_at_start_up_and_a_first_search_waits_for_it() {
    let env = Env::new();
    let content = "The spare key of the garage is under the blue flowerpot.";
    let saved = env.call("memory_save", &json!({"content": content}));
    assert_eq!(saved["inserted"], 1, "{saved}");
    let search = json!({"query": "where is the spare key of the garage", "topK": 1});
    let log = env.home().join("mcp.log");

    // A search at once: it waits for the warm-up's model and index, loads nothing twice.
    let mut cmd = env.cmd(&["mcp"]);
    cmd.env("KLAW_LOG_LEVEL", "klaw::memory=info,warn");
    let mut mcp = Mcp::start_with_stderr(cmd, std::fs::File::create(&log).unwrap());
    let found = mcp.call("memory_search", search.clone());
    assert_eq!(found["isError"], false, "{found}");
    assert_eq!(
        found["structuredContent"]["results"][0]["content"], content,
        "{found}"
    );
    let read_log = || std::fs::read_to_string(&log).unwrap();
    assert!(
        eventually(60, || read_log().contains("memory warmed")),
        "{}",
        read_log()
    );
    assert!(mcp.finish().success());
    let text = read_log();
    assert_eq!(text.matches("memory warmed").count(), 1, "{text}");
    assert!(!text.contains("WARN"), "{text}");

    // The same once warm.
    let mut cmd = env.cmd(&["mcp"]);
    cmd.env("KLAW_LOG_LEVEL", "klaw::memory=info,warn");
    let mut mcp = Mcp::start_with_stderr(cmd, std::fs::File::create(&log).unwrap());
    assert!(
        eventually(60, || read_log().contains("memory warmed")),
        "{}",
        read_log()
    );
    let found = mcp.call("memory_search", search);
    assert_eq!(
        found["structuredContent"]["results"][0]["content"], content,
        "{found}"
    );
    assert!(mcp.finish().success());
}

/// Issue 30: `memory.model` as a list (here the variable, comma-separated): a memory saved
/// with two models is found with them, doctor checks each model, the list shrunk back to
/// the default keeps the memory, and a listed model that is not installed is "not set
/// up" (exit code and doctor's warning), as the one model always was.
#[test]
fn two_models_from_the_variable_save_search_and_are_checked_by_the_doctor() {
    let env = Env::new();
    let two = "use-multilingual-v3, multilingual-e5-small";
    let with = |models: &str, args: &[&str]| {
        env.cmd(args)
            .env("KLAW_MEMORY_MODEL", models)
            .output()
            .unwrap()
    };
    let o = with(
        two,
        &[
            "call",
            "memory_save",
            r#"{"content": "Anna drinks green tea."}"#,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = with(two, &["memory", "search", "какой чай пьёт Анна?", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let found: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(found["results"][0]["content"], "Anna drinks green tea.");
    let o = with(two, &["doctor"]);
    let out = stdout(&o);
    assert_eq!(out.matches("ok    memory ").count(), 3, "{out}"); // two models, the db
    assert!(out.contains("multilingual-e5-small"), "{out}");

    // back to the default: its vectors were kept, nothing to re-embed
    assert_eq!(
        env.first_by_meaning("какой чай пьёт Анна?"),
        "Anna drinks green tea."
    );

    let missing = "use-multilingual-v3,no-such-model";
    let o = with(missing, &["memory", "search", "tea", "--json"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no-such-model"), "{}", stderr(&o));
    let out = stdout(&with(missing, &["doctor"]));
    assert!(out.contains("warn  memory"), "{out}");
    assert!(out.contains("no-such-model"), "{out}");
}

/// Issue 44: core memory in PostgreSQL (`storage.url`): engines of two data dirs set
/// one key at the same moment, many times over; each time one value is kept whole, the
/// other engine reads it, and no `core_memory.json` is written.
#[test]
fn two_engines_setting_one_core_key_at_once_keep_one_value_whole() {
    let Some(pg) = common::postgres::Postgres::start() else {
        return;
    };
    let (one, two) = (Env::without_model(), Env::without_model());
    let db = pg.url();
    let value = |who: &str, round: usize| format!("{who} {round} {}", who.repeat(400));
    for round in 0..5 {
        let children: Vec<_> = [(&one, "a"), (&two, "b")]
            .into_iter()
            .map(|(env, who)| {
                let args = json!({"section": "user", "key": "same", "value": value(who, round)});
                env.cmd(&["call", "memory_core_update", &args.to_string()])
                    .env("KLAW_DATABASE_URL", &db)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let o = c.wait_with_output().unwrap();
            assert!(o.status.success(), "{}", stderr(&o));
        }
        let read = |env: &Env| {
            let o = env
                .cmd(&["call", "memory_core_get", "{}"])
                .env("KLAW_DATABASE_URL", &db)
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", stderr(&o));
            serde_json::from_str::<Value>(&stdout(&o)).unwrap()
        };
        let (got, seen) = (read(&one), read(&two));
        assert_eq!(got, seen);
        let kept = got["user"]["same"].as_str().unwrap();
        assert!(
            kept == value("a", round) || kept == value("b", round),
            "torn: {kept}"
        );
        assert!(got["bytes"].as_u64().unwrap() <= 8192, "{got}");
    }
    for env in [&one, &two] {
        assert!(!env.data().join("core_memory.json").exists());
    }
}

/// Issue 45: with `storage.url` the agent's memory is in that PostgreSQL (pgvector):
/// what one engine (its own data dir) saves, another finds at once; the doctor names the
/// backend, pgvector's version and the HNSW index; a database without the extension
/// says to create it.
#[test]
fn memory_on_postgres_is_shared_by_engines_through_storage_url() {
    let Some(pg) = common::postgres::Postgres::start() else {
        return;
    };
    let url = pg.fresh_db();
    pg.psql_url(&url, "CREATE EXTENSION vector");
    let (a, b) = (Env::new(), Env::new());
    let with_db = |env: &Env, args: &[&str]| {
        let o = env
            .cmd(args)
            .env("KLAW_DATABASE_URL", &url)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        stdout(&o)
    };
    let content = "The Wi-Fi password at the dacha is 'sunflower-42'.";
    let saved: Value = serde_json::from_str(&with_db(
        &a,
        &[
            "call",
            "memory_save",
            &json!({"content": content}).to_string(),
        ],
    ))
    .unwrap();
    assert_eq!(saved["inserted"], 1, "{saved}");
    let found: Value = serde_json::from_str(&with_db(
        &b,
        &[
            "call",
            "memory_search",
            &json!({"query": "пароль от вайфая на даче", "topK": 3}).to_string(),
        ],
    ))
    .unwrap();
    assert_eq!(found["results"][0]["content"], content, "{found}");
    let again: Value = serde_json::from_str(&with_db(
        &b,
        &[
            "call",
            "memory_save",
            &json!({"content": content}).to_string(),
        ],
    ))
    .unwrap();
    assert_eq!(again["alreadyStored"], true, "{again}");
    // nothing in the data dirs: the memory is the database's
    assert!(!a.data().join("memory.sqlite").exists());
    let doctor = with_db(&b, &["doctor"]);
    let line = doctor
        .lines()
        .find(|l| l.contains("memory db"))
        .unwrap_or_default();
    assert!(
        line.starts_with("ok")
            && line.contains("pgvector 0.8")
            && line.contains("1 chunk")
            && line.contains("_hnsw"),
        "{doctor}"
    );

    let bare = pg.fresh_db();
    let o = a
        .cmd(&[
            "call",
            "memory_save",
            &json!({"content": content}).to_string(),
        ])
        .env("KLAW_DATABASE_URL", &bare)
        .output()
        .unwrap();
    let out = format!("{}{}", stdout(&o), stderr(&o));
    assert!(!o.status.success(), "{out}");
    assert!(out.contains("CREATE EXTENSION vector"), "{out}");
    assert!(!out.contains("panicked"), "{out}");
}
