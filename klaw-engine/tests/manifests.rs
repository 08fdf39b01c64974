//! Manifest tools through the real binary (issue 28): `<workspace>/tools/<name>/tool.yaml`
//! loaded at start-up, each broken one (YAML, schema, a name taken, a missing
//! interpreter) skipped and listed by `tools --failed`, `tools --format json`, `doctor`
//! and `tools reload` while the others work; a hanging script killed at its time limit
//! with everything it started; a script that writes outside the workspace stopped by
//! the sandbox (bubblewrap and Landlock); a manifest added and removed while `mcp` runs
//! announced with `tools/list_changed`; `tool_create`, a call, `replace`, and
//! `tool_delete` through an MCP session.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

mod common;
use common::mcp_client::Mcp;
use common::{dirs, engine_in, processes_with, stderr, stdout};

fn run(home: &Path, args: &[&str]) -> Output {
    engine_in(home, args).output().unwrap()
}

/// Writes `<root>/tools/<folder>/tool.yaml` and, when given, the folder's `run.sh`.
fn write_tool(root: &Path, folder: &str, yaml: &str, script: Option<&str>) {
    let dir = root.join("tools").join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    if let Some(script) = script {
        std::fs::write(dir.join("run.sh"), script).unwrap();
    }
    std::fs::write(dir.join("tool.yaml"), yaml).unwrap();
}

const WC: &str = "name: wc\ndescription_ru: Считает слова\n\
    parameters:\n  type: object\n  properties:\n    text: {type: string}\n  required: [text]\n\
    command: [python3, run.py]\ntimeout: 30\n";

const WC_PY: &str = "import json, sys\nargs = json.load(sys.stdin)\n\
    print(json.dumps({\"words\": len(args[\"text\"].split())}))\n";

#[test]
fn broken_manifests_are_listed_with_why_and_the_others_work() {
    let home = tempfile::tempdir().unwrap();
    let (data, ws) = dirs(home.path());
    write_tool(&ws, "wc", WC, None);
    std::fs::write(ws.join("tools/wc/run.py"), WC_PY).unwrap();
    // The system folder's tool of the same name is hidden by the workspace's.
    write_tool(
        &data,
        "wc",
        "name: wc\ndescription_ru: Системный\ncommand: [sh]\n",
        None,
    );
    write_tool(&ws, "yaml", "name: yaml\ndescription_ru: [unclosed\n", None);
    write_tool(
        &ws,
        "schema",
        "name: schema\ndescription_ru: x\ncommand: [sh]\n\
         parameters: {type: object, properties: {n: {type: nonsense}}}\n",
        None,
    );
    write_tool(
        &ws,
        "exec",
        "name: exec\ndescription_ru: x\ncommand: [sh]\n",
        None,
    );
    write_tool(
        &ws,
        "interp",
        "name: interp\ndescription_ru: x\ncommand: [no-such-interpreter-klaw, run.x]\n",
        None,
    );
    write_tool(
        &ws,
        "escape",
        "name: escape\ndescription_ru: x\ncommand: [/bin/sh]\n",
        None,
    );
    // A folder without a manifest is not a tool, and not a failure.
    std::fs::create_dir_all(ws.join("tools/notes")).unwrap();

    let o = run(home.path(), &["tools", "--failed", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let failed: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let why = |name: &str| -> String {
        failed
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {failed:#}"))["problem"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(failed.as_array().unwrap().len(), 5, "{failed:#}");
    assert!(why("yaml").contains("not a valid tool.yaml"), "{failed:#}");
    assert!(why("schema").contains("input schema"), "{failed:#}");
    assert!(why("exec").contains("already taken"), "{failed:#}");
    assert!(why("interp").contains("not installed"), "{failed:#}");
    assert!(
        why("escape").contains("outside the workspace"),
        "{failed:#}"
    );

    let o = run(home.path(), &["call", "wc", r#"{"text": "one two three"}"#]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(out["words"], 3);
    // Validated like every tool before the script runs.
    let o = run(home.path(), &["call", "wc", "{}"]);
    assert!(!o.status.success());
    assert!(stdout(&o).contains("text") || stderr(&o).contains("text"));

    let o = run(home.path(), &["tools", "--format", "json"]);
    let list: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(list["failed"].as_array().unwrap().len(), 5);
    let wc = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "wc")
        .unwrap();
    assert_eq!(
        wc["origin"],
        format!("manifest:{}", ws.join("tools/wc/tool.yaml").display())
    );
    // The agent can write this manifest: it cannot claim to be harmless.
    assert_eq!(wc["annotations"]["destructiveHint"], true, "{wc}");

    let o = run(home.path(), &["doctor"]);
    let line = stdout(&o)
        .lines()
        .find(|l| l.contains(" tools "))
        .unwrap()
        .to_owned();
    assert!(
        line.starts_with("warn") && line.contains("5 not loaded"),
        "{line}"
    );

    let o = run(home.path(), &["tools", "reload"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("loaded  wc"), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("1 manifest tool loaded, 5 failed"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn a_hanging_script_is_killed_at_its_time_limit_with_what_it_started() {
    let home = tempfile::tempdir().unwrap();
    let (_, ws) = dirs(home.path());
    let mark = format!("{}", 4000 + std::process::id() % 1000);
    write_tool(
        &ws,
        "hang",
        "name: hang\ndescription_ru: Висит\ncommand: [sh, run.sh]\ntimeout: 1\n",
        Some(&format!("sleep {mark} &\nsleep {mark}\n")),
    );
    let o = run(home.path(), &["call", "hang", "{}"]);
    assert!(!o.status.success());
    let said = format!("{}{}", stdout(&o), stderr(&o));
    assert!(said.contains("timeout"), "{said}");
    assert!(
        processes_with(&format!("sleep\0{mark}\0")).is_empty(),
        "a sleep {mark} outlived its tool"
    );
}

#[test]
fn a_script_cannot_write_outside_the_workspace() {
    for sandbox in ["bwrap", "landlock"] {
        let home = tempfile::tempdir().unwrap();
        let (data, ws) = dirs(home.path());
        let outside = home.path().join("outside.txt");
        let script = format!(
            "echo in > ../../inside.txt\necho out > {}\necho out > {}/stolen.txt\n",
            outside.display(),
            data.display()
        );
        write_tool(
            &ws,
            "escape",
            "name: escape\ndescription_ru: Пишет куда не надо\ncommand: [sh, run.sh]\n",
            Some(&script),
        );
        let o = engine_in(home.path(), &["call", "escape", "{}"])
            .env("KLAW_SANDBOX", sandbox)
            .output()
            .unwrap();
        // It ran (the write inside worked), and was stopped outside.
        assert!(
            ws.join("inside.txt").exists(),
            "{sandbox}: {}{}",
            stdout(&o),
            stderr(&o)
        );
        assert!(!outside.exists(), "{sandbox}: wrote outside the workspace");
        assert!(
            !data.join("stolen.txt").exists(),
            "{sandbox}: wrote into the data dir"
        );
        assert!(
            !o.status.success(),
            "{sandbox}: the failed writes are its exit code"
        );
    }
}

fn tool_names(mcp: &mut Mcp) -> Vec<String> {
    let list = mcp.request("tools/list", json!({}));
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_manifest_added_and_removed_while_mcp_runs_is_announced() {
    let home = tempfile::tempdir().unwrap();
    let (_, ws) = dirs(home.path());
    let mut mcp = Mcp::start(engine_in(home.path(), &["mcp"]));
    assert!(!tool_names(&mut mcp).contains(&"greet".to_owned()));
    write_tool(
        &ws,
        "greet",
        "name: greet\ndescription_ru: Здоровается\ncommand: [sh, run.sh]\n",
        Some("echo hello from a manifest\n"),
    );
    assert!(
        mcp.wait_for_notification("notifications/tools/list_changed", 60),
        "no list_changed after a manifest was added"
    );
    assert!(tool_names(&mut mcp).contains(&"greet".to_owned()));
    let out = mcp.call("greet", json!({}));
    assert_eq!(out["content"][0]["text"], "hello from a manifest", "{out}");
    std::fs::remove_dir_all(ws.join("tools/greet")).unwrap();
    assert!(
        mcp.wait_for_notification("notifications/tools/list_changed", 60),
        "no list_changed after a manifest was removed"
    );
    assert!(!tool_names(&mut mcp).contains(&"greet".to_owned()));
}

#[test]
fn tool_create_then_a_call_then_tool_delete() {
    let home = tempfile::tempdir().unwrap();
    let (_, ws) = dirs(home.path());
    let mut mcp = Mcp::start(engine_in(home.path(), &["mcp"]));
    let shout = |script: &str, replace: bool| {
        json!({
            "name": "shout",
            "description": "Повторяет текст заглавными буквами",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            "script": script,
            "interpreter": "python3",
            "replace": replace,
        })
    };
    let up = "import json, sys\nprint(json.load(sys.stdin)['text'].upper())\n";
    let made = mcp.call("tool_create", shout(up, false));
    assert_eq!(made["structuredContent"]["created"], true, "{made}");
    assert!(ws.join("tools/shout/tool.yaml").is_file());
    assert!(mcp.wait_for_notification("notifications/tools/list_changed", 60));
    let out = mcp.call("shout", json!({"text": "hi"}));
    assert_eq!(out["content"][0]["text"], "HI", "{out}");

    // A name in use needs replace; a built-in tool's name is never the agent's.
    let again = mcp.call("tool_create", shout(up, false));
    assert_eq!(again["isError"], true, "{again}");
    let down = "import json, sys\nprint(json.load(sys.stdin)['text'].lower())\n";
    let replaced = mcp.call("tool_create", shout(down, true));
    assert_eq!(
        replaced["structuredContent"]["replaced"], true,
        "{replaced}"
    );
    let out = mcp.call("shout", json!({"text": "HI"}));
    assert_eq!(out["content"][0]["text"], "hi", "{out}");
    let mut exec = shout(up, true);
    exec["name"] = json!("exec");
    let refused = mcp.call("tool_create", exec);
    assert_eq!(refused["isError"], true, "{refused}");

    // Checked before anything is saved.
    for (change, want) in [
        (
            json!({"interpreter": "no-such-interpreter-klaw"}),
            "not installed",
        ),
        (json!({"interpreter": "/bin/sh"}), "not a path"),
        (
            json!({"parameters": {"type": "object", "properties": {"n": {"type": "nonsense"}}}}),
            "schema",
        ),
        (json!({"name": "bad name!"}), "name"),
        (json!({"timeout": 0}), "time limit"),
    ] {
        let mut args = shout(up, false);
        args["name"] = json!("other");
        for (k, v) in change.as_object().unwrap() {
            args[k] = v.clone();
        }
        let e = mcp.call("tool_create", args.clone());
        assert_eq!(e["isError"], true, "{args}: {e}");
        assert!(
            e["content"][0]["text"].as_str().unwrap().contains(want),
            "{args}: {e}"
        );
    }
    assert!(
        !ws.join("tools/other").exists(),
        "a refused tool left files"
    );

    let e = mcp.call("tool_delete", json!({"name": "exec"}));
    assert_eq!(e["isError"], true, "{e}");
    let deleted = mcp.call("tool_delete", json!({"name": "shout"}));
    assert_eq!(deleted["structuredContent"]["deleted"], true, "{deleted}");
    assert!(!ws.join("tools/shout").exists());
    // An unknown tool is a protocol error in MCP.
    let gone = mcp.request(
        "tools/call",
        json!({"name": "shout", "arguments": {"text": "hi"}}),
    );
    assert!(
        gone["error"]["message"].as_str().unwrap().contains("shout"),
        "{gone}"
    );
}
