//! Cold start of `klaw-engine tools --format openai`: process start, config load,
//! tool collection and validation, rendering, output. Target: under 20 ms.
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

criterion_group!(benches, cold_start);
criterion_main!(benches);
