#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Memory on PostgreSQL with pgvector (the `postgres` feature): a real PostgreSQL 18 with
//! pgvector (`scripts/setup-test-tools.sh`, the engine's test server) and the real models.
//! Save, search, remove, `memory_get`'s reads; two engines importing the same file at
//! once; a database without pgvector; bad input as on SQLite; and the retrieval sets on
//! both backends, which must score the same.

#[path = "../../klaw-engine/tests/common/postgres.rs"]
mod server;

mod lists;

use std::collections::BTreeMap;
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

/// How many chunks `path` makes when imported alone into a fresh SQLite index of
/// `model`: what a PostgreSQL index must hold after any import of it, however it ran.
fn chunks_alone_on_sqlite(model: Embedder, path: &std::path::Path) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Index::open(
        &dir.path().join("m.sqlite"),
        model,
        &MemoryConfig::default(),
    )
    .unwrap();
    klaw_memory::import::Import::new(&[path.to_path_buf()])
        .unwrap()
        .run(&sqlite, &mut ())
        .unwrap();
    sqlite.len().unwrap()
}

fn connect(url: &str) -> Pg {
    let (runtime, memory) = crate::support::pg::connect(url);
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
    // the server ends every connection (a restart, a network drop): the next calls
    // reconnect, and a save done again stores nothing twice
    let db = pg_db_name(&pg);
    server.psql(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = '{db}' AND pid <> pg_backend_pid()"
    ));
    let r = index
        .save(&doc(
            "Пользователь предпочитает зелёный чай без сахара.",
            "test",
        ))
        .unwrap();
    assert_eq!((r.inserted, r.duplicates), (0, 1));
    assert_eq!(index.len().unwrap(), 1);
    // every pooled connection had ended (a search uses more than one): each is
    // replaced, however many were lost at once
    server.psql(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = '{db}' AND pid <> pg_backend_pid()"
    ));
    for mode in [SearchMode::Hybrid, SearchMode::Vector, SearchMode::Text] {
        assert!(first("зелёным чаем", mode).contains("чай"), "{mode:?}");
    }
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
    let alone = chunks_alone_on_sqlite(model, &path);
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

/// A bench query: its words and its vector.
type Query = (String, Vec<f32>);

/// A small deterministic generator (xorshift), so the synthetic store is the same each run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    /// About normal (the sum of four uniforms, centred).
    fn normal(&mut self) -> f32 {
        (0..4).map(|_| self.unit()).sum::<f32>() - 2.0
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The synthetic bench on PostgreSQL (issue 45): `KLAW_PG_BENCH_CHUNKS` chunks (default
/// 20,000) of synthetic text and vectors, stored in batches of 1,000 through the store;
/// then p50/p99 of vector, text and hybrid searches (the query's vector ready), the HNSW
/// index's rebuild time and size, the tables' size, and HNSW's recall@10 against the
/// exact scan on 200 queries. Text: 40 words a chunk drawn (Zipf-like) from 5,000 made-up
/// words; vectors: 384 dimensions, each chunk one of 500 random centres plus noise, a
/// query another point near a centre. Run it alone, in release for real figures:
/// `cargo test --release --all-features -p klaw-memory --test all -- pg::bench --ignored --nocapture`.
#[test]
#[ignore = "a benchmark: minutes, and PostgreSQL"]
fn bench_synthetic_store_on_postgres() {
    use klaw_memory::bench_support::{NewChunk, PgStore, pg_hybrid};
    use std::time::Instant;
    let Some(server) = server::Postgres::start() else {
        return;
    };
    let n: usize = std::env::var("KLAW_PG_BENCH_CHUNKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    const DIMS: usize = 384;
    let url = vector_db(&server);
    let pg = connect(&url);
    let (mut store, _) = PgStore::open_models(pg.memory.clone(), &[(DIMS, "synthetic")]).unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let syllables = [
        "ka", "lo", "mi", "ter", "va", "dos", "ne", "ru", "shi", "bat", "gor", "el",
    ];
    let words: Vec<String> = (0..5000)
        .map(|i| {
            let mut w = String::new();
            let mut x = i + 7;
            for _ in 0..3 {
                w.push_str(syllables[x % syllables.len()]);
                x /= syllables.len();
            }
            format!("{w}{}", i % 10)
        })
        .collect();
    let centres: Vec<Vec<f32>> = (0..500)
        .map(|_| (0..DIMS).map(|_| rng.normal()).collect())
        .collect();
    let word = |rng: &mut Rng| {
        // Zipf-like: the square of a uniform favours the first words
        let u = rng.unit();
        words[((u * u) * words.len() as f32) as usize % words.len()].clone()
    };
    let near = |rng: &mut Rng, c: &[f32]| -> Vec<f32> {
        c.iter().map(|x| x + 0.6 * rng.normal()).collect()
    };
    let started = Instant::now();
    let mut done = 0;
    while done < n {
        let batch: Vec<NewChunk> = (done..(done + 1000).min(n))
            .map(|i| {
                let text: Vec<String> = (0..40).map(|_| word(&mut rng)).collect();
                let c = &centres[rng.next() as usize % centres.len()];
                NewChunk {
                    content: format!("{} #{i}", text.join(" ")),
                    source: format!("synthetic/{}", i / 100),
                    created_at: Some(1_700_000_000 + i as i64),
                    context: None,
                    vector: near(&mut rng, c),
                    more_vectors: Vec::new(),
                }
            })
            .collect();
        done += store.insert(&batch).unwrap().inserted;
    }
    let load = started.elapsed();
    let queries: Vec<(String, Vec<f32>)> = (0..200)
        .map(|_| {
            let c = &centres[rng.next() as usize % centres.len()];
            let q: Vec<String> = (0..3).map(|_| word(&mut rng)).collect();
            (q.join(" "), near(&mut rng, c))
        })
        .collect();
    let time = |f: &mut dyn FnMut(&Query)| -> (f64, f64) {
        let mut ms: Vec<f64> = queries
            .iter()
            .map(|q| {
                let t = Instant::now();
                f(q);
                t.elapsed().as_secs_f64() * 1000.0
            })
            .collect();
        ms.sort_by(f64::total_cmp);
        (percentile(&ms, 0.5), percentile(&ms, 0.99))
    };
    let period = klaw_memory::Period::default();
    let vector = time(&mut |(_, v)| {
        store.search_space(0, v, 10, period).unwrap();
    });
    let text = time(&mut |(q, _)| {
        store.search_text_in(q, 10, period).unwrap();
    });
    let hybrid = time(&mut |(q, v)| {
        pg_hybrid(&store, q, v, 10).unwrap();
    });
    // the text side as it was before klaw_memory_terms and the bounded ranking (issue 45's
    // first version), its SQL here: each phrase's document frequency a count(*) over the
    // GIN index, every match ranked (its whole tsvector unnested); the synthetic words are
    // their own stems. Timed on the first `KLAW_PG_BENCH_OLD` queries (0: not at all; it
    // takes seconds a query at 100,000 chunks): the text search's best 10, and hybrid's
    // parts that changed (the text side's best 50 with its counts, and the IDFs' counts
    // that fusion asked for) plus the vector pool.
    let old_queries: usize = std::env::var("KLAW_PG_BENCH_OLD")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let old = (old_queries > 0).then(|| {
        let old_text = |words: &[&str], hybrid: bool, k: i64| -> usize {
            pg.runtime.block_on(async {
                let c = pg.memory.pool.get().await.unwrap();
                let r = c
                    .query_one("SELECT chunks, tokens FROM klaw_memory_stats", &[])
                    .await
                    .unwrap();
                let (n, tokens): (i64, i64) = (r.get(0), r.get(1));
                let avgdl = tokens as f64 / n as f64;
                let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
                let (tsquery, times) = if hybrid {
                    let g: Vec<String> = (0..quoted.len())
                        .flat_map(|i| (i + 1..quoted.len()).map(move |j| (i, j)))
                        .map(|(i, j)| format!("({} & {})", quoted[i], quoted[j]))
                        .collect();
                    (g.join(" | "), 2.0)
                } else {
                    (quoted.join(" | "), 1.0)
                };
                let df = c
                    .prepare(
                        "SELECT count(*) FROM klaw_memory_chunks WHERE tsv @@ $1::text::tsquery",
                    )
                    .await
                    .unwrap();
                let mut lexemes = Vec::new();
                let mut weights = Vec::new();
                for (w, q) in words.iter().zip(&quoted) {
                    let hits: i64 = c.query_one(&df, &[q]).await.unwrap().get(0);
                    let idf = ((n - hits) as f64 + 0.5) / (hits as f64 + 0.5);
                    lexemes.push(w.to_string());
                    weights.push(idf.ln().max(1e-6) * times);
                    if hybrid {
                        // fusion's IDFs: a count of the word, and of its stem (the same)
                        c.query_one(&df, &[q]).await.unwrap();
                        c.query_one(&df, &[q]).await.unwrap();
                    }
                }
                let sql = "SELECT c.id, c.content, c.source, c.created_at, f.s
                     FROM (SELECT m.id, (
                               SELECT coalesce(sum(q.w * (cardinality(u.positions) * 2.2)
                                   / (cardinality(u.positions)
                                      + 1.2 * (0.25 + 0.75 * m.ntok / $4::float8))), 0)
                               FROM unnest(m.tsv) u
                               JOIN unnest($2::text[], $3::float8[]) q(t, w) ON u.lexeme = q.t
                           ) AS s
                           FROM klaw_memory_chunks m
                           WHERE m.tsv @@ $1::text::tsquery
                           ORDER BY s DESC, m.id LIMIT $5) f
                     JOIN klaw_memory_chunks c ON c.id = f.id
                     ORDER BY f.s DESC, c.id";
                c.query(sql, &[&tsquery, &lexemes, &weights, &avgdl, &k])
                    .await
                    .unwrap()
                    .len()
            })
        };
        let few = &queries[..old_queries.min(queries.len())];
        let time_few = |f: &mut dyn FnMut(&Query)| -> (f64, f64) {
            let mut ms: Vec<f64> = few
                .iter()
                .map(|q| {
                    let t = Instant::now();
                    f(q);
                    t.elapsed().as_secs_f64() * 1000.0
                })
                .collect();
            ms.sort_by(f64::total_cmp);
            (percentile(&ms, 0.5), percentile(&ms, 0.99))
        };
        let text = time_few(&mut |(q, _)| {
            old_text(&q.split(' ').collect::<Vec<_>>(), false, 10);
        });
        let hybrid = time_few(&mut |(q, v)| {
            old_text(&q.split(' ').collect::<Vec<_>>(), true, 50);
            store.vector_pool(0, v, 10, 50, period).unwrap();
        });
        (few.len(), text, hybrid)
    });
    if let Some((few, text, hybrid)) = old {
        eprintln!(
            "\nthe old text side on {few} queries: text p50 {:.2} ms p99 {:.2} ms; \
             hybrid's old parts and the vector pool p50 {:.2} ms p99 {:.2} ms",
            text.0, text.1, hybrid.0, hybrid.1
        );
    }
    let mut recall = 0.0;
    for (_, v) in &queries {
        let exact: Vec<i64> = store
            .search_vector_exact(v, 10)
            .unwrap()
            .iter()
            .map(|h| h.id)
            .collect();
        let got = store.search_space(0, v, 10, period).unwrap();
        recall +=
            got.iter().filter(|h| exact.contains(&h.id)).count() as f64 / exact.len().max(1) as f64;
    }
    recall /= queries.len() as f64;
    // the text side ranks a bounded set of chunks: it finds what ranking every match finds
    // (the text search's best 10, and hybrid's text side's best 50)
    let same_text = queries
        .iter()
        .filter(|(q, _)| {
            let bounded = store.search_text_in(q, 10, period).unwrap();
            let every = store.search_text_exhaustive(q, 10, false).unwrap();
            let side = store.hybrid_text_side(q, 50, period).unwrap();
            let every_side = store.search_text_exhaustive(q, 50, true).unwrap();
            bounded.iter().map(|h| h.id).eq(every.iter().map(|h| h.id))
                && side
                    .iter()
                    .map(|h| h.id)
                    .eq(every_side.iter().map(|h| h.id))
        })
        .count();
    assert_eq!(same_text, queries.len(), "the bounded text ranking differs");
    let table = server.psql_url(
        &url,
        "SELECT relname FROM pg_class WHERE relname LIKE 'klaw\\_memory\\_space\\_%\\_hnsw'",
    );
    let t = Instant::now();
    server.psql_url(&url, &format!("REINDEX INDEX {table}"));
    let build = t.elapsed();
    let sizes = server.psql_url(
        &url,
        &format!(
            "SELECT pg_size_pretty(pg_relation_size('{table}')), \
             pg_size_pretty(sum(pg_total_relation_size(oid))::bigint) FROM pg_class \
             WHERE relkind = 'r' AND relname LIKE 'klaw\\_memory\\_%'"
        ),
    );
    eprintln!(
        "\n{n} chunks on PostgreSQL (ef_search {}): loaded in {:.1} s; \
         vector p50 {:.2} ms p99 {:.2} ms; text p50 {:.2} ms p99 {:.2} ms; \
         hybrid p50 {:.2} ms p99 {:.2} ms; HNSW recall@10 {:.3} on {} queries; \
         HNSW rebuilt in {:.1} s; HNSW size | all tables: {sizes}",
        pg.memory.ef_search,
        load.as_secs_f64(),
        vector.0,
        vector.1,
        text.0,
        text.1,
        hybrid.0,
        hybrid.1,
        recall,
        queries.len(),
        build.as_secs_f64()
    );
    store.remove_source_prefix("").unwrap();
}

/// The light English model, also installed by `make setup` (see `tests/embed_minilm.rs`).
fn another_model() -> Embedder {
    let (_, lib) = EmbedderConfig::default_paths().unwrap();
    let dir = EmbedderConfig::cache_dir()
        .unwrap()
        .join("models")
        .join("all-minilm-l6-v2");
    Embedder::new(EmbedderConfig::load(dir, lib).expect("installed by `make setup`"))
}

const NOTES: [&str; 4] = [
    "The staging server is srv-db-07 in Frankfurt.",
    "Кошка Мурка боится пылесоса и прячется под диваном.",
    "Anna drinks green tea without sugar every morning.",
    "The quarterly report is due on the fifth of March.",
];

fn first_hit(index: &Index, query: &str, mode: SearchMode) -> String {
    index
        .search(query, 1, mode)
        .unwrap()
        .first()
        .map(|h| h.content.clone())
        .unwrap_or_default()
}

/// The vector spaces' tables and how many vectors each holds.
fn spaces_of(server: &server::Postgres, url: &str) -> Vec<usize> {
    let tables = server.psql_url(
        url,
        "SELECT relname FROM pg_class WHERE relkind = 'r' \
         AND relname LIKE 'klaw\\_memory\\_space\\_%' ORDER BY 1",
    );
    tables
        .lines()
        .filter(|t| !t.is_empty())
        .map(|t| {
            server
                .psql_url(url, &format!("SELECT count(*) FROM {t}"))
                .trim()
                .parse()
                .unwrap()
        })
        .collect()
}

/// Two models on PostgreSQL: a vector space (a pgvector table) each, every chunk in
/// both, searches found through both; opening with one of them leaves the other's space
/// alone (another engine may use it).
#[test]
fn two_models_on_postgres_have_a_space_each() {
    let Some(server) = server::Postgres::start() else {
        return;
    };
    let url = vector_db(&server);
    let pg = connect(&url);
    let index = open(&pg, vec![embedder(), another_model()]).unwrap();
    assert_eq!(index.embedders().len(), 2);
    for n in NOTES {
        assert_eq!(index.save(&doc(n, "notes")).unwrap().inserted, 1);
    }
    assert_eq!(spaces_of(&server, &url), vec![NOTES.len(); 2]);
    for mode in [SearchMode::Vector, SearchMode::Hybrid] {
        assert!(first_hit(&index, "which server is used for staging?", mode).contains("srv-db-07"));
        assert!(first_hit(&index, "what drink does Anna like?", mode).contains("tea"));
    }
    drop(index);
    let one = open(&pg, vec![embedder()]).unwrap();
    assert_eq!(one.reembedded(), 0);
    assert!(first_hit(&one, "what is the cat afraid of?", SearchMode::Vector).contains("Мурка"));
    assert_eq!(spaces_of(&server, &url), vec![NOTES.len(); 2]);
}

/// A model change with engines sharing the memory: two engines start with the new model
/// at once; one embeds every chunk in the new space (under the space's lock), the other
/// waits and embeds none; meanwhile an engine of the old model keeps searching its own
/// space and finding. Nothing is stored twice.
#[test]
fn a_model_change_is_embedded_once_while_the_old_model_searches() {
    let Some(server) = server::Postgres::start() else {
        return;
    };
    let url = vector_db(&server);
    let old_pg = connect(&url);
    let old = open(&old_pg, vec![embedder()]).unwrap();
    let filler: Vec<Document> = (0..300)
        .map(|i| {
            doc(
                &format!(
                    "Meeting note {i}: the budget line {} was moved to the next quarter.",
                    i * 7
                ),
                "filler",
            )
        })
        .collect();
    old.save_all(&filler).unwrap();
    for n in NOTES {
        old.save(&doc(n, "notes")).unwrap();
    }
    let chunks = old.len().unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let model = another_model();
    model.load().unwrap();
    let (searched, reembedded) = std::thread::scope(|s| {
        let searcher = s.spawn(|| {
            let mut n = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                let hit = first_hit(&old, "where is the staging server?", SearchMode::Vector);
                assert!(hit.contains("srv-db-07"), "{hit}");
                n += 1;
            }
            n
        });
        let engines: Vec<_> = (0..2)
            .map(|_| {
                let model = model.clone();
                let url = &url;
                s.spawn(move || {
                    let pg = connect(url);
                    let index = open(&pg, vec![model]).unwrap();
                    let n = index.reembedded();
                    let hit = first_hit(
                        &index,
                        "which server is used for staging?",
                        SearchMode::Vector,
                    );
                    assert!(hit.contains("srv-db-07"), "{hit}");
                    drop(index);
                    drop(pg);
                    n
                })
            })
            .collect();
        let mut reembedded: Vec<usize> = engines.into_iter().map(|h| h.join().unwrap()).collect();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        reembedded.sort_unstable();
        (searcher.join().unwrap(), reembedded)
    });
    assert_eq!(
        reembedded,
        vec![0, chunks],
        "one engine embedded every chunk"
    );
    assert!(searched > 0);
    assert_eq!(spaces_of(&server, &url), vec![chunks; 2]);
    // the old model's engine still searches its space
    assert!(first_hit(&old, "what is the cat afraid of?", SearchMode::Vector).contains("Мурка"));
}

/// The server ends the import's connections again and again while it runs (a restart, a
/// network drop): each call reconnects (its transaction was rolled back), or the import
/// fails and is run again; in the end every chunk is stored once, and the words' counts
/// (`klaw_memory_terms`) equal the chunks'.
#[test]
fn an_import_whose_connection_drops_stores_each_chunk_once() {
    let Some(server) = server::Postgres::start() else {
        return;
    };
    let url = vector_db(&server);
    let text: String = (0..300)
        .map(|i| {
            format!(
                "## Part {i}\n\nNote number {i}: the shipment to warehouse {} weighed {} kg.\n\n",
                i % 13,
                i * 31
            )
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.md");
    std::fs::write(&path, &text).unwrap();
    let model = embedder();
    let pg = connect(&url);
    let index = open(&pg, vec![model.clone()]).unwrap();
    let db = pg_db_name(&pg);
    let import = || {
        klaw_memory::import::Import::new(std::slice::from_ref(&path))
            .unwrap()
            .run(&index, &mut ())
    };
    let done = std::sync::atomic::AtomicBool::new(false);
    let (first, drops) = std::thread::scope(|s| {
        let dropper = s.spawn(|| {
            let mut drops = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(200));
                server.psql(&format!(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE datname = '{db}' AND pid <> pg_backend_pid()"
                ));
                drops += 1;
            }
            drops
        });
        let first = import();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        (first, dropper.join().unwrap())
    });
    assert!(
        drops > 1,
        "the import ended before its connection was dropped"
    );
    // failed or not, a run again completes it and stores nothing twice
    let again = import().unwrap();
    let alone = chunks_alone_on_sqlite(model, &path);
    assert!(alone > 100);
    assert_eq!(index.len().unwrap(), alone, "{first:?} then {again:?}");
    assert_eq!(again.saved.inserted + again.saved.duplicates, alone);
    let stored = server.psql_url(
        &url,
        "SELECT count(*), count(DISTINCT content_hash) FROM klaw_memory_chunks",
    );
    assert_eq!(stored, format!("{alone}|{alone}"));
    assert_eq!(spaces_of(&server, &url), vec![alone]);
    let wrong_counts = server.psql_url(
        &url,
        "SELECT count(*) FROM (SELECT u.lexeme, count(*) AS n FROM klaw_memory_chunks, \
         unnest(tsv) u GROUP BY u.lexeme) a FULL JOIN klaw_memory_terms t USING (lexeme) \
         WHERE coalesce(a.n, 0) <> coalesce(t.ndoc, 0)",
    );
    assert_eq!(wrong_counts, "0");
}
