//! Skills at scale: discovery of 1,000 skills (500 system, 500 workspace) by a new
//! catalog — every `SKILL.md` read and its frontmatter parsed (target: under 50 ms) —
//! and, after one skill changed, the scan alone (a directory listing and a `stat` per
//! skill, one file parsed again) and `skill_list` through the registry (the same scan
//! and the JSON of 1,000 skills).
//!
//! Run with: cargo bench -p klaw-tools --bench skills

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use klaw_tools::tools::skills::SkillCatalog;
use klaw_tools::{ToolContext, ToolRegistry};
use serde_json::json;

const SKILLS: usize = 1000;

fn write_skill(root: &Path, name: &str, description: &str) {
    let dir = root.join("skills").join(name);
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!(
            "---\nname: {name}\ndescription: {description}\nlicense: MIT\nmetadata:\n  author: bench\n  version: \"1.0\"\nallowed-tools: file_read exec\n---\n# {name}\n\n{}",
            "Step by step instructions.\n".repeat(40)
        ),
    )
    .unwrap();
    std::fs::write(dir.join("scripts/run.sh"), "echo hi\n").unwrap();
}

fn skills(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (data, ws) = (dir.path().join("data"), dir.path().join("ws"));
    for i in 0..SKILLS {
        let root = if i % 2 == 0 { &data } else { &ws };
        write_skill(
            root,
            &format!("skill-{i:04}"),
            &format!("Does task number {i} when the user asks for it."),
        );
    }

    let mut g = c.benchmark_group("skills");
    g.sample_size(20);
    g.bench_function("discover_1000_cold", |b| {
        b.iter(|| {
            let catalog = SkillCatalog::default();
            let found = catalog.scan(&ws, &data);
            assert_eq!(found.skills.len(), SKILLS);
            black_box(found)
        });
    });

    // The scan alone after one change: the listing and a stat per skill, one parse.
    let warm = SkillCatalog::default();
    warm.scan(&ws, &data);
    let mut n = 0u64;
    g.bench_function("rescan_after_one_change", |b| {
        b.iter(|| {
            n += 1;
            write_skill(&ws, "skill-0003", &format!("Rescanned {n} times."));
            black_box(warm.scan(&ws, &data))
        });
    });

    let registry = ToolRegistry::collect().unwrap();
    let ctx = ToolContext::builder()
        .workspace(&ws)
        .data_dir(&data)
        .build();
    rt.block_on(registry.execute(&ctx, "skill_list", json!({})))
        .unwrap();
    let mut n = 0u64;
    g.bench_function("skill_list_after_one_change", |b| {
        b.iter(|| {
            n += 1;
            write_skill(&ws, "skill-0001", &format!("Changed {n} times."));
            let out = rt
                .block_on(registry.execute(&ctx, "skill_list", json!({})))
                .unwrap();
            black_box(out)
        });
    });
    g.finish();
}

criterion_group!(benches, skills);
criterion_main!(benches);
