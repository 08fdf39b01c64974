//! `memory_search` latency percentiles and peak memory: 1000 searches per case after 50
//! warm-up ones, each timed alone, then p50, p90, p99 and the maximum; at the end the
//! process's peak RSS (`VmHWM`). The `incl_embed` cases call [`Index::search`], what
//! `memory_search` runs (the query embedded while the text side is searched), and so does
//! `text`; the `search_only` cases call the store with the query's vector ready (through
//! `bench_support`, not an API). The stores are those of
//! `benches/memory.rs`, cached (test-set notes plus filler with random vectors, see
//! `support/memory.rs`). The `topK` cases compare topK 10 and 50 (issue 32: 50 within
//! 20% of 10): each question is searched at both, in turn and in alternating order, so a
//! load that changes over the run weighs on both alike; `hybrid_topK` calls
//! [`Index::search`], `memory_search_topK` the tool by name through the registry, as the
//! engine does (arguments checked, the search, the answer built and serialised).
//! The `top_up` cases compare hybrid search with and without its text side topped up by
//! the any-word search (issue 49), in turn and in alternating order as the `topK` pairs:
//! `hybrid_top_up` calls [`Index::search`]'s fusion with the top-up on and off,
//! `hybrid_text_side_top_up` the hybrid's text side alone (no embedding beside it).
//! The `two_models` cases search an index of two models (issue 30, `memory.model` as a
//! list: the default model and multilingual-e5-small, one vector space each): the
//! default's store copied, with an e5 space added (the test set's notes really embedded,
//! the filler random, as in the first space), cached beside it.
//! Prints only; asserts nothing.
//!
//! Arguments that do not start with `--` select the cases whose name contains one of
//! them, e.g. `100k/hybrid_incl_embed` alone for its peak RSS under `/usr/bin/time -v`.
//!
//! Run with: cargo bench -p klaw-memory --bench memory_latency

#![allow(clippy::unwrap_used, clippy::expect_used)] // bench code: a panic is a failed run

#[path = "support/memory.rs"]
mod support;

use std::hint::black_box;
use std::time::{Duration, Instant};

use klaw_core::{ToolContext, ToolRegistry};
use klaw_memory::bench_support::{self, MemoryStore};
use klaw_memory::{
    Embedder, EmbedderConfig, Index, MEMORY_DB, MemoryConfig, Period, SearchMode, Weights,
};

const K: usize = 10;
/// `memory_search`'s largest topK.
const K_MAX: usize = 50;
const RUNS: usize = 1000;
const WARM_UP: usize = 50;

#[derive(Clone, Copy)]
enum Case {
    HybridInclEmbed,
    VectorInclEmbed,
    Text,
    HybridSearchOnly,
    VectorSearchOnly,
    /// Hybrid with embedding, within a period of this many days from the first chunk.
    HybridPeriod(i64),
    /// Hybrid with embedding at topK 10 and 50, in turn.
    HybridTopK,
    /// The `memory_search` tool (hybrid) at topK 10 and 50, in turn, through the registry.
    ToolTopK,
    /// Hybrid with embedding, the text side topped up and not, in turn.
    HybridTopUp,
    /// The hybrid's text side alone, topped up and not, in turn.
    TextSideTopUp,
    /// Hybrid with embedding (both models') on the index of two models.
    TwoHybrid,
    /// Vector with embedding (both models') on the index of two models.
    TwoVector,
}

impl Case {
    /// Whether the case searches the index of two models.
    fn two(self) -> bool {
        matches!(self, Case::TwoHybrid | Case::TwoVector)
    }
}

/// The index of `n` chunks with two models, `first`'s (the store of
/// [`support::big_index`]) and `second`'s: a copy of the first's store with a space for
/// the second, whose vectors are the test set's notes embedded by it and random unit
/// vectors for the filler. Cached beside the first's store.
fn two_model_index(n: usize, first: &Embedder, second: &Embedder) -> Index {
    let src = support::big_index(n, first).path().to_owned();
    let path = src.with_extension("two-models.sqlite");
    let models = vec![first.clone(), second.clone()];
    if !path.exists() {
        let t = Instant::now();
        eprintln!("building {} ...", path.display());
        let tmp = src.with_extension("two-models.tmp");
        let _ = std::fs::remove_file(&tmp);
        klaw_sqlite_vec::register().unwrap();
        rusqlite::Connection::open(&src)
            .unwrap()
            .execute("VACUUM INTO ?1", [tmp.to_str().unwrap()])
            .unwrap();
        let specs = [
            (first.dims(), first.fingerprint()),
            (second.dims(), second.fingerprint()),
        ];
        let (mut store, _) = MemoryStore::open_models(&tmp, &specs, false).unwrap();
        let todo = store.chunks_without_vectors_in(1).unwrap();
        // the test set's notes are the first chunks
        let notes = support::test_set().notes.len();
        let mut rng = support::Rng::new(0x7770_0000 + n as u64);
        let mut batches = todo.chunks(10_000).enumerate().peekable();
        while let Some((b, batch)) = batches.next() {
            let vectors: Vec<(i64, Vec<f32>)> = batch
                .iter()
                .enumerate()
                .map(|(i, (id, text))| {
                    let v = if b * 10_000 + i < notes {
                        second.embed_passages(&[text.as_str()]).unwrap().remove(0)
                    } else {
                        support::random_unit(&mut rng, second.dims())
                    };
                    (*id, v)
                })
                .collect();
            if batches.peek().is_some() {
                store.set_vectors_in(1, &vectors).unwrap();
            } else {
                store.finish_vectors_in(1, &vectors).unwrap();
            }
        }
        drop(store);
        std::fs::rename(&tmp, &path).unwrap();
        eprintln!("built in {:.1} s", t.elapsed().as_secs_f64());
    }
    let index = Index::open_models(&path, models, &MemoryConfig::default()).unwrap();
    assert_eq!(index.reembedded(), 0, "{}", path.display());
    index
}

/// `memory_search` on a store: the registry, a context whose data directory has the
/// store as its memory, a runtime to call it on.
struct ToolRun {
    registry: ToolRegistry,
    ctx: ToolContext,
    rt: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

impl ToolRun {
    fn new(store: &std::path::Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(store, dir.path().join(MEMORY_DB)).unwrap();
        let ctx = ToolContext::builder()
            .data_dir(dir.path())
            .workspace(dir.path())
            .build();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        ToolRun {
            registry: ToolRegistry::collect().unwrap(),
            ctx,
            rt,
            _dir: dir,
        }
    }

    fn search(&self, q: &str, k: usize) {
        let args = serde_json::json!({"query": q, "topK": k});
        let out = self
            .rt
            .block_on(self.registry.execute(&self.ctx, "memory_search", args))
            .unwrap();
        black_box(out.text());
    }
}

fn main() {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let cases = [
        (10_000, "10k/hybrid_incl_embed", Case::HybridInclEmbed),
        (100_000, "100k/hybrid_incl_embed", Case::HybridInclEmbed),
        (100_000, "100k/hybrid_topK", Case::HybridTopK),
        (100_000, "100k/hybrid_top_up", Case::HybridTopUp),
        (100_000, "100k/hybrid_text_side_top_up", Case::TextSideTopUp),
        (100_000, "100k/memory_search_topK", Case::ToolTopK),
        (100_000, "100k/vector_incl_embed", Case::VectorInclEmbed),
        (100_000, "100k/text", Case::Text),
        (100_000, "100k/hybrid_search_only", Case::HybridSearchOnly),
        (100_000, "100k/vector_search_only", Case::VectorSearchOnly),
        // `from`/`to`: a week (about 1,000 chunks) and a year (about half of them)
        (100_000, "100k/hybrid_week", Case::HybridPeriod(7)),
        (100_000, "100k/hybrid_year", Case::HybridPeriod(365)),
        (100_000, "100k/two_models_hybrid", Case::TwoHybrid),
        (100_000, "100k/two_models_vector", Case::TwoVector),
    ];
    let selected: Vec<_> = cases
        .into_iter()
        .filter(|(_, name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f)))
        .collect();
    let e = support::embedder();
    let set = support::test_set();
    let questions: Vec<&str> = set.questions.iter().map(|q| q.q.as_str()).collect();
    let vectors = e.embed_queries(&questions).unwrap();
    // the tool opens the store again with a model of its own: only when a case asks
    // (its peak RSS counts a second model)
    let mut stores: Vec<((usize, bool), Index, Option<ToolRun>)> = Vec::new();
    println!(
        "{:<26} {:>9} {:>9} {:>9} {:>9}",
        "case (ms)", "p50", "p90", "p99", "max"
    );
    for (n, name, case) in selected {
        let key = (n, case.two());
        if !stores.iter().any(|(m, _, _)| *m == key) {
            drop(support::big_store(n, &e));
            let t = Instant::now();
            let (index, what) = if case.two() {
                let e5 = Embedder::new(
                    EmbedderConfig::from_cache_model("multilingual-e5-small").unwrap(),
                );
                e5.load().unwrap();
                let index = two_model_index(n, &e, &e5);
                // its first search loads the second space's in-memory copy
                black_box(index.search(questions[0], K, SearchMode::Vector).unwrap());
                (index, "two_models_open")
            } else {
                (support::big_index(n, &e), "open_index")
            };
            println!(
                "{:<26} {:>9.2}",
                format!("{}k/{what}", n / 1000),
                ms(t.elapsed())
            );
            // the first vector search loads the in-memory copy of the vectors
            let t = Instant::now();
            black_box(
                bench_support::store(&index)
                    .sqlite()
                    .unwrap()
                    .search_vector(&vectors[0], K)
                    .unwrap(),
            );
            println!(
                "{:<26} {:>9.2}",
                format!("{}k/first_vector_search", n / 1000),
                ms(t.elapsed())
            );
            stores.push((key, index, None));
        }
        let (_, store, tool) = stores.iter_mut().find(|(m, _, _)| *m == key).unwrap();
        if matches!(case, Case::ToolTopK) && tool.is_none() {
            *tool = Some(ToolRun::new(store.path()));
        }
        let (store, tool) = (&*store, tool.as_ref());
        // one row per topK (or top-up off and on: 0 and 1) for the pairs, else one
        let ks: &[usize] = match case {
            Case::HybridTopK | Case::ToolTopK => &[K, K_MAX],
            Case::HybridTopUp | Case::TextSideTopUp => &[0, 1],
            _ => &[K],
        };
        let fusion = bench_support::fusion(store);
        if matches!(case, Case::TextSideTopUp) {
            // how many questions the top-up runs for: fewer than the depth hold most words
            let depth = fusion.depth(K);
            let topped = questions
                .iter()
                .filter(|q| {
                    let most = bench_support::store(store)
                        .hybrid_text_side(q, depth, Period::default())
                        .unwrap();
                    most.len() < depth
                })
                .count();
            println!("{name:<26} topped up: {topped} of {}", questions.len());
        }
        let mut times = vec![Vec::with_capacity(RUNS); ks.len()];
        for i in 0..WARM_UP + RUNS {
            let j = i % questions.len();
            for turn in 0..ks.len() {
                // alternating which goes first
                let which = (turn + i) % ks.len();
                let k = ks[which];
                let t = Instant::now();
                match case {
                    Case::ToolTopK => tool.unwrap().search(questions[j], k),
                    Case::HybridTopK => {
                        black_box(store.search(questions[j], k, SearchMode::Hybrid).unwrap());
                    }
                    Case::HybridTopUp => {
                        let fusion = fusion.with_top_up(k == 1);
                        black_box(
                            bench_support::search_fused(
                                store,
                                questions[j],
                                K,
                                SearchMode::Hybrid,
                                fusion,
                            )
                            .unwrap(),
                        );
                    }
                    Case::TextSideTopUp => {
                        let fusion = fusion.with_top_up(k == 1);
                        black_box(
                            bench_support::store(store)
                                .fusion_text_side(
                                    questions[j],
                                    fusion.depth(K),
                                    Period::default(),
                                    fusion,
                                )
                                .unwrap(),
                        );
                    }
                    _ => run(store, case, questions[j], &vectors[j]),
                }
                if i >= WARM_UP {
                    times[which].push(t.elapsed());
                }
            }
        }
        let mut p50s = Vec::new();
        for (times, k) in times.iter_mut().zip(ks) {
            times.sort_unstable();
            let at = |p: f64| ms(times[((times.len() as f64 * p) as usize).min(times.len() - 1)]);
            let row = match case {
                Case::HybridTopUp | Case::TextSideTopUp => {
                    name.replace("top_up", if *k == 1 { "top_up_on" } else { "top_up_off" })
                }
                _ if ks.len() > 1 => name.replace("topK", &format!("topK{k}")),
                _ => name.to_owned(),
            };
            println!(
                "{row:<26} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
                at(0.50),
                at(0.90),
                at(0.99),
                ms(times[times.len() - 1])
            );
            p50s.push(at(0.50));
        }
        match (case, &p50s[..]) {
            (Case::HybridTopUp | Case::TextSideTopUp, [off, on]) => {
                println!("{name:<26} p50 on / off: {:.3}", on / off);
            }
            (_, [a, b]) => println!("{name:<26} p50 topK {K_MAX} / topK {K}: {:.3}", b / a),
            _ => {}
        }
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(line) = status.lines().find(|l| l.starts_with("VmHWM")) {
        println!("peak RSS ({line})");
    }
}

fn run(index: &Index, case: Case, q: &str, v: &[f32]) {
    match case {
        Case::HybridInclEmbed | Case::TwoHybrid => {
            black_box(index.search(q, K, SearchMode::Hybrid).unwrap());
        }
        Case::HybridTopK | Case::ToolTopK | Case::HybridTopUp | Case::TextSideTopUp => {
            unreachable!("timed in turn by main")
        }
        Case::VectorInclEmbed | Case::TwoVector => {
            black_box(index.search(q, K, SearchMode::Vector).unwrap());
        }
        Case::Text => {
            black_box(index.search(q, K, SearchMode::Text).unwrap());
        }
        Case::VectorSearchOnly => {
            black_box(
                bench_support::store(index)
                    .sqlite()
                    .unwrap()
                    .search_vector(v, K)
                    .unwrap(),
            );
        }
        Case::HybridPeriod(days) => {
            let period = Period {
                from: Some(support::FIRST_CHUNK_AT),
                to: Some(support::FIRST_CHUNK_AT + days * 86_400),
            };
            black_box(index.search_in(q, K, SearchMode::Hybrid, period).unwrap());
        }
        Case::HybridSearchOnly => {
            black_box(
                bench_support::store(index)
                    .sqlite()
                    .unwrap()
                    .search_hybrid(q, v, K, Weights::default())
                    .unwrap(),
            );
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
