//! `telegram-test-api`, a fake Telegram Bot API (npm, installed with Node 22 by
//! `scripts/setup-test-tools.sh`), started through `tests/telegram/start.js` on a free
//! loopback port; stopped when dropped.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The running fake server.
pub(crate) struct FakeTelegram {
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    child: Child,
}

impl FakeTelegram {
    /// Starts it; `None` (said why) when it is not installed.
    pub(crate) fn start(cache: &Path) -> Option<Self> {
        let modules = cache.join("node22/node_modules");
        let node = modules.join(".bin/node");
        if !modules.join("telegram-test-api").exists() || !node.exists() {
            eprintln!(
                "telegram-test-api is not installed under {} (scripts/setup-test-tools.sh)",
                modules.display()
            );
            return None;
        }
        let launcher = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/telegram/start.js");
        let mut child = Command::new(node)
            .arg(launcher)
            .arg("0")
            .env("NODE_PATH", &modules)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("the fake Telegram said {line:?}"))
            .to_owned();
        Some(Self {
            url: format!("http://127.0.0.1:{port}"),
            child,
        })
    }
}

impl Drop for FakeTelegram {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
