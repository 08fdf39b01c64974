//! Memory: `memory_search` latency and `memory_save` throughput with the real model.
//!
//! - `memory_search/*`: hybrid search as `memory_search` runs it (`Index::search`, k = 10,
//!   equal weights: the query embedded while the text side is searched) at 10k and 100k
//!   chunks; at 100k also vector only (embedding included), text only, hybrid with a
//!   ready query vector, and the query embedding alone. The queries are the retrieval
//!   test set's questions, in turn.
//! - `memory_save/*`: what saving a note costs (`Index::save_all`, what `memory_save`
//!   runs: chunk, embed the chunks, insert in one transaction); notes of 50 to 200 tokens
//!   made of the test set's notes, one at a time and 32 at a time (throughput in notes
//!   per second).
//!
//! The big stores are the test set's notes, really embedded, plus filler texts with
//! **random** vectors (see `support/memory.rs`: every step of vector search scans a fixed
//! share of the vectors, so the latency does not depend on their values); they are built once (a minute or two for 100k) and
//! cached under the target directory. Percentiles (p50/p99) and peak RSS:
//! `benches/memory_latency.rs`.
//!
//! Run with: cargo bench -p klaw-memory --bench memory

#![allow(clippy::unwrap_used, clippy::expect_used)] // bench code: a panic is a failed run

#[path = "support/memory.rs"]
mod support;

use std::cell::Cell;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use klaw_memory::bench_support;
use klaw_memory::{Document, Index, MemoryConfig, SearchMode, TextKind, Weights};

const K: usize = 10;

fn search(c: &mut Criterion) {
    let e = support::embedder();
    let set = support::test_set();
    let questions: Vec<&str> = set.questions.iter().map(|q| q.q.as_str()).collect();
    let next = Cell::new(0usize);
    let question = || {
        let i = next.get();
        next.set(i + 1);
        questions[i % questions.len()]
    };
    let mut g = c.benchmark_group("memory_search");
    g.sample_size(30).measurement_time(Duration::from_secs(10));
    for n in [10_000, 100_000] {
        let index = support::big_index(n, &e);
        g.bench_function(BenchmarkId::new("hybrid_incl_embed", n), |b| {
            b.iter(|| black_box(index.search(question(), K, SearchMode::Hybrid).unwrap()))
        });
        if n < 100_000 {
            continue;
        }
        g.bench_function(BenchmarkId::new("vector_incl_embed", n), |b| {
            b.iter(|| black_box(index.search(question(), K, SearchMode::Vector).unwrap()))
        });
        g.bench_function(BenchmarkId::new("text", n), |b| {
            b.iter(|| black_box(index.search(question(), K, SearchMode::Text).unwrap()))
        });
        // with the query's vector ready: the store itself (not an API)
        let store = bench_support::store(&index);
        let vectors = e.embed_queries(&questions).unwrap();
        g.bench_with_input(
            BenchmarkId::new("hybrid_search_only", n),
            store.sqlite().unwrap(),
            |b, s| {
                b.iter(|| {
                    let i = next.get() % questions.len();
                    next.set(i + 1);
                    black_box(
                        s.search_hybrid(questions[i], &vectors[i], K, Weights::default())
                            .unwrap(),
                    )
                })
            },
        );
        g.bench_function("embed_query", |b| {
            b.iter(|| black_box(e.embed_queries(&[question()]).unwrap()))
        });
    }
    g.finish();
}

/// `count` notes of 50 to 200 tokens, each the test set's notes joined in a run of 2 to 7,
/// made unique by a date line.
fn notes(count: usize) -> Vec<String> {
    let set = support::test_set();
    let mut rng = support::Rng::new(7);
    (0..count)
        .map(|i| {
            let start = rng.range(0, set.notes.len() - 1);
            let len = rng.range(2, 7);
            let body: Vec<&str> = (0..len)
                .map(|j| set.notes[(start + j) % set.notes.len()].text.as_str())
                .collect();
            format!(
                "2024-{:02}-{:02}, #{i}\n\n{}",
                i % 12 + 1,
                i % 28 + 1,
                body.join(" ")
            )
        })
        .collect()
}

/// What `memory_save` does with notes: chunk, embed, insert in one transaction.
fn save(index: &Index, texts: &[String]) {
    let docs: Vec<Document> = texts
        .iter()
        .map(|t| Document {
            content: t.clone(),
            source: "memory_save".to_string(),
            created_at: None,
            context: None,
        })
        .collect();
    black_box(index.save_all(&docs).unwrap());
}

fn save_bench(c: &mut Criterion) {
    let e = support::embedder();
    let texts = notes(20_000);
    let tokens: usize = texts
        .iter()
        .take(200)
        .map(|t| e.count_tokens(TextKind::Passage, t).unwrap())
        .sum();
    eprintln!(
        "memory_save: notes of {:.0} tokens on average",
        tokens as f64 / 200.0
    );
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(
        &dir.path().join("m.sqlite"),
        e.clone(),
        &MemoryConfig::default(),
    )
    .unwrap();
    let mut next = 0usize;
    let mut g = c.benchmark_group("memory_save");
    g.sample_size(10).measurement_time(Duration::from_secs(15));
    for batch in [1usize, 32] {
        g.throughput(Throughput::Elements(batch as u64));
        g.bench_function(BenchmarkId::new("notes", batch), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    // fresh texts each time: a stored text would be skipped as a duplicate
                    let slice: Vec<String> = (0..batch)
                        .map(|j| texts[(next + j) % texts.len()].clone())
                        .collect();
                    next += batch;
                    let t = Instant::now();
                    save(&index, &slice);
                    total += t.elapsed();
                }
                total
            })
        });
    }
    g.finish();
}

criterion_group!(benches, search, save_bench);
criterion_main!(benches);
