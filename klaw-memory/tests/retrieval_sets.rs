#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Retrieval quality per embedding model and search mode on sets of the project's own:
//!
//! - `tests/data/crosslang.json`: 48 notes of one bilingual user (24 Russian, 24 English,
//!   each topic in both languages, so a same-language distractor exists), each asked
//!   once in the other language and once, paraphrased, in its own (96 questions);
//! - `tests/data/topicpairs.json`: 44 notes as an agent keeps them ("Пользователь ...",
//!   "The user ..."), 22 topics with one Russian and one English note each about a
//!   different detail, each asked in the other language and in its own (88 questions):
//!   a question shares its common words and often the topic with the same-topic note in
//!   its own language, the wrong answer across languages (issue 30);
//! - `tests/data/conversations/*.jsonl`: four dialogues in dated sessions (Russian,
//!   English, mixed, and a longer English one; about 380 turns) with questions
//!   (`*.questions.json`) whose evidence is one or more turn ids: single turns, several
//!   turns, when something happened, the latest value of something that changed, turns
//!   understood only with the one before, and questions in the other language. Imported
//!   two ways: as a conversation (as `memory import` imports it,
//!   [`conversation::documents`]: each turn with its date and the previous turn as
//!   context) and as document lines (each turn `speaker: text` alone);
//! - `tests/data/long/*.jsonl` (issue 49, made by `scripts/gen_long_conversations.py`):
//!   four long two-speaker conversations of 16 dated sessions (three English, one
//!   Russian; 1711 turns) with 305 questions (a single fact, when something happened, a
//!   fact in two turns, a preference stated once in the first sessions; some
//!   paraphrased), imported both ways, with a plain BM25 over the same turns printed
//!   beside the modes (`long_conversations`, the default model only).
//!
//! For each model and mode (text, vector, hybrid, and hybrid fused by RRF as before issue
//! 30) the test prints top-1, MRR@10 and recall@10 (the share of a question's evidence in
//! the first ten), as the tables of `doc/memory.md`, and checks floors (the measured
//! value less a margin, so another CPU passes) and that the default model and fusion are
//! the best of them where it matters.
//!
//! Run with: cargo test -p klaw-memory --test all -- retrieval_sets:: --nocapture
//! (`KLAW_RETRIEVAL_MODELS=multilingual-e5-small` runs one model's rows only, and skips
//! the checks that compare models; `KLAW_RETRIEVAL_FUSIONS=1` adds a row per candidate
//! fusion that was measured for issue 30).

use std::collections::{BTreeMap, HashSet};

use klaw_memory::bench_support::{self, Evidence, Fusion, Spaces};
use klaw_memory::conversation::{self, Turn};
use klaw_memory::{Document, Embedder, EmbedderConfig, Hit, Index, MemoryConfig, SearchMode};
use serde::Deserialize;
use serde_json::Value;

pub(crate) const K: usize = 10;
pub(crate) const DIALOGUES: [&str; 4] = ["family-ru", "friends-en", "work-mixed", "climbing-en"];
/// The dialogues in English only: their questions also count under `english`.
const ENGLISH: [&str; 2] = ["friends-en", "climbing-en"];

/// One way of searching: a mode, and for hybrid the fusion (`None`: the index's own,
/// the default with the model's lift, as `memory_search` searches).
#[derive(Clone, Copy)]
struct Way {
    name: &'static str,
    mode: SearchMode,
    fusion: Option<Fusion>,
    /// With several models: how their spaces add up (`None`: the index's own).
    spaces: Option<Spaces>,
    /// If above 0: the index's own fusion with each side proposing this many candidates
    /// (the default's 50 before issue 49).
    depth: usize,
    /// If set: the index's own fusion with this text evidence.
    evidence: Option<Evidence>,
}

const fn way(name: &'static str, mode: SearchMode, fusion: Fusion) -> Way {
    Way {
        name,
        mode,
        fusion: Some(fusion),
        spaces: None,
        depth: 0,
        evidence: None,
    }
}

/// `mode` as `memory_search` runs it.
const fn own(name: &'static str, mode: SearchMode) -> Way {
    Way {
        name,
        mode,
        fusion: None,
        spaces: None,
        depth: 0,
        evidence: None,
    }
}

const fn lift(name: &'static str, evidence: Evidence, lift: f64, depth: usize) -> Way {
    way(
        name,
        SearchMode::Hybrid,
        Fusion::Lift {
            evidence,
            lift,
            depth,
            bm25: 0.0,
            stretch: false,
            spread: 0.0,
            top_up: false,
        },
    )
}

const fn blended(name: &'static str, lift: f64, bm25: f64) -> Way {
    way(
        name,
        SearchMode::Hybrid,
        Fusion::Lift {
            evidence: Evidence::IdfAcross(1.0),
            lift,
            depth: 50,
            bm25,
            stretch: false,
            spread: 0.0,
            top_up: false,
        },
    )
}

const fn stretched(name: &'static str, evidence: Evidence, lift: f64, depth: usize) -> Way {
    way(
        name,
        SearchMode::Hybrid,
        Fusion::Lift {
            evidence,
            lift,
            depth,
            bm25: 0.0,
            stretch: true,
            spread: 0.0,
            top_up: false,
        },
    )
}

const fn spread(name: &'static str, spread: f64) -> Way {
    way(
        name,
        SearchMode::Hybrid,
        Fusion::Lift {
            evidence: Evidence::IdfAcross(1.0),
            lift: 0.5,
            depth: 50,
            bm25: 0.0,
            stretch: false,
            spread,
            top_up: false,
        },
    )
}

/// What every run prints: the modes as `memory_search` runs them, and the fusion before
/// issue 30 for comparison.
const WAYS: [Way; 5] = [
    own("text", SearchMode::Text),
    own("vector", SearchMode::Vector),
    own("hybrid", SearchMode::Hybrid),
    way("hybrid, RRF (before)", SearchMode::Hybrid, Fusion::Rrf),
    Way {
        depth: 50,
        ..own("hybrid, best 50 of each side (before)", SearchMode::Hybrid)
    },
];

/// The other fusions measured for issue 30 (`KLAW_RETRIEVAL_FUSIONS=1`): the cosine
/// (stretched to 0..1 over the candidates, or not) plus `lift` times the text evidence,
/// over the best `depth` of each side; the first seven are the lifts tried for a model's
/// `hybrid_lift` (`KLAW_RETRIEVAL_FUSIONS="lift 0."`: e5's is 0.1). The last is issue
/// 49's: the default with the gate across languages graded by the cosine
/// ([`Evidence::IdfGraded`], `KLAW_RETRIEVAL_FUSIONS=graded`).
const CANDIDATES: [Way; 21] = [
    lift("the default, lift 0.05", Evidence::IdfAcross(1.0), 0.05, 50),
    lift("the default, lift 0.07", Evidence::IdfAcross(1.0), 0.07, 50),
    lift("the default, lift 0.1", Evidence::IdfAcross(1.0), 0.1, 50),
    lift("the default, lift 0.15", Evidence::IdfAcross(1.0), 0.15, 50),
    lift("the default, lift 0.2", Evidence::IdfAcross(1.0), 0.2, 50),
    lift("the default, lift 0.3", Evidence::IdfAcross(1.0), 0.3, 50),
    lift("the default, lift 0.5", Evidence::IdfAcross(1.0), 0.5, 50),
    spread("the default, lift × spread / 0.3", 0.3),
    spread("the default, lift × spread / 0.4", 0.4),
    spread("the default, lift × spread / 0.5", 0.5),
    lift("cos + 0.1 bm25/max, 10", Evidence::Bm25, 0.1, 10),
    lift("cos + 0.1 IDF share, 10", Evidence::Idf, 0.1, 10),
    lift("cos + 0.5 IDF share, 50", Evidence::Idf, 0.5, 50),
    lift(
        "cos + 0.5 IDF, neutral, 30",
        Evidence::IdfNeutral(1.0),
        0.5,
        30,
    ),
    lift(
        "cos + 0.3 IDF, across, 30",
        Evidence::IdfAcross(1.0),
        0.3,
        30,
    ),
    lift(
        "cos + 0.5 IDF, across, 30",
        Evidence::IdfAcross(1.0),
        0.5,
        30,
    ),
    lift(
        "cos + 0.7 IDF, across, 50",
        Evidence::IdfAcross(1.0),
        0.7,
        50,
    ),
    stretched(
        "stretched + 1.0 IDF, across, 50",
        Evidence::IdfAcross(1.0),
        1.0,
        50,
    ),
    blended("cos + 0.5 IDF × bm25 ¼, across, 50", 0.5, 0.25),
    blended("cos + 0.5 IDF × bm25 ½, across, 50", 0.5, 0.5),
    Way {
        evidence: Some(Evidence::IdfGraded(1.0)),
        ..own("the default, gate graded by the cosine", SearchMode::Hybrid)
    },
];

/// Two models in one index (issue 30, `memory.model` as a list): its spaces added up
/// with [`Spaces::DEFAULT`] (`hybrid`), and the other ways measured.
const fn spaces(name: &'static str, spaces: Spaces) -> Way {
    Way {
        name,
        mode: SearchMode::Hybrid,
        fusion: None,
        spaces: Some(spaces),
        depth: 0,
        evidence: None,
    }
}

const fn weighted(name: &'static str, across: f64, across_gap: f64, cap: f64) -> Way {
    spaces(
        name,
        Spaces {
            others: 1.0,
            across,
            across_gap,
            cap,
        },
    )
}

/// What an index of two models prints: the modes as `memory_search` runs them (vector:
/// the cosines of both spaces summed; hybrid: their scores summed), and the way that
/// keeps the first model's answers across languages (the second space left out when the
/// first space's best chunk is in another script than the query).
const TWO_WAYS: [Way; 4] = [
    own("text", SearchMode::Text),
    own("vector", SearchMode::Vector),
    own("hybrid", SearchMode::Hybrid),
    weighted("hybrid, second space left out across", 0.0, 0.0, 0.0),
];

/// The other ways of adding two spaces up that were measured (`KLAW_RETRIEVAL_FUSIONS`
/// as for [`CANDIDATES`]): `across`, the second space's weight when the first space's
/// best chunk is in another script than the query; `gap`, added to the second space's
/// cosine of a chunk in another script than the query; `cap`, the second space sinks no
/// candidate more than this below its best.
const TWO_CANDIDATES: [Way; 8] = [
    weighted("hybrid, across 0.5", 0.5, 0.0, 0.0),
    weighted("hybrid, across 0.25", 0.25, 0.0, 0.0),
    weighted("hybrid, gap 0.02", 1.0, 0.02, 0.0),
    weighted("hybrid, gap 0.06", 1.0, 0.06, 0.0),
    weighted("hybrid, gap 0.1", 1.0, 0.1, 0.0),
    weighted("hybrid, cap 0.03", 1.0, 0.0, 0.03),
    weighted("hybrid, cap 0.05", 1.0, 0.0, 0.05),
    weighted("hybrid, cap 0.08", 1.0, 0.0, 0.08),
];

/// Every way of one kind of index: of one model, or of several.
fn ways_for(models: usize) -> Vec<Way> {
    if models > 1 {
        let mut w = TWO_WAYS.to_vec();
        w.extend(candidates(&TWO_CANDIDATES));
        w
    } else {
        ways()
    }
}

/// Every way either kind prints, each name once (for the tables).
fn all_ways() -> Vec<Way> {
    let mut w = ways();
    for t in ways_for(2) {
        if !w.iter().any(|x| x.name == t.name) {
            w.push(t);
        }
    }
    w
}

fn ways() -> Vec<Way> {
    let mut w = WAYS.to_vec();
    w.extend(candidates(&CANDIDATES));
    w
}

/// The candidates `KLAW_RETRIEVAL_FUSIONS` asks for: `1`, every one; other text, those
/// whose name contains it.
fn candidates(all: &[Way]) -> Vec<Way> {
    match std::env::var("KLAW_RETRIEVAL_FUSIONS") {
        Ok(f) => all
            .iter()
            .filter(|c| f == "1" || c.name.contains(f.as_str()))
            .copied()
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// A model as the test runs it: a directory under `<cache>/models/`, and e5's prefix for
/// stored texts replaced by the query one ("query: " on both sides, e5's convention for
/// symmetric tasks) when `symmetric`; `more`: the other models of an index of several
/// (`memory.model` as a list), after the first.
struct Model {
    label: &'static str,
    dir: &'static str,
    symmetric: bool,
    more: &'static [&'static str],
}

impl Model {
    /// What `KLAW_RETRIEVAL_MODELS` names it by: its directories joined by `+`.
    fn key(&self) -> String {
        std::iter::once(self.dir)
            .chain(self.more.iter().copied())
            .collect::<Vec<_>>()
            .join("+")
    }
}

/// The label of the two-model index.
const TWO: &str = "use-multilingual-v3 + multilingual-e5-small";

const MODELS: [Model; 4] = [
    Model {
        label: "multilingual-e5-small",
        dir: "multilingual-e5-small",
        symmetric: false,
        more: &[],
    },
    Model {
        label: "multilingual-e5-small, query: on both sides",
        dir: "multilingual-e5-small",
        symmetric: true,
        more: &[],
    },
    Model {
        label: "use-multilingual-v3",
        dir: "use-multilingual-v3",
        symmetric: false,
        more: &[],
    },
    Model {
        label: TWO,
        dir: "use-multilingual-v3",
        symmetric: false,
        more: &["multilingual-e5-small"],
    },
];

/// The models of an index, the first leading.
fn embedders(m: &Model) -> Vec<Embedder> {
    std::iter::once(m.dir)
        .chain(m.more.iter().copied())
        .map(|dir| {
            let mut config =
                EmbedderConfig::from_cache_model(dir).unwrap_or_else(|e| panic!("{e}"));
            if m.symmetric {
                config.passage_prefix = config.query_prefix.clone();
                config.fingerprint += "+symmetric";
            }
            let e = Embedder::new(config);
            e.load().unwrap_or_else(|e| panic!("{e}"));
            e
        })
        .collect()
}

/// Top-1, MRR@10 and recall@10 summed over questions.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Score {
    pub(crate) n: usize,
    pub(crate) top1: usize,
    mrr: f64,
    recall: f64,
}

impl Score {
    pub(crate) fn add(&mut self, ranked: &[String], relevant: &[String]) {
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
    pub(crate) fn mrr(&self) -> f64 {
        self.mrr / self.n.max(1) as f64
    }
    pub(crate) fn recall(&self) -> f64 {
        self.recall / self.n.max(1) as f64
    }
    fn plus(self, o: Score) -> Score {
        Score {
            n: self.n + o.n,
            top1: self.top1 + o.top1,
            mrr: self.mrr + o.mrr,
            recall: self.recall + o.recall,
        }
    }
}

/// Scores by (category, way).
type Scores = BTreeMap<(String, &'static str), Score>;

/// One question: the text, the categories it counts in (besides `all`), the relevant ids.
struct Question<'q> {
    q: &'q str,
    cats: Vec<&'q str>,
    relevant: &'q [String],
}

/// How deep the default hybrid ranking of each question is kept for [`two_spaces`].
const DEEP: usize = 30;

/// One question's categories, relevant ids and default hybrid ranking (id, score).
type Deep = (Vec<String>, Vec<String>, Vec<(String, f64)>);

/// A set searched with one model: the scores, and per question its categories, relevant
/// ids and the default hybrid's best [`DEEP`] (id, score).
struct Run {
    scores: Scores,
    deep: Vec<Deep>,
}

/// Searches every question every way; scores by category and for "all".
fn score(index: &Index, questions: &[Question<'_>], id_of: impl Fn(&str) -> String) -> Run {
    let mut scores = Scores::new();
    let mut deep = Vec::new();
    let ways = ways_for(index.embedders().len());
    for q in questions {
        let hits = index.search(q.q, DEEP, SearchMode::Hybrid).unwrap();
        deep.push((
            q.cats.iter().map(|c| (*c).to_owned()).collect(),
            q.relevant.to_vec(),
            hits.iter().map(|h| (id_of(&h.source), h.score)).collect(),
        ));
        for w in &ways {
            let fusion = w.fusion.unwrap_or_else(|| bench_support::fusion(index));
            let fusion = if w.depth > 0 {
                fusion.with_depth(w.depth)
            } else {
                fusion
            };
            let fusion = w.evidence.map_or(fusion, |e| fusion.with_evidence(e));
            let hits: Vec<Hit> = match w.spaces {
                Some(spaces) => {
                    bench_support::search_spaces(index, q.q, K, w.mode, spaces).unwrap()
                }
                None => bench_support::search_fused(index, q.q, K, w.mode, fusion).unwrap(),
            };
            let ranked: Vec<String> = hits.iter().map(|h| id_of(&h.source)).collect();
            for cat in q.cats.iter().copied().chain(["all"]) {
                scores
                    .entry((cat.to_owned(), w.name))
                    .or_default()
                    .add(&ranked, q.relevant);
            }
        }
    }
    Run { scores, deep }
}

/// Two models as two vector spaces of one store, approximated after the fact: each
/// question's default hybrid rankings of both models ([`DEEP`] each) fused by the sum of
/// their scores (a chunk missing from one ranking gets that ranking's lowest score).
fn two_spaces(a: &Run, b: &Run) -> Run {
    let mut scores = Scores::new();
    for ((cats, relevant, ra), (_, _, rb)) in a.deep.iter().zip(&b.deep) {
        let floor = |r: &[(String, f64)]| r.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
        let (fa, fb) = (floor(ra), floor(rb));
        let mut ids: Vec<&String> = ra.iter().chain(rb).map(|x| &x.0).collect();
        ids.sort();
        ids.dedup();
        let get = |r: &[(String, f64)], id: &String, f: f64| {
            r.iter().find(|x| &x.0 == id).map_or(f, |x| x.1)
        };
        let mut fused: Vec<(f64, &String)> = ids
            .into_iter()
            .map(|id| (get(ra, id, fa) + get(rb, id, fb), id))
            .collect();
        fused.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(y.1)));
        let ranked: Vec<String> = fused.into_iter().map(|x| x.1.clone()).collect();
        for cat in cats.iter().map(String::as_str).chain(["all"]) {
            scores
                .entry((cat.to_owned(), "hybrid"))
                .or_default()
                .add(&ranked, relevant);
        }
    }
    Run {
        scores,
        deep: Vec::new(),
    }
}

#[derive(Deserialize)]
pub(crate) struct NoteSet {
    pub(crate) notes: Vec<Note>,
    pub(crate) questions: Vec<NoteQuestion>,
}

#[derive(Deserialize)]
pub(crate) struct Note {
    pub(crate) id: String,
    pub(crate) text: String,
}

#[derive(Deserialize)]
pub(crate) struct NoteQuestion {
    pub(crate) q: String,
    category: String,
    pub(crate) relevant: Vec<String>,
}

fn open(e: &[Embedder]) -> (tempfile::TempDir, Index) {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open_models(
        &dir.path().join("m.sqlite"),
        e.to_vec(),
        &MemoryConfig::default(),
    )
    .unwrap();
    (dir, index)
}

/// A set of notes (`crosslang.json`, `topicpairs.json`), each note saved as it is.
fn notes(e: &[Embedder], json: &str) -> Run {
    let set: NoteSet = serde_json::from_str(json).unwrap();
    let (_dir, index) = open(e);
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
    let qs: Vec<Question<'_>> = set
        .questions
        .iter()
        .map(|q| Question {
            q: &q.q,
            cats: vec![&q.category],
            relevant: &q.relevant,
        })
        .collect();
    score(&index, &qs, str::to_owned)
}

#[derive(Deserialize)]
pub(crate) struct TurnQuestion {
    pub(crate) q: String,
    category: String,
    pub(crate) evidence: Vec<String>,
    /// The question avoids the evidence's words (the long conversations mark it).
    #[serde(default)]
    paraphrased: bool,
}

/// The turns of `tests/data/<dir>/<name>.jsonl`.
pub(crate) fn dialogue(dir: &str, name: &str) -> Vec<Turn> {
    let path = format!(
        "{}/tests/data/{dir}/{name}.jsonl",
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

/// The questions of `tests/data/<dir>/<name>.questions.json`.
pub(crate) fn questions(dir: &str, name: &str) -> Vec<TurnQuestion> {
    let path = format!(
        "{}/tests/data/{dir}/{name}.questions.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// All dialogues in one index (a question may find another dialogue's turns): as a
/// conversation (`context`: each turn with its date and the turn before, as `memory
/// import` does), or as document lines (each turn alone).
fn conversations(e: &[Embedder], context: bool) -> Run {
    let (_dir, index) = open(e);
    let mut qs = Vec::new();
    for name in DIALOGUES {
        let turns = dialogue("conversations", name);
        let mut docs = conversation::documents(&turns, name);
        if !context {
            docs.iter_mut().for_each(|d| d.context = None);
        }
        let report = index.save_all(&docs).unwrap();
        assert_eq!(report.duplicates, 0, "{name}");
        qs.extend(
            questions("conversations", name)
                .into_iter()
                .map(|q| (name, q)),
        );
    }
    let qs: Vec<Question<'_>> = qs
        .iter()
        .map(|(name, q)| Question {
            q: &q.q,
            cats: if ENGLISH.contains(name) {
                vec![&q.category, "english"]
            } else {
                vec![&q.category]
            },
            relevant: &q.evidence,
        })
        .collect();
    score(&index, &qs, |source| {
        source
            .split_once('#')
            .map_or(source, |(_, id)| id)
            .to_owned()
    })
}

/// Every set's scores for one model.
struct Sets {
    label: &'static str,
    crosslang: Run,
    topicpairs: Run,
    conversation: Run,
    lines: Run,
}

fn table(title: &str, rows: &[(&str, &Scores)], cats: &[&str]) -> String {
    let mut t = format!(
        "\n{title}\n\n| model | mode | {} |\n|---|---|{}\n",
        cats.iter()
            .map(|c| format!("{c} top-1 · MRR@10 · R@10"))
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(cats.len())
    );
    // the plain BM25 first where a set has it, then the ways
    let names: Vec<&str> = std::iter::once(BM25)
        .chain(all_ways().into_iter().map(|w| w.name))
        .collect();
    for (label, scores) in rows {
        for name in names
            .iter()
            .copied()
            .filter(|n| scores.contains_key(&("all".to_owned(), *n)))
        {
            let cells: Vec<String> = cats
                .iter()
                .map(|c| {
                    let s = scores
                        .get(&((*c).to_owned(), name))
                        .copied()
                        .unwrap_or_default();
                    format!("{}/{} · {:.3} · {:.3}", s.top1, s.n, s.mrr(), s.recall())
                })
                .collect();
            t += &format!("| {label} | {name} | {} |\n", cells.join(" | "));
        }
    }
    t
}

const NOTE_CATS: [&str; 2] = ["cross_language", "same_language"];
const CONV_CATS: [&str; 8] = [
    "all",
    "english",
    "single",
    "multi",
    "temporal",
    "update",
    "context",
    "cross_language",
];

#[test]
fn models_compared_on_notes_and_long_conversations() {
    // `KLAW_RETRIEVAL_MODELS=dir,dir`: only those (while trying a model out)
    let only = std::env::var("KLAW_RETRIEVAL_MODELS").ok();
    let mut all: Vec<Sets> = Vec::new();
    for m in MODELS.iter().filter(|m| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|d| d == m.key()))
    }) {
        let e = embedders(m);
        all.push(Sets {
            label: m.label,
            crosslang: notes(&e, include_str!("data/crosslang.json")),
            topicpairs: notes(&e, include_str!("data/topicpairs.json")),
            conversation: conversations(&e, true),
            lines: conversations(&e, false),
        });
    }
    // Every set together, per way: what one number says about a model and a fusion.
    let mut t = String::from(
        "\nevery set together (notes, topic pairs, conversations both ways)\n\n\
         | model | mode | top-1 | MRR@10 | R@10 |\n|---|---|---|---|---|\n",
    );
    let both =
        ["multilingual-e5-small", "use-multilingual-v3"].map(|l| all.iter().find(|s| s.label == l));
    if let [Some(e5), Some(use3)] = both {
        let two = Sets {
            label: "e5 + USE, two spaces (after the fact)",
            crosslang: two_spaces(&e5.crosslang, &use3.crosslang),
            topicpairs: two_spaces(&e5.topicpairs, &use3.topicpairs),
            conversation: two_spaces(&e5.conversation, &use3.conversation),
            lines: two_spaces(&e5.lines, &use3.lines),
        };
        all.push(two);
    }
    for s in &all {
        for w in all_ways() {
            let key = ("all".to_owned(), w.name);
            if !s.crosslang.scores.contains_key(&key) {
                continue;
            }
            let sum = [&s.crosslang, &s.topicpairs, &s.conversation, &s.lines]
                .iter()
                .fold(Score::default(), |a, x| a.plus(x.scores[&key]));
            t += &format!(
                "| {} | {} | {}/{} | {:.3} | {:.3} |\n",
                s.label,
                w.name,
                sum.top1,
                sum.n,
                sum.mrr(),
                sum.recall()
            );
        }
    }
    eprintln!("{t}");
    let rows = |f: fn(&Sets) -> &Run| -> Vec<(&str, &Scores)> {
        all.iter().map(|s| (s.label, &f(s).scores)).collect()
    };
    eprintln!(
        "{}",
        table(
            "cross-language notes (48 notes, 96 questions)",
            &rows(|s| &s.crosslang),
            &NOTE_CATS
        )
    );
    eprintln!(
        "{}",
        table(
            "topic pairs (44 notes, 22 topics in both languages, 88 questions)",
            &rows(|s| &s.topicpairs),
            &NOTE_CATS
        )
    );
    eprintln!(
        "{}",
        table(
            "conversations imported as conversations (4 dialogues, 177 questions)",
            &rows(|s| &s.conversation),
            &CONV_CATS
        )
    );
    eprintln!(
        "{}",
        table(
            "conversations imported as document lines (each turn alone)",
            &rows(|s| &s.lines),
            &CONV_CATS
        )
    );
    floors(&all, only.is_some());
}

/// Floors: each the value measured when written less a margin (another CPU, another ONNX
/// Runtime build may move a question or two); never exact scores.
fn floors(all: &[Sets], one_model: bool) {
    let get = |label: &str, f: fn(&Sets) -> &Run, cat: &str, way: &'static str| {
        all.iter()
            .find(|s| s.label == label)
            .map(|s| f(s).scores[&(cat.to_owned(), way)])
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
    // which set of a model's run
    type Pick = fn(&Sets) -> &Run;
    let [cross, pairs, conv, lines]: [Pick; 4] = [
        |s| &s.crosslang,
        |s| &s.topicpairs,
        |s| &s.conversation,
        |s| &s.lines,
    ];
    let (h, rrf) = ("hybrid", "hybrid, RRF (before)");
    // (what, model, set, category, top-1 floor, R@10 floor), hybrid with the default
    // fusion. Measured 2026-11-26: notes USE 43/48 0.98 and 40/48 1.00, e5 34/48 0.96 and
    // 41/48 1.00; topic pairs USE 37/44 1.00 and 40/44 1.00, e5 15/44 0.80 and 42/44 1.00
    // (0.59 and 41/44 with USE's lift of 0.5 before e5 had its own, `hybrid_lift` 0.1);
    // conversations USE 69/177 0.78 as a conversation, 55/177 0.66 as lines, e5 72/177
    // 0.77 and 77/177 0.72. Two models (USE + e5, scores summed), measured 2026-11-26:
    // notes 43/48 1.00 and 45/48 1.00, topic pairs 34/44 1.00 and 41/44 1.00,
    // conversations 73/177 0.81, as lines 62/177 0.71.
    #[rustfmt::skip]
    let table: [(&str, &str, Pick, &str, usize, f64); 18] = [
        ("USE notes, other language", use3, cross, "cross_language", 40, 0.9),
        ("USE notes, same language", use3, cross, "same_language", 36, 0.95),
        ("e5 notes, other language", e5, cross, "cross_language", 30, 0.9),
        ("e5 notes, same language", e5, cross, "same_language", 37, 0.95),
        ("USE topic pairs, other language", use3, pairs, "cross_language", 34, 0.95),
        ("USE topic pairs, same language", use3, pairs, "same_language", 37, 0.95),
        ("e5 topic pairs, other language", e5, pairs, "cross_language", 11, 0.7),
        ("e5 topic pairs, same language", e5, pairs, "same_language", 37, 0.95),
        ("USE conversations", use3, conv, "all", 60, 0.74),
        ("USE conversations as lines", use3, lines, "all", 47, 0.62),
        ("e5 conversations", e5, conv, "all", 60, 0.71),
        ("e5 conversations as lines", e5, lines, "all", 60, 0.65),
        ("two models notes, other language", TWO, cross, "cross_language", 40, 0.95),
        ("two models notes, same language", TWO, cross, "same_language", 41, 0.95),
        ("two models topic pairs, other language", TWO, pairs, "cross_language", 31, 0.95),
        ("two models topic pairs, same language", TWO, pairs, "same_language", 38, 0.95),
        ("two models conversations", TWO, conv, "all", 64, 0.77),
        ("two models conversations as lines", TWO, lines, "all", 54, 0.67),
    ];
    for (what, model, set, cat, top1, recall) in table {
        floor(what, get(model, set, cat, h), top1, recall);
    }

    // Issue 30, with the default model: the fusion keeps the vector side's answer in the
    // other language (RRF lost it to the same-topic note in the question's language,
    // measured 31/44 against 37/44) and finds more of the conversations (R@10 0.735 and
    // 0.587 with RRF, 0.783 and 0.661 now).
    if let (Some(new), Some(old)) = (
        get(use3, pairs, "cross_language", h),
        get(use3, pairs, "cross_language", rrf),
    ) {
        assert!(new.top1 >= old.top1 + 3, "{new:?} vs RRF {old:?}");
    }
    for (what, set) in [("conversations", conv), ("lines", lines)] {
        if let (Some(new), Some(old)) = (get(use3, set, "all", h), get(use3, set, "all", rrf)) {
            assert!(
                new.recall() >= old.recall() + 0.02 && new.top1 >= old.top1,
                "{what}: {new:?} vs RRF {old:?}"
            );
        }
    }
    // Two models find more of the conversations than the default alone (R@10 0.814
    // against 0.783, as lines 0.714 against 0.661), and the way that leaves the second
    // space out across languages keeps the default's answers there (37/44).
    for (what, set, gain) in [("conversations", conv, 0.01), ("lines", lines, 0.03)] {
        if let (Some(two), Some(one)) = (get(TWO, set, "all", h), get(use3, set, "all", h)) {
            assert!(
                two.recall() >= one.recall() + gain,
                "{what}: {two:?} vs {one:?}"
            );
        }
    }
    if let (Some(two), Some(one)) = (
        get(
            TWO,
            pairs,
            "cross_language",
            "hybrid, second space left out across",
        ),
        get(use3, pairs, "cross_language", h),
    ) {
        assert!(two.top1 + 1 >= one.top1, "{two:?} vs {one:?}");
    }
    if one_model {
        return;
    }
    // The default model is the best where issue 17 asked (doc/memory.md): Russian
    // questions about English notes and back, and the same recall over conversations.
    let default = EmbedderConfig::from_cache().unwrap().name;
    assert_eq!(default, use3);
    let (u, e) = (
        get(use3, cross, "cross_language", h).unwrap(),
        get(e5, cross, "cross_language", h).unwrap(),
    );
    assert!(u.top1 >= e.top1 + 4 && u.mrr() > e.mrr(), "{u:?} vs {e:?}");
    let (u, e) = (
        get(use3, conv, "all", h).unwrap(),
        get(e5, conv, "all", h).unwrap(),
    );
    assert!(u.recall() >= e.recall() - 0.04, "{u:?} vs {e:?}");
    // A turn's context (its date and the turn before) is what makes the Universal
    // Sentence Encoder find conversations: measured R@10 0.78 with it, 0.66 without.
    let without = get(use3, lines, "all", h).unwrap();
    assert!(
        u.recall() >= without.recall() + 0.06,
        "{u:?} vs {without:?}"
    );
}

/// The row of a plain BM25 over the same turns, printed beside the modes (issue 49: the
/// hybrid must beat its own word search).
const BM25: &str = "BM25 alone";

/// The long conversations of issue 49, `tests/data/long/` (made by
/// `scripts/gen_long_conversations.py --seed 49`): two speakers each, 16 dated sessions,
/// 360 to 470 turns; three in English, one in Russian.
const LONG: [&str; 4] = [
    "anna-ben-en",
    "chloe-daniel-en",
    "priya-marcus-en",
    "olga-dmitry-ru",
];

/// A plain Okapi BM25 (k1 1.2, b 0.75, Lucene's IDF) over lowercased runs of letters and
/// digits: no stemming, no stop words, every query word optional. The baseline a
/// benchmark's authors would run, not Klaw's text side (which stems, drops stop words
/// and wants most of the query's words).
struct Bm25 {
    /// (id, term counts, length in words)
    docs: Vec<(String, std::collections::HashMap<String, usize>, usize)>,
    df: std::collections::HashMap<String, usize>,
    avg: f64,
}

impl Bm25 {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;

    fn new(docs: &[(String, String)]) -> Self {
        let mut df = std::collections::HashMap::new();
        let docs: Vec<_> = docs
            .iter()
            .map(|(id, text)| {
                let words = bm25_words(text);
                let mut tf = std::collections::HashMap::new();
                for w in &words {
                    *tf.entry(w.clone()).or_insert(0) += 1;
                }
                for w in tf.keys() {
                    *df.entry(w.clone()).or_insert(0) += 1;
                }
                (id.clone(), tf, words.len())
            })
            .collect();
        let avg = docs.iter().map(|d| d.2 as f64).sum::<f64>() / docs.len().max(1) as f64;
        Bm25 { docs, df, avg }
    }

    /// The ids of the best `k` documents for `query` (ties by id).
    fn search(&self, query: &str, k: usize) -> Vec<String> {
        let n = self.docs.len() as f64;
        let mut terms = bm25_words(query);
        terms.sort();
        terms.dedup();
        let mut scored: Vec<(f64, &String)> = self
            .docs
            .iter()
            .map(|(id, tf, len)| {
                let s: f64 = terms
                    .iter()
                    .filter_map(|t| {
                        let f = *tf.get(t)? as f64;
                        let df = self.df[t] as f64;
                        let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                        let norm = 1.0 - Self::B + Self::B * *len as f64 / self.avg;
                        Some(idf * f * (Self::K1 + 1.0) / (f + Self::K1 * norm))
                    })
                    .sum();
                (s, id)
            })
            .filter(|(s, _)| *s > 0.0)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
        scored.into_iter().take(k).map(|x| x.1.clone()).collect()
    }
}

fn bm25_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The long conversations in one index, as a conversation (`context`: each turn with its
/// date and the turn before, as `memory import` does) or as documents (each turn
/// `speaker: text` alone; a repeated short reply is saved once, as `memory_save` would);
/// scored every way and by [`Bm25`] over the same turns. Ids are `<name>#<turn id>`
/// (every conversation has sessions `s1`..`s16`).
fn long_run(e: &[Embedder], context: bool) -> Run {
    let (_dir, index) = open(e);
    let mut qs: Vec<(TurnQuestion, Vec<&str>, Vec<String>)> = Vec::new();
    let mut texts: Vec<(String, String)> = Vec::new();
    for name in LONG {
        let mut docs = conversation::documents(&dialogue("long", name), name);
        if !context {
            docs.iter_mut().for_each(|d| d.context = None);
        }
        let report = index.save_all(&docs).unwrap();
        if context {
            assert_eq!(report.duplicates, 0, "{name}");
        }
        let mut seen = HashSet::new();
        texts.extend(
            docs.into_iter()
                .filter(|d| seen.insert((d.content.clone(), d.context.clone())))
                .map(|d| (d.source, d.content)),
        );
        let lang = if name.ends_with("-ru") {
            "russian"
        } else {
            "english"
        };
        for q in questions("long", name) {
            let relevant = q.evidence.iter().map(|id| format!("{name}#{id}")).collect();
            let mut cats = vec![lang];
            if q.paraphrased {
                cats.push("paraphrased");
            }
            qs.push((q, cats, relevant));
        }
    }
    let questions: Vec<Question<'_>> = qs
        .iter()
        .map(|(q, cats, relevant)| Question {
            q: &q.q,
            cats: std::iter::once(q.category.as_str())
                .chain(cats.iter().copied())
                .collect(),
            relevant,
        })
        .collect();
    let mut run = score(&index, &questions, str::to_owned);
    let bm25 = Bm25::new(&texts);
    for q in &questions {
        let ranked = bm25.search(q.q, K);
        for cat in q.cats.iter().copied().chain(["all"]) {
            run.scores
                .entry((cat.to_owned(), BM25))
                .or_default()
                .add(&ranked, q.relevant);
        }
    }
    run
}

const LONG_CATS: [&str; 8] = [
    "all",
    "english",
    "russian",
    "single",
    "temporal",
    "multi",
    "preference",
    "paraphrased",
];

/// Issue 49: long two-speaker conversations of dated sessions (`tests/data/long/`), as
/// documents and as a conversation, with a plain BM25 beside each mode. The default
/// model only (`KLAW_RETRIEVAL_MODELS` picks others, as for the test above).
#[test]
fn long_conversations() {
    let only = std::env::var("KLAW_RETRIEVAL_MODELS").ok();
    let default = EmbedderConfig::from_cache().unwrap().name;
    let mut runs: Vec<(&str, Run, Run)> = Vec::new();
    for m in MODELS.iter().filter(|m| match only.as_deref() {
        Some(o) => o.split(',').any(|d| d == m.key()),
        None => m.key() == default && !m.symmetric,
    }) {
        let e = embedders(m);
        runs.push((m.label, long_run(&e, false), long_run(&e, true)));
    }
    let n = runs
        .first()
        .map_or(0, |r| r.1.scores[&("all".to_owned(), BM25)].n);
    let docs: Vec<(&str, &Scores)> = runs.iter().map(|r| (r.0, &r.1.scores)).collect();
    let conv: Vec<(&str, &Scores)> = runs.iter().map(|r| (r.0, &r.2.scores)).collect();
    eprintln!(
        "{}",
        table(
            &format!(
                "long conversations as documents (4 conversations, 1711 turns, {n} questions)"
            ),
            &docs,
            &LONG_CATS
        )
    );
    eprintln!(
        "{}",
        table(
            "long conversations imported as conversations",
            &conv,
            &LONG_CATS
        )
    );
    long_floors(&runs);
}

/// Floors of the long conversations with the default model (hybrid as `memory_search`
/// runs it): the measured values less a margin, never exact; and issue 49's bar, the
/// hybrid at least 0.08 of R@10 above a plain BM25 over the same turns, both ways.
/// Measured 2026-11-27 (USE): as documents R@10 BM25 0.667, text 0.862, vector 0.826,
/// hybrid 0.916 (206/305 top-1); as a conversation BM25 0.661, text 0.859, vector 0.695,
/// hybrid 0.882 (179/305). With each side proposing 100 (issue 49, 2026-11-27): hybrid
/// 0.918 (206/305) as documents, 0.908 (179/305) as a conversation.
fn long_floors(runs: &[(&str, Run, Run)]) {
    let Some((_, docs, conv)) = runs.iter().find(|r| r.0 == "use-multilingual-v3") else {
        return;
    };
    let all = |run: &Run, way: &'static str| run.scores[&("all".to_owned(), way)];
    for (what, run, top1, recall) in [
        ("documents", docs, 185, 0.88),
        ("conversation", conv, 160, 0.84),
    ] {
        let (h, b) = (all(run, "hybrid"), all(run, BM25));
        assert!(
            h.top1 >= top1 && h.recall() >= recall,
            "long conversations as {what}: top-1 {}/{} (floor {top1}), R@10 {:.3} (floor {recall})",
            h.top1,
            h.n,
            h.recall()
        );
        assert!(
            h.recall() >= b.recall() + 0.08,
            "long conversations as {what}: hybrid R@10 {:.3}, BM25 {:.3}",
            h.recall(),
            b.recall()
        );
    }
}
