//! What the `klaw-engine` binary tests share: the command with a clean environment, the
//! model cache `make setup` fills, and the output as text.

#![allow(dead_code)] // each test file uses its own part

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output};
use std::time::{Duration, Instant};

/// The `klaw-engine` binary with `args`, an empty environment but `PATH`, `HOME = home`
/// and `TZ = UTC`: nothing of the developer's setup leaks in.
pub(crate) fn engine(home: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_klaw-engine"));
    c.args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("TZ", "UTC");
    c
}

/// The data dir and the workspace of a test, side by side under `home`.
pub(crate) fn dirs(home: &Path) -> (PathBuf, PathBuf) {
    (home.join("data"), home.join("ws"))
}

/// [`engine`] with its data dir and workspace under `home` ([`dirs`]), logging errors
/// only.
pub(crate) fn engine_in(home: &Path, args: &[&str]) -> Command {
    let (data, ws) = dirs(home);
    let mut cmd = engine(home, args);
    cmd.env("KLAW_DATA", &data)
        .env("KLAW_WORKSPACE", &ws)
        .env("KLAW_LOG_LEVEL", "error");
    cmd
}

/// The engine `chat` runs, assembled in this process on a temporary home: every tool
/// registered (a model configured, its server never asked). Keep the directory while
/// the engine is used.
pub(crate) fn assembled() -> (tempfile::TempDir, klaw_engine::Engine) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().to_owned();
    let env = move |name: &str| match name {
        "HOME" => Some(home.display().to_string()),
        "KLAW_CONFIG" => Some(home.join("engine.json").display().to_string()),
        "KLAW_LLM_BASE_URL" => Some("http://127.0.0.1:9/v1".to_owned()),
        "KLAW_LLM_MODEL" => Some("none".to_owned()),
        _ => None,
    };
    std::fs::write(dir.path().join("engine.json"), "{}").unwrap();
    let config = klaw_engine::Config::load_with(&env).unwrap();
    let app = klaw_engine::App::for_listing(config).unwrap();
    let engine = app.engine().clone();
    (dir, engine)
}

/// The cache `make setup` fills: `KLAW_CACHE`, else `~/.cache/klaw`.
pub(crate) fn cache() -> PathBuf {
    klaw_tools::cache_dir().expect("neither KLAW_CACHE nor HOME is set")
}

/// Standard output, as text.
pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Standard error, as text.
pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
/// `path` (under the cache) when `scripts/setup-test-tools.sh` has installed it, else
/// `None` (said why); under CI (`CI=true`) its absence fails the test instead.
pub(crate) fn installed(path: PathBuf) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    let why = format!(
        "{} is missing: run scripts/setup-test-tools.sh",
        path.display()
    );
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
    eprintln!("skipping: {why}");
    None
}

/// The test tools' Python (`<cache>/venv-test`: the MCP SDK, FastMCP).
pub(crate) fn test_python() -> Option<PathBuf> {
    installed(cache().join("venv-test/bin/python"))
}

/// Waits up to `secs` for `cond` (checked every 50 ms); whether it became true.
pub(crate) fn eventually(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cond()
}

/// The pids of the live (not zombie) processes whose command line (its arguments
/// joined by NUL bytes) contains `mark`.
pub(crate) fn processes_with(mark: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z');
        if !zombie && String::from_utf8_lossy(&cmdline).contains(mark) {
            found.push(pid);
        }
    }
    found
}

pub(crate) mod fake_telegram;
pub(crate) mod mcp_client;
pub(crate) mod nginx;
pub(crate) mod postgres;
pub(crate) mod scripted;

/// Runs `cmd` with `input` on its stdin and waits for its output.
pub(crate) fn run_with_stdin(mut cmd: Command, input: &str) -> Output {
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A process that fails at start-up may be gone before its input is written.
    let _ = std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes());
    child.wait_with_output().unwrap()
}

/// Sends SIGTERM to `child` and waits (up to 60 s) for its exit.
pub(crate) fn terminate(child: &mut Child) -> ExitStatus {
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    wait_exit(child)
}

/// Waits (up to 60 s) for `child`'s exit after a signal.
pub(crate) fn wait_exit(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "no exit 60 s after the signal");
        std::thread::sleep(Duration::from_millis(50));
    }
}
