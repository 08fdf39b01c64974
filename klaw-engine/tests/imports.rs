//! Imported MCP servers (`mcpServers`) through the real `klaw-engine` binary, with real
//! third-party servers: `@modelcontextprotocol/server-everything` and
//! `server-filesystem` (Node 22, installed by `scripts/setup-test-tools.sh` into
//! `<cache>/node22`) and a FastMCP server of ours (`tests/imports/server.py`, in
//! `<cache>/venv-test`), over stdio and over Streamable HTTP; a server that never
//! answers `initialize` (`tests/imports/silent.py`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};

use crate::common;
use common::mcp_client::Mcp;
use common::scripted::{Reply, ScriptedServer};
use common::{
    cache, engine, eventually, installed, processes_with, run_with_stdin, stderr, stdout,
    test_python as python,
};

/// Node 22's `bin` directory with the reference servers.
fn node_bin() -> Option<PathBuf> {
    let node = installed(cache().join("node22/node_modules/.bin/node"))?;
    installed(cache().join("node22/node_modules/.bin/mcp-server-everything"))?;
    Some(node.parent().unwrap().to_path_buf())
}

fn script(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/imports")
        .join(name)
        .display()
        .to_string()
}

/// A home whose `engine.json` is `config`; the workspace and data under it.
fn home_with(config: Value) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join(".config/klaw");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("engine.json"), config.to_string()).unwrap();
    home
}

/// A stdio server entry running `script` with the test venv's Python.
fn py_server(py: &Path, args: &[&str]) -> Value {
    let mut a = vec![script("server.py")];
    a.extend(args.iter().map(|s| s.to_string()));
    json!({"command": py, "args": a})
}

fn node_server(bin: &Path, server: &str, args: &[&str]) -> Value {
    let mut a = vec![bin.join(server).display().to_string()];
    a.extend(args.iter().map(|s| s.to_string()));
    json!({"command": bin.join("node"), "args": a})
}

/// `klaw-engine mcp` with the test tools' cache and `env`, as a client.
fn client(home: &Path, env: &[(&str, &str)]) -> Mcp {
    let mut cmd = engine(home, &["mcp"]);
    cmd.env("KLAW_CACHE", cache());
    for (k, v) in env {
        cmd.env(k, v);
    }
    Mcp::start(cmd)
}

fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// server-everything through Klaw's MCP server: its tools listed beside Klaw's, a call,
/// a call's progress reports forwarded to Klaw's client; server-filesystem reads a file.
#[test]
fn the_reference_servers_are_listed_called_and_report_progress() {
    let Some(bin) = node_bin() else { return };
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("note.txt"), "from server-filesystem").unwrap();
    let dir = files.path().canonicalize().unwrap().display().to_string();
    let mut everything = node_server(&bin, "mcp-server-everything", &[]);
    everything["env"] = json!({"GIVEN": "${KLAW_TEST_GIVEN}"});
    let home = home_with(json!({"mcpServers": {
        "everything": everything,
        "fs": node_server(&bin, "mcp-server-filesystem", &[&dir]),
    }}));
    let mut c = client(
        home.path(),
        &[
            ("KLAW_TEST_GIVEN", "given-on-purpose"),
            ("SOME_SECRET", "sk-kept-from-servers"),
        ],
    );
    let names = c.tool_names();
    for expected in [
        "everything__echo",
        "everything__trigger-long-running-operation",
        "fs__read_text_file",
        "file_read",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected}: {names:?}");
    }
    // The server's definition carried over: output schema, annotations, description.
    let list = c.request("tools/list", json!({}));
    let def = |name: &str| {
        list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap()
    };
    let structured = def("everything__get-structured-content");
    assert_eq!(structured["outputSchema"]["type"], "object", "{structured}");
    assert_eq!(
        structured["annotations"]["readOnlyHint"], true,
        "{structured}"
    );
    assert!(!structured["description"].as_str().unwrap().is_empty());
    let r = c.call(
        "everything__get-structured-content",
        json!({"location": "New York"}),
    );
    assert!(r["structuredContent"].is_object(), "{r}");

    let r = c.call("everything__echo", json!({"message": "привет"}));
    assert_eq!(r["isError"], false, "{r}");
    assert!(text_of(&r).contains("привет"), "{r}");

    // Progress: Klaw's client gives a token; the server's reports reach it.
    c.send(
        json!({"jsonrpc": "2.0", "id": "long", "method": "tools/call", "params": {
            "name": "everything__trigger-long-running-operation",
            "arguments": {"duration": 1, "steps": 2},
            "_meta": {"progressToken": "p-3"},
        }}),
    );
    let p = c.wait_for(|m| m["method"] == "notifications/progress");
    assert_eq!(p["params"]["progressToken"], "p-3", "{p}");
    let r = c.wait_for(|m| m["id"] == "long");
    assert_eq!(r["result"]["isError"], false, "{r}");

    // A server gets HOME, PATH and the like, and its own `env`; not the engine's secrets.
    let r = c.call("everything__get-env", json!({}));
    let env = text_of(&r);
    assert!(
        env.contains("given-on-purpose") && env.contains("PATH"),
        "{env}"
    );
    assert!(!env.contains("sk-kept-from-servers"), "{env}");

    let path = format!("{dir}/note.txt");
    let r = c.call("fs__read_text_file", json!({"path": path}));
    assert!(text_of(&r).contains("from server-filesystem"), "{r}");
    // Outside its allowed directory: the server's own refusal, an error result.
    let r = c.call("fs__read_text_file", json!({"path": "/etc/hostname"}));
    assert_eq!(r["isError"], true, "{r}");
    assert!(c.finish().success());
}

/// `klaw-engine call` of an imported tool, and the graceful stop: no server process is
/// left once the engine has exited.
#[test]
fn call_runs_an_imported_tool_and_leaves_no_process_behind() {
    let Some(py) = python() else { return };
    let mark = format!("--mark=call-{}", std::process::id());
    let home = home_with(json!({"mcpServers": {"py": py_server(&py, &[&mark])}}));
    let o = engine(home.path(), &["call", "py__add", r#"{"a": 2, "b": 40}"#])
        .env("KLAW_CACHE", cache())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("42"), "{}", stdout(&o));
    assert!(
        eventually(10, || processes_with(&mark).is_empty()),
        "left behind: {:?}",
        processes_with(&mark)
    );
}

/// A FastMCP server over stdio and another over Streamable HTTP; a tool whose schema
/// Klaw refuses is reported failed and the others load; a server that never answers
/// `initialize` does not hold up the start and is reported.
#[test]
fn fastmcp_over_stdio_and_http_with_failures_reported() {
    let Some(py) = python() else { return };
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut http = std::process::Command::new(&py)
        .args([script("server.py"), "--http".into(), port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let up = eventually(60, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert!(up, "the FastMCP HTTP server did not listen");
    let home = home_with(json!({"mcpServers": {
        "py": py_server(&py, &[]),
        "web": {"type": "http", "url": format!("http://127.0.0.1:${{KLAW_TEST_PORT}}/mcp")},
        "silent": {"command": py, "args": [script("silent.py")], "startupTimeoutSeconds": 2},
        "off": {"command": "/nonexistent", "enabled": false},
    }}));
    let env = [("KLAW_TEST_PORT", port.to_string())];
    let run = |args: &[&str]| {
        let mut cmd = engine(home.path(), args);
        cmd.env("KLAW_CACHE", cache());
        for (k, v) in &env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    let o = run(&["call", "py__add", r#"{"a": 1, "b": 2}"#]);
    assert!(stdout(&o).contains('3'), "{}\n{}", stdout(&o), stderr(&o));
    let o = run(&["call", "web__add", r#"{"a": 20, "b": 22}"#]);
    assert!(stdout(&o).contains("42"), "{}\n{}", stdout(&o), stderr(&o));
    let o = run(&["call", "py__fail", "{}"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("this tool always fails"),
        "{}",
        stderr(&o)
    );

    let o = run(&["tools", "--format", "json"]);
    let listed: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"py__add") && names.contains(&"web__slow"),
        "{names:?}"
    );
    assert!(!names.contains(&"py__bad_schema"), "{names:?}");
    let add = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "py__add")
        .unwrap();
    assert_eq!(add["origin"], "mcp:py", "{add}");

    let o = run(&["tools", "--failed"]);
    let failed = stdout(&o);
    assert!(
        failed.contains("py__bad_schema"),
        "{failed}\n{}",
        stderr(&o)
    );
    assert!(
        failed.contains("город"),
        "the reason names the property: {failed}"
    );
    assert!(failed.contains("silent"), "{failed}");
    assert!(failed.contains("initialize"), "{failed}");
    assert!(
        !failed.contains("off"),
        "a disabled server is not started: {failed}"
    );

    let o = run(&["doctor"]);
    assert!(stdout(&o).contains("silent"), "{}", stdout(&o));
    let _ = http.kill();
    let _ = http.wait();
}

/// A server that crashes mid-call: the call gets an error, the server is restarted,
/// and its tools work again; a cancelled call reaches the server as
/// `notifications/cancelled`; a server's `tools/list_changed` reaches Klaw's client.
#[test]
fn crash_restart_cancel_and_list_changed() {
    let Some(py) = python() else { return };
    let marks = tempfile::tempdir().unwrap();
    let cancelled = marks.path().join("cancelled");
    let mark = format!("--mark=crash-{}", std::process::id());
    let mut server = py_server(&py, &[&mark]);
    server["env"] = json!({"KLAW_TEST_CANCELLED": cancelled});
    let home = home_with(json!({"mcpServers": {"py": server}}));
    let mut c = client(home.path(), &[]);

    let r = c.call("py__crash", json!({}));
    assert_eq!(r["isError"], true, "{r}");
    assert!(text_of(&r).contains("py"), "{r}");
    let back = eventually(60, || {
        let r = c.call("py__add", json!({"a": 1, "b": 1}));
        r["isError"] == false && text_of(&r).contains('2')
    });
    assert!(back, "the server was not restarted");

    // Cancel: Klaw's client cancels, Klaw cancels at the server.
    c.send(
        json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": {
            "name": "py__slow", "arguments": {}, "_meta": {"progressToken": 7},
        }}),
    );
    let p = c.wait_for(|m| m["method"] == "notifications/progress");
    assert_eq!(p["params"]["progressToken"], 7, "{p}");
    c.notify(
        "notifications/cancelled",
        json!({"requestId": "slow", "reason": "test"}),
    );
    assert!(
        eventually(60, || cancelled.exists()),
        "the server never saw the cancellation"
    );

    // list_changed: the server adds a tool; Klaw re-lists and tells its client.
    let r = c.call("py__grow", json!({}));
    assert_eq!(text_of(&r), "grew", "{r}");
    c.wait_for(|m| m["method"] == "notifications/tools/list_changed");
    let found = eventually(60, || c.tool_names().iter().any(|n| n == "py__grown"));
    assert!(found, "py__grown never listed");
    let r = c.call("py__grown", json!({}));
    assert_eq!(text_of(&r), "grown", "{r}");
    assert!(c.finish().success());
    // The restarted server is stopped with the engine too.
    assert!(
        eventually(10, || processes_with(&mark).is_empty()),
        "left behind: {:?}",
        processes_with(&mark)
    );
}

/// `GET /api/v1/tools` of `klaw-engine mcp --http` lists the imported tools with their
/// origin, and the failed ones under `failed`.
#[test]
fn the_http_tool_list_has_failed_entries() {
    let Some(py) = python() else { return };
    let home = home_with(json!({"mcpServers": {"py": py_server(&py, &[])}}));
    let mut child = engine(home.path(), &["mcp", "--http", "127.0.0.1:0"])
        .env("KLAW_CACHE", cache())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("exited before listening").unwrap();
        if let Some(url) = line.strip_prefix("klaw-engine: MCP over HTTP at http://") {
            break url.trim_end_matches("/mcp").to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        s,
        "GET /api/v1/tools HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    std::io::Read::read_to_string(&mut s, &mut response).unwrap();
    let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
    let list: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {response}"));
    let tools = list["tools"].as_array().unwrap();
    assert!(
        tools
            .iter()
            .any(|t| t["name"] == "py__add" && t["origin"] == "mcp:py"),
        "{list}"
    );
    let failed = list["failed"].as_array().unwrap();
    assert!(
        failed.iter().any(|f| f["name"] == "py__bad_schema"),
        "{list}"
    );
    common::terminate(&mut child);
}

/// A hostile server (a line that is not UTF-8, 1,505 tools, a 300 KiB schema, a
/// 200-character name, a recursive `$ref`, a schema nested 50,000 levels deep, an
/// image that is not base64): the engine stays up, imports the first 1,000 tools it
/// can, and says why not the rest. The deep schema (issue 42) costs its own tool only:
/// it used to make the whole `tools/list` unreadable, and every tool of the server hid
/// behind "did not answer within 10 s".
#[test]
fn a_hostile_server_is_bounded_and_refused_clearly() {
    let home = home_with(json!({"mcpServers": {
        "bad": {"command": "python3", "args": [script("hostile.py")]},
    }}));
    let run = |args: &[&str]| {
        engine(home.path(), args)
            .env("KLAW_CACHE", cache())
            .output()
            .unwrap()
    };
    let o = run(&["tools", "--failed", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let failed: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let problem = |name: &str| {
        failed
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .map(|f| f["problem"].as_str().unwrap().to_owned())
            .unwrap_or_else(|| panic!("{name} not failed: {failed:#}"))
    };
    assert!(problem("bad").contains("only the first 1000"));
    assert!(problem("bad__huge").contains("bytes of JSON"));
    assert!(problem("bad__loop").contains("recursive"));
    assert!(
        problem("bad__deep").contains("nests deeper than"),
        "{failed:#}"
    );
    let o = run(&["tools", "--format", "json"]);
    let listed: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let imported: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["origin"] == "mcp:bad")
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        imported.len(),
        1000 - 3,
        "the first 1000 less the 3 refused"
    );
    let long = imported.iter().find(|n| n.starts_with("bad__nnn")).unwrap();
    assert_eq!(long.len(), 64, "{long}");
    let o = run(&["call", "bad__image", "{}"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("not valid base64"), "{}", stdout(&o));
    assert!(stdout(&o).contains("still here"), "{}", stdout(&o));
}

/// An HTTP server that goes away and comes back: calls fail meanwhile, then work again.
#[test]
fn an_http_server_that_restarts_is_used_again() {
    let Some(py) = python() else { return };
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let serve = || {
        let child = std::process::Command::new(&py)
            .args([script("server.py"), "--http".into(), port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let up = eventually(60, || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(up, "the FastMCP HTTP server did not listen");
        child
    };
    let mut http = serve();
    let home = home_with(json!({"mcpServers": {
        "web": {"type": "http", "url": format!("http://127.0.0.1:{port}/mcp")},
    }}));
    let mut c = client(home.path(), &[]);
    let r = c.call("web__add", json!({"a": 1, "b": 2}));
    assert_eq!(text_of(&r), "3", "{r}");
    http.kill().unwrap();
    http.wait().unwrap();
    let r = c.call("web__add", json!({"a": 1, "b": 2}));
    assert_eq!(r["isError"], true, "{r}");
    let mut http = serve();
    let back = eventually(90, || {
        let r = c.call("web__add", json!({"a": 2, "b": 2}));
        text_of(&r) == "4"
    });
    assert!(back, "the HTTP server was not used again");
    assert!(c.finish().success());
    let _ = http.kill();
    let _ = http.wait();
}

/// A server that ignores the end of its stdin and SIGTERM, with a child that does too:
/// the engine's stop kills its process group, and neither is left behind.
#[test]
fn a_server_that_will_not_stop_is_killed_with_its_children() {
    let mark = format!("--mark=stubborn-{}", std::process::id());
    let home = home_with(json!({"mcpServers": {
        "s": {"command": "python3", "args": [script("stubborn.py"), mark]},
    }}));
    let o = engine(home.path(), &["call", "s__ping", "{}"])
        .env("KLAW_CACHE", cache())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "pong");
    assert!(
        eventually(10, || processes_with(&mark).is_empty()),
        "left behind: {:?}",
        processes_with(&mark)
    );
}

/// Issue 42, hole 8: a server's tool without an `annotations` object (`touch`, as most
/// servers list theirs) or with one that leaves `destructiveHint` out (`touch_tagged`)
/// is destructive, as MCP's defaults say. The default approval policy asks before it
/// runs: in `chat` with nobody at the console (stdin not a terminal; a scheduled run or
/// a subagent refuses the same way) the call is refused, the model reads why and the
/// server never sees it. A tool the server calls not destructive (`touch_safe`) runs,
/// and with `agent.approval` `never` all three run. What Klaw's MCP clients are told
/// says the same.
#[test]
fn a_tool_without_annotations_is_destructive_and_needs_approval() {
    let Some(py) = python() else { return };
    let home = home_with(json!({"mcpServers": {"py": py_server(&py, &[])}}));
    let mut c = client(home.path(), &[]);
    let list = c.request("tools/list", json!({}));
    let hints = |name: &str| {
        list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["annotations"].clone())
            .unwrap_or_else(|| panic!("{name} not listed: {list}"))
    };
    for (name, destructive, open_world) in [
        ("py__touch", true, true),
        ("py__touch_tagged", true, false),
        ("py__touch_safe", false, true),
    ] {
        let a = hints(name);
        assert_eq!(a["destructiveHint"], destructive, "{name}: {a}");
        assert_eq!(a["openWorldHint"], open_world, "{name}: {a}");
        assert_eq!(a["readOnlyHint"], false, "{name}: {a}");
    }
    assert!(c.finish().success());

    for approval in ["destructive", "never"] {
        let marks = tempfile::tempdir().unwrap();
        let mark = |n: &str| marks.path().join(n).display().to_string();
        let server = ScriptedServer::script(vec![
            Reply::openai_calls(&[
                ("a", "py__touch", json!({"path": mark("touch")})),
                ("b", "py__touch_tagged", json!({"path": mark("tagged")})),
                ("c", "py__touch_safe", json!({"path": mark("safe")})),
            ]),
            Reply::openai_answer("Done."),
        ]);
        let mut cmd = engine(home.path(), &["chat"]);
        cmd.env("KLAW_CACHE", cache())
            .env("KLAW_LLM_BASE_URL", format!("{}/v1", server.url))
            .env("KLAW_LLM_MODEL", "test-model")
            .env("KLAW_LLM_API_KEY", "sk-test")
            .env("KLAW_LOG_LEVEL", "error")
            .env("KLAW_APPROVAL", approval);
        let o = run_with_stdin(cmd, "Touch the files\n");
        assert!(o.status.success(), "{}", stderr(&o));
        // The results of the round, in the request that followed it.
        let results: Vec<(String, String)> = server
            .requests()
            .iter()
            .map(|r| {
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
                    .collect::<Vec<_>>()
            })
            .find(|results| !results.is_empty())
            .unwrap_or_else(|| panic!("no tool results: {}", stderr(&o)));
        let result = |id: &str| {
            results
                .iter()
                .find(|(i, _)| i == id)
                .map(|(_, r)| r.clone())
                .unwrap_or_else(|| panic!("no result for {id}: {results:?}"))
        };
        let asked = approval == "destructive";
        for (id, file) in [("a", "touch"), ("b", "tagged")] {
            assert_eq!(
                marks.path().join(file).exists(),
                !asked,
                "{approval}: {id} {results:?}"
            );
            if asked {
                let r = result(id);
                assert!(
                    r.starts_with("Error [refused]") && r.contains("approval"),
                    "{id}: {r}"
                );
            }
        }
        assert!(
            marks.path().join("safe").exists(),
            "{approval}: {results:?}"
        );
    }
}
