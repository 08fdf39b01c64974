//! Embedding throughput: batches of 32 short texts (~10 tokens) and of 32 ~200-token
//! texts, `passage: ` prefix, through `Embedder` (ort + tokenizers, tokenisation
//! included). `scripts/bench_embed.py` does the same with Python onnxruntime for the
//! ratio.
//!
//! First, single-query latency (the cost a `memory_search` pays): one ~10-token query,
//! `query: ` prefix, batch of 1, timed alone over 300 calls after 20 warm-up ones; prints
//! p50, p90 and p99. Skipped when a filter is given that `query` does not contain.
//! Also printed: the resident memory after loading the model and the peak at the end.
//!
//! `KLAW_EMBED_MODEL` picks another model: a name under `$KLAW_CACHE/models/`
//! (`all-minilm-l6-v2`) or a model directory.
//!
//! Run with: cargo bench -p klaw-memory --bench embed

#![allow(clippy::unwrap_used, clippy::expect_used)] // bench code: a panic is a failed run

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use klaw_memory::{Embedder, EmbedderConfig, TextKind};

const BATCH: usize = 32;
const QUERY: &str = "when did the meeting move to Thursday?";
const QUERY_RUNS: usize = 300;
const QUERY_WARM_UP: usize = 20;
const LONG: &str = "Klaw keeps notes for the agent: what the user asked, what was decided and \
why, which files changed and which commands ran. Each note is split into chunks, every chunk \
is embedded and stored beside its text, and a search combines the words with the meaning. \
Память хранит заметки агента: что спросил пользователь, что решили и почему. ";

/// The same texts as scripts/bench_embed.py.
fn texts() -> (Vec<String>, Vec<String>) {
    let short = (0..BATCH)
        .map(|i| format!("note {i}: the meeting moved to Thursday"))
        .collect();
    let long = (0..BATCH)
        .map(|i| format!("{i}. {}", LONG.repeat(2)))
        .collect();
    (short, long)
}

fn embed(c: &mut Criterion) {
    let config = match std::env::var("KLAW_EMBED_MODEL") {
        Ok(m) if !m.is_empty() => {
            let (default_dir, lib) = EmbedderConfig::default_paths().unwrap();
            let dir = if m.contains('/') {
                m.into()
            } else {
                default_dir.with_file_name(m)
            };
            EmbedderConfig::load(dir, lib)
        }
        _ => EmbedderConfig::from_cache(),
    };
    let e = Embedder::new(config.unwrap_or_else(|e| panic!("{e}")));
    eprintln!("model {}", e.config().name);
    e.load().unwrap();
    eprintln!("after load: {}", status("VmRSS"));
    // Criterion's own filter is the first argument that is not a flag.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    if filter.is_none_or(|f| "query".contains(f.as_str())) {
        query_latency(&e);
    }
    let (short, long) = texts();
    for (name, set) in [("short", &short), ("long", &long)] {
        let tokens: usize = set
            .iter()
            .map(|t| e.count_tokens(TextKind::Passage, t).unwrap())
            .sum();
        eprintln!(
            "{name}: {BATCH} texts, {:.1} tokens each",
            tokens as f64 / BATCH as f64
        );
    }
    let mut g = c.benchmark_group("embed_passages_batch32");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    for (name, set) in [("short", &short), ("long", &long)] {
        let refs: Vec<&str> = set.iter().map(String::as_str).collect();
        g.throughput(Throughput::Elements(BATCH as u64));
        g.bench_function(name, |b| {
            b.iter(|| black_box(e.embed_passages(&refs).unwrap()))
        });
    }
    g.finish();
    eprintln!("at the end: peak {}", status("VmHWM"));
}

/// A line of `/proc/self/status` (`VmRSS`, `VmHWM`), as `VmRSS: 123456 kB`.
fn status(key: &str) -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with(key));
    line.map_or_else(
        || format!("{key} unknown"),
        |l| l.split_whitespace().collect::<Vec<_>>().join(" "),
    )
}

/// One query at a time, each call timed alone: the percentiles a search sees.
fn query_latency(e: &Embedder) {
    let tokens = e.count_tokens(TextKind::Query, QUERY).unwrap();
    for _ in 0..QUERY_WARM_UP {
        black_box(e.embed_queries(&[QUERY]).unwrap());
    }
    let mut times: Vec<Duration> = (0..QUERY_RUNS)
        .map(|_| {
            let start = Instant::now();
            black_box(e.embed_queries(&[QUERY]).unwrap());
            start.elapsed()
        })
        .collect();
    times.sort();
    let ms = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1e3;
    eprintln!(
        "query: 1 text, {tokens} tokens, {QUERY_RUNS} calls: p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms",
        ms(0.5),
        ms(0.9),
        ms(0.99)
    );
}

criterion_group!(benches, embed);
criterion_main!(benches);
