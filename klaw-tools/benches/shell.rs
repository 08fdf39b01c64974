//! Round trip of `exec` with `true` (the shell line, so `sh -c true`): through the
//! registry, with each sandbox mode that works on this machine (off, bwrap, landlock),
//! beside `plain_spawn`, the same `sh -c true` started from Rust with its output piped
//! and waited for (issue 32's yardstick: Landlock within 2.5x, bwrap within 3x of it),
//! and `plain_spawn_pre_exec`, the same with the `pre_exec` hook that closes inherited
//! descriptors (what a command without the helper gets), which makes it a `fork`.
//! Modes that do not work are skipped with the reason printed.
//!
//! Run with: cargo bench -p klaw-tools --bench shell

#![allow(clippy::unwrap_used, clippy::expect_used)] // bench code: a panic is a failed run

use criterion::{Criterion, criterion_group, criterion_main};
use klaw_tools::testing::Kit;
use klaw_tools::tools::shell::{SandboxHelper, SandboxMode, ShellSettings};
use serde_json::json;

const HELPER: &str = env!("CARGO_BIN_EXE_klaw-sandbox");

fn exec_true(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("exec_true");
    g.sample_size(30);
    for (name, hook) in [("plain_spawn", false), ("plain_spawn_pre_exec", true)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut cmd = std::process::Command::new("sh");
                cmd.args(["-c", "true"]).stdin(std::process::Stdio::null());
                if hook {
                    // The `pre_exec` hook of a command without the helper (issue 13): the
                    // standard library forks instead of using `posix_spawn`.
                    klaw_sandbox::close_inherited_fds(&mut cmd);
                }
                assert!(cmd.output().unwrap().status.success());
            });
        });
    }
    for (name, mode) in [
        ("off", SandboxMode::Off),
        ("bwrap", SandboxMode::Bwrap),
        ("landlock", SandboxMode::Landlock),
    ] {
        if let Err(why) = klaw_sandbox::describe(mode, Some(std::path::Path::new(HELPER))) {
            eprintln!("skipping {name}: {why}");
            continue;
        }
        let shell = ShellSettings::default().with_sandbox(mode);
        let kit = Kit::new()
            .unwrap()
            .with_context(|b| b.service(SandboxHelper::new(HELPER)).service(shell));
        g.bench_function(name, |b| {
            b.iter(|| {
                let out = rt
                    .block_on(kit.call("exec", json!({"command": "true"})))
                    .unwrap();
                assert_eq!(out.structured().unwrap()["exitCode"], 0);
            });
        });
    }
    g.finish();
}

criterion_group!(benches, exec_true);
criterion_main!(benches);
