//! How much of the exact answer the in-memory vector prefilter keeps (the private
//! `klaw-memory/src/vectors.rs`, reached through `bench_support`, not an API): on really
//! embedded texts, the share of each query's exact 10 nearest that are among the
//! candidates it hands over for re-scoring (and of the exact 50 among 50 and 200, for
//! hybrid search's vector side at topK 50), with the bits used at every size (a store of
//! 100k would take hours to embed here, so the bits are forced on a smaller one; they
//! keep the nearest quarter by Hamming distance at any size).
//!
//! The corpus: the retrieval test set's 70 notes plus 2,930 filler texts of two sentences
//! (`support/memory.rs`; word soup from one small vocabulary, so the texts are much
//! closer to each other than real notes: a hard case). The queries: the 61 test-set
//! questions and 200 filler sentences. Embeddings are cached in `CARGO_TARGET_TMPDIR`.
//! Prints only; asserts nothing.
//!
//! For each share the bits keep (`KLAW_BENCH_DIVISORS`, default `4,8`: a quarter, an
//! eighth) it prints the above and, for the test set's questions, the answer notes'
//! recall@10 and MRR by vector search alone (the exact ranking over the corpus beside
//! the candidates re-scored): what a search would return, not only what the bits keep.
//! `KLAW_BENCH_MODELS`: the cached models to run (comma-separated names under
//! `<cache>/models/`; default the default model).
//!
//! Run with: cargo bench -p klaw-memory --bench memory_recall

#![allow(clippy::unwrap_used, clippy::expect_used)] // bench code: a panic is a failed run

#[path = "support/memory.rs"]
#[allow(dead_code)] // the texts and the model, not the stores
mod support;

use std::collections::HashSet;
use std::path::Path;

use klaw_memory::bench_support::{MIN_RESCORED, RESCORE_FACTOR, VectorCache, set_keep_divisor};
use klaw_memory::{Embedder, EmbedderConfig};

const CORPUS: usize = 3000;
const K: usize = 10;

fn embedded(e: &Embedder, file: &str, texts: &[String], queries: bool) -> Vec<Vec<f32>> {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "klaw-recall-{file}-{}-{}.f32",
        texts.len(),
        e.fingerprint().chars().rev().take(12).collect::<String>()
    ));
    let dims = e.dims();
    if let Ok(bytes) = std::fs::read(&path)
        && bytes.len() == texts.len() * dims * 4
    {
        let all: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        return all.chunks(dims).map(<[f32]>::to_vec).collect();
    }
    eprintln!(
        "embedding {} texts (cached in {}) ...",
        texts.len(),
        path.display()
    );
    let mut out = Vec::with_capacity(texts.len());
    for batch in texts.chunks(32) {
        let batch: Vec<&str> = batch.iter().map(String::as_str).collect();
        out.extend(if queries {
            e.embed_queries(&batch).unwrap()
        } else {
            e.embed_passages(&batch).unwrap()
        });
    }
    let bytes: Vec<u8> = out.iter().flatten().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(&path, bytes).unwrap();
    out
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The ids (indexes) of the `k` vectors nearest to `q` among `ids`, best first.
fn nearest(
    corpus: &[Vec<f32>],
    q: &[f32],
    ids: impl Iterator<Item = usize>,
    k: usize,
) -> Vec<usize> {
    let mut s: Vec<(f32, usize)> = ids.map(|i| (dot(q, &corpus[i]), i)).collect();
    s.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    s.into_iter().take(k).map(|(_, i)| i).collect()
}

/// Recall@10 and MRR (first answer within 10) of the questions' answer notes in `ranked`.
fn answer_quality(ranked: &[Vec<usize>], relevant: &[Vec<usize>]) -> (f64, f64) {
    let (mut recall, mut mrr) = (0.0, 0.0);
    for (got, want) in ranked.iter().zip(relevant) {
        let top: Vec<usize> = got.iter().take(K).copied().collect();
        recall += want.iter().filter(|i| top.contains(i)).count() as f64 / want.len() as f64;
        if let Some(r) = top.iter().position(|i| want.contains(i)) {
            mrr += 1.0 / (r + 1) as f64;
        }
    }
    (recall / ranked.len() as f64, mrr / ranked.len() as f64)
}

fn main() {
    let models: Vec<Option<String>> = match std::env::var("KLAW_BENCH_MODELS") {
        Ok(v) => v.split(',').map(|m| Some(m.trim().to_owned())).collect(),
        Err(_) => vec![None],
    };
    let divisors: Vec<usize> = std::env::var("KLAW_BENCH_DIVISORS")
        .unwrap_or_else(|_| "4,8".to_owned())
        .split(',')
        .map(|d| d.trim().parse().expect("a divisor"))
        .collect();
    for model in models {
        let e = match &model {
            None => support::embedder(),
            Some(name) => {
                let e = Embedder::new(EmbedderConfig::from_cache_model(name).unwrap());
                e.load().unwrap();
                e
            }
        };
        println!("== model {}", model.as_deref().unwrap_or("(default)"));
        run(&e, &divisors);
    }
}

fn run(e: &Embedder, divisors: &[usize]) {
    let set = support::test_set();
    let mut rng = support::Rng::new(42);
    let first_sentences = |t: String, n: usize| t.split_inclusive(". ").take(n).collect::<String>();
    let mut corpus: Vec<String> = set.notes.iter().map(|n| n.text.clone()).collect();
    while corpus.len() < CORPUS {
        corpus.push(first_sentences(support::filler_text(&mut rng), 2));
    }
    let mut queries: Vec<String> = set.questions.iter().map(|q| q.q.clone()).collect();
    let questions = queries.len();
    for _ in 0..200 {
        queries.push(first_sentences(support::filler_text(&mut rng), 1));
    }
    let relevant: Vec<Vec<usize>> = set
        .questions
        .iter()
        .map(|q| {
            q.relevant
                .iter()
                .map(|id| set.notes.iter().position(|n| &n.id == id).unwrap())
                .collect()
        })
        .collect();
    let cv = embedded(e, "corpus", &corpus, false);
    let qv = embedded(e, "queries", &queries, true);
    let mut mean = vec![0f32; e.dims()];
    for v in &cv {
        mean.iter_mut()
            .zip(v)
            .for_each(|(m, x)| *m += x / cv.len() as f32);
    }
    println!(
        "{} texts, {} dims; the mean vector's norm: {:.3}",
        cv.len(),
        e.dims(),
        dot(&mean, &mean).sqrt()
    );
    let mut cache = VectorCache::with_full_scan_up_to(e.dims(), 0, 0);
    for (i, v) in cv.iter().enumerate() {
        cache.insert(i as i64, v);
    }
    let exact_ranked: Vec<Vec<usize>> = qv[..questions]
        .iter()
        .map(|q| nearest(&cv, q, 0..cv.len(), K))
        .collect();
    let (r, m) = answer_quality(&exact_ranked, &relevant);
    println!("exact scan: answers' recall@{K} {r:.4}, MRR {m:.4}");
    // (k, candidates): vector search's 10 from 4 × 10 (at least MIN_RESCORED); hybrid's
    // vector side at topK 50, its pool of 50 from 50 (issue 32), and from 4 × 50 (before)
    let cases = [
        (K, (K * RESCORE_FACTOR).max(MIN_RESCORED)),
        (50, 50),
        (50, 50 * RESCORE_FACTOR),
    ];
    for &divisor in divisors {
        set_keep_divisor(divisor);
        println!("-- the bits keep 1/{divisor}");
        let wanted = cases[0].1;
        let ranked: Vec<Vec<usize>> = qv[..questions]
            .iter()
            .map(|q| {
                let c = cache.candidates(q, wanted);
                nearest(&cv, q, c.iter().map(|i| *i as usize), K)
            })
            .collect();
        let (r, m) = answer_quality(&ranked, &relevant);
        println!("questions  answers' recall@{K} {r:.4}, MRR {m:.4} (re-scoring {wanted})");
        for (k, wanted) in cases {
            for (name, range) in [
                ("questions", 0..questions),
                ("filler", questions..queries.len()),
            ] {
                let (mut kept, mut total) = (0usize, 0usize);
                for q in &qv[range.clone()] {
                    let exact = nearest(&cv, q, 0..cv.len(), k);
                    let candidates = cache.candidates(q, wanted);
                    let got: HashSet<usize> =
                        nearest(&cv, q, candidates.iter().map(|i| *i as usize), k)
                            .into_iter()
                            .collect();
                    kept += exact.iter().filter(|i| got.contains(i)).count();
                    total += exact.len();
                }
                println!(
                    "{name:<10} recall@{k} after re-scoring {wanted} candidates: {:.4} ({kept} of {total})",
                    kept as f64 / total as f64
                );
            }
        }
    }
}
