//! What the `klaw-engine` binary tests share: the command with a clean environment, the
//! model cache `make setup` fills, and the output as text.

#![allow(dead_code)] // each test file uses its own part

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
pub(crate) mod scripted;
