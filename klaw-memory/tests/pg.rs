#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Memory on PostgreSQL with pgvector (the `postgres` feature): a real PostgreSQL 18 with
//! pgvector (`scripts/setup-test-tools.sh`, the engine's test server) and the real models.
//! Save, search, remove, `memory_get`'s reads; two engines importing the same file at
//! once; a database without pgvector; bad input as on SQLite; and the retrieval sets on
//! both backends, which must score the same.

#[path = "../../klaw-engine/tests/common/postgres.rs"]
mod server;

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use klaw_memory::conversation;
use klaw_memory::{
    Document, Embedder, EmbedderConfig, Index, MemoryConfig, MemoryError, PgMemory, SearchMode,
};

use crate::retrieval_sets::{self as sets, K, NoteSet, Score};

/// The pool and the runtime it runs on (kept alive beside the index).
struct Pg {
    runtime: tokio::runtime::Runtime,
    memory: PgMemory,
}

fn connect(url: &str) -> Pg {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let config = tokio_postgres::Config::from_str(url).unwrap();
    let manager = deadpool_postgres::Manager::from_config(
        config,
        tokio_postgres::NoTls,
        deadpool_postgres::ManagerConfig {
            recycling_method: deadpool_postgres::RecyclingMethod::Fast,
        },
    );
    let pool = {
        let _guard = runtime.enter();
        deadpool_postgres::Pool::builder(manager)
            .max_size(4)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .unwrap()
    };
    let memory = PgMemory {
        pool,
        handle: runtime.handle().clone(),
        ef_search: klaw_memory::DEFAULT_EF_SEARCH,
    };
    Pg { runtime, memory }
}

/// A fresh database with pgvector, its URL.
fn vector_db(server: &server::Postgres) -> String {
    let url = server.fresh_db();
    server.psql_url(&url, "CREATE EXTENSION vector");
    url
}

fn embedder() -> Embedder {
    Embedder::new(EmbedderConfig::from_cache().expect("the model is installed by `make setup`"))
}

fn open(pg: &Pg, models: Vec<Embedder>) -> Result<Index, MemoryError> {
    Index::open_postgres(
        std::path::Path::new("pg"),
        pg.memory.clone(),
        models,
        &MemoryConfig::default(),
    )
}

fn doc(content: &str, source: &str) -> Document {
    Document {
        content: content.into(),
        source: source.into(),
        created_at: Some(1_700_000_000),
        context: None,
    }
}

#[test]
fn save_search_remove_on_postgres() {
    let Some(server) = server::Postgres::start() else {
        return;
    };
    let pg = connect(&vector_db(&server));
    let index = open(&pg, vec![embedder()]).unwrap();
    let r = index
        .save(&doc(
            "Пользователь предпочитает зелёный чай без сахара.",
            "test",
        ))
        .unwrap();
    assert_eq!((r.chunks, r.inserted, r.duplicates), (1, 1, 0));
    let again = index
        .save(&doc(
            "Пользователь предпочитает зелёный чай без сахара.",
            "test",
        ))
        .unwrap();
    assert_eq!((again.inserted, again.duplicates), (0, 1));
    index
        .save(&doc(
            "The staging server is srv-db-07 in Frankfurt.",
            "notes.md",
        ))
        .unwrap();
    assert_eq!(index.len().unwrap(), 2);
    // words (stems: "чаем" finds "чай"), meaning, both
    let first = |q: &str, mode| {
        index
            .search(q, 1, mode)
            .unwrap()
            .first()
            .map(|h| h.content.clone())
            .unwrap_or_default()
    };
    assert!(first("зелёным чаем", SearchMode::Text).contains("чай"));
    assert!(first("srv-db-07", SearchMode::Text).contains("Frankfurt"));
    assert!(first("what drink does the user like", SearchMode::Vector).contains("чай"));
    assert!(first("where is the staging server", SearchMode::Hybrid).contains("Frankfurt"));
    let hit = &index.search("Frankfurt", 1, SearchMode::Text).unwrap()[0];
    assert_eq!(
        (hit.source.as_str(), hit.date.as_str()),
        ("notes.md", "2023-11-14")
    );
    assert!(hit.score > 0.0);
    // a period: only the chunks of that time
    let period = klaw_memory::Period {
        from: Some(1_800_000_000),
        to: None,
    };
    assert!(
        index
            .search_in("Frankfurt", 5, SearchMode::Hybrid, period)
            .unwrap()
            .is_empty()
    );
    // bad input as on SQLite: nothing to save, a query of no words
    assert!(matches!(
        index.save(&doc("  \n ", "x")),
        Err(MemoryError::Empty)
    ));
    assert!(
        index
            .search("!!! ???", 5, SearchMode::Text)
            .unwrap()
            .is_empty()
    );
    assert!(
        index
            .search("\"AND OR NEAR(", 5, SearchMode::Hybrid)
            .is_ok()
    );
    assert!(index.search("x", 0, SearchMode::Vector).unwrap().is_empty());
    // another engine (its own pool) sees it at once, and removing is seen too
    let other_pool = connect(&server.url_of(&pg_db_name(&pg)));
    let other = open(&other_pool, vec![embedder()]).unwrap();
    assert_eq!(other.len().unwrap(), 2);
    assert_eq!(index.remove_source("notes.md").unwrap(), 1);
    assert!(
        other
            .search("Frankfurt", 5, SearchMode::Text)
            .unwrap()
            .is_empty()
    );
    assert_eq!(other.len().unwrap(), 1);
    drop(pg.runtime);
}

/// The database name of a pool's URL (for a second engine on it).
fn pg_db_name(pg: &Pg) -> String {
    pg.runtime.block_on(async {
        let c = pg.memory.pool.get().await.unwrap();
        c.query_one("SELECT current_database()", &[])
            .await
            .unwrap()
            .get::<_, String>(0)
    })
}

#[test]
fn a_database_without_pgvector_says_to_create_the_extension() {
    let Some(server) = server::Postgres::start() else {
        return;
    };
    let pg = connect(&server.fresh_db());
    let e = open(&pg, vec![embedder()]).unwrap_err();
    assert!(e.to_string().contains("CREATE EXTENSION vector"), "{e}");
}

#[test]
fn two_engines_importing_one_file_at_once_store_it_once() {
    let Some(server) = server::Postgres::start() else {
        return;
    };
    let url = vector_db(&server);
    let text: String = (0..40)
        .map(|i| {
            format!(
                "## Part {i}\n\nNote number {i}: the quarterly figure was {}.\n\n",
                i * 17
            )
        })
        .collect();
    let file = tempfile::tempdir().unwrap();
    let path = file.path().join("notes.md");
    std::fs::write(&path, &text).unwrap();
    let model = embedder();
    let engines: Vec<(Pg, Arc<Index>)> = (0..2)
        .map(|_| {
            let pg = connect(&url);
            let index = Arc::new(open(&pg, vec![model.clone()]).unwrap());
            (pg, index)
        })
        .collect();
    let reports: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = engines
            .iter()
            .map(|(_, index)| {
                let path = &path;
                s.spawn(move || {
                    klaw_memory::import::Import::new(std::slice::from_ref(path))
                        .unwrap()
                        .run(index, &mut ())
                        .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let alone = {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = Index::open(
            &dir.path().join("m.sqlite"),
            model,
            &MemoryConfig::default(),
        )
        .unwrap();
        klaw_memory::import::Import::new(std::slice::from_ref(&path))
            .unwrap()
            .run(&sqlite, &mut ())
            .unwrap();
        sqlite.len().unwrap()
    };
    assert!(alone > 1);
    assert_eq!(engines[0].1.len().unwrap(), alone, "{reports:?}");
    let stored = server.psql_url(
        &url,
        "SELECT count(*), count(DISTINCT content_hash) FROM klaw_memory_chunks",
    );
    assert_eq!(stored, format!("{alone}|{alone}"));
}

/// One set's top-1, MRR@10 and recall@10 per mode.
type ByMode = BTreeMap<&'static str, Score>;

const MODES: [(&str, SearchMode); 3] = [
    ("text", SearchMode::Text),
    ("vector", SearchMode::Vector),
    ("hybrid", SearchMode::Hybrid),
];

fn score(index: &Index, questions: &[(&str, &[String])], id_of: impl Fn(&str) -> String) -> ByMode {
    let mut out = ByMode::new();
    for (q, relevant) in questions {
        for (name, mode) in MODES {
            let ranked: Vec<String> = index
                .search(q, K, mode)
                .unwrap()
                .iter()
                .map(|h| id_of(&h.source))
                .collect();
            out.entry(name).or_default().add(&ranked, relevant);
        }
    }
    out
}

fn notes(index: &Index, json: &str) -> ByMode {
    let set: NoteSet = serde_json::from_str(json).unwrap();
    let docs: Vec<Document> = set.notes.iter().map(|n| doc(&n.text, &n.id)).collect();
    assert_eq!(index.save_all(&docs).unwrap().inserted, set.notes.len());
    let qs: Vec<(&str, &[String])> = set
        .questions
        .iter()
        .map(|q| (q.q.as_str(), q.relevant.as_slice()))
        .collect();
    score(index, &qs, str::to_owned)
}

fn conversations(index: &Index, context: bool) -> ByMode {
    let mut qs = Vec::new();
    for name in sets::DIALOGUES {
        let turns = sets::dialogue("conversations", name);
        let mut docs = conversation::documents(&turns, name);
        if !context {
            docs.iter_mut().for_each(|d| d.context = None);
        }
        index.save_all(&docs).unwrap();
        qs.extend(sets::questions("conversations", name));
    }
    let qs: Vec<(&str, &[String])> = qs
        .iter()
        .map(|q| (q.q.as_str(), q.evidence.as_slice()))
        .collect();
    score(index, &qs, |source| {
        source
            .split_once('#')
            .map_or(source, |(_, id)| id)
            .to_owned()
    })
}

/// Every set on one backend, `open` giving a new empty index for each.
fn every_set(open: &dyn Fn() -> Index) -> Vec<(&'static str, ByMode)> {
    vec![
        (
            "crosslang",
            notes(&open(), include_str!("data/crosslang.json")),
        ),
        (
            "topicpairs",
            notes(&open(), include_str!("data/topicpairs.json")),
        ),
        ("conversations", conversations(&open(), true)),
        ("lines", conversations(&open(), false)),
    ]
}

/// `make eval`'s sets on SQLite and on PostgreSQL with the default model: recall@10 and
/// MRR@10 within 0.01 of each other in every set and mode, top-1 within one question.
#[test]
fn retrieval_sets_score_the_same_on_both_backends() {
    let Some(server) = server::Postgres::start() else {
        return;
    };
    let model = embedder();
    model.load().unwrap();
    let dirs = tempfile::tempdir().unwrap();
    let n = std::cell::Cell::new(0);
    let sqlite = every_set(&|| {
        n.set(n.get() + 1);
        Index::open(
            &dirs.path().join(format!("{}.sqlite", n.get())),
            model.clone(),
            &MemoryConfig::default(),
        )
        .unwrap()
    });
    let pools = std::cell::RefCell::new(Vec::new());
    let postgres = every_set(&|| {
        let pg = connect(&vector_db(&server));
        let index = open(&pg, vec![model.clone()]).unwrap();
        pools.borrow_mut().push(pg);
        index
    });
    let mut table = String::from(
        "\n| set | mode | SQLite top-1 | PostgreSQL top-1 | SQLite MRR | PostgreSQL MRR | SQLite R@10 | PostgreSQL R@10 |\n|---|---|---|---|---|---|---|---|\n",
    );
    let mut bad = Vec::new();
    for ((set, a), (_, b)) in sqlite.iter().zip(&postgres) {
        for (mode, _) in MODES {
            let (x, y) = (&a[mode], &b[mode]);
            table += &format!(
                "| {set} | {mode} | {}/{} | {}/{} | {:.3} | {:.3} | {:.3} | {:.3} |\n",
                x.top1,
                x.n,
                y.top1,
                y.n,
                x.mrr(),
                y.mrr(),
                x.recall(),
                y.recall()
            );
            if (x.mrr() - y.mrr()).abs() > 0.01
                || (x.recall() - y.recall()).abs() > 0.01
                || x.top1.abs_diff(y.top1) > 1
            {
                bad.push(format!("{set} {mode}"));
            }
        }
    }
    eprintln!("{table}");
    assert!(bad.is_empty(), "the backends differ in {bad:?}:{table}");
}
