//! File tools at scale: `file_read` of a 10-line window at the end of a 100 MB file
//! (streamed: one buffer of memory whatever the size), and a recursive `file_list` of a
//! 100,000-file tree against `find` over the same tree (plain, and printing the same
//! fields, which needs a stat per entry as `file_list` does).
//!
//! `result_json_only` times the JSON result alone (`ToolOutput::json` of the listing),
//! the share of `file_list_recursive` spent outside the walk itself;
//! `file_list_recursive_structured` also reads the structured content (which is read
//! back from the text only when asked for), as an MCP client gets it. Issue 32's target:
//! `file_list_recursive` within 1.3x of `find_printf_type_size_mode`.
//!
//! Run with: cargo bench -p klaw-tools --bench files

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::hint::black_box;
use std::io::Write;
use std::process::Command;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use klaw_tools::tools::files::FilesSettings;
use klaw_tools::{ToolContext, ToolOutput, ToolRegistry};
use serde_json::json;

const LINE: &[u8] = b"0123456789 the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnopqrstuvwxyz 012345\n";
const LINES: usize = 1_000_000; // 100 bytes each: 100 MB
const DIRS: usize = 100;
const FILES_PER_DIR: usize = 1000;

fn files(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let registry = ToolRegistry::collect().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("tree")).unwrap();
    let files = FilesSettings::default().with_max_list_entries(DIRS * FILES_PER_DIR + DIRS + 1);
    let ctx = ToolContext::builder().workspace(&ws).service(files).build();

    // 100 MB of text.
    {
        assert_eq!(LINE.len(), 100);
        let mut f = std::io::BufWriter::new(std::fs::File::create(ws.join("big.log")).unwrap());
        for _ in 0..LINES {
            f.write_all(LINE).unwrap();
        }
        f.flush().unwrap();
    }
    // 100,000 files in 100 directories.
    for d in 0..DIRS {
        let sub = ws.join("tree").join(format!("d{d:03}"));
        std::fs::create_dir(&sub).unwrap();
        for f in 0..FILES_PER_DIR {
            std::fs::write(sub.join(format!("f{f:04}.txt")), b"x").unwrap();
        }
    }

    let mut g = c.benchmark_group("file_read");
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(10));
    let window = json!({"path": "big.log", "startLine": LINES - 9, "maxLines": 10});
    let out = rt
        .block_on(registry.execute(&ctx, "file_read", window.clone()))
        .unwrap();
    assert_eq!(out.structured().unwrap()["totalLines"], LINES);
    g.bench_function("window_at_end_of_100MB", |b| {
        b.iter(|| rt.block_on(registry.execute(&ctx, "file_read", black_box(window.clone()))))
    });
    g.finish();

    let mut g = c.benchmark_group("file_list_100k");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    let args = json!({"path": "tree", "recursive": true});
    let out = rt
        .block_on(registry.execute(&ctx, "file_list", args.clone()))
        .unwrap();
    assert_eq!(
        out.structured().unwrap()["count"],
        DIRS * FILES_PER_DIR + DIRS
    );
    assert_eq!(out.structured().unwrap()["truncated"], false);
    g.bench_function("file_list_recursive", |b| {
        b.iter(|| rt.block_on(registry.execute(&ctx, "file_list", black_box(args.clone()))))
    });
    // The same, with the structured content read too (as an MCP client gets it): the
    // text is written straight from the listing, the structured content read from it
    // only when asked for.
    g.bench_function("file_list_recursive_structured", |b| {
        b.iter(|| {
            let out = rt
                .block_on(registry.execute(&ctx, "file_list", black_box(args.clone())))
                .unwrap();
            black_box(out.structured().map(|v| v["count"].clone()))
        })
    });
    // The share of the framework's JSON result (to_value + pretty text) in the above.
    let value = out.structured().unwrap().clone();
    g.bench_function("result_json_only", |b| {
        b.iter(|| ToolOutput::json(black_box(value.clone())))
    });
    let tree = ws.join("tree");
    g.bench_function("find", |b| {
        b.iter(|| {
            let out = Command::new("find").arg(&tree).output().unwrap();
            assert!(out.status.success());
            black_box(out.stdout.len())
        })
    });
    g.bench_function("find_printf_type_size_mode", |b| {
        b.iter(|| {
            let out = Command::new("find")
                .arg(&tree)
                .args(["-printf", "%y %s %m %P\n"])
                .output()
                .unwrap();
            assert!(out.status.success());
            black_box(out.stdout.len())
        })
    });
    g.finish();
}

criterion_group!(benches, files);
criterion_main!(benches);
