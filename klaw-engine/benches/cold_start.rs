//! Cold start of `klaw-engine tools --format openai`: process start, config load,
//! tool collection and validation, rendering, output. Target: under 20 ms.
//!
//! `call_exec_paired`: the whole process of `klaw-engine call exec '{"command":"true"}'`
//! per sandbox mode that works here, each run paired with one of `klaw-engine call
//! current_time` (the same process without a command); the medians of 15 pairs are
//! printed (issue 32's targets: bwrap 12 ms, Landlock 9 ms, off 7 ms), beside the same
//! `exec` by a copy of the engine alone in a directory, which plays its own sandbox
//! helper (what it did before the small `klaw-engine-sandbox` beside it).
//!
//! Both run copies of the binaries, as installed: a binary the linker has just written
//! sits in the page cache in small pieces (it was written piecemeal), and each start
//! then takes about 10% more page faults and 0.5 ms more than the same bytes read from
//! disk or copied, which is how a user's binary is loaded.
//!
//! Run with: cargo bench -p klaw-engine --bench cold_start

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::process::{Command, Stdio};

use criterion::{Criterion, criterion_group, criterion_main};

fn cold_start(c: &mut Criterion) {
    let home = std::env::temp_dir().join("klaw-bench-home");
    let mut g = c.benchmark_group("cold_start");
    g.sample_size(50);
    g.bench_function("tools_format_openai", |b| {
        b.iter(|| {
            let status = Command::new(env!("CARGO_BIN_EXE_klaw-engine"))
                .args(["tools", "--format", "openai"])
                .env_remove("KLAW_CONFIG")
                .env("HOME", &home)
                .env("XDG_CONFIG_HOME", home.join("config"))
                .stdout(Stdio::null())
                .status()
                .expect("run klaw-engine");
            assert!(status.success());
        })
    });
    g.finish();
}

/// One whole `klaw-engine call` of the engine at `engine` in `mode`, timed.
fn call_with(
    engine: &std::path::Path,
    home: &std::path::Path,
    mode: &str,
    tool: &str,
    args: &str,
) -> std::time::Duration {
    let started = std::time::Instant::now();
    let status = Command::new(engine)
        .args(["call", tool, args])
        .env_remove("KLAW_CONFIG")
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("KLAW_SANDBOX", mode)
        .stdout(Stdio::null())
        .status()
        .expect("run klaw-engine");
    let took = started.elapsed();
    assert!(status.success(), "{tool} under {mode}");
    took
}

fn median(mut v: Vec<std::time::Duration>) -> std::time::Duration {
    v.sort();
    v[v.len() / 2]
}

fn call_exec_paired(_c: &mut Criterion) {
    let home = std::env::temp_dir().join("klaw-bench-home");
    // The engine and its small sandbox helper, installed side by side.
    let installed = tempfile::tempdir().expect("a temporary dir");
    let engine = installed.path().join("klaw-engine");
    std::fs::copy(env!("CARGO_BIN_EXE_klaw-engine"), &engine).expect("copy the engine");
    std::fs::copy(
        env!("CARGO_BIN_EXE_klaw-engine-sandbox"),
        installed.path().join("klaw-engine-sandbox"),
    )
    .expect("copy the sandbox helper");
    // The engine without its small helper beside it: its own helper.
    let alone = tempfile::tempdir().expect("a temporary dir");
    let engine_alone = alone.path().join("klaw-engine");
    std::fs::copy(env!("CARGO_BIN_EXE_klaw-engine"), &engine_alone).expect("copy the engine");
    for mode in ["off", "landlock", "bwrap"] {
        let probe = Command::new(&engine)
            .args(["call", "exec", r#"{"command":"true"}"#])
            .env_remove("KLAW_CONFIG")
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("KLAW_SANDBOX", mode)
            .output()
            .expect("run klaw-engine");
        if !probe.status.success() {
            eprintln!("call_exec_paired/{mode}: skipped (the sandbox does not work here)");
            continue;
        }
        let true_ = r#"{"command":"true"}"#;
        // once first: its sandbox probe is remembered then
        call_with(&engine_alone, &home, mode, "exec", true_);
        let (mut exec, mut time, mut own) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..15 {
            exec.push(call_with(&engine, &home, mode, "exec", true_));
            time.push(call_with(&engine, &home, mode, "current_time", "{}"));
            own.push(call_with(&engine_alone, &home, mode, "exec", true_));
        }
        let ms = |v: Vec<std::time::Duration>| median(v).as_secs_f64() * 1e3;
        eprintln!(
            "call_exec_paired/{mode}: exec {:.1} ms, current_time {:.1} ms, exec with the engine as its own helper {:.1} ms (medians of 15)",
            ms(exec),
            ms(time),
            ms(own)
        );
    }
}

criterion_group!(benches, cold_start, call_exec_paired);
criterion_main!(benches);
