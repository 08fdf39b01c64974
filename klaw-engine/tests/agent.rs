//! `klaw-engine chat` against scripted model servers on loopback (real HTTP, the
//! OpenAI and Anthropic formats) and a real small model (SmolLM2 behind llama.cpp's
//! server, set up by `scripts/setup-llm.sh`): tool calls, parallel calls, errors the
//! model recovers from, malformed arguments, retries, the round limit, history across
//! processes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::json;

use crate::common;
use common::scripted::{Recorded, Reply, ScriptedServer};
use common::{cache, engine, run_with_stdin, stderr, stdout};

/// `klaw-engine chat` with `lines` on stdin, talking to `base_url`.
fn chat(home: &Path, base_url: &str, env: &[(&str, &str)], lines: &str) -> Output {
    let mut cmd = engine(home, &["chat"]);
    cmd.env("KLAW_LLM_BASE_URL", base_url)
        .env("KLAW_LLM_MODEL", "test-model")
        .env("KLAW_LLM_API_KEY", "sk-agent-test-key")
        .env("KLAW_LOG_LEVEL", "error");
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_with_stdin(cmd, lines)
}

/// The `role: tool` messages of a request, by call id.
fn tool_messages(r: &Recorded) -> Vec<(String, String)> {
    r.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The content of the tool message answering call `id`.
fn result_of<'a>(results: &'a [(String, String)], id: &str) -> &'a str {
    results
        .iter()
        .find(|(i, _)| i == id)
        .map(|(_, c)| c.as_str())
        .unwrap_or_else(|| panic!("no result for the call {id}: {results:?}"))
}

#[test]
fn a_tool_call_then_an_answer() {
    let server = ScriptedServer::script(vec![
        Reply::openai_calls(&[("c1", "current_time", json!("{\"timezone\":\"UTC\"}"))]),
        Reply::openai_answer("It is noon in UTC."),
    ]);
    let home = tempfile::tempdir().unwrap();
    let o = chat(
        home.path(),
        &format!("{}/v1", server.url),
        &[],
        "What time is it?\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "It is noon in UTC.\n");
    assert!(
        stderr(&o).contains("→ current_time {\"timezone\":\"UTC\"}"),
        "{}",
        stderr(&o)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let first = &requests[0];
    assert_eq!(
        first.header("authorization"),
        Some("Bearer sk-agent-test-key")
    );
    assert!(
        first.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "file_read")
    );
    assert!(
        first.body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Klaw")
    );
    let results = tool_messages(&requests[1]);
    assert_eq!(results.len(), 1);
    assert!(
        results[0].1.contains("\"timezone\": \"UTC\""),
        "{results:?}"
    );
    assert!(!stderr(&o).contains("sk-agent-test-key"));
}

/// Core memory is in the system prompt, read afresh at each turn's start (beside the
/// history's writes): a fact saved in one turn is in the next turn's prompt, not in the
/// requests before it.
#[test]
fn core_memory_is_read_at_each_turns_start() {
    let server = ScriptedServer::script(vec![
        Reply::openai_calls(&[(
            "m",
            "memory_core_update",
            json!("{\"section\":\"user\",\"key\":\"name\",\"value\":\"Ada Lovelace\"}"),
        )]),
        Reply::openai_answer("Noted."),
        Reply::openai_answer("You are Ada Lovelace."),
    ]);
    let home = tempfile::tempdir().unwrap();
    let o = chat(
        home.path(),
        &format!("{}/v1", server.url),
        &[("KLAW_APPROVAL", "never")],
        "Call me Ada Lovelace.\nWho am I?\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Noted.\nYou are Ada Lovelace.\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let system = |r: &Recorded| {
        assert_eq!(r.body["messages"][0]["role"], "system");
        r.body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    for before in &requests[..2] {
        assert!(
            !system(before).contains("Ada Lovelace"),
            "{}",
            system(before)
        );
    }
    let next = system(&requests[2]);
    assert!(
        next.contains("Core memory") && next.contains("Ada Lovelace"),
        "{next}"
    );
}

#[test]
fn parallel_calls_errors_and_malformed_arguments_go_back_to_the_model() {
    let server = ScriptedServer::script(vec![
        Reply::openai_calls(&[
            ("a", "current_time", json!("{\"timezone\":\"UTC\"}")),
            (
                "b",
                "current_time",
                json!("{\"timezone\":\"Mars/Olympus\"}"),
            ),
            ("c", "current_time", json!("{\"timezone\": ")),
            ("d", "no_such_tool", json!("{}")),
        ]),
        Reply::openai_answer("Done, with what worked."),
    ]);
    let home = tempfile::tempdir().unwrap();
    let o = chat(
        home.path(),
        &format!("{}/v1", server.url),
        &[],
        "Times, please\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Done, with what worked.\n");
    let results = tool_messages(&server.requests()[1]);
    let by_id = |id: &str| result_of(&results, id);
    assert!(by_id("a").contains("UTC"));
    assert!(by_id("b").contains("unknown time zone"), "{}", by_id("b"));
    assert!(by_id("c").contains("not valid JSON"), "{}", by_id("c"));
    assert!(
        by_id("d").contains("unknown tool") && by_id("d").contains("current_time"),
        "{}",
        by_id("d")
    );
}

#[test]
fn a_rate_limit_is_waited_out() {
    let server = ScriptedServer::script(vec![
        Reply::status(429, r#"{"error": {"message": "slow down"}}"#)
            .with_header("retry-after", "0"),
        Reply::openai_answer("Hello!"),
    ]);
    let home = tempfile::tempdir().unwrap();
    let o = chat(home.path(), &format!("{}/v1", server.url), &[], "Hi\n");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Hello!\n");
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn the_round_limit_stops_the_turn_with_advice() {
    let server =
        ScriptedServer::respond(|_| Reply::openai_calls(&[("x", "current_time", json!("{}"))]));
    let home = tempfile::tempdir().unwrap();
    let o = chat(
        home.path(),
        &format!("{}/v1", server.url),
        &[("KLAW_MAX_TOOL_CALL_ROUNDS", "3")],
        "Loop forever\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("stopped after 3 rounds") && stdout(&o).contains("subagent_spawn"),
        "{}",
        stdout(&o)
    );
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn a_model_error_is_reported_and_the_chat_goes_on() {
    let server = ScriptedServer::script(vec![
        Reply::status(
            400,
            r#"{"error": {"message": "model `test-model` not found"}}"#,
        ),
        Reply::openai_answer("Second time lucky."),
    ]);
    let home = tempfile::tempdir().unwrap();
    let o = chat(
        home.path(),
        &format!("{}/v1", server.url),
        &[],
        "one\ntwo\n",
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("model `test-model` not found")
            && stderr(&o).contains("/v1/chat/completions"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stdout(&o), "Second time lucky.\n");
    // The first message is kept: the second request has both.
    let users: Vec<String> = server.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(users, ["one", "two"]);
}

#[test]
fn the_history_survives_the_process_and_chats_stay_apart() {
    let server = ScriptedServer::script(vec![
        Reply::openai_answer("Nice to meet you, Ann."),
        Reply::openai_answer("Your name is Ann."),
        Reply::openai_answer("I do not know your name."),
    ]);
    let home = tempfile::tempdir().unwrap();
    let url = format!("{}/v1", server.url);
    assert!(
        chat(home.path(), &url, &[], "My name is Ann.\n")
            .status
            .success()
    );
    assert!(
        chat(home.path(), &url, &[], "What is my name?\n")
            .status
            .success()
    );
    let mut other = engine(home.path(), &["chat", "--chat", "other"]);
    other
        .env("KLAW_LLM_BASE_URL", &url)
        .env("KLAW_LLM_MODEL", "m");
    assert!(run_with_stdin(other, "What is my name?\n").status.success());
    let requests = server.requests();
    let texts = |r: &Recorded| -> Vec<String> {
        r.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .skip(1)
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(
        texts(&requests[1]),
        [
            "My name is Ann.",
            "Nice to meet you, Ann.",
            "What is my name?"
        ]
    );
    assert_eq!(texts(&requests[2]), ["What is my name?"]);
}

#[test]
fn the_anthropic_format_end_to_end() {
    let server = ScriptedServer::script(vec![
        Reply::json(json!({
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "current_time", "input": {"timezone": "UTC"}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5},
        })),
        Reply::json(json!({
            "content": [{"type": "text", "text": "Noon, UTC."}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 20, "output_tokens": 3},
        })),
    ]);
    let home = tempfile::tempdir().unwrap();
    let o = chat(
        home.path(),
        &server.url,
        &[("KLAW_LLM_PROVIDER", "anthropic")],
        "Time?\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Noon, UTC.\n");
    let second = &server.requests()[1];
    assert_eq!(second.path, "/v1/messages");
    assert_eq!(second.header("x-api-key"), Some("sk-agent-test-key"));
    let last = second.body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"][0]["type"], "tool_result");
    assert_eq!(last["content"][0]["tool_use_id"], "toolu_1");
}

#[test]
fn no_model_configured_is_a_clear_error() {
    let home = tempfile::tempdir().unwrap();
    let o = run_with_stdin(engine(home.path(), &["chat"]), "hi\n");
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("set llm.model") && stderr(&o).contains("KLAW_LLM_MODEL"),
        "{}",
        stderr(&o)
    );
}

/// The real small model behind llama.cpp's server, with the `json` protocol: asked for
/// the time, it must call `current_time` and answer with what it returned.
#[test]
fn a_real_small_model_calls_a_tool_with_the_json_protocol() {
    let server_bin = cache().join("venv-llm/bin/klaw-llm-server");
    if !server_bin.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} is missing: run scripts/setup-test-tools.sh",
            server_bin.display()
        );
        eprintln!(
            "skipped: {} is missing (scripts/setup-test-tools.sh)",
            server_bin.display()
        );
        return;
    }
    let mut llm = Command::new(&server_bin)
        .args([
            "--port",
            "0",
            "--ctx",
            "4096",
            "--quiet",
            "--exit-on-stdin-eof",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(llm.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("the server said {first:?}"))
        .to_owned();
    let home = tempfile::tempdir().unwrap();
    let o = chat(
        home.path(),
        &format!("{url}/v1"),
        &[
            ("KLAW_LLM_MODEL", "smollm2"),
            ("KLAW_LLM_PROTOCOL", "json"),
            ("KLAW_LLM_TOOLS", "current_time"),
            ("KLAW_LLM_TEMPERATURE", "0"),
            ("KLAW_LLM_MAX_TOKENS", "96"),
        ],
        "What time is it now? Use the current_time tool.\n",
    );
    drop(llm.stdin.take());
    let _ = llm.kill();
    let _ = llm.wait();
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("✓ current_time"),
        "the model never called current_time:\n{err}\n{out}"
    );
    // The answer carries what the tool returned: its date or its hour and minute.
    let field = |name: &str, len: usize| {
        err.split(&format!("\"{name}\": \""))
            .nth(1)
            .and_then(|rest| rest.get(..len))
            .unwrap_or_else(|| panic!("no {name} in the tool's result:\n{err}"))
            .to_owned()
    };
    let (date, time) = (field("date", 10), field("time", 5));
    assert!(
        out.contains(&date) || out.contains(&time),
        "the answer does not use the result ({date} {time}):\n{out}"
    );
}

/// A destructive call needs a person's approval: with nobody at the console (stdin is
/// not a terminal) it is refused with a reason the model reads, and nothing is deleted;
/// with `agent.approval` `never` it runs.
#[test]
fn approval_refused_where_nobody_can_answer() {
    for (approval, deleted) in [("destructive", false), ("never", true)] {
        let server = ScriptedServer::script(vec![
            Reply::openai_calls(&[("d", "file_delete", json!("{\"path\":\"keep.txt\"}"))]),
            Reply::openai_answer("Understood."),
        ]);
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("keep.txt"), "precious").unwrap();
        let o = chat(
            home.path(),
            &format!("{}/v1", server.url),
            &[
                ("KLAW_WORKSPACE", ws.path().to_str().unwrap()),
                ("KLAW_APPROVAL", approval),
            ],
            "Delete keep.txt\n",
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let results = tool_messages(&server.requests()[1]);
        assert_eq!(
            ws.path().join("keep.txt").exists(),
            !deleted,
            "{approval}: {results:?}"
        );
        if !deleted {
            assert!(
                results[0].1.starts_with("Error [refused]") && results[0].1.contains("approval"),
                "{results:?}"
            );
        }
    }
}

/// `send_message` with the seeds' aliases: to the console it is printed; to a chat off
/// the whitelist it is an error result naming the chat, and nothing is sent.
#[test]
fn send_message_goes_through_the_gateway_whitelist() {
    let server = ScriptedServer::script(vec![
        Reply::openai_calls(&[
            (
                "a",
                "send_message",
                json!("{\"chanId\":\"console\",\"chat_id\":\"me\",\"message\":\"Hello there\"}"),
            ),
            (
                "b",
                "send_message",
                json!("{\"channel\":\"telegram\",\"chatId\":\"7\",\"content\":\"psst\"}"),
            ),
            (
                "c",
                "send_message",
                json!("{\"channel\":\"sms\",\"chatId\":\"1\",\"text\":\"x\"}"),
            ),
        ]),
        Reply::openai_answer("Sent what I could."),
    ]);
    let home = tempfile::tempdir().unwrap();
    let o = chat(
        home.path(),
        &format!("{}/v1", server.url),
        &[
            ("KLAW_TELEGRAM_TOKEN", "123:ABC"),
            ("KLAW_TELEGRAM_BASE_URL", "http://127.0.0.1:9"),
            ("KLAW_ALLOWED_CHAT_IDS", "telegram_42"),
        ],
        "Send the messages\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("[console me] Hello there"),
        "{}",
        stdout(&o)
    );
    let results = tool_messages(&server.requests()[1]);
    let by_id = |id: &str| result_of(&results, id);
    assert!(by_id("a").contains("\"success\": true"), "{}", by_id("a"));
    assert!(
        by_id("b").contains("telegram_7") && by_id("b").contains("allowedChatIds"),
        "{}",
        by_id("b")
    );
    assert!(
        by_id("c").contains("channel not found: `sms`"),
        "{}",
        by_id("c")
    );
    assert!(!stderr(&o).contains("123:ABC"), "{}", stderr(&o));
}

/// The last user message of a request (OpenAI format).
fn last_user(r: &Recorded) -> String {
    r.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// A model that spawns one subagent per instruction it is given (`SPAWN <what>`), and
/// a subagent that tries to spawn its own (refused: too deep), then answers `answer`.
fn delegating_model(answer: &'static str) -> ScriptedServer {
    ScriptedServer::respond(move |r| {
        let user = last_user(r);
        let has_results = !tool_messages(r).is_empty();
        if let Some(task) = user.strip_prefix("SPAWN ") {
            if has_results {
                return Reply::openai_answer("Started.");
            }
            return Reply::openai_calls(&[(
                "s",
                "subagent_spawn",
                json!(json!({"name": "report", "message": format!("TASK {task}"), "injectInto": "console_me"}).to_string()),
            )]);
        }
        if user.starts_with("TASK ") {
            if has_results {
                return Reply::openai_answer(answer);
            }
            return Reply::openai_calls(&[
                (
                    "x",
                    "subagent_spawn",
                    json!("{\"name\":\"deeper\",\"message\":\"more\"}"),
                ),
                (
                    "y",
                    "memory_core_update",
                    json!("{\"section\":\"user\",\"key\":\"k\",\"value\":\"v\"}"),
                ),
            ]);
        }
        Reply::openai_answer("?")
    })
}

/// `subagent_spawn` returns at once; the subagent runs with its own history, cannot go
/// deeper or change core memory, and its answer is delivered through the gateway; a
/// silent answer sends nothing.
#[test]
fn subagents_report_through_the_gateway_or_stay_silent() {
    for (answer, shown) in [
        ("The report is ready.", true),
        (r#"{"silent": true, "reason": "nothing new"}"#, false),
    ] {
        let server = delegating_model(answer);
        let home = tempfile::tempdir().unwrap();
        let o = chat(
            home.path(),
            &format!("{}/v1", server.url),
            &[],
            "SPAWN the report\n",
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let out = stdout(&o);
        assert!(out.contains("Started."), "{out}");
        assert_eq!(
            out.contains("[console me] The report is ready."),
            shown,
            "{out}"
        );
        assert!(!out.contains("silent"), "{out}");
        // The subagent's second request carries its refused calls.
        let sub = server
            .requests()
            .into_iter()
            .find(|r| last_user(r).starts_with("TASK ") && !tool_messages(r).is_empty())
            .expect("the subagent never got its tool results");
        let results = tool_messages(&sub);
        assert!(
            results[0].1.contains("Error [refused]") && results[0].1.contains("maxSubagentDepth"),
            "{results:?}"
        );
        assert!(results[1].1.contains("read-only"), "{results:?}");
        // Its history is its own: the main chat's message is not in it.
        assert!(
            !sub.body["messages"].to_string().contains("SPAWN"),
            "{}",
            sub.body["messages"]
        );
    }
}

/// Whether the request's own turn (what follows its last user message) holds a tool
/// result.
fn turn_has_results(r: &Recorded) -> bool {
    let messages = r.body["messages"].as_array().unwrap();
    let last_user = messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .unwrap_or(0);
    messages[last_user..].iter().any(|m| m["role"] == "tool")
}

/// A subagent of a name keeps its own history across spawns (`subagent:<name>`): spawned
/// again from another chat, in another process, its first request holds its earlier
/// task and answer, while no user's chat sees them.
#[test]
fn a_named_subagent_keeps_its_own_history_across_spawns() {
    let server = ScriptedServer::respond(|r| {
        let user = last_user(r);
        if let Some(task) = user.strip_prefix("SPAWN ") {
            if turn_has_results(r) {
                return Reply::openai_answer("Started.");
            }
            return Reply::openai_calls(&[(
                "s",
                "subagent_spawn",
                json!(json!({"name": "digest", "message": format!("TASK {task}")}).to_string()),
            )]);
        }
        if let Some(task) = user.strip_prefix("TASK ") {
            return Reply::openai_answer(&format!("DIGEST OF {task}"));
        }
        Reply::openai_answer("?")
    });
    let home = tempfile::tempdir().unwrap();
    let url = format!("{}/v1", server.url);
    for (chat, line) in [("first", "SPAWN alpha\n"), ("second", "SPAWN beta\n")] {
        let mut cmd = engine(home.path(), &["chat", "--chat", chat]);
        cmd.env("KLAW_LLM_BASE_URL", &url)
            .env("KLAW_LLM_MODEL", "test-model")
            .env("KLAW_LOG_LEVEL", "error");
        let o = run_with_stdin(cmd, line);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let requests = server.requests();
    let body = |r: &Recorded| r.body["messages"].to_string();
    let beta = requests
        .iter()
        .find(|r| last_user(r) == "TASK beta")
        .expect("the second subagent never asked");
    // Its earlier spawn's task and answer, then its own task.
    let users: Vec<_> = beta.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(users, ["TASK alpha", "TASK beta"], "{}", body(beta));
    assert!(body(beta).contains("DIGEST OF alpha"), "{}", body(beta));
    // The user's chats never see it (only their own spawn call names the task).
    for r in requests
        .iter()
        .filter(|r| last_user(r).starts_with("SPAWN "))
    {
        let users = r.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .count();
        assert_eq!(users, 1, "{}", body(r));
        assert!(!body(r).contains("DIGEST"), "{}", body(r));
    }
    // And none may take its name.
    let mut cmd = engine(home.path(), &["chat", "--chat", "subagent:digest"]);
    cmd.env("KLAW_LLM_BASE_URL", &url)
        .env("KLAW_LLM_MODEL", "test-model");
    let o = run_with_stdin(cmd, "hello\n");
    assert!(!o.status.success());
    assert!(stderr(&o).contains("is not a chat name"), "{}", stderr(&o));
}

/// The provider's usual key variable goes only to the provider's own server: a chat
/// with a local `baseUrl` and `OPENAI_API_KEY` set sends no key.
#[test]
fn a_key_from_the_environment_stays_with_its_provider() {
    let server = ScriptedServer::script(vec![Reply::openai_answer("hi")]);
    let home = tempfile::tempdir().unwrap();
    let mut cmd = engine(home.path(), &["chat"]);
    cmd.env("KLAW_LLM_BASE_URL", format!("{}/v1", server.url))
        .env("KLAW_LLM_MODEL", "m")
        .env("OPENAI_API_KEY", "sk-should-stay-home");
    let o = run_with_stdin(cmd, "hello\n");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(server.requests()[0].header("authorization"), None);
}

/// Escape sequences an attacker's answer would use: OSC 52 writes the clipboard, OSC 0
/// the window title, `ESC [2J` clears the screen, U+009B is a one-character CSI.
const HOSTILE: &str = "\x1b]52;c;cm0gLXJmIH4K\x07\x1b]0;pwned\x07\x1b[2J\u{9b}31m\r";

/// What a terminal would obey in `text`, if anything.
fn obeyed(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| c.is_control() && !matches!(c, '\n' | '\t'))
        .collect()
}

/// Issue 25, hole 8: the model's text (the answer, and through a tool's error and
/// malformed arguments, the tool lines) reached the terminal raw. Now no control
/// character of theirs reaches stdout or stderr; the visible text stays.
#[test]
fn escape_sequences_from_the_model_never_reach_the_terminal() {
    let server = ScriptedServer::script(vec![
        Reply::openai_calls(&[
            (
                "a",
                "current_time",
                json!({"timezone": format!("Mars{HOSTILE}")})
                    .to_string()
                    .into(),
            ),
            (
                "b",
                "current_time",
                json!(format!("{{\"timezone\": \"{HOSTILE}")),
            ),
        ]),
        Reply::openai_answer(&format!("Done.{HOSTILE}\r\nSee you.")),
    ]);
    let home = tempfile::tempdir().unwrap();
    let o = chat(home.path(), &format!("{}/v1", server.url), &[], "Hi\n");
    assert!(o.status.success(), "{}", stderr(&o));
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(obeyed(&out).is_empty(), "{:?}", obeyed(&out));
    assert!(obeyed(&err).is_empty(), "{:?}", obeyed(&err));
    assert_eq!(out, "Done.]52;c;cm0gLXJmIH4K]0;pwned[2J31m\nSee you.\n");
    assert!(
        err.contains("✗ current_time") && err.contains("]0;pwned"),
        "{err}"
    );
}

/// `klaw-engine chat` in a terminal (a pseudo-terminal through util-linux `script`):
/// what the person sees, typing `input`, with a timeout in case the chat hangs.
fn chat_in_a_terminal(home: &Path, base_url: &str, env: &[(&str, &str)], input: &str) -> String {
    let bin = env!("CARGO_BIN_EXE_klaw-engine");
    let mut cmd = Command::new("timeout");
    cmd.args([
        "60",
        "script",
        "-qec",
        &format!("'{bin}' chat"),
        "/dev/null",
    ])
    .env_clear()
    .env("HOME", home)
    .env("PATH", std::env::var_os("PATH").unwrap_or_default())
    .env("TZ", "UTC")
    .env("KLAW_LLM_BASE_URL", base_url)
    .env("KLAW_LLM_MODEL", "test-model")
    .env("KLAW_LLM_API_KEY", "sk-agent-test-key")
    .env("KLAW_LOG_LEVEL", "error");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = run_with_stdin(cmd, input);
    assert!(
        o.status.success(),
        "{:?}: {}{}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    // The terminal turns each line break into CR LF.
    stdout(&o).replace("\r\n", "\n")
}

/// Issue 25, hole 6: the approval question showed 300 characters, so `exec` of 290
/// harmless ones followed by `; touch PAYLOAD` was approved on the visible part and the
/// rest ran. Now the question shows the whole arguments (wrapped), a bidi override and
/// a carriage return or ESC in them written out, and the streamed answer has no escape
/// sequence left (hole 8, in a terminal).
#[test]
fn the_approval_question_shows_everything_that_would_run() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        panic!("util-linux `script` is needed to give the chat a terminal");
    }
    let harmless = format!("echo {}", "x".repeat(285));
    assert_eq!(harmless.len(), 290);
    let command = format!("{harmless}; touch PAYLOAD");
    let path = "report\u{202e}hs.txt\r\x1b[2Kinnocent.txt";
    let server = ScriptedServer::script(vec![
        Reply::openai_calls(&[
            ("e", "exec", json!({"command": command}).to_string().into()),
            ("d", "file_delete", json!({"path": path}).to_string().into()),
        ]),
        Reply::openai_answer(&format!("Nothing ran.{HOSTILE}")),
    ]);
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let screen = chat_in_a_terminal(
        home.path(),
        &format!("{}/v1", server.url),
        &[("KLAW_WORKSPACE", ws.path().to_str().unwrap())],
        // The message, `n` to each question, then Ctrl-D.
        "Clean up\nn\nn\n\x04",
    );
    // Every character of the command is on the screen, wrapped but whole.
    let unwrapped = screen.replace('\n', "");
    assert!(
        unwrapped.contains(&format!("\"command\": \"{command}\"")),
        "{screen}"
    );
    assert_eq!(screen.matches("Allow it? [y/N]").count(), 2, "{screen}");
    let questions: Vec<&str> = screen
        .split("The agent wants to call")
        .skip(1)
        .map(|q| q.split("Allow it?").next().unwrap())
        .collect();
    assert!(
        questions
            .iter()
            .flat_map(|q| q.lines())
            .all(|l| l.chars().count() <= 100),
        "{screen}"
    );
    // The bidi override, the CR and the ESC are shown, not obeyed.
    assert!(
        screen.contains(r#""path": "report\u{202e}hs.txt\r\u001b[2Kinnocent.txt""#),
        "{screen}"
    );
    assert!(!screen.contains('\u{202e}'), "{screen}");
    assert!(
        obeyed(&screen).is_empty(),
        "{:?}\n{screen}",
        obeyed(&screen)
    );
    assert!(screen.contains("Nothing ran.]52;c;"), "{screen}");
    assert!(!ws.path().join("PAYLOAD").exists());
    let results = tool_messages(&server.requests()[1]);
    assert!(
        results.iter().all(|(_, r)| r.contains("the user declined")),
        "{results:?}"
    );
}

/// A round's calls that change something run one at a time, in the order the model gave
/// them: a slow write, an edit of what it wrote, and a read of the edit all see the step
/// before (when every call of a round ran at once, the edit and the read found nothing).
/// Read-only calls next to each other still run together.
#[test]
fn calls_that_change_things_run_in_the_models_order() {
    let server = ScriptedServer::script(vec![
        Reply::openai_calls(&[
            (
                "w",
                "exec",
                json!("{\"command\": \"sleep 1 && printf alpha > notes.txt\"}"),
            ),
            (
                "e",
                "file_edit",
                json!("{\"path\": \"notes.txt\", \"oldText\": \"alpha\", \"newText\": \"beta\"}"),
            ),
            ("r1", "file_read", json!("{\"path\": \"notes.txt\"}")),
            ("r2", "current_time", json!("{\"timezone\": \"UTC\"}")),
        ]),
        Reply::openai_answer("Edited."),
    ]);
    let home = tempfile::tempdir().unwrap();
    let o = chat(
        home.path(),
        &format!("{}/v1", server.url),
        // Nobody at a piped console could approve exec and file_edit.
        &[("KLAW_APPROVAL", "never")],
        "Write, edit, read\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let results = tool_messages(&server.requests()[1]);
    let by_id = |id: &str| {
        results
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, c)| c.clone())
            .unwrap_or_default()
    };
    assert!(!by_id("e").starts_with("Error"), "{results:?}");
    assert!(by_id("r1").contains("beta"), "{results:?}");
    assert!(!by_id("r2").starts_with("Error"), "{results:?}");
}

/// Issue 44: two engines (each its own home and data dir, as two machines) on one
/// PostgreSQL (`storage.url`): what a chat said on one, and the fact it put in core
/// memory, are in the other's next request; nothing went to either data dir's files.
#[test]
fn history_and_core_memory_written_on_one_engine_are_read_on_another() {
    let Some(pg) = common::postgres::Postgres::start() else {
        return;
    };
    let db = pg.url();
    let server = ScriptedServer::script(vec![
        Reply::openai_calls(&[(
            "m",
            "memory_core_update",
            json!("{\"section\":\"user\",\"key\":\"name\",\"value\":\"Ann\"}"),
        )]),
        Reply::openai_answer("Nice to meet you, Ann."),
        Reply::openai_answer("Your name is Ann."),
    ]);
    let url = format!("{}/v1", server.url);
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = [
        ("KLAW_APPROVAL", "never"),
        ("KLAW_DATABASE_URL", db.as_str()),
    ];
    let o = chat(one.path(), &url, &env, "My name is Ann.\n");
    assert!(o.status.success(), "{}", stderr(&o));
    let o = chat(two.path(), &url, &env, "What is my name?\n");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Your name is Ann.\n");
    let asked = &server.requests()[2];
    let messages = asked.body["messages"].as_array().unwrap();
    let contents: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(contents.contains(&"My name is Ann."), "{contents:?}");
    assert!(contents.contains(&"Nice to meet you, Ann."), "{contents:?}");
    assert!(
        contents[0].contains("Core memory") && contents[0].contains("Ann"),
        "{}",
        contents[0]
    );
    for home in [&one, &two] {
        let data = home.path().join(".local/share/klaw");
        for file in ["agent.db", "core_memory.json"] {
            assert!(!data.join(file).exists(), "{file} in {}", data.display());
            assert!(!home.path().join("data").join(file).exists(), "{file}");
        }
    }
    assert_eq!(
        pg.psql("SELECT count(*) FROM history_messages WHERE chat = 'console'"),
        "6"
    );
}
