//! `klaw-engine mcp` with real MCP clients: the official Python SDK (installed by
//! `scripts/setup-test-tools.sh` into `<cache>/venv-test`) over stdio and over HTTP, and
//! raw JSON-RPC lines and raw HTTP requests for what a well-behaved client never sends.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::io::{BufRead, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;
use common::{
    cache, engine, eventually, installed, processes_with, stderr, stdout, test_python as python,
};

/// The Node 22 tools' directory (`<cache>/node22/node_modules/.bin`).
fn node_tools() -> Option<PathBuf> {
    let bin = installed(cache().join("node22/node_modules/.bin/node"))?;
    bin.parent().map(Path::to_path_buf)
}

/// `PATH` with Node 22 first.
fn node_path(bin: &Path) -> std::ffi::OsString {
    let mut paths = vec![bin.to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).unwrap()
}

/// Runs the SDK client script against `target` (the engine's path: stdio; a URL: HTTP).
fn sdk_client(py: &Path, home: &Path, target: &str) {
    run_script(py, home, "sdk_client.py", target, &[]);
}

/// Runs a client script of `tests/mcp/` with `target` and `env` besides `HOME`,
/// `KLAW_CACHE` and `PATH`; it prints `ok all` when every check passed.
fn run_script(py: &Path, home: &Path, script: &str, target: &str, env: &[(&str, &Path)]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp")
        .join(script);
    let mut cmd = std::process::Command::new(py);
    cmd.arg(script)
        .arg(target)
        .env_clear()
        .env("HOME", home)
        .env("KLAW_CACHE", cache())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap();
    let out = stdout(&o);
    assert!(
        o.status.success() && out.contains("ok all"),
        "stdout:\n{out}\nstderr:\n{}",
        stderr(&o)
    );
    // Over HTTP the client ends its session with a DELETE, which must succeed (a 202
    // made every Python client print this).
    let err = stderr(&o);
    assert!(!err.contains("Session termination failed"), "{err}");
}

#[test]
fn the_fastmcp_client_over_stdio() {
    let Some(py) = python() else { return };
    let home = tempfile::tempdir().unwrap();
    run_script(
        &py,
        home.path(),
        "fastmcp_client.py",
        env!("CARGO_BIN_EXE_klaw-engine"),
        &[],
    );
}

/// The MCP Inspector's CLI mode (`--cli`), started on `klaw-engine mcp` over stdio.
#[test]
fn the_inspector_cli_lists_and_calls() {
    let Some(bin) = node_tools() else { return };
    let home = tempfile::tempdir().unwrap();
    let inspector = |args: &[&str]| {
        let o = std::process::Command::new(bin.join("mcp-inspector"))
            .arg("--cli")
            .arg(env!("CARGO_BIN_EXE_klaw-engine"))
            .arg("mcp")
            .args(args)
            .env_clear()
            .env("HOME", home.path())
            .env("KLAW_CACHE", cache())
            .env("PATH", node_path(&bin))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
        serde_json::from_str::<Value>(&stdout(&o)).unwrap()
    };
    let list = inspector(&["--method", "tools/list"]);
    let names: Vec<&str> = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"file_read") && names.contains(&"exec"),
        "{names:?}"
    );
    let call = inspector(&[
        "--method",
        "tools/call",
        "--tool-name",
        "current_time",
        "--tool-arg",
        "timezone=Asia/Tokyo",
    ]);
    assert_eq!(call["isError"], false, "{call}");
    assert_eq!(
        call["structuredContent"]["timezone"], "Asia/Tokyo",
        "{call}"
    );
    let resources = inspector(&["--method", "resources/list"]);
    let uris: Vec<&str> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert!(
        uris.contains(&"klaw://docs/engine.md") && uris.contains(&"klaw://memory/core"),
        "{uris:?}"
    );
    let read = inspector(&[
        "--method",
        "resources/read",
        "--uri",
        "klaw://docs/engine.md",
    ]);
    assert!(
        read["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("## MCP"),
        "{read}"
    );
    let templates = inspector(&["--method", "resources/templates/list"]);
    assert!(
        templates
            .to_string()
            .contains("klaw://skills/{name}/{file}"),
        "{templates}"
    );
    let prompts = inspector(&["--method", "prompts/list"]);
    assert!(prompts["prompts"].is_array(), "{prompts}");
}

/// Runs the official conformance suite (`@modelcontextprotocol/conformance`, pinned in
/// `scripts/package-test.json`) with `args` against `server`; its exit status and its
/// summary (the text after `=== SUMMARY ===`).
#[cfg(feature = "fixtures")]
fn conformance(bin: &Path, server: &HttpServer, args: &[&str]) -> (bool, String) {
    let out = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(bin.join("conformance"))
        .args(["server", "--url"])
        .arg(format!("http://{}/mcp", server.addr))
        .args(args)
        .arg("--output-dir")
        .arg(out.path())
        .env("PATH", node_path(bin))
        .output()
        .unwrap();
    let text = stdout(&o);
    let summary = text.split("=== SUMMARY ===").nth(1).unwrap_or(&text);
    let summary = format!("{summary}\n{}", stderr(&o));
    (o.status.success(), summary)
}

/// The official conformance suite against `klaw-engine mcp --http`: every scenario of
/// the default run passes but those in `tests/mcp/conformance-baseline.yml` (each with
/// its reason), and a listed one that starts passing fails the test too (the baseline
/// must shrink).
#[cfg(feature = "fixtures")] // the scenarios call the fixture tools
#[test]
fn the_conformance_suite() {
    let Some(bin) = node_tools() else { return };
    let server = HttpServer::start("127.0.0.1:0", &[]);
    let baseline = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/conformance-baseline.yml");
    let (ok, summary) = conformance(
        &bin,
        &server,
        &["--expected-failures", baseline.to_str().unwrap()],
    );
    assert!(ok, "{summary}");
    // Every scenario passes (the baseline is empty).
    let total = summary.lines().find(|l| l.starts_with("Total:"));
    assert!(total.is_some_and(|t| t.ends_with(" 0 failed")), "{summary}");
    for must_pass in [
        "server-initialize",
        "ping",
        "tools-list",
        "dns-rebinding-protection",
    ] {
        assert!(
            summary.contains(&format!("✓ {must_pass}")),
            "{must_pass} did not pass:\n{summary}"
        );
    }
}

/// Every scenario MCP 2026-07-28 requires (`--requirements 2026-07-28`, each run at that
/// revision's stateless wire) passes, with no expected failure: the stateless server
/// (removed methods not found, `subscriptions/listen`, capabilities asked for), the ten
/// input-required results (elicitation, sampling and roots asked through the result,
/// the request's state sealed, several rounds, a changed state refused). What the run
/// reports but does not score (the tasks extension, the scenarios still pending in the
/// suite) may fail: only those.
#[cfg(feature = "fixtures")]
#[test]
fn the_conformance_requirements_of_2026_07_28() {
    let Some(bin) = node_tools() else { return };
    let server = HttpServer::start("127.0.0.1:0", &[]);
    let (ok, summary) = conformance(&bin, &server, &["--requirements", "2026-07-28"]);
    assert!(ok, "{summary}");
    let (scored, not_scored) = summary
        .split_once("Not scored for 2026-07-28")
        .unwrap_or((summary.as_str(), ""));
    let failed: Vec<&str> = scored
        .lines()
        .filter_map(|l| l.strip_prefix("✗ "))
        .filter_map(|l| l.split(':').next())
        .filter(|name| !not_scored.contains(&format!("✗ {name} (")))
        .collect();
    assert!(failed.is_empty(), "{failed:?} failed:\n{summary}");
    for must_pass in [
        "server-stateless",
        "tools-call-with-progress",
        "caching",
        "input-required-result-basic-elicitation",
        "input-required-result-basic-sampling",
        "input-required-result-basic-list-roots",
        "input-required-result-request-state",
        "input-required-result-multiple-input-requests",
        "input-required-result-multi-round",
        "input-required-result-missing-input-response",
        "input-required-result-non-tool-request",
        "input-required-result-result-type",
        "input-required-result-unsupported-methods",
        "input-required-result-tampered-state",
        "input-required-result-capability-check",
        "input-required-result-ignore-extra-params",
        "input-required-result-validate-input",
    ] {
        assert!(
            summary.contains(&format!("✓ {must_pass}:")),
            "{must_pass} did not pass:\n{summary}"
        );
    }
}

/// The whole suite (`--suite all`: pending and extension scenarios too) passes with no
/// expected failure (`tests/mcp/conformance-baseline-all.yml` is empty): the tasks
/// extension, SSE polling, and the pending scenarios' tools of a schema kept as given.
#[cfg(feature = "fixtures")]
#[test]
fn the_whole_conformance_suite() {
    let Some(bin) = node_tools() else { return };
    let server = HttpServer::start("127.0.0.1:0", &[]);
    let baseline =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/conformance-baseline-all.yml");
    let (ok, summary) = conformance(
        &bin,
        &server,
        &[
            "--suite",
            "all",
            "--expected-failures",
            baseline.to_str().unwrap(),
        ],
    );
    assert!(ok, "{summary}");
    let total = summary.lines().find(|l| l.starts_with("Total:"));
    assert!(total.is_some_and(|t| t.ends_with(" 0 failed")), "{summary}");
    for must_pass in [
        "server-stateless",
        "input-required-result-multi-round",
        "server-sse-polling",
        "tasks-lifecycle",
        "tasks-capability-negotiation",
        "tasks-wire-fields",
        "tasks-request-state-removal",
        "tasks-mrtr-input",
        "tasks-request-headers",
        "tasks-dispatch-and-envelope",
        "tasks-required-task-error",
        "tasks-mrtr-composition",
        "json-schema-2020-12",
        "http-custom-header-server-validation",
    ] {
        assert!(
            summary.contains(&format!("✓ {must_pass}:")),
            "{must_pass} did not pass:\n{summary}"
        );
    }
}

#[test]
fn the_python_sdk_over_stdio() {
    let Some(py) = python() else { return };
    let home = tempfile::tempdir().unwrap();
    sdk_client(&py, home.path(), env!("CARGO_BIN_EXE_klaw-engine"));
}

/// A workspace with the skill `pdf` (SKILL.md, a script, a PNG, and `leak`: a link to
/// a secret outside), as `tests/mcp/sdk_protocol.py` expects it; the workspace's path.
fn protocol_workspace(home: &Path) -> PathBuf {
    let ws = home.join("ws");
    let skill = ws.join("skills/pdf");
    std::fs::create_dir_all(skill.join("scripts")).unwrap();
    std::fs::create_dir_all(skill.join("assets")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: pdf\ndescription: Fills PDF forms\n---\n# PDF\nUse fill.py.\n",
    )
    .unwrap();
    std::fs::write(skill.join("scripts/fill.py"), "print('fill')\n").unwrap();
    let png = [
        0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0, 0xff,
    ];
    std::fs::write(skill.join("assets/pixel.png"), png).unwrap();
    std::fs::write(home.join("secret"), "TOP SECRET").unwrap();
    std::os::unix::fs::symlink(home.join("secret"), skill.join("leak")).unwrap();
    ws
}

/// Runs `tests/mcp/sdk_protocol.py` against `target` (the engine: stdio; a URL: HTTP).
fn sdk_protocol(py: &Path, home: &Path, ws: &Path, target: &str) {
    run_script(
        py,
        home,
        "sdk_protocol.py",
        target,
        &[("KLAW_WORKSPACE", ws)],
    );
}

/// The protocol beyond tools through the Python SDK: resources (and an attacker's
/// URIs), a skill as a prompt, completion, core memory's subscription, approval asked
/// through elicitation (yes, then no) and, with the fixtures, sampling.
#[test]
fn the_python_sdk_on_resources_prompts_and_elicitation() {
    let Some(py) = python() else { return };
    let home = tempfile::tempdir().unwrap();
    let ws = protocol_workspace(home.path());
    sdk_protocol(&py, home.path(), &ws, env!("CARGO_BIN_EXE_klaw-engine"));
}

/// The same over HTTP: the questions and the update notification travel on the
/// session's streams.
#[test]
fn the_python_sdk_on_resources_prompts_and_elicitation_over_http() {
    let Some(py) = python() else { return };
    let home = tempfile::tempdir().unwrap();
    let ws = protocol_workspace(home.path());
    let server = HttpServer::start("127.0.0.1:0", &[("KLAW_WORKSPACE", ws.to_str().unwrap())]);
    sdk_protocol(
        &py,
        home.path(),
        &ws,
        &format!("http://{}/mcp", server.addr),
    );
}

/// `llm.provider: "mcp-sampling"`: a subagent spawned through MCP runs on the client's
/// model (the Python SDK's sampling callback), tools in the text protocol.
#[test]
fn a_subagent_runs_on_the_clients_model_through_sampling() {
    let Some(py) = python() else { return };
    let home = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/sdk_sampling.py");
    let o = std::process::Command::new(py)
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_klaw-engine"))
        .env_clear()
        .env("HOME", home.path())
        .env("KLAW_CACHE", cache())
        .env("KLAW_LLM_PROVIDER", "mcp-sampling")
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .unwrap();
    let out = stdout(&o);
    assert!(
        o.status.success() && out.contains("ok all"),
        "stdout:\n{out}\nstderr:\n{}",
        stderr(&o)
    );
}

/// `klaw-engine mcp --http` (or `run` with `mcp.enabled`) on a free port, killed when
/// dropped; its stderr is kept.
struct HttpServer {
    child: Child,
    addr: String,
    log: std::sync::Arc<std::sync::Mutex<String>>,
    _home: tempfile::TempDir,
}

impl HttpServer {
    fn start(bind: &str, env: &[(&str, &str)]) -> Self {
        Self::start_limited(bind, env, None)
    }

    /// [`HttpServer::start`], with at most `open_files` open files when given (the soft
    /// and hard limit, set by the shell that starts it).
    fn start_limited(bind: &str, env: &[(&str, &str)], open_files: Option<u32>) -> Self {
        let home = tempfile::tempdir().unwrap();
        Self::launch(home, &["mcp", "--http", bind], env, open_files)
    }

    /// `klaw-engine ARGS` in `home`, which must serve MCP over HTTP.
    fn launch(
        home: tempfile::TempDir,
        args: &[&str],
        env: &[(&str, &str)],
        open_files: Option<u32>,
    ) -> Self {
        let mut cmd = engine(home.path(), args);
        if let Some(n) = open_files {
            let mut sh = std::process::Command::new("sh");
            sh.env_clear()
                .arg("-c")
                .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                .arg(cmd.get_program())
                .args(cmd.get_args());
            for (k, v) in cmd.get_envs() {
                if let Some(v) = v {
                    sh.env(k, v);
                }
            }
            cmd = sh;
        }
        cmd.env("KLAW_CACHE", cache());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = String::new();
        let addr = loop {
            let Some(line) = lines.next() else {
                panic!("the server exits before listening:\n{seen}");
            };
            let line = line.unwrap();
            seen.push_str(&line);
            seen.push('\n');
            if let Some(url) = line.strip_prefix("klaw-engine: MCP over HTTP at http://") {
                // A server on every address is reached on the loopback one.
                break url
                    .trim_end_matches("/mcp")
                    .replace("0.0.0.0:", "127.0.0.1:");
            }
        };
        // Keep draining its log so it never blocks on a full pipe.
        let log = std::sync::Arc::new(std::sync::Mutex::new(seen));
        let kept = std::sync::Arc::clone(&log);
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                let mut k = kept.lock().unwrap();
                k.push_str(&l);
                k.push('\n');
            }
        });
        Self {
            child,
            addr,
            log,
            _home: home,
        }
    }

    /// A raw HTTP/1.1 request; the status and the body.
    fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, String) {
        let (status, _, body) = self.exchange(method, path, headers, body);
        (status, body)
    }

    /// A raw HTTP/1.1 request; the status, the head and the body.
    fn exchange(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, String, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("Host: {}\r\n", self.addr));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        s.write_all(head.as_bytes()).unwrap();
        // The server may answer (413) and close before the whole body is sent.
        let _ = s.write_all(body);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).into_owned();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        (status, head.to_owned(), body.to_owned())
    }

    /// A session opened as a client opens one (`initialize`, then `initialized`): its id.
    fn open_session(&self) -> String {
        let (status, head, body) = self.exchange(
            "POST",
            "/mcp",
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
            ],
            INITIALIZE.as_bytes(),
        );
        assert_eq!(status, 200, "{body}");
        let session = session_id(&head).expect(&head);
        let (status, body) = self.post_mcp(
            &[
                ("Mcp-Session-Id", &session),
                ("Mcp-Protocol-Version", "2025-06-18"),
            ],
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        assert_eq!(status, 202, "{body}");
        session
    }

    fn post_mcp(&self, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        let mut all = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        all.extend_from_slice(headers);
        self.request("POST", "/mcp", &all, body.as_bytes())
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_python_sdk_over_http() {
    let Some(py) = python() else { return };
    let server = HttpServer::start("127.0.0.1:0", &[]);
    let home = tempfile::tempdir().unwrap();
    sdk_client(&py, home.path(), &format!("http://{}/mcp", server.addr));
}

/// `klaw-engine run` with `mcp-sampling`, `mcp.enabled`, a token, and a per-second
/// scheduled job (`JOB-TICK`, added beforehand), `llm.samplingClient` set to `named`.
fn sampling_run(token: &str, named: Option<&str>) -> HttpServer {
    let home = tempfile::tempdir().unwrap();
    let o = engine(
        home.path(),
        &["schedule", "add", "tick", "* * * * * *", "JOB-TICK"],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let mut env = vec![
        ("KLAW_LLM_PROVIDER", "mcp-sampling"),
        ("KLAW_MCP_ENABLED", "true"),
        ("KLAW_MCP_BIND", "127.0.0.1:0"),
        ("KLAW_MCP_TOKEN", token),
    ];
    if let Some(n) = named {
        env.push(("KLAW_LLM_SAMPLING_CLIENT", n));
    }
    HttpServer::launch(home, &["run"], &env, None)
}

/// Sampling sessions do not see each other (`tests/mcp/sdk_sampling_sessions.py`): two
/// clients that offer sampling, `klaw-a` then `klaw-b` (the most recent, where every
/// request used to go). A's subagent is sampled only through A; the scheduled job,
/// which no session started, through neither client, and the run fails saying that
/// `llm.samplingClient` names none.
#[test]
fn sampling_goes_only_to_the_session_that_started_the_work() {
    let Some(py) = python() else { return };
    let token = "test-token-0123456789abcdef";
    let server = sampling_run(token, None);
    let home = tempfile::tempdir().unwrap();
    run_sampling_sessions(&py, home.path(), &server, token, "none");
    let log = server.log.lock().unwrap().clone();
    assert!(
        log.contains("is not sampled through any MCP client unless llm.samplingClient"),
        "{log}"
    );
}

/// With `llm.samplingClient` naming `klaw-b`, the scheduled job is sampled through B and
/// never through A; A's subagent is still A's alone.
#[test]
fn work_no_session_started_goes_to_the_named_client_only() {
    let Some(py) = python() else { return };
    let token = "test-token-0123456789abcdef";
    let server = sampling_run(token, Some("klaw-b"));
    let home = tempfile::tempdir().unwrap();
    run_sampling_sessions(&py, home.path(), &server, token, "named");
}

fn run_sampling_sessions(py: &Path, home: &Path, server: &HttpServer, token: &str, mode: &str) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/sdk_sampling_sessions.py");
    let o = std::process::Command::new(py)
        .arg(script)
        .arg(format!("http://{}/mcp", server.addr))
        .arg(token)
        .arg(mode)
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .unwrap();
    let out = stdout(&o);
    assert!(
        o.status.success() && out.contains("ok all"),
        "stdout:\n{out}\nstderr:\n{}\nengine:\n{}",
        stderr(&o),
        server.log.lock().unwrap()
    );
}

/// With `mcp-sampling` (the provider, or one model of `llm.models`), the HTTP server
/// needs a token even on loopback: `mcp --http` and `run` with `mcp.enabled` refuse to
/// start without one, saying why.
#[test]
fn http_with_sampling_needs_a_token() {
    let home = tempfile::tempdir().unwrap();
    let refused = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = engine(home.path(), args);
        cmd.env("KLAW_CACHE", cache());
        for (k, v) in env {
            cmd.env(k, v);
        }
        // A server that starts anyway is stopped after a while (and fails the test).
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let waiting = std::thread::spawn(move || child.wait_with_output().unwrap());
        let deadline = Instant::now() + Duration::from_secs(30);
        while !waiting.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if !waiting.is_finished() {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
        }
        let o = waiting.join().unwrap();
        let err = stderr(&o);
        assert!(
            !o.status.success()
                && err.contains("without a token")
                && err.contains("mcp-sampling")
                && err.contains("mcp.token")
                && !err.contains("MCP over HTTP at"),
            "{args:?} {env:?}: {err}"
        );
    };
    refused(
        &["mcp", "--http", "127.0.0.1:0"],
        &[("KLAW_LLM_PROVIDER", "mcp-sampling")],
    );
    refused(
        &["run"],
        &[
            ("KLAW_LLM_PROVIDER", "mcp-sampling"),
            ("KLAW_MCP_ENABLED", "true"),
            ("KLAW_MCP_BIND", "127.0.0.1:0"),
        ],
    );
    std::fs::write(
        home.path().join("engine.json"),
        r#"{"llm": {"model": "m", "baseUrl": "http://127.0.0.1:9/v1", "models": {"client": {"provider": "mcp-sampling", "model": "x"}}}}"#,
    )
    .unwrap();
    let config = home.path().join("engine.json");
    refused(
        &["mcp", "--http", "127.0.0.1:0"],
        &[("KLAW_CONFIG", config.to_str().unwrap())],
    );
    // With a token it starts.
    let server = HttpServer::start(
        "127.0.0.1:0",
        &[
            ("KLAW_LLM_PROVIDER", "mcp-sampling"),
            ("KLAW_MCP_TOKEN", "test-token-0123456789abcdef"),
        ],
    );
    let (status, _) = server.request("GET", "/api/v1/tools", &[], b"");
    assert_eq!(status, 401);
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// Hostile HTTP: a foreign Host or Origin (DNS rebinding), a 10 MB body, broken JSON, a
/// batch, an unknown path, a client that hangs up mid-request: each gets a status and a
/// JSON body saying why, and the server goes on.
#[test]
fn hostile_http_requests_are_refused_clearly() {
    let server = HttpServer::start("127.0.0.1:0", &[]);
    let (status, body) = server.request("GET", "/api/v1/tools", &[("Host", "evil.example")], b"");
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("forbidden_host"), "{body}");
    let (status, body) = server.post_mcp(&[("Origin", "http://evil.example")], INITIALIZE);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("forbidden_origin"), "{body}");
    let (status, _) = server.post_mcp(&[("Origin", "http://localhost:3000")], INITIALIZE);
    assert_eq!(status, 200, "a local page may call");

    let big = vec![b' '; 10 << 20];
    let (status, body) = server.request(
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ],
        &big,
    );
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("mcp.maxBodyBytes"), "{body}");

    let (status, body) = server.post_mcp(&[], "{ not json");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("-32700"), "{body}");
    let (status, body) = server.post_mcp(&[], &format!("[{INITIALIZE}]"));
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("-32600") && body.contains("batches"),
        "{body}"
    );
    let (status, body) = server.request("GET", "/admin", &[], b"");
    assert_eq!(status, 404, "{body}");

    // A client that sends half a request and goes away: the server still serves others.
    {
        let mut s = TcpStream::connect(&server.addr).unwrap();
        let _ = s.write_all(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 500\r\n\r\n{\"jsonrpc\"",
        );
    }
    let (status, body) = server.request("GET", "/api/v1/tools", &[], b"");
    assert_eq!(status, 200, "{body}");
    let tools: Value = serde_json::from_str(&body).unwrap();
    assert!(tools["count"].as_u64().unwrap() > 10, "{tools}");
    // The same data as `klaw-engine tools --format json`.
    let home = tempfile::tempdir().unwrap();
    let cli = engine(home.path(), &["tools", "--format", "json"])
        .output()
        .unwrap();
    assert!(cli.status.success(), "{}", stderr(&cli));
    assert_eq!(serde_json::from_str::<Value>(&stdout(&cli)).unwrap(), tools);
    assert!(
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["loaded"] == true && t["inputSchema"].is_object()),
        "{tools}"
    );
}

/// In a session, a body that is not one message is refused as without one (rmcp reads it
/// first there; the guard answers once rmcp has refused it): broken JSON, the same with a
/// wrong Content-Type, a batch, an array that reads as a response's fields. JSON that is
/// not a message keeps rmcp's 415. The session goes on working.
#[test]
fn a_bad_body_in_a_session_is_refused_as_without_one() {
    let server = HttpServer::start("127.0.0.1:0", &[]);
    let session = server.open_session();
    let in_session = [
        ("Mcp-Session-Id", session.as_str()),
        ("Mcp-Protocol-Version", "2025-06-18"),
    ];
    for (bad, code) in [
        ("{ not json", "-32700"),
        (r#"{"jsonrpc":"2.0","id":3,"method":"tools/list""#, "-32700"),
        (&format!("[{INITIALIZE}]"), "-32600"),
        (r#"["2.0", 7, {}]"#, "-32600"),
    ] {
        let (status, body) = server.post_mcp(&in_session, bad);
        assert_eq!(status, 400, "{bad:.60}: {body}");
        assert!(body.contains(code), "{bad:.60}: {body}");
    }
    let as_text = |body: &[u8]| {
        server.request(
            "POST",
            "/mcp",
            &[
                ("Content-Type", "text/plain"),
                ("Accept", "application/json, text/event-stream"),
                ("Mcp-Session-Id", session.as_str()),
                ("Mcp-Protocol-Version", "2025-06-18"),
            ],
            body,
        )
    };
    let (status, body) = as_text(b"{ not json");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("-32700"), "{body}");
    // What rmcp refuses for another reason keeps rmcp's answer: JSON that is not a
    // message (here nested past the parser's depth), a wrong Content-Type.
    let deep = format!("{}1{}", r#"{"a":"#.repeat(100_000), "}".repeat(100_000));
    let (status, body) = server.post_mcp(&in_session, &deep);
    assert_eq!(status, 415, "{body}");
    let (status, body) = as_text(br#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#);
    assert_eq!(status, 415, "{body}");
    let (status, body) = server.post_mcp(
        &in_session,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"current_time","arguments":{}}}"#,
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(r#""id":5"#) && !body.contains(r#""isError":true"#),
        "{body}"
    );
}

/// A non-loopback address needs a token: refused at start-up without one; with one,
/// every request must carry it.
#[test]
fn a_public_bind_needs_and_checks_the_token() {
    let home = tempfile::tempdir().unwrap();
    let o = engine(home.path(), &["mcp", "--http", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("without a token"), "{}", stderr(&o));

    let token = "test-token-0123456789abcdef";
    let server = HttpServer::start("0.0.0.0:0", &[("KLAW_MCP_TOKEN", token)]);
    let (status, body) = server.request("GET", "/api/v1/tools", &[], b"");
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("Bearer"), "{body}");
    let (status, _) = server.request(
        "GET",
        "/api/v1/tools",
        &[("Authorization", "Bearer test-token-0123456789abcdeX")],
        b"",
    );
    assert_eq!(status, 401);
    let bearer = format!("Bearer {token}");
    let (status, body) = server.request("GET", "/api/v1/tools", &[("Authorization", &bearer)], b"");
    assert_eq!(status, 200, "{body}");
    let (status, _) = server.post_mcp(&[("Authorization", &bearer)], INITIALIZE);
    assert_eq!(status, 200);
}

/// What the server sent on `s` until it closed it (end of stream, or a reset), or `None`
/// when `s` is still open at `deadline`.
fn until_closed(s: &mut TcpStream, deadline: Instant) -> Option<String> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return None;
            }
            Err(_) => break,
        }
    }
    Some(String::from_utf8_lossy(&seen).into_owned())
}

/// Slowloris, against a server limited to 256 open files: 300 connections that send half
/// a request's headers and wait, one that trickles its headers a byte at a time, and one
/// that keeps its connection after a refused request. An authorised client is served
/// meanwhile, and the server never holds more connections than `mcp.maxConnections`; each
/// half-sent connection is closed after `mcp.headerTimeoutSeconds` (2 here),
/// the trickling one too, and the refused one at once.
#[test]
fn slowloris_connections_are_closed_and_the_honest_client_served() {
    let token = "test-token-0123456789abcdef";
    let server = HttpServer::start_limited(
        "127.0.0.1:0",
        &[
            ("KLAW_MCP_TOKEN", token),
            ("KLAW_MCP_HEADER_TIMEOUT_SECONDS", "2"),
        ],
        Some(256),
    );
    let bearer = format!("Bearer {token}");
    let half = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n",
        server.addr
    );
    let mut attackers: Vec<TcpStream> = (0..300)
        .map(|_| {
            let mut s = TcpStream::connect(&server.addr).unwrap();
            s.write_all(half.as_bytes()).unwrap();
            s
        })
        .collect();
    // The server holds at most mcp.maxConnections (128 by default) of them: the rest wait
    // in the kernel's queue, and the engine keeps files to open for its own work.
    if cfg!(target_os = "linux") {
        let most = (0..20)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(50));
                sockets(server.child.id())
            })
            .max()
            .unwrap();
        assert!(most <= 128 + 8, "the server holds {most} sockets");
    }
    let addr = server.addr.clone();
    // Writes fail once the server has closed the connection.
    let trickler = std::thread::spawn(move || {
        let mut s = TcpStream::connect(&addr).unwrap();
        let _ = s.write_all(b"GET /api/v1/tools HTTP/1.1\r\nX-Slow: ");
        let deadline = Instant::now() + Duration::from_secs(90);
        while Instant::now() < deadline {
            if s.write_all(b"a").is_err() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    });

    // The honest client waits its turn (no retry needed) and is served.
    let (status, body) = server.request("GET", "/api/v1/tools", &[("Authorization", &bearer)], b"");
    assert_eq!(
        status, 200,
        "an authorised request behind 300 half-sent ones was not served: {body}"
    );

    let deadline = Instant::now() + Duration::from_secs(90);
    for (i, s) in attackers.iter_mut().enumerate() {
        assert!(
            until_closed(s, deadline).is_some(),
            "half-sent connection {i} is still open"
        );
    }
    assert!(
        trickler.join().unwrap(),
        "a connection trickling its headers is still open"
    );

    // A refused request on a kept-alive connection: 401, then the server hangs up.
    let mut refused = TcpStream::connect(&server.addr).unwrap();
    refused
        .write_all(
            format!(
                "GET /api/v1/tools HTTP/1.1\r\nHost: {}\r\n\r\n",
                server.addr
            )
            .as_bytes(),
        )
        .unwrap();
    let answer = until_closed(&mut refused, Instant::now() + Duration::from_secs(30));
    let answer = answer.expect("a refused client kept its connection");
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");

    let (status, body) = server.request("GET", "/api/v1/tools", &[("Authorization", &bearer)], b"");
    assert_eq!(status, 200, "{body}");
}

/// A crowd of `n` connections to `addr`, each sending `half` and then nothing, that
/// reconnects each one the server closes, until `stop`; how many it (re)opened.
fn slow_crowd(addr: &str, half: &str, n: usize, stop: &AtomicBool) -> usize {
    let addr: std::net::SocketAddr = addr.parse().unwrap();
    // A full accept queue must not hold the crowd (and the test) in `connect`.
    let open = || {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
        s.write_all(half.as_bytes()).ok()?;
        s.set_nonblocking(true).ok()?;
        Some(s)
    };
    let mut crowd: Vec<Option<TcpStream>> = (0..n).map(|_| open()).collect();
    let mut opened = n;
    let mut buf = [0u8; 512];
    while !stop.load(Ordering::Relaxed) {
        for slot in &mut crowd {
            let closed = match slot {
                None => true,
                Some(s) => match s.read(&mut buf) {
                    Ok(_) => true,
                    Err(e) => e.kind() != ErrorKind::WouldBlock,
                },
            };
            if closed && !stop.load(Ordering::Relaxed) {
                *slot = open();
                opened += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    opened
}

/// The slow crowd: the engine at 256 open files (soft and hard), 300 connections that
/// send half a request line and stop, reconnecting as soon as the server closes one.
/// An honest client's `initialize` and `tools/list` are answered at once (well under the
/// 10 s header timeout the crowd used to hold every slot for), three times over; the
/// server never holds more than `mcp.maxConnections` sockets. The same with
/// `mcp.maxConnections` at 1,000, more than the open files allow (the server holds
/// fewer, and never runs out of files to accept with), and with a crowd that sends
/// whole headers and half a body.
#[test]
fn an_honest_client_is_answered_at_once_behind_a_reconnecting_slow_crowd() {
    let token = "test-token-0123456789abcdef";
    let server = HttpServer::start_limited("127.0.0.1:0", &[("KLAW_MCP_TOKEN", token)], Some(256));
    honest_behind_a_slow_crowd(&server, token, "POST /mcp HT", 128 + 8);
    let server = HttpServer::start_limited(
        "127.0.0.1:0",
        &[
            ("KLAW_MCP_TOKEN", token),
            ("KLAW_MCP_MAX_CONNECTIONS", "1000"),
        ],
        Some(256),
    );
    honest_behind_a_slow_crowd(&server, token, "POST /mcp HT", 256 - 32);
    // Without a token (loopback), a crowd whose headers are whole but whose bodies
    // stop halfway is as unfinished, and pushed out the same way.
    let server = HttpServer::start_limited("127.0.0.1:0", &[], Some(256));
    let half_body = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\n\r\n{{\"jsonrpc\"",
        server.addr
    );
    honest_behind_a_slow_crowd(&server, token, &half_body, 128 + 8);
}

/// Three rounds of an honest client's `initialize`, `notifications/initialized` and
/// `tools/list` behind 300 reconnecting connections that each send `half`, each round
/// answered within 3 s, the server holding at most `most` sockets.
fn honest_behind_a_slow_crowd(server: &HttpServer, token: &str, half: &str, most: usize) {
    let bearer = format!("Bearer {token}");
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let crowd = scope.spawn(|| slow_crowd(&server.addr, half, 300, &stop));
        let _stop = SetOnDrop(&stop);
        // The crowd is in and holds every slot.
        std::thread::sleep(Duration::from_secs(2));
        for round in 0..3 {
            let started = Instant::now();
            let (status, head, body) = server.exchange(
                "POST",
                "/mcp",
                &[
                    ("Authorization", &bearer),
                    ("Content-Type", "application/json"),
                    ("Accept", "application/json, text/event-stream"),
                ],
                INITIALIZE.as_bytes(),
            );
            assert_eq!(
                status, 200,
                "round {round}: initialize behind the crowd: {body}"
            );
            let session = session_id(&head).expect(&head);
            let headers = [
                ("Authorization", bearer.as_str()),
                ("Mcp-Session-Id", session.as_str()),
                ("Mcp-Protocol-Version", "2025-06-18"),
            ];
            let (status, body) = server.post_mcp(
                &headers,
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            );
            assert_eq!(status, 202, "round {round}: {body}");
            let (status, body) = server.post_mcp(
                &headers,
                r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            );
            assert!(
                status == 200 && body.contains("current_time"),
                "round {round}: tools/list behind the crowd: {status} {body}"
            );
            let took = started.elapsed();
            assert!(
                took < Duration::from_secs(3),
                "round {round}: the honest client waited {took:?} behind the slow crowd"
            );
            if cfg!(target_os = "linux") {
                let held = sockets(server.child.id());
                assert!(held <= most, "the server holds {held} sockets");
            }
        }
        stop.store(true, Ordering::Relaxed);
        let opened = crowd.join().unwrap();
        // The crowd was pushed out and came back (it was not merely queued).
        assert!(opened > 300, "the crowd opened {opened} connections");
    });
}

/// How many sockets the process `pid` has open (Linux).
fn sockets(pid: u32) -> usize {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    fds.flatten()
        .filter(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
        })
        .count()
}

/// The `Mcp-Session-Id` of a response's head.
fn session_id(head: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("mcp-session-id")
            .then(|| v.trim().to_owned())
    })
}

/// Session flood: 200 `initialize` calls from 8 threads, past `mcp.maxSessions` (20 here).
/// Those past the cap get 503 `too_many_sessions` naming the keys; a session opened
/// before the flood keeps working throughout; the flood's sessions, left idle for
/// `mcp.sessionIdleSeconds` (3 here), end (404), and a new client gets a session again.
#[test]
fn an_initialize_flood_is_capped_and_idle_sessions_end() {
    let server = HttpServer::start(
        "127.0.0.1:0",
        &[
            ("KLAW_MCP_MAX_SESSIONS", "20"),
            ("KLAW_MCP_SESSION_IDLE_SECONDS", "3"),
        ],
    );
    let ping = |server: &HttpServer, session: &str| {
        server.post_mcp(
            &[
                ("Mcp-Session-Id", session),
                ("Mcp-Protocol-Version", "2025-06-18"),
            ],
            r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
        )
    };
    let honest = server.open_session();

    // The honest client goes on working, every 300 ms, through the flood and after it.
    let done = AtomicBool::new(false);
    let failures = std::thread::scope(|scope| {
        let pinger = scope.spawn(|| {
            let mut failures = Vec::new();
            while !done.load(Ordering::Relaxed) {
                let (status, body) = ping(&server, &honest);
                if status != 200 || !body.contains("\"result\"") {
                    failures.push(format!("{status} {body}"));
                }
                std::thread::sleep(Duration::from_millis(300));
            }
            failures
        });
        // Stops the pinger however this ends (a failed assertion too).
        let _stop = SetOnDrop(&done);

        let flood: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    (0..25)
                        .map(|_| {
                            server.exchange(
                                "POST",
                                "/mcp",
                                &[
                                    ("Content-Type", "application/json"),
                                    ("Accept", "application/json, text/event-stream"),
                                ],
                                INITIALIZE.as_bytes(),
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let answers: Vec<_> = flood.into_iter().flat_map(|t| t.join().unwrap()).collect();
        let flooded: Vec<String> = answers
            .iter()
            .filter(|(status, _, _)| *status == 200)
            .map(|(_, head, _)| session_id(head).expect(head))
            .collect();
        let refused: Vec<_> = answers
            .iter()
            .filter(|(status, _, _)| *status != 200)
            .collect();
        assert!(
            !refused.is_empty(),
            "all {} initialize calls made a session",
            answers.len()
        );
        for (status, head, body) in &refused {
            assert_eq!(*status, 503, "{head}\n{body}");
            let why: Value = serde_json::from_str(body).expect(body);
            assert_eq!(why["error"], "too_many_sessions", "{why}");
            let message = why["message"].as_str().unwrap();
            assert!(
                message.contains("mcp.maxSessions") && message.contains("mcp.sessionIdleSeconds"),
                "{message}"
            );
            assert!(
                head.to_ascii_lowercase().contains("retry-after: 3"),
                "{head}"
            );
        }

        // Idle, the flood's sessions end: a new client gets in, and an ended session's
        // client gets 404 (each is asked once: a question would keep it alive).
        assert!(
            !flooded.is_empty(),
            "no initialize of the flood made a session"
        );
        assert!(
            eventually(60, || server.post_mcp(&[], INITIALIZE).0 == 200),
            "no session slot came free"
        );
        let statuses: Vec<u16> = flooded.iter().map(|s| ping(&server, s).0).collect();
        assert!(
            statuses.contains(&404) && statuses.iter().all(|s| [200, 404].contains(s)),
            "{statuses:?}"
        );
        done.store(true, Ordering::Relaxed);
        pinger.join().unwrap()
    });
    assert!(
        failures.is_empty(),
        "the honest session failed: {failures:?}"
    );
    let (status, body) = ping(&server, &honest);
    assert_eq!(status, 200, "{body}");
}

/// Sets its flag when dropped.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Raw lines: a line that is not JSON (or not UTF-8) gets a parse error and the server
/// keeps serving; a JSON-RPC batch gets -32600; a `tools/call` without a name gets
/// -32602 with its own id (the client is not left waiting); a bad cursor -32602.
#[test]
fn malformed_lines_get_errors_and_the_server_goes_on() {
    let home = tempfile::tempdir().unwrap();
    let mut child = engine(home.path(), &["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "this is not json {",
        r#"[{"jsonrpc":"2.0","id":2,"method":"ping"}]"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"current_time","arguments":{"timezone":"UTC"}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"cursor":"not-a-cursor"}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"arguments":{}}}"#,
    ];
    let mut stdin = child.stdin.take().unwrap();
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
    }
    stdin.write_all(b"\xff\xfe not utf-8\n").unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":6,"method":"ping"}}"#).unwrap();
    // The server answers what it read before the end of stdin, then stops.
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    let answers: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_id = |id: Value| answers.iter().find(|a| a["id"] == id).cloned();
    assert!(
        answers
            .iter()
            .any(|a| a["id"].is_null() && a["error"]["code"] == -32700),
        "no parse error: {answers:#?}\n{}",
        stderr(&o)
    );
    assert!(
        answers
            .iter()
            .any(|a| a["id"].is_null() && a["error"]["code"] == -32600),
        "no invalid-request error for the batch: {answers:#?}"
    );
    let call = by_id(Value::from(3)).unwrap();
    assert_eq!(
        call["result"]["structuredContent"]["timezone"], "UTC",
        "{call}"
    );
    let list = by_id(Value::from(4)).unwrap();
    assert_eq!(list["error"]["code"], -32602, "{list}");
    let nameless = by_id(Value::from(5)).unwrap();
    assert_eq!(nameless["error"]["code"], -32602, "{nameless}");
    let parse_errors = answers
        .iter()
        .filter(|a| a["id"].is_null() && a["error"]["code"] == -32700)
        .count();
    assert_eq!(parse_errors, 2, "not JSON, not UTF-8: {answers:#?}");
    assert!(
        by_id(Value::from(6)).unwrap()["result"].is_object(),
        "served after them"
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

/// The `_meta` every request of the stateless protocol (2026-07-28) carries.
const STATELESS_META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}"#;

fn stateless_headers<'a>(method: &'a str, name: &'a str) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![
        ("Mcp-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
    ];
    if !name.is_empty() {
        h.push(("Mcp-Name", name));
    }
    h
}

/// The stateless protocol (2026-07-28): no `initialize`; `server/discover` says what
/// the server is, and a `tools/call` carries its own log level.
#[cfg(feature = "fixtures")] // the logging fixture
#[test]
fn the_stateless_protocol_discovers_and_calls() {
    let server = HttpServer::start("127.0.0.1:0", &[]);
    let discover = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{{STATELESS_META}}}}}}}"#
    );
    let (status, body) = server.post_mcp(&stateless_headers("server/discover", ""), &discover);
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("\"2026-07-28\"")
            && body.contains("\"tools\"")
            && body.contains("\"logging\""),
        "{body}"
    );

    let call = |level: &str| {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"test_tool_with_logging","arguments":{{}},{STATELESS_META},"io.modelcontextprotocol/logLevel":"{level}"}}}}}}"#
        );
        server.post_mcp(
            &stateless_headers("tools/call", "test_tool_with_logging"),
            &body,
        )
    };
    let (status, body) = call("debug");
    assert_eq!(status, 200, "{body}");
    let started = body.find("Tool execution started").expect(&body);
    let completed = body.find("Tool execution completed").expect(&body);
    let result = body.find("Logging test completed").expect(&body);
    assert!(started < completed && completed < result, "{body}");
    let (status, body) = call("error");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("Logging test completed") && !body.contains("notifications/message"),
        "{body}"
    );
}

/// The live pids of the processes whose command line is `sleep <mark>`.
fn sleepers(mark: &str) -> Vec<String> {
    processes_with(&format!("sleep\0{mark}\0"))
}

/// A client that goes away ends its calls: a stateless request whose connection
/// closes mid-call, and a session deleted while its call runs, each have their `exec`'s
/// process tree killed (a stateful client that only drops one response stream may
/// come back for it: the spec says that is not a cancellation).
#[cfg(target_os = "linux")]
#[test]
fn calls_end_when_their_client_goes_away() {
    let server = HttpServer::start("127.0.0.1:0", &[]);
    let mark = (900_000 + std::process::id()).to_string();
    let exec = |extra: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"exec","arguments":{{"command":"sleep {mark}","timeout":300}}{extra}}}}}"#
        )
    };
    let send = |headers: &[(&str, &str)], body: &str| {
        let mut s = TcpStream::connect(&server.addr).unwrap();
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            server.addr,
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        s.write_all(format!("{head}\r\n{body}").as_bytes()).unwrap();
        s
    };

    // Stateless: the connection is the request.
    let conn = send(
        &stateless_headers("tools/call", "exec"),
        &exec(&format!(",{STATELESS_META}}}")),
    );
    assert!(
        eventually(30, || !sleepers(&mark).is_empty()),
        "the command never started"
    );
    drop(conn);
    assert!(
        eventually(15, || sleepers(&mark).is_empty()),
        "{:?} outlived its client",
        sleepers(&mark)
    );

    // Stateful: a session with a call running is deleted.
    let (status, head) = {
        let mut s = send(&[], INITIALIZE);
        let mut out = Vec::new();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 4096];
        // The headers and the first event are enough (the stream stays open).
        while !String::from_utf8_lossy(&out).contains("\"result\"") {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "{}", String::from_utf8_lossy(&out));
            out.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&out).into_owned();
        (
            text.split_whitespace().nth(1).unwrap_or("").to_owned(),
            text,
        )
    };
    assert_eq!(status, "200", "{head}");
    let session = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_owned())
        })
        .expect(&head);
    let with_session = [
        ("Mcp-Session-Id", session.as_str()),
        ("Mcp-Protocol-Version", "2025-06-18"),
    ];
    let (status, body) = server.post_mcp(
        &with_session,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(status, 202, "{body}");
    let _stream = send(&with_session, &exec(""));
    assert!(
        eventually(30, || !sleepers(&mark).is_empty()),
        "the command never started"
    );
    let (status, body) = server.request("DELETE", "/mcp", &with_session, b"");
    // 200 or 204: clients report a 202 as a failed termination.
    assert!(status == 200 || status == 204, "{status} {body}");
    assert!(
        eventually(15, || sleepers(&mark).is_empty()),
        "{:?} outlived its session",
        sleepers(&mark)
    );
}

/// What is normal in MCP 2026-07-28 is answered as the version says and logs no
/// warning: a removed method is not found (HTTP 404, -32601, its id kept), a
/// `subscriptions/listen` stream is acknowledged with its subscription id, and a call
/// whose client goes away ends without a warning (it was one `WARN` line per
/// cancellation and per stream).
#[cfg(target_os = "linux")]
#[test]
fn the_stateless_protocol_without_warnings() {
    let server = HttpServer::start("127.0.0.1:0", &[]);
    for method in ["initialize", "logging/setLevel", "resources/subscribe"] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":"r1","method":"{method}","params":{{{STATELESS_META}}}}}}}"#
        );
        let (status, body) = server.post_mcp(&stateless_headers(method, ""), &body);
        assert_eq!(status, 404, "{method}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["error"]["code"], -32601, "{body}");
        assert_eq!(v["id"], "r1", "{body}");
    }
    // An older client's handshake is untouched.
    let (status, body) = server.post_mcp(&[], INITIALIZE);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"protocolVersion\""), "{body}");

    let open = |body: &str, method: &str, name: &str| {
        let mut s = TcpStream::connect(&server.addr).unwrap();
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            server.addr,
            body.len()
        );
        for (k, v) in stateless_headers(method, name) {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        s.write_all(format!("{head}\r\n{body}").as_bytes()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    };
    let listen = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{STATELESS_META}}}}}}}"#
    );
    let mut stream = open(&listen, "subscriptions/listen", "");
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("subscriptionId") {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    let seen = String::from_utf8_lossy(&seen);
    assert!(
        seen.starts_with("HTTP/1.1 200")
            && seen.contains("notifications/subscriptions/acknowledged"),
        "{seen}"
    );
    drop(stream);

    let mark = (910_000 + std::process::id()).to_string();
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"exec","arguments":{{"command":"sleep {mark}","timeout":300}},{STATELESS_META}}}}}}}"#
    );
    let conn = open(&call, "tools/call", "exec");
    assert!(
        eventually(30, || !sleepers(&mark).is_empty()),
        "the command never started"
    );
    drop(conn);
    assert!(
        eventually(15, || sleepers(&mark).is_empty()),
        "{:?} outlived its client",
        sleepers(&mark)
    );
    std::thread::sleep(Duration::from_millis(300));
    let log = server.log.lock().unwrap().clone();
    assert!(!log.contains(" WARN "), "{log}");
}

/// Over stdio too, a request of MCP 2026-07-28 (its version in its `_meta`) for a
/// method that version removed is not found (-32601), whatever its params; the
/// session's own requests (2025-06-18, no such `_meta`) keep them.
#[test]
fn removed_methods_over_stdio_in_2026_07_28() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = engine(home.path(), &["mcp"]);
    cmd.env("KLAW_CACHE", cache());
    let mut c = common::mcp_client::Mcp::start(cmd);
    let meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}
    });
    for (method, params) in [
        (
            "logging/setLevel",
            serde_json::json!({"level": "debug", "_meta": meta}),
        ),
        ("logging/setLevel", serde_json::json!({"_meta": meta})),
        ("initialize", serde_json::json!({"_meta": meta})),
        ("resources/subscribe", serde_json::json!({"_meta": meta})),
    ] {
        let r = c.request(method, params);
        assert_eq!(r["error"]["code"], -32601, "{method}: {r}");
    }
    let r = c.request("logging/setLevel", serde_json::json!({"level": "debug"}));
    assert!(r.get("result").is_some(), "{r}");
}

/// Issue 42, hole 10 through `resources/read`: `klaw://skills/{name}/{file}` of a link
/// out of the skill's folder (to the data dir's `memory.sqlite`, to `/etc/passwd`) is
/// an error that carries nothing of the file, for a system and a workspace skill; a
/// link inside the folder is read.
#[cfg(feature = "skills")]
#[test]
fn skill_resources_are_read_only_beneath_the_skills_folder() {
    use serde_json::json;
    let home = tempfile::tempdir().unwrap();
    let (data, ws) = common::dirs(home.path());
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("memory.sqlite"), "SECRET of the data dir").unwrap();
    std::fs::write(ws.join("private.md"), "SECRET of the workspace").unwrap();
    for (root, name, out) in [
        (&data, "sys", "../../memory.sqlite"),
        (&ws, "wsk", "../../private.md"),
    ] {
        let dir = root.join("skills").join(name);
        std::fs::create_dir_all(dir.join("refs")).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: has links\n---\n# {name}\n"),
        )
        .unwrap();
        std::fs::write(dir.join("refs/guide.md"), "the guide").unwrap();
        std::os::unix::fs::symlink("refs/guide.md", dir.join("guide")).unwrap();
        std::os::unix::fs::symlink(out, dir.join("db")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("passwd")).unwrap();
    }
    let mut c = common::mcp_client::Mcp::start(common::engine_in(home.path(), &["mcp"]));
    for skill in ["sys", "wsk"] {
        let read = |c: &mut common::mcp_client::Mcp, file: &str| {
            c.request(
                "resources/read",
                json!({"uri": format!("klaw://skills/{skill}/{file}")}),
            )
        };
        let r = read(&mut c, "guide");
        assert_eq!(r["result"]["contents"][0]["text"], "the guide", "{r}");
        for file in ["db", "passwd"] {
            let r = read(&mut c, file);
            assert!(r["error"].is_object(), "{skill} {file}: {r}");
            assert!(!r.to_string().contains("SECRET"), "{skill} {file}: {r}");
            assert!(!r.to_string().contains("root:"), "{skill} {file}: {r}");
        }
    }
    assert!(c.finish().success());
}

/// MCP's tasks extension through rmcp's own client (over stdio, the extension declared
/// at `initialize`): a long `exec` is answered with a task handle, `tasks/get` reports
/// it working, `tasks/cancel` kills its process tree and the task ends `cancelled`; a
/// task's question (`confirm_delete`, a fixture) is `input_required` until
/// `tasks/update` answers it, then the task completes with its result inlined; a quick
/// tool is answered as usual.
#[cfg(all(target_os = "linux", feature = "fixtures"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_calls_run_as_tasks_for_an_rmcp_client() {
    use rmcp::ServiceExt;
    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientConfig, GetTaskParams,
        Implementation, TaskPayload, TaskStatus, UpdateTaskParams,
    };

    let home = tempfile::tempdir().unwrap();
    let cmd = common::engine_in(home.path(), &["mcp"]);
    let transport =
        rmcp::transport::TokioChildProcess::new(tokio::process::Command::from(cmd)).unwrap();
    // No elicitation declared: `exec`'s approval is not asked (a task's questions are
    // the task's, whatever the client declared).
    let capabilities = serde_json::from_value(serde_json::json!({
        "extensions": {"io.modelcontextprotocol/tasks": {}}
    }))
    .unwrap();
    let client = ClientConfig::new(capabilities, Implementation::new("tasks-test", "1"))
        .serve(transport)
        .await
        .unwrap();
    let advertised = client.peer_info().unwrap().capabilities.supports_tasks();
    assert!(
        advertised,
        "the server does not advertise the tasks extension"
    );
    let call = |name: &str, args: Value| {
        let mut p = CallToolRequestParams::new(name.to_owned());
        p.arguments = args.as_object().cloned();
        p
    };
    let get = |id: String| {
        let client = &client;
        async move { client.get_task(GetTaskParams::new(id)).await.unwrap().task }
    };
    // Polls until the task's status is `want` (or it ended otherwise), for 30 s.
    let until = |id: String, want: TaskStatus| async move {
        let started = Instant::now();
        loop {
            let task = get(id.clone()).await;
            if task.status() == want || task.status().is_terminal() {
                return task;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "{task:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };

    // A quick tool: a plain result.
    let quick = client
        .call_tool_once(call("current_time", serde_json::json!({})))
        .await
        .unwrap();
    assert!(matches!(quick, CallToolResponse::Complete(_)), "{quick:?}");

    // A long exec: a task; cancelled, its process tree is killed.
    let mark = (910_000 + std::process::id()).to_string();
    let created = client
        .call_tool_once(call(
            "exec",
            serde_json::json!({"command": format!("sleep {mark}"), "timeout": 300}),
        ))
        .await
        .unwrap();
    let CallToolResponse::Task(created) = created else {
        panic!("exec did not become a task: {created:?}")
    };
    let id = created.task.task_id.clone();
    assert_eq!(created.task.status, TaskStatus::Working);
    assert!(created.task.ttl_ms.is_some_and(|t| t > 0), "{created:?}");
    assert!(
        eventually(30, || !sleepers(&mark).is_empty()),
        "the command never started"
    );
    assert_eq!(get(id.clone()).await.status(), TaskStatus::Working);
    client
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap();
    let ended = until(id.clone(), TaskStatus::Cancelled).await;
    assert_eq!(ended.status(), TaskStatus::Cancelled, "{ended:?}");
    assert!(
        eventually(15, || sleepers(&mark).is_empty()),
        "{:?} outlived its cancelled task",
        sleepers(&mark)
    );
    // Cancelling an ended task changes nothing.
    client
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap();
    assert_eq!(get(id).await.status(), TaskStatus::Cancelled);

    // A task's question waits for tasks/update; answered, the task completes.
    let created = client
        .call_tool_once(call(
            "confirm_delete",
            serde_json::json!({"filename": "old.txt"}),
        ))
        .await
        .unwrap();
    let CallToolResponse::Task(created) = created else {
        panic!("confirm_delete did not become a task: {created:?}")
    };
    let id = created.task.task_id.clone();
    let waiting = until(id.clone(), TaskStatus::InputRequired).await;
    let TaskPayload::InputRequired { input_requests } = &waiting.payload else {
        panic!("{waiting:?}")
    };
    let keys: Vec<String> = input_requests.keys().cloned().collect();
    assert_eq!(keys, ["confirm"], "{waiting:?}");
    let answers = keys
        .into_iter()
        .map(|k| {
            (
                k,
                serde_json::json!({"action": "accept", "content": {"confirm": true}}),
            )
        })
        .collect();
    client
        .update_task(UpdateTaskParams::new(id.clone(), answers))
        .await
        .unwrap();
    let done = until(id, TaskStatus::Completed).await;
    let TaskPayload::Completed { result } = &done.payload else {
        panic!("{done:?}")
    };
    assert_eq!(result["content"][0]["text"], "deleted old.txt", "{done:?}");
    client.cancel().await.unwrap();
}
