//! The `klaw-engine` binary, run as a user runs it: every command, exit codes, and
//! configuration errors.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use crate::common;
#[cfg(feature = "memory")]
use common::cache;
use common::{engine, stderr, stdout};

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn config(&self, text: &str) -> &Self {
        std::fs::write(self.dir.path().join("engine.json"), text).unwrap();
        self
    }

    /// A configuration with `sandbox` = `mode` and the workspace and data dir under the
    /// home; the workspace.
    fn sandboxed(&self, mode: &str) -> std::path::PathBuf {
        let ws = self.home().join("ws");
        self.config(&format!(
            r#"{{"sandbox": {mode:?}, "workspace": {:?}, "dataDir": {:?}}}"#,
            ws.display().to_string(),
            self.home().join("data").display().to_string()
        ));
        ws
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = engine(self.dir.path(), args);
        if self.dir.path().join("engine.json").exists() {
            c.env("KLAW_CONFIG", self.dir.path().join("engine.json"));
        }
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn home(&self) -> &Path {
        self.dir.path()
    }
}

#[test]
fn tools_prints_a_table() {
    let o = Env::new().run(&["tools"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("NAME"), "{out}");
    // The name column is as wide as the longest name.
    assert!(
        out.lines().any(
            |l| l.starts_with("current_time ") && l.contains(" r---   Возвращает текущие дату")
        ),
        "{out}"
    );
}

#[test]
fn tools_renders_every_format_as_a_json_array() {
    let env = Env::new();
    for (format, name_at) in [
        ("openai", "/function/name"),
        ("openai-loose", "/function/name"),
        ("anthropic", "/name"),
        ("gemini", "/name"),
        ("mcp", "/name"),
    ] {
        for lang in ["ru", "en"] {
            let o = env.run(&["tools", "--format", format, "--lang", lang]);
            assert!(o.status.success(), "{format}: {}", stderr(&o));
            let v: Value = serde_json::from_slice(&o.stdout).unwrap();
            let tools = v.as_array().unwrap();
            assert!(
                tools
                    .iter()
                    .any(|t| t.pointer(name_at) == Some(&"current_time".into())),
                "{format}"
            );
        }
    }
    let o = env.run(&["tools", "--format", "openai", "--lang", "en"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    // Sorted by name (`code_execute` comes first now): current_time by its name.
    let current_time = v
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "current_time")
        .unwrap();
    assert!(
        current_time["function"]["description"]
            .as_str()
            .unwrap()
            .starts_with("Returns the current date")
    );
    let o = env.run(&["tools", "--format", "xml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown format `xml`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn call_prints_the_result_and_exits_zero() {
    let o = Env::new().run(&["call", "current_time", r#"{"timezone": "Asia/Tokyo"}"#]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["timezone"], "Asia/Tokyo");
    assert_eq!(v["utcOffset"], "+09:00");
}

#[test]
fn call_reads_arguments_from_stdin() {
    let env = Env::new();
    let mut child = env
        .cmd(&["call", "current_time", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"timezone": "Europe/Moscow"}"#)
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("\"utcOffset\": \"+03:00\""));
}

/// `call --jsonl`: one result line per request line, in order, in one process; a bad
/// line is an error line for its id (or its line number), and the rest go on.
#[test]
fn call_jsonl_answers_every_line() {
    let env = Env::new();
    let mut child = env
        .cmd(&["call", "--jsonl"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input = concat!(
        r#"{"id": "a", "name": "current_time", "arguments": {"timezone": "UTC"}}"#,
        "\n",
        r#"{"id": 2, "name": "no_such_tool"}"#,
        "\n",
        "not json\n",
        "\n",
        r#"{"id": "d", "arguments": {}}"#,
        "\n",
        r#"{"id": "e", "name": "current_time", "arguments": {"timezone": 5}}"#,
        "\n",
        r#"{"id": "f", "name": "file_write", "arguments": {"path": "../x", "content": "no"}}"#,
        "\n",
    );
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    stdin.write_all(b"\xff not utf-8\n").unwrap();
    stdin
        .write_all(br#"{"id": "h", "name": "current_time"}"#)
        .unwrap();
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary: Vec<(Value, bool, &str)> = lines
        .iter()
        .map(|l| {
            let kind = l["error"]["kind"].as_str().unwrap_or("");
            (l["id"].clone(), l["ok"].as_bool().unwrap(), kind)
        })
        .collect();
    assert_eq!(
        summary,
        [
            (Value::from("a"), true, ""),
            (Value::from(2), false, "unknown_tool"),
            (Value::from(3), false, "invalid_arguments"),
            (Value::from("d"), false, "invalid_arguments"),
            (Value::from("e"), false, "invalid_arguments"),
            (Value::from("f"), false, "access_denied"),
            (Value::from(8), false, "invalid_arguments"),
            (Value::from("h"), true, ""),
        ],
        "{lines:#?}"
    );
    assert!(lines[0]["result"]["iso"].is_string(), "{}", lines[0]);
    assert!(
        lines[2]["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("line 3 is not JSON"),
        "{}",
        lines[2]
    );
}

#[test]
fn call_errors_exit_one_with_the_message() {
    let env = Env::new();
    let o = env.run(&["call", "current_time", r#"{"timezone": "Mars/Olympus"}"#]);
    assert_eq!(o.status.code(), Some(1));
    // Once: the log's warning for the failed call does not repeat it. The arguments
    // were JSON: the error names the JSON pointer.
    assert_eq!(
        stderr(&o),
        "Error [invalid_arguments]: /timezone: unknown time zone `Mars/Olympus`; use an IANA \
         name such as Europe/Moscow or America/New_York\n"
    );
    // A log level that asks for more keeps the log's line.
    let o = env
        .cmd(&["call", "current_time", r#"{"timezone": "Mars/Olympus"}"#])
        .env("KLAW_LOG_LEVEL", "info")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("tool failed: /timezone"),
        "{}",
        stderr(&o)
    );
    let o = env.run(&["call", "curent_time"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("unknown tool `curent_time`; did you mean `current_time`?"));
    let o = env.run(&["call", "current_time", "{not json"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("the arguments are not valid JSON"),
        "{}",
        stderr(&o)
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn config_errors_name_the_key_or_the_position() {
    let env = Env::new();
    env.config("{\n  \"maxFileSizeByte\": 10\n}");
    let o = env.run(&["tools"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("unknown field `maxFileSizeByte`"), "{err}");
    assert!(err.contains("line 2"), "{err}");

    env.config("{\n  \"timezone\": \"UTC\",\n}");
    let err = stderr(&env.run(&["call", "current_time"]));
    assert!(err.contains("line 3 column 1"), "{err}");

    env.config(r#"{"maxToolCallRounds": "ten"}"#);
    let err = stderr(&env.run(&["config"]));
    assert!(
        err.contains("invalid type: string \"ten\", expected u32"),
        "{err}"
    );
}

#[test]
fn config_prints_the_effective_configuration() {
    let env = Env::new();
    env.config(r#"{"timezone": "Europe/Berlin", "language": "en"}"#);
    let o = env
        .cmd(&["config"])
        .env("KLAW_WORKSPACE", "/tmp/ws-x")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["workspace"], "/tmp/ws-x");
    assert_eq!(v["timezone"], "Europe/Berlin");
    assert_eq!(v["language"], "en");
    assert_eq!(v["maxFileSizeBytes"], 1_048_576);
    assert_eq!(v["maxToolCallRounds"], 10);
    assert_eq!(
        v["dataDir"],
        env.home().join(".local/share/klaw").to_str().unwrap()
    );
    assert_eq!(v["memory"]["model"], "use-multilingual-v3");
    assert_eq!(
        v["memory"]["runtimeLibrary"],
        env.home()
            .join(".cache/klaw/onnxruntime/libonnxruntime.so.1.31.1")
            .to_str()
            .unwrap()
    );
}

#[test]
fn doctor_reports_each_check_and_fails_on_a_broken_config() {
    let env = Env::new();
    let o = env.run(&["doctor"]);
    assert!(o.status.success(), "{}", stdout(&o));
    let out = stdout(&o);
    for line in [
        "ok    config",
        "warn  data dir",
        "warn  workspace",
        "ok    timezone    UTC",
        "ok    tools",
    ] {
        assert!(out.contains(line), "{line:?} in {out}");
    }
    // This machine (and CI) has a working sandbox; `auto` names the one it picked.
    assert!(
        out.contains("ok    sandbox     bwrap") || out.contains("ok    sandbox     landlock"),
        "{out}"
    );
    assert!(
        out.contains("fix: the engine creates it when it starts"),
        "{out}"
    );
    // An empty HOME has no embedding model: a warning naming the path and `make setup`.
    if cfg!(feature = "memory") {
        assert!(
            out.contains("warn  memory      embedding model file not found"),
            "{out}"
        );
        assert!(out.contains("fix: run `make setup`"), "{out}");
    }

    env.config(r#"{"timezone": "Nowhere/City"}"#);
    let o = env.run(&["doctor"]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(
        out.contains("FAIL  config      timezone: unknown time zone `Nowhere/City`"),
        "{out}"
    );
    assert!(out.contains("fix: correct engine.json"), "{out}");
}

#[test]
fn a_call_creates_the_directories_from_the_environment() {
    let env = Env::new();
    let ws = env.home().join("my-ws");
    let data = env.home().join("my-data");
    let o = env
        .cmd(&["call", "current_time"])
        .env("KLAW_WORKSPACE", &ws)
        .env("KLAW_DATA", &data)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(ws.is_dir() && data.is_dir());
}

/// With the cache `make setup` fills (CI runs it first), doctor names the runtime and the
/// model's fingerprint.
#[cfg(feature = "memory")]
#[test]
fn doctor_finds_the_embedding_runtime_and_model() {
    let cache = cache();
    let env = Env::new();
    let o = env
        .cmd(&["doctor"])
        .env("KLAW_CACHE", &cache)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(
        out.contains("ok    memory      ONNX Runtime 1.31.1"),
        "{out}\n(run `make setup` if the model is missing)"
    );
    assert!(
        out.contains("model use-multilingual-v3 (")
            && out.contains("512 dims, 512 tokens, sha256:"),
        "{out}"
    );

    // The configured model, here the light English one from the variable.
    let o = env
        .cmd(&["doctor"])
        .env("KLAW_CACHE", &cache)
        .env("KLAW_MEMORY_MODEL", "all-minilm-l6-v2")
        .output()
        .unwrap();
    let out = stdout(&o);
    assert!(
        out.contains("model all-minilm-l6-v2 (") && out.contains("384 dims, 256 tokens, sha256:"),
        "{out}"
    );
}

#[test]
fn no_command_runs_doctor_then_lists_tools() {
    let o = Env::new().run(&[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("ok    tools"), "{out}");
    assert!(out.contains("NAME"), "{out}");
}

#[test]
fn doctor_warns_when_the_sandbox_is_off() {
    let env = Env::new();
    env.config(r#"{"sandbox": "off"}"#);
    let o = env.run(&["doctor"]);
    assert!(o.status.success(), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(
        out.contains("warn  sandbox     off: commands run unsandboxed"),
        "{out}"
    );
    assert!(out.contains("fix: set `sandbox` to `auto`"), "{out}");
}

/// Commands run under Landlock + seccomp when asked (the helper applies them).
#[test]
fn the_engine_runs_commands_under_landlock() {
    let env = Env::new();
    let ws = env.sandboxed("landlock");
    let o = env.run(&[
        "call",
        "exec",
        r#"{"command": "echo hi > f.txt; cat f.txt"}"#,
    ]);
    let out = stdout(&o);
    if stderr(&o).contains("does not work here") {
        // CI's machine has Landlock: a skip there would hide a broken sandbox.
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true"),
            "Landlock does not work on this CI machine: {}",
            stderr(&o)
        );
        eprintln!("skipping: {}", stderr(&o));
        return;
    }
    assert!(o.status.success(), "{out}{}", stderr(&o));
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["stdout"], "hi\n", "{v}");
    assert_eq!(v["sandbox"], "landlock", "{v}");
    assert_eq!(std::fs::read_to_string(ws.join("f.txt")).unwrap(), "hi\n");
}

/// `call code_execute` runs code through exec's sandbox (Landlock here), its code written
/// to the command's private temporary directory, its input on stdin.
#[test]
fn code_execute_runs_through_the_call_command() {
    let env = Env::new();
    let ws = env.sandboxed("landlock");
    let o = env.run(&[
        "call",
        "code_execute",
        r#"{"language": "bash", "code": "read -r x; echo \"$x\" > f.txt; cat f.txt; echo \"$0\"", "stdin": "from stdin"}"#,
    ]);
    if stderr(&o).contains("does not work here") {
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true"),
            "Landlock does not work on this CI machine: {}",
            stderr(&o)
        );
        eprintln!("skipping: {}", stderr(&o));
        return;
    }
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    let v: Value = serde_json::from_str(&out).unwrap();
    let printed = v["stdout"].as_str().unwrap();
    assert!(printed.starts_with("from stdin\n"), "{v}");
    // The script ran from the command's own temporary directory, not the workspace.
    assert!(
        printed.contains("/klaw-exec-") && printed.trim_end().ends_with("klaw-code.sh"),
        "{v}"
    );
    assert_eq!(v["sandbox"], "landlock", "{v}");
    assert_eq!(v["language"], "bash", "{v}");
    assert_eq!(
        std::fs::read_to_string(ws.join("f.txt")).unwrap(),
        "from stdin\n"
    );
    assert!(!ws.join("klaw-code.sh").exists());
}

/// Commands run under the engine's small helper, `klaw-engine-sandbox`, which every
/// build puts beside `klaw-engine` (it starts faster than a copy of the engine); the
/// engine still plays the helper itself where it is missing (the test above).
#[test]
fn commands_run_under_the_small_helper_beside_the_engine() {
    let env = Env::new();
    env.sandboxed("off");
    let o = env.run(&[
        "call",
        "exec",
        r#"{"command": "tr '\\0' ' ' < /proc/$PPID/cmdline"}"#,
    ]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let helper = std::path::Path::new(env!("CARGO_BIN_EXE_klaw-engine"))
        .with_file_name("klaw-engine-sandbox");
    assert!(
        v["stdout"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{} __klaw-sandbox ", helper.display())),
        "{v}"
    );
}

/// The engine plays the helper itself (what a binary that embeds the engine without the
/// small helper beside it relies on): `klaw-engine __klaw-sandbox <policy> <command>`
/// applies Landlock + seccomp and runs the command.
#[test]
fn the_engine_is_its_own_sandbox_helper_too() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let policy = serde_json::json!({"landlock": true, "network": false, "write": [ws], "cwd": ws});
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_klaw-engine"))
        .args([
            "__klaw-sandbox",
            &policy.to_string(),
            "sh",
            "-c",
            "echo hi > f; cat f",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The lifeline stays open until the helper is done.
    let _lifeline = child.stdin.take();
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    if err.contains("Landlock") && !status.success() {
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true"),
            "Landlock does not work on this CI machine: {err}"
        );
        eprintln!("skipping: {err}");
        return;
    }
    assert!(status.success(), "{out}{err}");
    assert_eq!(out, "hi\n");
    assert_eq!(std::fs::read_to_string(ws.join("f")).unwrap(), "hi\n");
}

/// Where bubblewrap cannot work (a `bwrap` that fails, as without user namespaces),
/// `auto` falls back to Landlock, and `doctor` says so.
#[test]
fn auto_falls_back_to_landlock_when_bwrap_fails() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let bin = env.home().join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("bwrap");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = env.cmd(&["doctor"]).env("PATH", &path).output().unwrap();
    let out = stdout(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("ok    sandbox     landlock + seccomp (bwrap does not work here: bwrap: setting up uid map: Permission denied)"),
        "{out}"
    );

    env.config(r#"{"sandbox": "bwrap"}"#);
    let o = env.cmd(&["doctor"]).env("PATH", &path).output().unwrap();
    let out = stdout(&o);
    assert!(
        out.contains("warn  sandbox     exec and process refuse to run: the `bwrap` sandbox does not work here"),
        "{out}"
    );
}

/// `docs index` with the real model (installed by `make setup`; missing, this fails with
/// the setup hint): the first run indexes every doc, the second finds nothing changed.
/// `doctor`'s `docs` line sees the index missing, then up to date.
#[cfg(feature = "docs")]
#[test]
fn docs_index_twice_reindexes_nothing_the_second_time() {
    let cache = cache();
    let env = Env::new();
    let run = || {
        env.cmd(&["docs", "index"])
            .env("KLAW_CACHE", &cache)
            .output()
            .unwrap()
    };
    let doctor = || {
        stdout(
            &env.cmd(&["doctor"])
                .env("KLAW_CACHE", &cache)
                .output()
                .unwrap(),
        )
    };
    let out = doctor();
    assert!(out.contains("ok    docs        "), "{out}");
    assert!(out.contains("docs.sqlite not built yet"), "{out}");
    let first = run();
    assert!(
        first.status.success(),
        "{}{}",
        stdout(&first),
        stderr(&first)
    );
    let out = stdout(&first);
    assert!(out.starts_with("docs index: "), "{out}");
    assert!(!out.contains(" 0 files indexed"), "{out}");
    let second = run();
    assert!(second.status.success(), "{}", stderr(&second));
    let out = stdout(&second);
    assert!(out.contains("docs index: 0 files indexed"), "{out}");
    assert!(out.contains("0 removed; 0 chunks"), "{out}");
    let out = doctor();
    let line = out
        .lines()
        .find(|l| l.starts_with("ok    docs "))
        .unwrap_or_default();
    assert!(line.contains("docs.sqlite: "), "{out}");
    assert!(
        line.contains(" chunks; up to date with the embedded docs ("),
        "{out}"
    );
}

/// Issue 25, hole 5: a project-local engine.json whose workspace is its own folder put
/// the keys and the sandbox switch in reach of every command. The engine refuses to
/// start on it — named relatively or absolutely, or through a symlink — says why and
/// what to do, and runs nothing.
#[test]
fn a_config_file_inside_the_workspace_is_refused_and_nothing_runs() {
    let env = Env::new();
    let project = env.home().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let config = project.join("engine.json");
    std::fs::write(
        &config,
        r#"{"workspace": ".", "llm": {"apiKey": "sk-attacker-reads-this"}}"#,
    )
    .unwrap();
    // Elsewhere, a link to it, with the workspace named absolutely.
    let etc = env.home().join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    std::fs::write(
        project.join("linked.json"),
        serde_json::json!({"workspace": project}).to_string(),
    )
    .unwrap();
    std::os::unix::fs::symlink(project.join("linked.json"), etc.join("engine.json")).unwrap();
    for (named, shown) in [
        (config.clone(), config.display().to_string()),
        ("engine.json".into(), config.display().to_string()),
        (
            etc.join("engine.json"),
            etc.join("engine.json").display().to_string(),
        ),
    ] {
        for args in [
            &["call", "exec", r#"{"command": "touch RAN"}"#][..],
            &["mcp"],
            &["config"],
        ] {
            let o = engine(env.home(), args)
                .env("KLAW_CONFIG", &named)
                .current_dir(&project)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(1), "{named:?} {args:?}: {err}");
            assert!(
                err.starts_with(&format!(
                    "error: configuration: the config file {shown} is inside the workspace"
                )) && err.contains("could read its secrets (llm.apiKey")
                    && err.contains("turn the sandbox off")
                    && err.contains("Move the config file out of the workspace")
                    && err.contains("or point the workspace elsewhere"),
                "{named:?} {args:?}: {err}"
            );
            assert!(o.stdout.is_empty(), "{args:?}: {}", stdout(&o));
            assert!(!project.join("RAN").exists());
        }
    }
}

/// Issue 25, hole 8: `klaw-engine call` printed what a tool returned as it was. A file
/// holding escape sequences (U+009B among them, which JSON leaves as it is) and an error
/// quoting the model's argument reach stdout and stderr without a control character.
#[test]
fn call_prints_no_escape_sequence_a_tool_returned() {
    let env = Env::new();
    let ws = env.home().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(
        ws.join("evil.txt"),
        "hi\x1b]52;c;cm0gLXJmIH4K\x07\x1b]0;pwned\x07\x1b[2J\u{9b}31m\u{85}there\n",
    )
    .unwrap();
    let obeyed = |text: &str| -> Vec<char> {
        text.chars()
            .filter(|c| c.is_control() && !matches!(c, '\n' | '\t'))
            .collect()
    };
    let o = env
        .cmd(&["call", "file_read", r#"{"path": "evil.txt"}"#])
        .env("KLAW_WORKSPACE", &ws)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(obeyed(&stdout(&o)).is_empty(), "{:?}", stdout(&o));
    assert!(stdout(&o).contains("31mthere"), "{}", stdout(&o));
    let o = env
        .cmd(&[
            "call",
            "current_time",
            r#"{"timezone": "Mars\u001b]0;pwned\u0007\u009b2J"}"#,
        ])
        .env("KLAW_WORKSPACE", &ws)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("Mars]0;pwned2J"), "{err:?}");
    assert!(obeyed(&err).is_empty(), "{err:?}");
}

/// `tools`, `doctor` and `call` see the engine as it is assembled for a front end, with
/// the engine's own tools: `send_message` always, `subagent_spawn` when a model is
/// configured (before, `call send_message` said "unknown tool").
#[test]
fn the_engine_own_tools_are_listed_and_callable() {
    let env = Env::new();
    let names = |o: &Output| -> Vec<String> {
        stdout(o)
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .collect()
    };
    let o = env.run(&["tools"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = names(&o);
    assert!(listed.iter().any(|n| n == "send_message"), "{listed:?}");
    assert!(!listed.iter().any(|n| n == "subagent_spawn"), "{listed:?}");
    let o = env
        .cmd(&["tools"])
        .env("KLAW_LLM_MODEL", "some-model")
        .env("KLAW_LLM_BASE_URL", "http://127.0.0.1:9/v1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let with_model = names(&o);
    assert!(
        with_model.iter().any(|n| n == "subagent_spawn"),
        "{with_model:?}"
    );
    // doctor counts the same tools.
    let o = env.run(&["doctor"]);
    let count = format!("{} tools valid", listed.len() - 2); // the header and the footer
    assert!(stdout(&o).contains(&count), "{count}: {}", stdout(&o));
    // The tool runs: an unknown channel is its own error, not an unknown tool.
    let o = env.run(&[
        "call",
        "send_message",
        r#"{"channel": "nowhere", "chat_id": "1", "text": "hi"}"#,
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("channel not found"), "{}", stderr(&o));
}

/// `web_fetch` through the engine: its own MCP port and the metadata address are
/// refused; `web.allowedPrivateHosts` (here from its variable) opens exactly one
/// loopback service, whose page is returned.
#[test]
fn web_fetch_refuses_the_host_and_reaches_only_allowed_private_services() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in listener.incoming().map_while(Result::ok) {
            let mut buf = [0u8; 4096];
            let _ = std::io::Read::read(&mut s, &mut buf);
            let body = "<html><head><title>Wiki</title></head><body><p>internal wiki page</p></body></html>";
            let _ = std::io::Write::write_all(
                &mut s,
                format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).as_bytes(),
            );
        }
    });
    let env = Env::new();
    for url in [
        "http://127.0.0.1:8765/mcp".to_owned(),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        format!("http://localhost:{port}/"),
    ] {
        let o = env.run(&["call", "web_fetch", &json!({"url": url}).to_string()]);
        assert_eq!(o.status.code(), Some(1), "{url}");
        assert!(
            stderr(&o).contains(
                "[access_denied]: access to private and internal addresses is not allowed"
            ),
            "{url}: {}",
            stderr(&o)
        );
    }
    let o = env
        .cmd(&[
            "call",
            "web_fetch",
            &json!({"url": format!("http://127.0.0.1:{port}/")}).to_string(),
        ])
        .env(
            "KLAW_WEB_ALLOWED_PRIVATE_HOSTS",
            format!("127.0.0.1:{port}"),
        )
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        v["content"]
            .as_str()
            .unwrap()
            .contains("internal wiki page"),
        "{v}"
    );
}

/// Pages for `render_js` on loopback: `/` a page; `/slow` one whose body never ends (the
/// call waits on it), which sets `asked` when requested. Its port.
fn render_pages(asked: std::sync::Arc<std::sync::atomic::AtomicBool>) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in listener.incoming().map_while(Result::ok) {
            let asked = std::sync::Arc::clone(&asked);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let n = std::io::Read::read(&mut s, &mut buf).unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]);
                if head.contains(" /slow ") {
                    asked.store(true, std::sync::atomic::Ordering::SeqCst);
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n<html><body><p>slow");
                    for _ in 0..600 {
                        std::thread::sleep(std::time::Duration::from_millis(100));
                        if s.write_all(b" .").is_err() {
                            return;
                        }
                    }
                    return;
                }
                let body = "<html><head><title>Page</title></head><body><article><p>A page about rivers, valleys and the slow work of water on rock, long enough to be kept.</p></article></body></html>";
                let _ = s.write_all(
                    format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).as_bytes(),
                );
            });
        }
    });
    port
}

/// `dir` and everything beneath it.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.extend(walk(&e.path()));
            } else {
                out.push(e.path());
            }
        }
    }
    out
}

/// The live processes whose command line or environment names `mark`.
fn processes_naming(mark: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
        {
            continue;
        }
        let names = |file: &str| {
            std::fs::read(format!("/proc/{pid}/{file}"))
                .is_ok_and(|b| String::from_utf8_lossy(&b).contains(mark))
        };
        if names("cmdline") || names("environ") {
            found.push(pid);
        }
    }
    found
}

/// Issue 42, hole 3: `render_js`'s browser (Debian's `chromium-headless-shell` is a
/// shell wrapper) outlived the engine, as root, its profile left in the temporary
/// directory. However the engine ends (`call` done, SIGKILL or SIGTERM in the middle of
/// a call, `mcp` closed by the end of its stdin; SIGKILL of an engine that is not root),
/// no process of the browser and no profile stays.
#[test]
fn render_js_leaves_no_browser_and_no_profile_however_the_engine_ends() {
    let on_path = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            [
                "chromium-headless-shell",
                "chrome-headless-shell",
                "chromium",
            ]
            .iter()
            .any(|b| d.join(b).is_file())
        })
    });
    if !on_path {
        assert!(
            std::env::var_os("CI").is_none(),
            "no browser: scripts/setup.sh installs chromium-headless-shell"
        );
        eprintln!("no Chromium on PATH; render_js is not tested");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let port = render_pages(std::sync::Arc::clone(&asked));
    let page = |path: &str| json!({"url": format!("http://127.0.0.1:{port}{path}")}).to_string();
    let root = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self").unwrap().uid() == 0
    };
    for ending in [
        "exit",
        "SIGKILL",
        "SIGTERM",
        "stdin EOF",
        "SIGKILL of an unprivileged engine",
    ] {
        // An engine that is not root runs the browser as its own user.
        let user = (ending.contains("unprivileged") && root).then_some(2_147_483_600_u32);
        if ending.contains("unprivileged") && !root {
            continue;
        }
        let env = Env::new();
        // The engine's own temporary directory: the profile goes there, and its path
        // marks the browser's processes (in their command lines and environments).
        let tmp = env.home().join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        for dir in [env.home(), tmp.as_path()] {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711)).unwrap();
        }
        if let Some(id) = user {
            for entry in walk(env.home()) {
                std::os::unix::fs::lchown(entry, Some(id), Some(id)).unwrap();
            }
        }
        let mark = tmp.join("klaw-browser-").display().to_string();
        let engine = |args: &[&str]| {
            let mut cmd = env.cmd(args);
            if let Some(id) = user {
                use std::os::unix::process::CommandExt;
                cmd.uid(id).gid(id);
            }
            cmd.env("TMPDIR", &tmp)
                .env(
                    "KLAW_WEB_ALLOWED_PRIVATE_HOSTS",
                    format!("127.0.0.1:{port}"),
                )
                .env("KLAW_LOG_LEVEL", "error");
            cmd
        };
        let mut seen = Vec::new();
        match ending {
            "exit" => {
                let mut child = engine(&["call", "render_js", &page("/")])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                assert!(common::eventually(60, || {
                    seen = processes_naming(&mark);
                    !seen.is_empty() || child.try_wait().unwrap().is_some()
                }));
                let o = child.wait_with_output().unwrap();
                assert!(o.status.success(), "{}", stderr(&o));
                assert!(stdout(&o).contains("rivers"), "{}", stdout(&o));
            }
            "SIGKILL" | "SIGTERM" | "SIGKILL of an unprivileged engine" => {
                asked.store(false, std::sync::atomic::Ordering::SeqCst);
                let mut child = engine(&["call", "render_js", &page("/slow")])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                assert!(
                    common::eventually(60, || asked.load(std::sync::atomic::Ordering::SeqCst)),
                    "{ending}: the browser never asked for the page"
                );
                seen = processes_naming(&mark);
                let signal = if ending == "SIGKILL" {
                    "-KILL"
                } else {
                    "-TERM"
                };
                assert!(
                    Command::new("kill")
                        .args([signal, &child.id().to_string()])
                        .status()
                        .unwrap()
                        .success()
                );
                common::wait_exit(&mut child);
            }
            _ => {
                let mut mcp = common::mcp_client::Mcp::start(engine(&["mcp"]));
                let r = mcp.call("render_js", serde_json::from_str(&page("/")).unwrap());
                assert!(r.to_string().contains("rivers"), "{r}");
                seen = processes_naming(&mark);
                mcp.finish();
            }
        }
        assert!(!seen.is_empty(), "{ending}: no browser process was seen");
        let left = |tmp: &Path| {
            std::fs::read_dir(tmp)
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("klaw-browser-"))
                .collect::<Vec<_>>()
        };
        let gone = common::eventually(20, || {
            processes_naming(&mark).is_empty() && left(&tmp).is_empty()
        });
        assert!(
            gone,
            "{ending}: after the engine ended, browser processes {:?} and profiles {:?} remain",
            processes_naming(&mark),
            left(&tmp)
        );
    }
}

/// A page of 3,000 nested `<b>` (21 KB) overflowed a thread's stack and aborted the engine
/// (exit 134), and 30,000 nested `<div>` kept it busy past the tool's time limit: through
/// the engine both are read, their text returned, and the process exits normally.
#[test]
fn web_fetch_of_a_deeply_nested_page_does_not_kill_the_engine() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in listener.incoming().map_while(Result::ok) {
            let mut buf = [0u8; 4096];
            let n = std::io::Read::read(&mut s, &mut buf).unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]);
            let (open, close, levels) = if head.starts_with("GET /divs") {
                ("<div>", "</div>", 30_000)
            } else {
                ("<b>", "</b>", 3_000)
            };
            let body = format!(
                "<html><head><title>Deep</title></head><body>{}<p>the bottom of a deep page</p>{}</body></html>",
                open.repeat(levels),
                close.repeat(levels)
            );
            let _ = std::io::Write::write_all(
                &mut s,
                format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).as_bytes(),
            );
        }
    });
    let env = Env::new();
    for path in ["/bold", "/divs"] {
        let o = env
            .cmd(&[
                "call",
                "web_fetch",
                &json!({"url": format!("http://127.0.0.1:{port}{path}")}).to_string(),
            ])
            .env(
                "KLAW_WEB_ALLOWED_PRIVATE_HOSTS",
                format!("127.0.0.1:{port}"),
            )
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{path}: {}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(
            v["content"]
                .as_str()
                .unwrap()
                .contains("the bottom of a deep page"),
            "{path}: {v}"
        );
    }
}
