//! What a second embedding model costs (issue 30, `memory.model` as a list): the
//! embedding throughput with the default model (USE), with e5, and with both (every chunk
//! embedded by each); the resident memory with one and with both sessions; a query
//! embedded by each, and by both at once on two threads (a search of two vector spaces
//! waits for the slower); then the import as `memory import` runs it (`Index::save_all`
//! into a new index, SQLite included) with one model and with both, and a hybrid
//! search's p50 on each of those indexes. The texts: the conversations of
//! `tests/data/conversations` as `memory import` embeds them (each turn after its date
//! and the turn before). Prints only; asserts nothing.
//!
//! Run with: cargo bench -p klaw-memory --bench two_models

#![allow(clippy::unwrap_used, clippy::expect_used)] // bench code: a panic is a failed run

use std::time::{Duration, Instant};

use klaw_memory::conversation::{self, Turn};
use klaw_memory::{Document, Embedder, EmbedderConfig, Index, MemoryConfig, SearchMode};

const DIALOGUES: [&str; 4] = ["family-ru", "friends-en", "work-mixed", "climbing-en"];
const QUERY_RUNS: usize = 200;

fn rss(field: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn model(dir: &str) -> Embedder {
    let e = Embedder::new(EmbedderConfig::from_cache_model(dir).unwrap());
    e.load().unwrap();
    e
}

fn texts() -> Vec<String> {
    documents()
        .into_iter()
        .map(|d| match d.context {
            Some(c) if !c.is_empty() => format!("{c}\n{}", d.content),
            _ => d.content,
        })
        .collect()
}

/// The dialogues as `memory import` imports them.
fn documents() -> Vec<Document> {
    let mut out = Vec::new();
    for name in DIALOGUES {
        let path = format!(
            "{}/tests/data/conversations/{name}.jsonl",
            env!("CARGO_MANIFEST_DIR")
        );
        let turns: Vec<Turn> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| Turn::from_line(&serde_json::from_str(l).unwrap(), i + 1).unwrap())
            .collect();
        out.extend(conversation::documents(&turns, name));
    }
    out
}

fn embed_all(e: &Embedder, texts: &[&str]) -> Duration {
    let t = Instant::now();
    for batch in texts.chunks(64) {
        std::hint::black_box(e.embed_passages(batch).unwrap());
    }
    t.elapsed()
}

fn p50(mut v: Vec<Duration>) -> f64 {
    v.sort_unstable();
    v[v.len() / 2].as_secs_f64() * 1000.0
}

fn main() {
    let texts = texts();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    println!(
        "{} chunks (conversation turns with their context)",
        texts.len()
    );
    let use3 = model("use-multilingual-v3");
    embed_all(&use3, &texts[..8]);
    println!(
        "RSS with USE loaded: {} (peak {})",
        rss("VmRSS"),
        rss("VmHWM")
    );
    let e5 = model("multilingual-e5-small");
    embed_all(&e5, &texts[..8]);
    println!(
        "RSS with USE and e5 loaded: {} (peak {})",
        rss("VmRSS"),
        rss("VmHWM")
    );

    let tu = embed_all(&use3, &texts);
    let te = embed_all(&e5, &texts);
    let n = texts.len() as f64;
    println!(
        "import: USE {:.0} chunks/s, e5 {:.0} chunks/s, both {:.0} chunks/s",
        n / tu.as_secs_f64(),
        n / te.as_secs_f64(),
        n / (tu + te).as_secs_f64()
    );

    let questions: Vec<&str> = texts
        .iter()
        .take(QUERY_RUNS)
        .map(|t| {
            let t = t.lines().last().unwrap_or(t);
            &t[..t.char_indices().nth(80).map_or(t.len(), |(i, _)| i)]
        })
        .collect();
    let (mut u, mut e, mut both) = (Vec::new(), Vec::new(), Vec::new());
    for q in &questions {
        let t = Instant::now();
        std::hint::black_box(use3.embed_queries(&[q]).unwrap());
        u.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(e5.embed_queries(&[q]).unwrap());
        e.push(t.elapsed());
        let t = Instant::now();
        std::thread::scope(|s| {
            let h = s.spawn(|| e5.embed_queries(&[q]).unwrap());
            std::hint::black_box(use3.embed_queries(&[q]).unwrap());
            std::hint::black_box(h.join().unwrap());
        });
        both.push(t.elapsed());
    }
    println!(
        "query embedding p50: USE {:.2} ms, e5 {:.2} ms, both on two threads {:.2} ms",
        p50(u),
        p50(e),
        p50(both)
    );

    // the import through the index, as `memory import` runs it, and a search of it
    let docs = documents();
    for models in [vec![use3.clone()], vec![use3.clone(), e5.clone()]] {
        let label = models
            .iter()
            .map(|m| m.config().name.as_str())
            .collect::<Vec<_>>()
            .join(" + ");
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open_models(
            &dir.path().join("m.sqlite"),
            models,
            &MemoryConfig::default(),
        )
        .unwrap();
        let t = Instant::now();
        let r = index.save_all(&docs).unwrap();
        let secs = t.elapsed().as_secs_f64();
        let mut times = Vec::new();
        for q in &questions {
            let t = Instant::now();
            std::hint::black_box(index.search(q, 10, SearchMode::Hybrid).unwrap());
            times.push(t.elapsed());
        }
        println!(
            "import into an index of {label}: {} chunks in {secs:.1} s, {:.0} chunks/s; \
             hybrid search p50 {:.2} ms ({} chunks); RSS {}",
            r.inserted,
            r.inserted as f64 / secs,
            p50(times),
            index.len().unwrap(),
            rss("VmRSS")
        );
    }
    println!("peak RSS {}", rss("VmHWM"));
}
