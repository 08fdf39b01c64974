//! Skills through the real binary (issue 26): a skill added, changed and removed while
//! `klaw-engine mcp` runs is seen without a restart, in `skill_list`, `skill_load` and
//! the skills' MCP prompts, and while `klaw-engine run` serves MCP over HTTP; the agent's system prompt lists the
//! skills within `skills.promptBudgetChars` (every name, descriptions shortened; when
//! not even the names fit, the one the message is about first, the rest counted), and sees a skill added
//! between two turns of `chat`; a loaded skill's `allowed-tools` is enforced when
//! `skills.enforceAllowedTools` is on (the scripted OpenAI-compatible server on loopback
//! records the prompt and the tool results); `doctor` lists the malformed skills; a
//! link in a skill's folder read through `skill_load` only when it stays in the folder.

#![cfg(feature = "skills")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common;
use common::mcp_client::Mcp;
use common::scripted::{Recorded, Reply, ScriptedServer};
use common::{dirs, engine_in, run_with_stdin, stderr, stdout};

fn write_skill(root: &Path, folder: &str, text: &str) {
    let dir = root.join("skills").join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), text).unwrap();
}

fn md(name: &str, description: &str, extra: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n{extra}---\n# {name}\n\nStep one.\n")
}

fn names(list: &Value) -> Vec<(String, String)> {
    list["structuredContent"]["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["origin"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn skills_added_changed_and_removed_while_mcp_runs_are_seen_without_a_restart() {
    let home = tempfile::tempdir().unwrap();
    let (data, ws) = dirs(home.path());
    write_skill(&data, "pdf", &md("pdf", "system pdf", ""));
    let mut mcp = Mcp::start(engine_in(home.path(), &["mcp"]));
    let list = mcp.call("skill_list", json!({}));
    assert_eq!(names(&list), [("pdf".into(), "system".into())], "{list}");

    // Added: a workspace skill shadowing the system one, and a new one.
    write_skill(&ws, "pdf", &md("pdf", "workspace pdf", ""));
    write_skill(&ws, "notes", &md("notes", "takes notes", ""));
    let list = mcp.call("skill_list", json!({}));
    assert_eq!(
        names(&list),
        [
            ("notes".into(), "workspace".into()),
            ("pdf".into(), "workspace".into())
        ],
        "{list}"
    );
    let pdf = &list["structuredContent"]["skills"][1];
    assert!(
        pdf["shadows"].as_str().unwrap().contains("system skill at"),
        "{pdf}"
    );

    // Each skill is also an MCP prompt: its SKILL.md as a user message.
    let prompts = mcp.request("prompts/list", json!({}));
    // (A build with the fixtures lists the conformance suite's test_* prompts after.)
    let listed: Vec<&str> = prompts["result"]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .filter(|n| !n.starts_with("test_"))
        .collect();
    assert_eq!(listed, ["notes", "pdf"], "{prompts}");
    assert_eq!(
        prompts["result"]["prompts"][1]["description"],
        "workspace pdf"
    );
    let prompt = mcp.request("prompts/get", json!({"name": "pdf"}));
    assert_eq!(prompt["result"]["messages"][0]["role"], "user", "{prompt}");
    assert_eq!(
        prompt["result"]["messages"][0]["content"]["text"],
        md("pdf", "workspace pdf", ""),
        "{prompt}"
    );
    let unknown = mcp.request("prompts/get", json!({"name": "pfd"}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the closest: `pdf`"),
        "{unknown}"
    );

    // Changed: the body and the description, at once.
    write_skill(
        &ws,
        "notes",
        "---\nname: notes\ndescription: takes better notes\n---\nNew steps.\n",
    );
    let loaded = mcp.call("skill_load", json!({"name": "notes"}));
    assert_eq!(
        loaded["structuredContent"]["content"],
        "---\nname: notes\ndescription: takes better notes\n---\nNew steps.\n",
        "{loaded}"
    );
    // Broken: skipped with its problem, the others still there.
    write_skill(&ws, "notes", "no frontmatter here\n");
    let list = mcp.call("skill_list", json!({}));
    assert_eq!(names(&list), [("pdf".into(), "workspace".into())], "{list}");
    let skipped = &list["structuredContent"]["skipped"][0];
    assert!(
        skipped["path"]
            .as_str()
            .unwrap()
            .ends_with("skills/notes/SKILL.md"),
        "{skipped}"
    );
    assert!(
        skipped["problem"]
            .as_str()
            .unwrap()
            .starts_with("no frontmatter"),
        "{skipped}"
    );

    // Removed: the system skill is back in effect.
    std::fs::remove_dir_all(ws.join("skills")).unwrap();
    let list = mcp.call("skill_list", json!({}));
    assert_eq!(names(&list), [("pdf".into(), "system".into())], "{list}");
    let e = mcp.call("skill_load", json!({"name": "notes"}));
    assert_eq!(e["isError"], true, "{e}");
    assert!(
        e["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("no skill `notes`; the closest: `pdf`"),
        "{e}"
    );
}

/// A stateless (2026-07-28) MCP `tools/call` of `skill_list` over HTTP at `addr`; the body.
fn skill_list_over_http(addr: &str) -> String {
    use std::io::Read;
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"skills-test","version":"1"}}"#;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"skill_list","arguments":{{}},{meta}}}}}"#
    );
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: skill_list\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    out
}

#[test]
fn a_skill_added_while_run_runs_is_seen_without_a_restart() {
    let home = tempfile::tempdir().unwrap();
    let (_, ws) = dirs(home.path());
    write_skill(&ws, "first", &md("first", "There from the start.", ""));
    let mut child = Running(
        engine_in(home.path(), &["run"])
            .env("KLAW_MCP_ENABLED", "true")
            .env("KLAW_MCP_BIND", "127.0.0.1:0")
            .env("KLAW_LOG_LEVEL", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(child.0.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("run exited before listening").unwrap();
        if let Some(url) = line.strip_prefix("klaw-engine: MCP over HTTP at http://") {
            break url.trim_end_matches("/mcp").to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});

    let before = skill_list_over_http(&addr);
    assert!(before.contains("There from the start."), "{before}");
    assert!(!before.contains("second"), "{before}");
    write_skill(&ws, "second", &md("second", "Added while running.", ""));
    let after = skill_list_over_http(&addr);
    assert!(after.contains("Added while running."), "{after}");
}

/// A child process killed when the test ends, however it ends.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `klaw-engine chat` with `lines` on stdin, talking to the scripted server.
fn chat(home: &Path, server: &ScriptedServer, env: &[(&str, &str)], lines: &str) -> Output {
    let mut cmd = engine_in(home, &["chat"]);
    cmd.env("KLAW_LLM_BASE_URL", format!("{}/v1", server.url))
        .env("KLAW_LLM_MODEL", "test-model")
        .env("KLAW_LLM_API_KEY", "sk-skills-test");
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_with_stdin(cmd, lines)
}

/// The system prompt of a request.
fn system(r: &Recorded) -> String {
    r.body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The content of the tool message answering call `id`.
fn result_of(r: &Recorded, id: &str) -> String {
    r.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no result for {id}: {}", r.body))
        .to_owned()
}

#[test]
fn the_system_prompt_lists_skills_within_the_budget_and_sees_new_ones() {
    let home = tempfile::tempdir().unwrap();
    let (data, ws) = dirs(home.path());
    write_skill(&ws, "alpha", &md("alpha", "First skill.", ""));
    write_skill(&ws, "beta", &md("beta", "Second\n  skill.", ""));
    write_skill(&data, "gamma", &md("gamma", "Third skill.", ""));
    write_skill(&ws, "broken", "---\nname: [\n---\n");

    // Every skill fits the default budget; the broken one is not offered.
    let server = ScriptedServer::script(vec![Reply::openai_answer("ok")]);
    let o = chat(home.path(), &server, &[], "hello\n");
    assert!(o.status.success(), "{}", stderr(&o));
    let prompt = system(&server.requests()[0]);
    for line in [
        "- alpha: First skill.\n",
        "- beta: Second skill.\n",
        "- gamma: Third skill.\n",
    ] {
        assert!(prompt.contains(line), "{line:?} not in:\n{prompt}");
    }
    assert!(prompt.contains("call skill_load"), "{prompt}");
    assert!(!prompt.contains("broken"), "{prompt}");
    assert!(!prompt.contains("not listed"), "{prompt}");

    // A budget for every name but not every whole line: the descriptions shortened,
    // no name dropped (issue 46).
    let server = ScriptedServer::script(vec![Reply::openai_answer("ok")]);
    let o = chat(
        home.path(),
        &server,
        &[("KLAW_SKILLS_PROMPT_BUDGET_CHARS", "45")],
        "hello\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let prompt = system(&server.requests()[0]);
    for name in ["- alpha", "- beta", "- gamma"] {
        assert!(prompt.contains(name), "{name} not in:\n{prompt}");
    }
    assert!(prompt.contains("…\n"), "{prompt}");
    assert!(
        prompt.contains("Descriptions shortened to fit skills.promptBudgetChars, 45"),
        "{prompt}"
    );
    assert!(!prompt.contains("not listed"), "{prompt}");

    // A budget for one name: the one the message is about; the rest counted, never
    // cut silently.
    let server = ScriptedServer::script(vec![Reply::openai_answer("ok")]);
    let o = chat(
        home.path(),
        &server,
        &[("KLAW_SKILLS_PROMPT_BUDGET_CHARS", "8")],
        "use the gamma skill\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let prompt = system(&server.requests()[0]);
    assert!(prompt.contains("- gamma\n"), "{prompt}");
    assert!(!prompt.contains("- alpha"), "{prompt}");
    assert!(
        prompt.contains(
            "2 more skill(s) are not listed here (skills.promptBudgetChars is 8); call skill_list to see every skill."
        ),
        "{prompt}"
    );

    // A skill added while chat runs is in the next turn's prompt.
    let added = ws.clone();
    let server = ScriptedServer::respond(move |_| {
        write_skill(&added, "delta", &md("delta", "Added mid-chat.", ""));
        Reply::openai_answer("ok")
    });
    let o = chat(home.path(), &server, &[], "one\ntwo\n");
    assert!(o.status.success(), "{}", stderr(&o));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(!system(&requests[0]).contains("- delta:"));
    assert!(
        system(&requests[1]).contains("- delta: Added mid-chat.\n"),
        "{}",
        system(&requests[1])
    );
}

/// The model loads the skill `reader` (allowed-tools: file_read), then calls file_list
/// and file_read; returns the second request's results of both.
fn load_then_call_others(home: &Path, env: &[(&str, &str)]) -> (String, String, String) {
    let server = ScriptedServer::script(vec![
        Reply::openai_calls(&[("l", "skill_load", json!({"name": "reader"}))]),
        Reply::openai_calls(&[
            ("a", "file_list", json!({"path": "."})),
            ("b", "file_read", json!({"path": "skills/reader/SKILL.md"})),
        ]),
        Reply::openai_answer("done"),
    ]);
    let o = chat(home, &server, env, "read it\n");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "done\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    (
        result_of(&requests[1], "l"),
        result_of(&requests[2], "a"),
        result_of(&requests[2], "b"),
    )
}

/// A home whose workspace has the skill `reader`, which allows `file_read` only.
fn reader_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    write_skill(
        &dirs(home.path()).1,
        "reader",
        &md("reader", "Reads files.", "allowed-tools: file_read\n"),
    );
    home
}

#[test]
fn allowed_tools_of_a_loaded_skill_are_enforced_when_asked() {
    let home = reader_home();

    let (loaded, list, read) = load_then_call_others(
        home.path(),
        &[("KLAW_SKILLS_ENFORCE_ALLOWED_TOOLS", "true")],
    );
    assert!(loaded.contains("Reads files."), "{loaded}");
    assert!(
        list.contains("`file_list` is not in the allowed-tools of the skill(s) loaded in this conversation (reader); use only: file_read"),
        "{list}"
    );
    assert!(read.contains("Step one."), "{read}");

    // Off (the default): the skill's list limits nothing.
    let home = reader_home();
    let (_, list, _) = load_then_call_others(home.path(), &[]);
    assert!(!list.contains("allowed-tools"), "{list}");
    assert!(list.contains("skills"), "{list}");
}

#[test]
fn doctor_lists_the_malformed_skills() {
    let home = tempfile::tempdir().unwrap();
    let (data, ws) = dirs(home.path());
    write_skill(&ws, "good", &md("good", "Fine.", ""));
    write_skill(&ws, "Bad", &md("Bad", "Bad name.", ""));
    write_skill(&ws, "no-description", "---\nname: no-description\n---\n");
    write_skill(&data, "other", &md("not-other", "Wrong folder.", ""));
    write_skill(
        &data,
        "broken",
        "---\nname: broken\n  description: d\n---\n",
    );
    write_skill(
        &data,
        "extra",
        &md("extra", "Has an extra key.", "version: 2\n"),
    );
    let o = engine_in(home.path(), &["doctor"]).output().unwrap();
    let out = stdout(&o);
    let line = out
        .lines()
        .find(|l| l.contains("skills"))
        .unwrap_or_else(|| panic!("no skills check:\n{out}"));
    assert!(line.starts_with("warn"), "{out}");
    assert!(line.contains("4 skills in use; 2 skills skipped"), "{out}");
    assert!(
        out.contains("skills/extra/SKILL.md: unknown frontmatter key `version` (kept;"),
        "{out}"
    );
    // Lenient: loaded, with their warnings, after the skipped ones.
    let warned = out.find("loaded, with warnings:").unwrap();
    assert!(
        out[warned..].contains("skills/Bad/SKILL.md: name `Bad` has `B`"),
        "{out}"
    );
    assert!(
        out[warned..].contains(
            "skills/other/SKILL.md: name `not-other` differs from its folder's name `other`; the skill is called `other`"
        ),
        "{out}"
    );
    assert!(
        out[..warned].contains("skills/no-description/SKILL.md: `description` is missing"),
        "{out}"
    );
    // The line is the file's (the opening --- is line 1).
    assert!(
        out[..warned].contains("skills/broken/SKILL.md: the frontmatter is not valid YAML")
            && out[..warned].contains("line 3"),
        "{out}"
    );
    assert!(out.contains("fix each skipped SKILL.md"), "{out}");

    // Only warnings: nothing is "skipped until then".
    std::fs::remove_dir_all(ws.join("skills/no-description")).unwrap();
    std::fs::remove_dir_all(data.join("skills/broken")).unwrap();
    let out = stdout(&engine_in(home.path(), &["doctor"]).output().unwrap());
    assert!(out.contains("4 skills in use\n"), "{out}");
    assert!(!out.contains("skipped"), "{out}");
    assert!(out.contains("the skills above load"), "{out}");
}

/// Skills whose folders hold links (issue 42, hole 10): a system skill in the data dir
/// with `db -> ../../memory.sqlite` and `passwd -> /etc/passwd`, a workspace skill with
/// a link to a workspace file outside it and another to `/etc/passwd`, and in each a
/// link that stays in the folder (`guide -> refs/guide.md`); a system skill whose
/// `SKILL.md` is a link to a file of the data dir. Returns the home.
fn linked_skills() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let (data, ws) = dirs(home.path());
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("memory.sqlite"), "SECRET of the data dir").unwrap();
    std::fs::write(
        data.join("notes.md"),
        md("stolen", "SECRET frontmatter", ""),
    )
    .unwrap();
    std::fs::write(ws.join("private.md"), "SECRET of the workspace").unwrap();
    for (root, name, out) in [
        (&data, "sys", "../../memory.sqlite"),
        (&ws, "wsk", "../../private.md"),
    ] {
        write_skill(root, name, &md(name, "has links", ""));
        let dir = root.join("skills").join(name);
        std::fs::create_dir_all(dir.join("refs")).unwrap();
        std::fs::write(dir.join("refs/guide.md"), "the guide").unwrap();
        std::os::unix::fs::symlink("refs/guide.md", dir.join("guide")).unwrap();
        std::os::unix::fs::symlink(out, dir.join("db")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("passwd")).unwrap();
    }
    let stolen = data.join("skills/stolen");
    std::fs::create_dir_all(&stolen).unwrap();
    std::os::unix::fs::symlink("../../notes.md", stolen.join("SKILL.md")).unwrap();
    home
}

/// Hole 10 through `skill_load`: `file` that is a link out of the skill's folder is
/// refused (`access_denied`), even to a file of the skill's own root (the data dir's
/// `memory.sqlite`, a workspace file); a link inside the folder is read; a `SKILL.md`
/// that is a link out of its folder makes the skill malformed, not loadable.
#[test]
fn skill_load_reads_only_beneath_the_skills_folder() {
    let home = linked_skills();
    let mut mcp = Mcp::start(engine_in(home.path(), &["mcp"]));
    for skill in ["sys", "wsk"] {
        let r = mcp.call("skill_load", json!({"name": skill, "file": "guide"}));
        assert_eq!(
            r["structuredContent"]["content"], "the guide",
            "{skill}: {r}"
        );
        for file in ["db", "passwd", "../../memory.sqlite", "refs/../db"] {
            let r = mcp.call("skill_load", json!({"name": skill, "file": file}));
            assert_eq!(r["isError"], true, "{skill} {file}: {r}");
            let text = r["content"][0]["text"].as_str().unwrap();
            assert!(!text.contains("SECRET"), "{skill} {file}: {r}");
            assert!(
                text.contains("denied") || text.contains("not a path inside"),
                "{skill} {file}: {r}"
            );
        }
    }
    let r = mcp.call("skill_load", json!({"name": "stolen"}));
    assert_eq!(r["isError"], true, "{r}");
    assert!(!r.to_string().contains("SECRET"), "{r}");
    let list = mcp.call("skill_list", json!({}));
    assert!(
        list["structuredContent"]["skipped"]
            .to_string()
            .contains("refused: it leads out of"),
        "{list}"
    );
    assert!(mcp.finish().success());
}

/// Skills as published (issue 46), in the folders other clients read: a name that is
/// not its folder's, a description over 1,024 characters, mistyped optional keys, a
/// byte order mark, Claude Code's `allowed-tools`, a non-ASCII name, in the workspace's
/// `skills/` and `.claude/skills/`, the home's `.agents/skills/` and `.claude/skills/`
/// and a `skills.paths` folder; each loads with its warning, the unusable one is
/// skipped with its reason and loading it says so; `doctor` names the shadowed one.
#[test]
fn published_skills_load_from_every_client_s_folder() {
    let home = tempfile::tempdir().unwrap();
    let (_, ws) = dirs(home.path());
    let put = |dir: &Path, folder: &str, text: &str| {
        std::fs::create_dir_all(dir.join(folder)).unwrap();
        std::fs::write(dir.join(folder).join("SKILL.md"), text).unwrap();
    };
    let long = "Extracts text and tables from PDF files. ".repeat(30);
    put(
        &ws.join("skills"),
        "pdf-processing",
        &format!(
            "\u{feff}---\nname: pdf\ndescription: {long}\nlicense: 2.0\nmetadata:\n  version: 1.0\nallowed-tools: Bash(python3:*), Read, Grep, TodoWrite\n---\n# PDF\n"
        ),
    );
    put(
        &ws.join("skills"),
        "broken",
        "---\nname: broken\n---\n# no description\n",
    );
    put(
        &ws.join(".claude/skills"),
        "xlsx",
        &md("xlsx", "Spreadsheets (workspace).", ""),
    );
    put(
        &home.path().join(".claude/skills"),
        "xlsx",
        &md("xlsx", "Spreadsheets (user).", ""),
    );
    put(
        &home.path().join(".agents/skills"),
        "отчёты",
        &md("отчёты", "Пишет отчёты.", ""),
    );
    put(
        &home.path().join("team"),
        "docx",
        &md("docx", "Word documents.", ""),
    );
    let mut cmd = engine_in(home.path(), &["mcp"]);
    cmd.env("KLAW_SKILLS_PATHS", "~/team");
    let mut mcp = Mcp::start(cmd);
    let list = mcp.call("skill_list", json!({}));
    assert_eq!(
        names(&list),
        [
            ("docx".into(), "path".into()),
            ("pdf-processing".into(), "workspace".into()),
            ("xlsx".into(), "workspace".into()),
            ("отчёты".into(), "user".into()),
        ],
        "{list}"
    );
    let skills = &list["structuredContent"]["skills"];
    let pdf = &skills[1];
    let warnings = pdf["warnings"].to_string();
    for w in [
        "name `pdf` differs from its folder's name `pdf-processing`; the skill is called `pdf-processing`",
        "description is 1229 characters, more than the format's 1024",
        "`license` is a number",
        "`metadata.version` is a number",
        "is no Klaw tool: TodoWrite",
    ] {
        assert!(warnings.contains(w), "{w}: {warnings}");
    }
    assert_eq!(
        pdf["allowedTools"],
        json!([
            "exec(python3:*)",
            "process(python3:*)",
            "file_read",
            "file_list"
        ]),
        "{pdf}"
    );
    assert!(
        skills[2]["shadows"]
            .as_str()
            .unwrap()
            .starts_with("user skill at "),
        "{list}"
    );
    assert!(
        skills[3]["warnings"].to_string().contains("has `о`"),
        "{list}"
    );
    let skipped = &list["structuredContent"]["skipped"][0];
    assert_eq!(skipped["name"], "broken", "{list}");
    let e = mcp.call("skill_load", json!({"name": "broken"}));
    let text = e["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("the skill `broken` exists (")
            && text.contains("but was skipped, so it cannot be loaded: `description` is missing"),
        "{e}"
    );
    let loaded = mcp.call("skill_load", json!({"name": "отчёты"}));
    assert_eq!(loaded["structuredContent"]["origin"], "user", "{loaded}");
    assert!(mcp.finish().success());

    let mut doctor = engine_in(home.path(), &["doctor"]);
    doctor.env("KLAW_SKILLS_PATHS", "~/team");
    let out = stdout(&doctor.output().unwrap());
    assert!(
        out.contains("4 skills in use; shadowed: xlsx (workspace at "),
        "{out}"
    );
    assert!(out.contains(".claude/skills/xlsx over user at "), "{out}");
}

/// A skill's bundled script runs (issue 46), from the data dir and from the workspace,
/// under bubblewrap and under Landlock: `skill_load` gives a system skill's folder as
/// commands see it (`skillDir`, read-only at its own path) and `exec` runs
/// `python3 <skillDir>/scripts/hello.py` from the workspace; it gives the workspace
/// skill's folder as exec's working directory, and `exec` runs `python3
/// scripts/hello.py` from there, as its SKILL.md writes it. The home is outside `/tmp`
/// where the machine allows, so that the second command of a session goes through the
/// kept sandbox of the sandbox server (a skills folder under `/tmp` runs one-shot).
#[test]
fn a_skill_s_bundled_script_runs_in_both_sandboxes() {
    let home = tempfile::tempdir_in("/var/tmp")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let (data, ws) = dirs(home.path());
    for root in [&ws, &data] {
        write_skill(
            root,
            "hello",
            &md("hello", "Greets.", "")
                .replace("Step one.", "Run `python3 scripts/hello.py NAME`."),
        );
        let scripts = root.join("skills/hello/scripts");
        std::fs::create_dir_all(&scripts).unwrap();
        std::fs::write(
            scripts.join("hello.py"),
            "import sys, pathlib\nhere = pathlib.Path(__file__).resolve().parent.parent\nprint('hello', sys.argv[1], (here / 'SKILL.md').exists())\n",
        )
        .unwrap();
    }
    // The system skill alone first: its script runs by the path skill_load gives.
    std::fs::rename(ws.join("skills"), home.path().join("parked")).unwrap();
    let skill_dir = std::fs::canonicalize(data.join("skills/hello")).unwrap();
    for sandbox in ["bwrap", "landlock"] {
        let mut cmd = engine_in(home.path(), &["mcp"]);
        cmd.env("KLAW_SANDBOX", sandbox);
        let mut mcp = Mcp::start(cmd);
        let sys = mcp.call("skill_load", json!({"name": "hello"}));
        let out = &sys["structuredContent"];
        assert_eq!(out["origin"], "system", "{sys}");
        assert!(out.get("execDir").is_none(), "{sys}");
        assert_eq!(out["skillDir"], skill_dir.to_str().unwrap(), "{sys}");
        assert!(
            out["howToReadFiles"]
                .as_str()
                .unwrap()
                .contains("Commands (exec) see the skill's folder read-only at"),
            "{sys}"
        );
        // Twice: the first command one-shot, the second through the sandbox server.
        for _ in 0..2 {
            let ran = mcp.call(
                "exec",
                json!({"command": format!("python3 {}/scripts/hello.py world", skill_dir.display())}),
            );
            let out = &ran["structuredContent"];
            assert_eq!(out["sandbox"], sandbox, "{ran}");
            assert_eq!(out["exitCode"], 0, "{sandbox}: {ran}");
            assert_eq!(out["stdout"], "hello world True\n", "{sandbox}: {ran}");
        }
        assert!(mcp.finish().success());
    }
    std::fs::rename(home.path().join("parked"), ws.join("skills")).unwrap();

    for sandbox in ["bwrap", "landlock"] {
        let mut cmd = engine_in(home.path(), &["mcp"]);
        cmd.env("KLAW_SANDBOX", sandbox);
        let mut mcp = Mcp::start(cmd);
        let loaded = mcp.call("skill_load", json!({"name": "hello"}));
        let dir = loaded["structuredContent"]["execDir"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(dir, "skills/hello", "{loaded}");
        let ran = mcp.call(
            "exec",
            json!({"command": "python3 scripts/hello.py world", "workingDir": dir}),
        );
        let out = &ran["structuredContent"];
        assert_eq!(out["sandbox"], sandbox, "{ran}");
        assert_eq!(out["exitCode"], 0, "{sandbox}: {ran}");
        assert_eq!(out["stdout"], "hello world True\n", "{sandbox}: {ran}");
        assert!(mcp.finish().success());
    }
}
