#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Retrieval quality on the project's own test set, `tests/data/retrieval.json`: about 70
//! notes an assistant keeps for one bilingual user (half Russian, half English) and about
//! 60 questions with the notes that answer them, in four categories (cross-language,
//! exact identifiers, Russian word forms, paraphrases).
//!
//! Every note is saved to an index with the real model (its id as the source); every
//! question is searched in the three modes (text only, vector only, hybrid with equal
//! weights) with k = 10. The
//! test prints recall@5 and MRR@10 per mode and per category, the questions where hybrid
//! ranks the answer below one of the sides, and hybrid with the text side weighted down
//! (`--nocapture`). Missing model files fail the test with the setup hint, as in
//! `tests/embed.rs`: `make test` installs them first.
//!
//! Run with: cargo test -p klaw-memory --test all -- retrieval:: --nocapture

use std::collections::BTreeMap;

use klaw_memory::{
    Document, Embedder, EmbedderConfig, Hit, Index, MemoryConfig, SearchMode, Weights,
};
use serde::Deserialize;

const K: usize = 10;
const RECALL_AT: usize = 5;

#[derive(Deserialize)]
struct TestSet {
    notes: Vec<Note>,
    questions: Vec<Question>,
}

#[derive(Deserialize)]
struct Note {
    id: String,
    text: String,
}

#[derive(Deserialize)]
struct Question {
    q: String,
    category: String,
    relevant: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Mode {
    Text,
    Vector,
    Hybrid,
}

const MODES: [Mode; 3] = [Mode::Text, Mode::Vector, Mode::Hybrid];

/// Recall@5 and MRR@10 summed over questions; divide by `n`.
#[derive(Debug, Default, Clone, Copy)]
struct Score {
    n: usize,
    recall: f64,
    mrr: f64,
}

impl Score {
    fn add(&mut self, ranked: &[String], relevant: &[String]) {
        self.n += 1;
        let found = relevant
            .iter()
            .filter(|r| ranked.iter().take(RECALL_AT).any(|x| x == *r))
            .count();
        self.recall += found as f64 / relevant.len() as f64;
        if let Some(pos) = ranked.iter().take(K).position(|x| relevant.contains(x)) {
            self.mrr += 1.0 / (pos + 1) as f64;
        }
    }

    fn recall(&self) -> f64 {
        self.recall / self.n.max(1) as f64
    }

    fn mrr(&self) -> f64 {
        self.mrr / self.n.max(1) as f64
    }
}

struct Results {
    /// (category or "all", mode) -> score
    scores: BTreeMap<(String, Mode), Score>,
}

impl Results {
    fn get(&self, category: &str, mode: Mode) -> Score {
        self.scores[&(category.to_string(), mode)]
    }
}

fn run() -> Results {
    let set: TestSet = serde_json::from_str(include_str!("data/retrieval.json")).unwrap();
    let config = EmbedderConfig::from_cache().unwrap_or_else(|e| panic!("{e}"));
    let embedder = Embedder::new(config);
    embedder.load().unwrap_or_else(|e| panic!("{e}"));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    // The same index with other fusion weights: another connection to the same file.
    let index_with = |weights: Weights| {
        let config = MemoryConfig {
            weights,
            ..MemoryConfig::default()
        };
        Index::open(&path, embedder.clone(), &config).unwrap()
    };
    let index = index_with(Weights::default());
    let docs: Vec<Document> = set
        .notes
        .iter()
        .map(|n| Document {
            content: n.text.clone(),
            source: n.id.clone(),
            created_at: Some(1_700_000_000),
            context: None,
        })
        .collect();
    let report = index.save_all(&docs).unwrap();
    assert_eq!(report.chunks, set.notes.len(), "one chunk per note");
    assert_eq!(
        report.inserted,
        set.notes.len(),
        "note texts must be unique"
    );
    let ids = |hits: Vec<Hit>| -> Vec<String> { hits.into_iter().map(|h| h.source).collect() };

    let mut scores: BTreeMap<(String, Mode), Score> = BTreeMap::new();
    // Questions where hybrid puts the first answer lower than one of the sides does.
    let mut worse = Vec::new();
    for q in &set.questions {
        let mut rank = BTreeMap::new();
        for mode in MODES {
            let search_mode = match mode {
                Mode::Text => SearchMode::Text,
                Mode::Vector => SearchMode::Vector,
                Mode::Hybrid => SearchMode::Hybrid,
            };
            let ranked = ids(index.search(&q.q, K, search_mode).unwrap());
            for cat in [q.category.as_str(), "all"] {
                scores
                    .entry((cat.to_string(), mode))
                    .or_default()
                    .add(&ranked, &q.relevant);
            }
            let r = ranked.iter().position(|x| q.relevant.contains(x));
            rank.insert(mode, (r.map_or(99, |r| r + 1), ranked));
        }
        let (h, hybrid) = &rank[&Mode::Hybrid];
        if *h > rank[&Mode::Text].0.min(rank[&Mode::Vector].0) {
            worse.push(format!(
                "  [{}] {:?} wants {:?}: rank text {}, vector {}, hybrid {} (hybrid top 3 {:?})",
                q.category,
                q.q,
                q.relevant,
                rank[&Mode::Text].0,
                rank[&Mode::Vector].0,
                h,
                &hybrid[..hybrid.len().min(3)],
            ));
        }
    }

    // Informational: hybrid with the text side weighted down (vector weight 1).
    let mut sweep = String::from("hybrid with other weights (all questions):\n");
    for text_weight in [0.25, 0.5, 0.75, 1.0] {
        let weighted = index_with(Weights {
            text: text_weight,
            vector: 1.0,
        });
        let mut s = Score::default();
        for q in &set.questions {
            s.add(
                &ids(weighted.search(&q.q, K, SearchMode::Hybrid).unwrap()),
                &q.relevant,
            );
        }
        sweep += &format!(
            "  text {text_weight:.2} vector 1.00: R@5 {:.3}  MRR {:.3}\n",
            s.recall(),
            s.mrr()
        );
    }
    eprintln!("{sweep}");

    let mut table = format!(
        "\nretrieval: {} notes, {} questions, k = {K}\n{:<16}{:>4}  {:>10} {:>10} {:>10}   {:>10} {:>10} {:>10}\n",
        set.notes.len(),
        set.questions.len(),
        "category",
        "n",
        "R@5 text",
        "R@5 vec",
        "R@5 hyb",
        "MRR text",
        "MRR vec",
        "MRR hyb",
    );
    let mut cats: Vec<&str> = set.questions.iter().map(|q| q.category.as_str()).collect();
    cats.sort_unstable();
    cats.dedup();
    cats.push("all");
    for cat in cats {
        let s = |m| scores[&(cat.to_string(), m)];
        table += &format!(
            "{cat:<16}{:>4}  {:>10.3} {:>10.3} {:>10.3}   {:>10.3} {:>10.3} {:>10.3}\n",
            s(Mode::Text).n,
            s(Mode::Text).recall(),
            s(Mode::Vector).recall(),
            s(Mode::Hybrid).recall(),
            s(Mode::Text).mrr(),
            s(Mode::Vector).mrr(),
            s(Mode::Hybrid).mrr(),
        );
    }
    eprintln!("{table}");
    eprintln!(
        "questions where hybrid ranks the answer below one of the sides (99: not in the top {K}):\n{}",
        worse.join("\n")
    );
    Results { scores }
}

/// The issue asks for a set "on which hybrid beats FTS-only and vector-only". Hybrid
/// ranks better than both overall (MRR@10 0.883 vs text 0.643 and vector 0.861 when
/// written, with multilingual-e5-small; 0.973 vs 0.643 and 0.956 with the Universal
/// Sentence Encoder, the default since), finds at least as much in the top 5 as each, and is never worse than the
/// vector side in any category. Two things make that so (see `hybrid_text_side` in
/// `src/store.rs`): stop words are left out of the text query, and the text
/// side counts only chunks with more than half of the query's words or one of its codes;
/// without them a cross-language question let unrelated notes that share one word
/// ("meeting", "Alex") outrank the vector side's answer. Each floor is the measured value
/// minus a margin.
#[test]
fn hybrid_beats_text_only_and_vector_only() {
    let r = run();
    let all = |m| r.get("all", m);
    let (text, vector, hybrid) = (all(Mode::Text), all(Mode::Vector), all(Mode::Hybrid));
    for (side, s) in [("text", text), ("vector", vector)] {
        assert!(
            hybrid.mrr() > s.mrr() && hybrid.recall() >= s.recall(),
            "hybrid MRR@10 {:.3} R@5 {:.3}, {side} MRR@10 {:.3} R@5 {:.3}",
            hybrid.mrr(),
            hybrid.recall(),
            s.mrr(),
            s.recall()
        );
    }
    assert!(hybrid.recall() > text.recall());
    for cat in ["cross_language", "identifier", "paraphrase", "word_form"] {
        let (v, h) = (r.get(cat, Mode::Vector), r.get(cat, Mode::Hybrid));
        assert!(
            h.mrr() >= v.mrr() && h.recall() >= v.recall(),
            "{cat}: hybrid MRR@10 {:.3} R@5 {:.3} below vector {:.3} {:.3}",
            h.mrr(),
            h.recall(),
            v.mrr(),
            v.recall()
        );
    }
    let (id_vector, id_hybrid) = (
        r.get("identifier", Mode::Vector).mrr(),
        r.get("identifier", Mode::Hybrid).mrr(),
    );
    // Codes are where words help: hybrid ranks them better than meaning alone (or both
    // are perfect, as with the Universal Sentence Encoder).
    assert!(
        id_hybrid > id_vector || id_hybrid == 1.0,
        "identifier MRR@10: hybrid {id_hybrid:.3}, vector {id_vector:.3}"
    );

    let floor = |cat: &str, mode: Mode, min_recall: f64| {
        let s = r.get(cat, mode);
        assert!(
            s.recall() >= min_recall,
            "{cat} {mode:?}: recall@5 {:.3} < {min_recall}",
            s.recall()
        );
    };
    // Cross-language: the words do not match (text finds nothing), the meaning does.
    let cross_text = r.get("cross_language", Mode::Text).recall();
    assert!(
        cross_text <= 0.1,
        "cross_language text recall@5 {cross_text:.3}"
    );
    floor("cross_language", Mode::Vector, 0.8);
    floor("cross_language", Mode::Hybrid, 0.8);
    // Exact identifiers and Russian word forms (the stem column): the words match.
    floor("identifier", Mode::Text, 0.9);
    floor("identifier", Mode::Hybrid, 0.9);
    floor("word_form", Mode::Text, 0.9);
    floor("word_form", Mode::Hybrid, 0.9);
    floor("paraphrase", Mode::Vector, 0.9);
    floor("paraphrase", Mode::Hybrid, 0.9);
}
