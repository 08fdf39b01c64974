//! Round trip of `exec` with `true` (the shell line, so `sh -c true`): through the
//! registry, with each sandbox mode that works on this machine (off, bwrap, landlock),
//! each both with a helper per command (`<mode>`, what a one-shot `klaw-engine call
//! exec` does) and through the sandbox server of a serving engine (`<mode>_served`),
//! beside `plain_spawn`, the same `sh -c true` started from
//! Rust with its output piped and waited for (issue 32's yardstick: Landlock within
//! 2.5x, bwrap within 3x of it), and `plain_spawn_pre_exec`, the same with the
//! `pre_exec` hook that closes inherited descriptors (what a command without the helper
//! gets), which makes it a `fork`. Modes that do not work are skipped with the reason
//! printed.
//!
//! After criterion's groups, `paired` times every variant once per round, in turn, for
//! `KLAW_BENCH_ROUNDS` rounds (default 200), and prints each one's median and its ratio
//! to the plain spawn: load that comes and goes then weighs on all of them alike.
//! `KLAW_BENCH_ONLY` (names, comma-separated) keeps only some variants; a criterion
//! filter that matches none (`-- paired`) runs only the paired rounds.
//! `KLAW_BENCH_HELPERS` (`name=path`, comma-separated) adds Landlock through other
//! builds of the helper (`landlock_<name>`, `landlock_served_<name>`): a change to the
//! helper measured against the build before it in the same rounds.
//!
//! Run with: cargo bench -p klaw-tools --bench shell

#![allow(clippy::unwrap_used, clippy::expect_used)] // bench code: a panic is a failed run

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use klaw_tools::testing::Kit;
use klaw_tools::tools::shell::{SandboxHelper, SandboxMode, SandboxServer, ShellSettings};
use serde_json::json;

const HELPER: &str = env!("CARGO_BIN_EXE_klaw-sandbox");

/// One way of running `sh -c true`, timed as a whole.
type Variant = (String, Box<dyn Fn()>);

fn variants(rt: &'static tokio::runtime::Runtime) -> Vec<Variant> {
    let mut out: Vec<Variant> = Vec::new();
    for (name, hook) in [("plain_spawn", false), ("plain_spawn_pre_exec", true)] {
        out.push((
            name.into(),
            Box::new(move || {
                let mut cmd = std::process::Command::new("sh");
                cmd.args(["-c", "true"]).stdin(std::process::Stdio::null());
                if hook {
                    // The `pre_exec` hook of a command without the helper (issue 13):
                    // the standard library forks instead of using `posix_spawn`.
                    klaw_sandbox::close_inherited_fds(&mut cmd);
                }
                assert!(cmd.output().unwrap().status.success());
            }),
        ));
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
        for (suffix, server) in [
            ("", SandboxServer::Never),
            ("_served", SandboxServer::Always),
        ] {
            out.push(exec_through(
                rt,
                format!("{name}{suffix}"),
                mode,
                server,
                HELPER,
            ));
        }
    }
    // `KLAW_BENCH_HELPERS=old=/path/to/klaw-sandbox,...`: Landlock through other builds
    // of the helper too (`landlock_old`, `landlock_served_old`), in the same rounds.
    if let Ok(extra) = std::env::var("KLAW_BENCH_HELPERS") {
        for item in extra.split(',') {
            let (name, path) = item.split_once('=').expect("KLAW_BENCH_HELPERS: name=path");
            let path: &'static str = Box::leak(path.to_owned().into_boxed_str());
            for (suffix, server) in [
                ("", SandboxServer::Never),
                ("_served", SandboxServer::Always),
            ] {
                let name = format!("landlock{suffix}_{name}");
                out.push(exec_through(rt, name, SandboxMode::Landlock, server, path));
            }
        }
    }
    // `KLAW_BENCH_ONLY=plain_spawn,landlock_served`: only those (the first is the
    // yardstick of the ratios).
    if let Ok(only) = std::env::var("KLAW_BENCH_ONLY") {
        let only: Vec<&str> = only.split(',').collect();
        out.retain(|(name, _)| only.contains(&name.as_str()));
    }
    out
}

/// `exec` of `true` through the registry, under `mode` with `server`, through the
/// helper at `helper`.
fn exec_through(
    rt: &'static tokio::runtime::Runtime,
    name: String,
    mode: SandboxMode,
    server: SandboxServer,
    helper: &'static str,
) -> Variant {
    let shell = ShellSettings::default()
        .with_sandbox(mode)
        .with_sandbox_server(server);
    let kit = Kit::new()
        .unwrap()
        .with_context(|b| b.service(SandboxHelper::new(helper)).service(shell));
    let run = move || {
        let out = rt
            .block_on(kit.call("exec", json!({"command": "true"})))
            .unwrap();
        assert_eq!(out.structured().unwrap()["exitCode"], 0);
    };
    (name, Box::new(run))
}

fn exec_true(c: &mut Criterion) {
    let rt: &'static tokio::runtime::Runtime = Box::leak(Box::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap(),
    ));
    let variants = variants(rt);
    let mut g = c.benchmark_group("exec_true");
    g.sample_size(30);
    for (name, run) in &variants {
        g.bench_function(name.as_str(), |b| b.iter(run));
    }
    g.finish();
    paired(&variants);
}

/// Every variant once per round, in turn; medians and ratios to the plain spawn.
fn paired(variants: &[Variant]) {
    let rounds: usize = std::env::var("KLAW_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(200);
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); variants.len()];
    for _ in 0..rounds {
        for (i, (_, run)) in variants.iter().enumerate() {
            let start = Instant::now();
            run();
            times[i].push(start.elapsed());
        }
    }
    let median = |t: &mut Vec<Duration>| {
        t.sort();
        t[t.len() / 2]
    };
    let medians: Vec<Duration> = times.iter_mut().map(median).collect();
    let Some(plain) = medians.first().map(Duration::as_secs_f64) else {
        return;
    };
    eprintln!(
        "\nexec_true paired, {rounds} rounds (median, ratio to {}):",
        variants[0].0
    );
    for ((name, _), m) in variants.iter().zip(&medians) {
        eprintln!(
            "  {name:22} {:8.3} ms  {:5.2}x",
            m.as_secs_f64() * 1e3,
            m.as_secs_f64() / plain
        );
    }
}

criterion_group!(benches, exec_true);
criterion_main!(benches);
