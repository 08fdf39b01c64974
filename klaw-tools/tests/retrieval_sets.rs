#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Retrieval quality per embedding model on two sets of the project's own:
//!
//! - `tests/data/crosslang.json`: 48 notes of one bilingual user (24 Russian, 24 English,
//!   each topic in both languages, so a same-language distractor exists), each asked
//!   once in the other language and once, paraphrased, in its own (96 questions);
//! - `tests/data/conversations/*.jsonl`: three dialogues in dated sessions (Russian,
//!   English, mixed; about 290 turns), imported as `memory import` imports them
//!   ([`conversation::documents`]: each turn with the previous one and the date as
//!   context), with questions (`*.questions.json`) whose evidence is one or more turn
//!   ids: single turns, several turns, when something happened, the latest value of
//!   something that changed, turns understood only with the one before, and questions
//!   in the other language.
//!
//! For each model and mode (text, vector, hybrid) the test prints top-1, MRR@10 and
//! recall@10 (the share of a question's evidence in the first ten), as the tables of
//! `doc/memory.md`, and checks floors (the measured value less a margin, so another CPU
//! passes) and that the default model is the best of them on both sets.
//!
//! Run with: cargo test -p klaw-tools --features memory --test retrieval_sets -- --nocapture
//! (`KLAW_RETRIEVAL_MODELS=multilingual-e5-small` runs one model's rows only, and skips
//! the checks that compare models).

use std::collections::{BTreeMap, HashSet};

use klaw_tools::tools::memory::conversation::{self, Turn};
use klaw_tools::tools::memory::{
    Document, Embedder, EmbedderConfig, Index, MemoryConfig, SearchMode,
};
use serde::Deserialize;
use serde_json::Value;

const K: usize = 10;
const MODES: [SearchMode; 3] = [SearchMode::Text, SearchMode::Vector, SearchMode::Hybrid];
const DIALOGUES: [&str; 3] = ["family-ru", "friends-en", "work-mixed"];

/// A model as the test runs it: a directory under `<cache>/models/`, and e5's prefix for
/// stored texts replaced by the query one ("query: " on both sides, e5's convention for
/// symmetric tasks) when `symmetric`.
struct Model {
    label: &'static str,
    dir: &'static str,
    symmetric: bool,
}

const MODELS: [Model; 3] = [
    Model {
        label: "multilingual-e5-small",
        dir: "multilingual-e5-small",
        symmetric: false,
    },
    Model {
        label: "multilingual-e5-small, query: on both sides",
        dir: "multilingual-e5-small",
        symmetric: true,
    },
    Model {
        label: "use-multilingual-v3",
        dir: "use-multilingual-v3",
        symmetric: false,
    },
];

fn embedder(m: &Model) -> Embedder {
    let mut config = EmbedderConfig::from_cache_model(m.dir).unwrap_or_else(|e| panic!("{e}"));
    if m.symmetric {
        config.passage_prefix = config.query_prefix.clone();
        config.fingerprint += "+symmetric";
    }
    let e = Embedder::new(config);
    e.load().unwrap_or_else(|e| panic!("{e}"));
    e
}

/// Top-1, MRR@10 and recall@10 summed over questions.
#[derive(Debug, Default, Clone, Copy)]
struct Score {
    n: usize,
    top1: usize,
    mrr: f64,
    recall: f64,
}

impl Score {
    fn add(&mut self, ranked: &[String], relevant: &[String]) {
        self.n += 1;
        let first = ranked.iter().take(K).position(|x| relevant.contains(x));
        if first == Some(0) {
            self.top1 += 1;
        }
        if let Some(p) = first {
            self.mrr += 1.0 / (p + 1) as f64;
        }
        let top: HashSet<&String> = ranked.iter().take(K).collect();
        let found = relevant.iter().filter(|r| top.contains(r)).count();
        self.recall += found as f64 / relevant.len().max(1) as f64;
    }
    fn mrr(&self) -> f64 {
        self.mrr / self.n.max(1) as f64
    }
    fn recall(&self) -> f64 {
        self.recall / self.n.max(1) as f64
    }
}

type Scores = BTreeMap<(String, &'static str), Score>;

fn mode_name(m: SearchMode) -> &'static str {
    match m {
        SearchMode::Text => "text",
        SearchMode::Vector => "vector",
        SearchMode::Hybrid => "hybrid",
    }
}

/// Searches every question in every mode; scores by category and for "all".
fn score<'q>(
    index: &Index,
    questions: impl Iterator<Item = (&'q str, &'q str, &'q [String])>,
    id_of: impl Fn(&str) -> String,
) -> Scores {
    let mut scores = Scores::new();
    for (q, category, relevant) in questions {
        for mode in MODES {
            let ranked: Vec<String> = index
                .search(q, K, mode)
                .unwrap()
                .into_iter()
                .map(|h| id_of(&h.source))
                .collect();
            for cat in [category, "all"] {
                scores
                    .entry((cat.to_owned(), mode_name(mode)))
                    .or_default()
                    .add(&ranked, relevant);
            }
        }
    }
    scores
}

#[derive(Deserialize)]
struct CrossSet {
    notes: Vec<CrossNote>,
    questions: Vec<CrossQuestion>,
}

#[derive(Deserialize)]
struct CrossNote {
    id: String,
    text: String,
}

#[derive(Deserialize)]
struct CrossQuestion {
    q: String,
    category: String,
    relevant: Vec<String>,
}

fn crosslang(e: &Embedder) -> Scores {
    let set: CrossSet = serde_json::from_str(include_str!("data/crosslang.json")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(
        &dir.path().join("m.sqlite"),
        e.clone(),
        &MemoryConfig::default(),
    )
    .unwrap();
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
    assert_eq!(index.save_all(&docs).unwrap().inserted, set.notes.len());
    score(
        &index,
        set.questions
            .iter()
            .map(|q| (q.q.as_str(), q.category.as_str(), q.relevant.as_slice())),
        str::to_owned,
    )
}

#[derive(Deserialize)]
struct TurnQuestion {
    q: String,
    category: String,
    evidence: Vec<String>,
}

fn dialogue(name: &str) -> Vec<Turn> {
    let path = format!(
        "{}/tests/data/conversations/{name}.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| Turn::from_line(&serde_json::from_str::<Value>(l).unwrap(), i + 1).unwrap())
        .collect()
}

fn questions(name: &str) -> Vec<TurnQuestion> {
    let path = format!(
        "{}/tests/data/conversations/{name}.questions.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// All dialogues in one index (a question may find another dialogue's turns); with
/// `context` false, turns are stored alone (to measure what the context brings).
fn conversations(e: &Embedder, context: bool) -> Scores {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(
        &dir.path().join("m.sqlite"),
        e.clone(),
        &MemoryConfig::default(),
    )
    .unwrap();
    let mut qs = Vec::new();
    for name in DIALOGUES {
        let turns = dialogue(name);
        let mut docs = conversation::documents(&turns, name);
        if !context {
            docs.iter_mut().for_each(|d| d.context = None);
        }
        let report = index.save_all(&docs).unwrap();
        assert_eq!(report.duplicates, 0, "{name}");
        qs.extend(questions(name));
    }
    score(
        &index,
        qs.iter()
            .map(|q| (q.q.as_str(), q.category.as_str(), q.evidence.as_slice())),
        |source| {
            source
                .split_once('#')
                .map_or(source, |(_, id)| id)
                .to_owned()
        },
    )
}

fn table(title: &str, rows: &[(&str, Scores)], cats: &[&str]) -> String {
    let mut t = format!(
        "\n{title}\n\n| model | mode | {} |\n|---|---|{}\n",
        cats.iter()
            .map(|c| format!("{c} top-1 / MRR@10 / R@10"))
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(cats.len())
    );
    for (label, scores) in rows {
        for mode in MODES {
            let cells: Vec<String> = cats
                .iter()
                .map(|c| {
                    let s = scores[&((*c).to_owned(), mode_name(mode))];
                    format!("{}/{} · {:.2} · {:.2}", s.top1, s.n, s.mrr(), s.recall())
                })
                .collect();
            t += &format!(
                "| {label} | {} | {} |\n",
                mode_name(mode),
                cells.join(" | ")
            );
        }
    }
    t
}

#[test]
fn models_compared_on_cross_language_notes_and_long_conversations() {
    let mut cross = Vec::new();
    let mut conv = Vec::new();
    // `KLAW_RETRIEVAL_MODELS=dir,dir`: only those (while trying a model out)
    let only = std::env::var("KLAW_RETRIEVAL_MODELS").ok();
    for m in MODELS.iter().filter(|m| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|d| d == m.dir))
    }) {
        let e = embedder(m);
        cross.push((m.label, crosslang(&e)));
        conv.push((m.label, conversations(&e, true)));
        if !m.symmetric {
            conv.push((
                if m.dir == "use-multilingual-v3" {
                    "use-multilingual-v3, turns without context"
                } else {
                    "multilingual-e5-small, turns without context"
                },
                conversations(&e, false),
            ));
        }
    }
    // Both sets together, hybrid (what memory_search does by default).
    let mut overall: Vec<(&str, Score)> = Vec::new();
    for ((label, c), (_, v)) in cross
        .iter()
        .zip(conv.iter().filter(|(l, _)| !l.contains("without")))
    {
        let (a, b) = (
            c[&("all".to_owned(), "hybrid")],
            v[&("all".to_owned(), "hybrid")],
        );
        overall.push((
            label,
            Score {
                n: a.n + b.n,
                top1: a.top1 + b.top1,
                mrr: a.mrr + b.mrr,
                recall: a.recall + b.recall,
            },
        ));
    }
    let mut t = String::from(
        "\nboth sets, hybrid\n\n| model | top-1 | MRR@10 | R@10 |\n|---|---|---|---|\n",
    );
    for (label, s) in &overall {
        t += &format!(
            "| {label} | {}/{} | {:.3} | {:.3} |\n",
            s.top1,
            s.n,
            s.mrr(),
            s.recall()
        );
    }
    eprintln!("{t}");
    eprintln!(
        "{}",
        table(
            "cross-language notes (48 notes, 96 questions)",
            &cross,
            &["cross_language", "same_language"]
        )
    );
    eprintln!(
        "{}",
        table(
            "conversations (3 dialogues)",
            &conv,
            &[
                "all",
                "single",
                "multi",
                "temporal",
                "update",
                "context",
                "cross_language"
            ]
        )
    );

    // Floors: each the value measured when written less a margin (another CPU, another
    // ONNX Runtime build may move a question or two).
    let get = |rows: &[(&str, Scores)], label: &str, cat: &str, mode: &'static str| {
        rows.iter()
            .find(|(l, _)| *l == label)
            .map(|(_, s)| s[&(cat.to_owned(), mode)])
    };
    let floor = |what: &str, s: Option<Score>, top1: usize, recall: f64| {
        if let Some(s) = s {
            assert!(
                s.top1 >= top1 && s.recall() >= recall,
                "{what}: top-1 {}/{} (floor {top1}), R@10 {:.3} (floor {recall})",
                s.top1,
                s.n,
                s.recall()
            );
        }
    };
    let (e5, use3) = ("multilingual-e5-small", "use-multilingual-v3");
    // measured: e5 34/48 0.96, USE 43/48 0.98
    floor(
        "e5 cross-language",
        get(&cross, e5, "cross_language", "hybrid"),
        30,
        0.9,
    );
    floor(
        "USE cross-language",
        get(&cross, use3, "cross_language", "hybrid"),
        40,
        0.9,
    );
    // measured: e5 44/48 1.00, USE 38/48 1.00
    floor(
        "e5 same-language",
        get(&cross, e5, "same_language", "hybrid"),
        40,
        0.95,
    );
    floor(
        "USE same-language",
        get(&cross, use3, "same_language", "hybrid"),
        34,
        0.95,
    );
    // measured: e5 48/137 0.72, USE 42/137 0.72
    floor(
        "e5 conversations",
        get(&conv, e5, "all", "hybrid"),
        40,
        0.66,
    );
    floor(
        "USE conversations",
        get(&conv, use3, "all", "hybrid"),
        36,
        0.66,
    );

    if only.is_some() {
        return;
    }
    // The default model is the best where the issue asked (doc/memory.md): Russian
    // questions about English notes and back, and the same recall over conversations.
    let default = EmbedderConfig::from_cache().unwrap().name;
    assert_eq!(default, use3);
    let (u, e) = (
        get(&cross, use3, "cross_language", "hybrid").unwrap(),
        get(&cross, e5, "cross_language", "hybrid").unwrap(),
    );
    assert!(u.top1 >= e.top1 + 4 && u.mrr() > e.mrr(), "{u:?} vs {e:?}");
    let (u, e) = (
        get(&conv, use3, "all", "hybrid").unwrap(),
        get(&conv, e5, "all", "hybrid").unwrap(),
    );
    assert!(u.recall() >= e.recall() - 0.04, "{u:?} vs {e:?}");
    // A turn's context (its date and the turn before) is what makes the Universal
    // Sentence Encoder find conversations: measured R@10 0.72 with it, 0.58 without.
    let without = get(
        &conv,
        "use-multilingual-v3, turns without context",
        "all",
        "hybrid",
    )
    .unwrap();
    assert!(
        u.recall() >= without.recall() + 0.06,
        "{u:?} vs {without:?}"
    );
}
