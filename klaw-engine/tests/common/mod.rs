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
pub(crate) mod fake_telegram;
pub(crate) mod mcp_client;
pub(crate) mod scripted;

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
