//! Crash safety of `file_write` overwrites: a writer process is killed with SIGKILL in
//! the middle of large overwrites; the file under its name is afterwards the old
//! content or the new one, whole, never a mix or a prefix.
//!
//! The writer is this same test binary, run again with an environment variable.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use klaw_tools::{Limits, ToolContext, ToolRegistry};
use serde_json::json;

const WRITER_ENV: &str = "KLAW_FILES_CRASH_WRITER";
const TEST_NAME: &str = "kill_9_during_overwrite_leaves_the_old_or_the_new_file";
/// Bytes per version: large enough that a write and its fsync take a while.
const SIZE: usize = 8 << 20;

/// Version `n` of the file: SIZE copies of one letter.
fn version(n: u64) -> u8 {
    b'a' + (n % 26) as u8
}

/// The writer: overwrites `big.bin` with version 1, 2, 3... and reports each start and
/// end on stdout, until killed (or after many rounds, should the parent vanish).
fn writer(workspace: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let registry = ToolRegistry::collect().unwrap();
    let ctx = ToolContext::builder()
        .workspace(workspace)
        .limits(Limits::default().with_max_file_size_bytes(SIZE as u64))
        .build();
    rt.block_on(async {
        for n in 1..=10_000_u64 {
            let content = String::from_utf8(vec![version(n); SIZE]).unwrap();
            println!("start {n}");
            registry
                .execute(
                    &ctx,
                    "file_write",
                    json!({"path": "big.bin", "content": content, "mode": "overwrite"}),
                )
                .await
                .unwrap();
            println!("done {n}");
        }
    });
}

/// The test `name` of this file by its full path in the test binary: `files_crash::{name}`
/// (this file is a module of `tests/all.rs`), as `--exact` wants it.
fn test_path(name: &str) -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_owned(),
    }
}

#[test]
fn kill_9_during_overwrite_leaves_the_old_or_the_new_file() {
    if let Ok(ws) = std::env::var(WRITER_ENV) {
        writer(&ws);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let target = ws.join("big.bin");
    for round in 0..6_u64 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                &test_path(TEST_NAME),
                "--nocapture",
                "--test-threads=1",
            ])
            .env(WRITER_ENV, ws)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // Let a few versions complete, then kill while the next one is being written,
        // at a different moment in each round.
        let wait_for = format!("start {}", 2 + round % 3);
        let mut log = Vec::new();
        for line in lines.by_ref() {
            let line = line.unwrap();
            let go = line == wait_for;
            log.push(line);
            if go {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(round * 7));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        log.extend(lines.map_while(Result::ok));

        let last_start: u64 = log
            .iter()
            .filter_map(|l| l.strip_prefix("start "))
            .filter_map(|n| n.parse().ok())
            .max()
            .unwrap_or_else(|| panic!("the writer did not start: {log:?}"));
        let bytes = std::fs::read(&target).unwrap();
        assert_eq!(bytes.len(), SIZE, "round {round}: a partial file: {log:?}");
        let first = bytes[0];
        assert!(
            bytes.iter().all(|&b| b == first),
            "round {round}: a mix of versions"
        );
        // The write in flight either landed whole or not at all.
        assert!(
            first == version(last_start) || first == version(last_start - 1),
            "round {round}: version {:?} after starting {last_start}",
            first as char
        );
        eprintln!(
            "round {round}: killed during write {last_start}; file holds version {}",
            if first == version(last_start) {
                last_start
            } else {
                last_start - 1
            }
        );
        stray_temporaries_are_hidden(ws);
    }
}

/// Only `big.bin` and hidden temporaries from killed writes may be there.
fn stray_temporaries_are_hidden(ws: &Path) {
    for e in std::fs::read_dir(ws).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        assert!(
            name == "big.bin" || (name.starts_with(".big.bin.klaw-") && name.ends_with(".tmp")),
            "unexpected file {name}"
        );
    }
}
