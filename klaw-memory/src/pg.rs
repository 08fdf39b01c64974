//! The memory store on PostgreSQL (the `postgres` feature): the chunks, their sources and
//! dates in tables, the words in a `tsvector`, one pgvector table per model with an HNSW
//! index (cosine distance). Engines that share the PostgreSQL of `storage.url` share it.
//!
//! The text side uses the same tokens as SQLite's: [`fts::words`] and their Snowball
//! stems are computed here, in Klaw, and stored as a `tsvector` (no PostgreSQL parser or
//! dictionary touches them: the value is built as a literal, as the `simple`
//! configuration would keep it), and a query is the same terms ([`fts::query_terms`]) as
//! a `tsquery`. Chunks are ranked by the same BM25 as FTS5's (`k1` 1.2, `b` 0.75, each
//! of the query's phrases weighted by its IDF over the chunks, a term's frequency counted
//! over the words and the stems together), computed in SQL from the `tsvector`'s
//! positions. Hybrid search fuses the two sides with the same code as SQLite
//! ([`store::fuse_sides`]).
//!
//! Everything here blocks: each call runs its statements on the pool's runtime and
//! waits (the index's calls run off the async threads, as SQLite's do).

use super::fts;
use super::fuse::{FoundBy, Spaces, Weights};
use super::store::{
    self, FuseSource, Hit, InsertReport, NewChunk, Period, SpaceSide, SpacesOpened, StoreError,
    StoredChunk,
};
use deadpool_postgres::Pool;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use tokio_postgres::types::ToSql;

mod lists;
pub use lists::ListSettings;

/// pgvector's HNSW `ef_search` when none is given: the candidates the index walks per
/// query (pgvector's own default is 40; a hybrid search asks for up to 100). 200: at a
/// million chunks, recall@10 against the exact scan is 0.947 at 100 and 0.955 at 200
/// for about the same time a query (doc/memory.md, "Measured at scale").
pub const DEFAULT_EF_SEARCH: u32 = 200;

/// The advisory lock key under which the memory's tables are made (`klaw` then 0x45).
const SCHEMA_LOCK: i64 = 0x6b6c_6177_0000_0045;

/// FTS5's BM25 parameters, which the text side reproduces.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// A `tsvector` keeps at most this many positions of a lexeme, each at most 16383.
const MAX_POSITIONS: usize = 255;
const MAX_POSITION: usize = 16383;
/// A lexeme longer than this many bytes is refused by PostgreSQL: left out.
const MAX_LEXEME_BYTES: usize = 2046;

/// How memory reaches the PostgreSQL of `storage.url`: the engine's pool, the runtime
/// that drives its connections, and the HNSW search setting.
#[derive(Clone)]
pub struct PgMemory {
    /// The pool (the engine's, shared with its other stores).
    pub pool: Pool,
    /// The runtime the pool's connections run on; calls block on it.
    pub handle: tokio::runtime::Handle,
    /// pgvector's `hnsw.ef_search` for vector searches (raised to the number of
    /// candidates asked for when that is larger): higher finds more of the exact
    /// nearest, slower. [`DEFAULT_EF_SEARCH`] by default.
    pub ef_search: u32,
    /// Kept alive as long as the memory is: what owns the runtime of
    /// [`handle`](Self::handle) (the engine's storage), if not the caller.
    pub owner: Option<std::sync::Arc<dyn std::any::Any + Send + Sync>>,
}

impl PgMemory {
    /// Looks at the memory in the database without the models (`doctor`): pgvector's
    /// version, the chunks, each vector space's HNSW index and its size, the total size.
    /// `Ok(None)` when pgvector is there but the memory's tables are not made yet; a
    /// database without pgvector is [`StoreError::NoVectorExtension`].
    pub fn inspect(&self) -> Result<Option<PgReport>, StoreError> {
        self.handle.block_on(async {
            let c = self.pool.get().await.map_err(sql_err)?;
            let Some(pgvector) = c
                .query_opt(
                    "SELECT extversion FROM pg_extension WHERE extname = 'vector'",
                    &[],
                )
                .await?
                .map(|r| r.get::<_, String>(0))
            else {
                return Err(StoreError::NoVectorExtension);
            };
            let made: bool = c
                .query_one("SELECT to_regclass('klaw_memory_stats') IS NOT NULL", &[])
                .await?
                .get(0);
            if !made {
                return Ok(None);
            }
            let chunks: i64 = c
                .query_one("SELECT chunks FROM klaw_memory_stats", &[])
                .await?
                .get(0);
            let indexes = c
                .query(
                    "SELECT c.relname::text, pg_size_pretty(pg_relation_size(c.oid))
                     FROM pg_class c WHERE c.relkind = 'i'
                       AND c.relname LIKE 'klaw\\_memory\\_space\\_%\\_hnsw' ORDER BY 1",
                    &[],
                )
                .await?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            let total_size: String = c
                .query_one(
                    "SELECT pg_size_pretty(coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint)
                     FROM pg_class c WHERE c.relkind = 'r' AND c.relname LIKE 'klaw\\_memory\\_%'",
                    &[],
                )
                .await?
                .get(0);
            Ok(Some(PgReport {
                pgvector,
                chunks,
                indexes,
                total_size,
            }))
        })
    }

    /// The memory on `pool`, whose connections run on `handle`'s runtime, with
    /// [`DEFAULT_EF_SEARCH`].
    pub fn new(pool: Pool, handle: tokio::runtime::Handle) -> Self {
        Self {
            pool,
            handle,
            ef_search: DEFAULT_EF_SEARCH,
            owner: None,
        }
    }
}

impl std::fmt::Debug for PgMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgMemory")
            .field("ef_search", &self.ef_search)
            .finish_non_exhaustive()
    }
}

impl PartialEq for PgMemory {
    fn eq(&self, other: &Self) -> bool {
        self.ef_search == other.ef_search
    }
}

/// One model's vectors: the table `klaw_memory_space_<h>`.
#[derive(Debug)]
struct PgSpace {
    table: String,
    complete_key: String,
    dims: usize,
    model: String,
}

/// What `doctor` says of the memory on PostgreSQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgReport {
    /// pgvector's version (`extversion`).
    pub pgvector: String,
    /// Chunks stored.
    pub chunks: i64,
    /// Each vector space: its HNSW index and that index's size, pretty-printed.
    pub indexes: Vec<(String, String)>,
    /// The size of the memory's tables with their indexes, pretty-printed.
    pub total_size: String,
}

/// The memory store on PostgreSQL. See the module docs.
#[derive(Debug)]
pub struct PgStore {
    pg: PgMemory,
    spaces: Vec<PgSpace>,
    lists: ListSettings,
    /// Text searches the impact lists proved, and those that ranked the postings after
    /// trying them.
    proven: std::sync::atomic::AtomicU64,
    fell_back: std::sync::atomic::AtomicU64,
    /// The lists being built in the background.
    builds: std::sync::Arc<lists::Builds>,
}

fn sql_err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Postgres(e.to_string())
}

/// `e` and its sources as one line (tokio-postgres says only `db error` itself).
fn pg_err(e: &tokio_postgres::Error) -> StoreError {
    let mut out = e.to_string();
    let mut next = std::error::Error::source(e);
    while let Some(s) = next {
        let _ = write!(out, ": {s}");
        next = s.source();
    }
    let conflict = e.code().is_some_and(|c| {
        *c == tokio_postgres::error::SqlState::T_R_DEADLOCK_DETECTED
            || *c == tokio_postgres::error::SqlState::T_R_SERIALIZATION_FAILURE
    });
    if conflict {
        StoreError::PostgresConflict(out)
    } else {
        StoreError::Postgres(out)
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        pg_err(&e)
    }
}

/// A chunk's tokens, as FTS5 indexes its two columns: the words, then their stems. The
/// positions are 1-based; the count is the chunk's length in tokens.
fn tokens(content: &str) -> (Vec<String>, usize) {
    let words: Vec<String> = fts::words(content).collect();
    let stems: Vec<String> = words.iter().map(|w| fts::stem(w)).collect();
    let n = words.len() + stems.len();
    (words.into_iter().chain(stems).collect(), n)
}

/// A `tsvector` literal of `tokens` with their positions: each lexeme quoted (no parser,
/// no dictionary: the lexemes are Klaw's). Besides it, each lexeme with its frequency (the
/// positions kept of it, as `cardinality(positions)` reads them back), for
/// `klaw_memory_terms`.
fn tsvector(tokens: &[String]) -> (String, Vec<(String, i32)>) {
    let mut at: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, t) in tokens.iter().enumerate() {
        if t.len() <= MAX_LEXEME_BYTES {
            let p = at.entry(t.as_str()).or_default();
            if p.len() < MAX_POSITIONS {
                p.push((i + 1).min(MAX_POSITION));
            }
        }
    }
    let mut out = String::new();
    let mut tfs = Vec::with_capacity(at.len());
    for (lexeme, positions) in at {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&quote_lexeme(lexeme));
        out.push(':');
        let mut last = 0;
        let mut kept = 0;
        for p in positions {
            // positions past the last one kept are one position
            if p == last {
                continue;
            }
            last = p;
            if kept > 0 {
                out.push(',');
            }
            kept += 1;
            let _ = write!(out, "{p}");
        }
        tfs.push((lexeme.to_owned(), kept));
    }
    (out, tfs)
}

/// A lexeme quoted for a `tsvector` or `tsquery` literal.
fn quote_lexeme(t: &str) -> String {
    format!("'{}'", t.replace('\\', "\\\\").replace('\'', "''"))
}

/// A term of a query: its word, or its word or its stem.
fn query_term((w, s): &(String, String)) -> String {
    if w == s {
        quote_lexeme(w)
    } else {
        format!("({} | {})", quote_lexeme(w), quote_lexeme(s))
    }
}

/// The text side's query: the `tsquery` that finds the chunks, and its phrases as FTS5
/// would count them for BM25, each with how many times it appears in the expression.
struct TextQuery {
    tsquery: String,
    phrases: Vec<(String, f64)>,
    /// Each term's phrases (indices into `phrases`), and whether it is a code (which
    /// matches alone).
    terms: Vec<(Vec<usize>, bool)>,
    /// How many terms a chunk needs to match (a code alone is enough).
    need: usize,
}

impl TextQuery {
    /// Whether every chunk the query matches has one of the phrases `taken`: a chunk
    /// without them can match only the terms with a phrase not taken, and too few of
    /// them (none a code) is no match.
    fn covered_by(&self, taken: &[usize]) -> bool {
        let open: Vec<bool> = self
            .terms
            .iter()
            .filter(|(ps, _)| ps.iter().any(|p| !taken.contains(p)))
            .map(|(_, code)| *code)
            .collect();
        open.len() < self.need && !open.iter().any(|c| *c)
    }
}

/// Each of `terms`' phrases' indices in `phrases`, and whether it is a code.
fn term_phrases(terms: &[(String, String)], phrases: &[(String, f64)]) -> Vec<(Vec<usize>, bool)> {
    terms
        .iter()
        .map(|(w, s)| {
            let at: Vec<usize> = phrases
                .iter()
                .enumerate()
                .filter(|(_, (p, _))| p == w || p == s)
                .map(|(i, _)| i)
                .collect();
            (at, fts::is_code(w))
        })
        .collect()
}

/// The phrases of `terms` (each word and its stem, once), each appearing `times`.
fn phrases(terms: &[(String, String)], times: f64) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for (w, s) in terms {
        for t in [w, s] {
            if !out.iter().any(|(x, _)| x == t) {
                out.push((t.clone(), times));
            }
        }
    }
    out
}

/// [`fts::match_query`] as a `tsquery`: any of the terms.
fn any_of(terms: &[(String, String)]) -> Option<TextQuery> {
    if terms.is_empty() {
        return None;
    }
    let q: Vec<String> = terms.iter().map(query_term).collect();
    let phrases = phrases(terms, 1.0);
    Some(TextQuery {
        tsquery: q.join(" | "),
        terms: term_phrases(terms, &phrases),
        phrases,
        need: 1,
    })
}

/// [`fts::min_should_match`] as a `tsquery`: more than half of the terms, or a code. Each
/// term is in `C(n - 1, need - 1)` of the groups, which FTS5's BM25 counts each.
fn most_of(terms: &[(String, String)]) -> Option<TextQuery> {
    let n = terms.len();
    if n == 0 || n > fts::MAX_MIN_SHOULD_MATCH_TERMS {
        return None;
    }
    let need = n / 2 + 1;
    let mut groups = Vec::new();
    let mut pick: Vec<usize> = (0..need).collect();
    loop {
        let group: Vec<String> = pick.iter().map(|&i| query_term(&terms[i])).collect();
        groups.push(format!("({})", group.join(" & ")));
        let Some(i) = (0..need).rev().find(|&i| pick[i] < n - need + i) else {
            break;
        };
        pick[i] += 1;
        for j in i + 1..need {
            pick[j] = pick[j - 1] + 1;
        }
    }
    let times = binomial(n - 1, need - 1) as f64;
    let mut phrases = phrases(terms, times);
    for (w, _) in terms.iter().filter(|(w, _)| fts::is_code(w)) {
        groups.push(quote_lexeme(w));
        if let Some(p) = phrases.iter_mut().find(|(x, _)| x == w) {
            p.1 += 1.0;
        }
    }
    Some(TextQuery {
        tsquery: groups.join(" | "),
        terms: term_phrases(terms, &phrases),
        phrases,
        need,
    })
}

fn binomial(n: usize, k: usize) -> usize {
    (0..k).fold(1, |acc, i| acc * (n - i) / (i + 1))
}

/// A vector as pgvector's text form, normalised (the cosine is then `1 - distance`).
fn vector_text(v: &[f32], dims: usize) -> Result<String, StoreError> {
    let blob = store::normalised(v, dims)?;
    let mut out = String::with_capacity(dims * 12);
    out.push('[');
    for (i, b) in blob.chunks_exact(4).enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{}", f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    }
    out.push(']');
    Ok(out)
}

/// `YYYY-MM-DD` (UTC) of Unix seconds; empty out of range, as SQLite's `date()`.
fn date_of(t: i64) -> String {
    jiff::Timestamp::from_second(t)
        .map(|ts| ts.strftime("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

fn hit(r: &tokio_postgres::Row, found_by: FoundBy) -> Hit {
    let created_at: i64 = r.get(3);
    Hit {
        id: r.get(0),
        content: r.get(1),
        source: r.get(2),
        date: date_of(created_at),
        created_at,
        score: r.get(4),
        found_by,
    }
}

/// Whether a failure is one to retry the transaction after (a deadlock, a serialization
/// failure): two engines importing overlapping files in another order.
fn retryable(e: &StoreError) -> bool {
    matches!(e, StoreError::PostgresConflict(_))
}

/// [`PgStore::lock_space`]'s lock: its connection, closed when this is dropped (not given
/// back to the pool), which releases the lock.
pub(crate) struct SpaceLock {
    client: Option<deadpool_postgres::Object>,
}

impl Drop for SpaceLock {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            drop(deadpool_postgres::Object::take(c));
        }
    }
}

/// The words of the chunks an insert stores, for `klaw_memory_terms`: each lexeme's
/// chunks, its largest frequency in one, and the shortest of them (in tokens), which bound
/// what it can add to a chunk's BM25.
#[derive(Default)]
struct TermCounts(BTreeMap<String, (i64, i32, i32)>);

impl TermCounts {
    fn add(&mut self, tfs: &[(String, i32)], ntok: i32) {
        for (lexeme, tf) in tfs {
            let e = self.0.entry(lexeme.clone()).or_insert((0, 0, i32::MAX));
            e.0 += 1;
            e.1 = e.1.max(*tf);
            e.2 = e.2.min(ntok);
        }
    }

    /// Adds the counts to the table, in the order of the lexemes (so two engines storing
    /// at once lock the rows in the same order, and do not deadlock).
    async fn store(&self, tx: &deadpool_postgres::Transaction<'_>) -> Result<(), StoreError> {
        let mut lexemes = Vec::with_capacity(self.0.len());
        let (mut ndoc, mut maxtf, mut minntok) = (Vec::new(), Vec::new(), Vec::new());
        for (l, (n, tf, dl)) in &self.0 {
            lexemes.push(l.as_str());
            ndoc.push(*n);
            maxtf.push(*tf);
            minntok.push(*dl);
        }
        tx.execute(
            "INSERT INTO klaw_memory_terms AS t (lexeme, ndoc, maxtf, minntok)
             SELECT * FROM unnest($1::text[], $2::int8[], $3::int4[], $4::int4[])
             ON CONFLICT (lexeme) DO UPDATE SET ndoc = t.ndoc + excluded.ndoc,
                 maxtf = greatest(t.maxtf, excluded.maxtf),
                 minntok = least(t.minntok, excluded.minntok)",
            &[&lexemes, &ndoc, &maxtf, &minntok],
        )
        .await?;
        Ok(())
    }
}

/// Each of `lexemes` found in `klaw_memory_terms`: its chunks, its largest frequency in
/// one, the shortest of its chunks (tokens).
async fn term_stats(
    c: &deadpool_postgres::Object,
    lexemes: &[String],
) -> Result<std::collections::HashMap<String, (i64, i32, i32)>, StoreError> {
    let st = c
        .prepare_cached(
            "SELECT lexeme, ndoc, maxtf, minntok FROM klaw_memory_terms
             WHERE lexeme = ANY($1) AND ndoc > 0",
        )
        .await?;
    Ok(c.query(&st, &[&lexemes])
        .await?
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2), r.get(3))))
        .collect())
}

impl PgStore {
    /// Opens the memory in the database of `pg` for several models, `(dims,
    /// fingerprint)` each, one vector space per model: makes the tables it lacks (under
    /// an advisory lock, so engines starting together do not race), and a space for
    /// each model that has none ([`SpacesOpened::new`]). Spaces of models not listed are
    /// left alone: another engine may still use them. A database without pgvector is a
    /// [`StoreError::NoVectorExtension`].
    pub fn open_models(
        pg: PgMemory,
        models: &[(usize, &str)],
    ) -> Result<(Self, SpacesOpened), StoreError> {
        let wanted: Vec<(usize, String)> = models
            .iter()
            .map(|(dims, fp)| (*dims, format!("{fp} ({dims} dims)")))
            .collect();
        if wanted.is_empty() {
            return Err(StoreError::WrongSpaces {
                expected: 1,
                got: 0,
            });
        }
        for (i, (_, m)) in wanted.iter().enumerate() {
            if wanted[..i].iter().any(|(_, x)| x == m) {
                return Err(StoreError::SameModelTwice(m.clone()));
            }
        }
        let handle = pg.handle.clone();
        let pool = pg.pool.clone();
        let (spaces, opened) = handle.block_on(async move {
            let mut client = pool.get().await.map_err(sql_err)?;
            let has: Option<String> = client
                .query_opt(
                    "SELECT extversion FROM pg_extension WHERE extname = 'vector'",
                    &[],
                )
                .await?
                .map(|r| r.get(0));
            if has.is_none() {
                return Err(StoreError::NoVectorExtension);
            }
            let tx = client.transaction().await?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
                .await?;
            tx.batch_execute(
                "CREATE TABLE IF NOT EXISTS klaw_memory_meta (
                     key TEXT PRIMARY KEY, value TEXT NOT NULL);
                 CREATE TABLE IF NOT EXISTS klaw_memory_chunks (
                     id BIGSERIAL PRIMARY KEY,
                     content TEXT NOT NULL,
                     source TEXT NOT NULL,
                     created_at BIGINT NOT NULL,
                     content_hash TEXT NOT NULL UNIQUE,
                     context TEXT,
                     tsv TSVECTOR NOT NULL,
                     ntok INTEGER NOT NULL);
                 CREATE INDEX IF NOT EXISTS klaw_memory_chunks_tsv
                     ON klaw_memory_chunks USING gin (tsv);
                 CREATE INDEX IF NOT EXISTS klaw_memory_chunks_created_at
                     ON klaw_memory_chunks (created_at);
                 CREATE INDEX IF NOT EXISTS klaw_memory_chunks_source
                     ON klaw_memory_chunks (source text_pattern_ops);
                 CREATE TABLE IF NOT EXISTS klaw_memory_stats (
                     one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
                     chunks BIGINT NOT NULL, tokens BIGINT NOT NULL);
                 INSERT INTO klaw_memory_stats (one, chunks, tokens) VALUES (true, 0, 0)
                     ON CONFLICT DO NOTHING;",
            )
            .await?;
            let terms_made: bool = tx
                .query_one("SELECT to_regclass('klaw_memory_terms') IS NOT NULL", &[])
                .await?
                .get(0);
            if !terms_made {
                // a memory made before the table: its counts from the chunks stored
                tx.batch_execute(
                    "CREATE TABLE klaw_memory_terms (
                         lexeme TEXT PRIMARY KEY,
                         ndoc BIGINT NOT NULL,
                         maxtf INTEGER NOT NULL,
                         minntok INTEGER NOT NULL);
                     INSERT INTO klaw_memory_terms (lexeme, ndoc, maxtf, minntok)
                         SELECT u.lexeme, count(*), max(cardinality(u.positions)), min(m.ntok)
                         FROM klaw_memory_chunks m, unnest(m.tsv) u GROUP BY u.lexeme;",
                )
                .await?;
            }
            // the impact lists (empty in a memory made before them: made by the searches)
            tx.batch_execute(lists::SCHEMA).await?;
            let mut spaces = Vec::with_capacity(wanted.len());
            let mut opened = SpacesOpened {
                dropped: Vec::new(),
                new: vec![false; wanted.len()],
            };
            for (i, (dims, model)) in wanted.iter().enumerate() {
                let h = store::space_hash(model);
                let space = PgSpace {
                    table: format!("klaw_memory_space_{h}"),
                    complete_key: format!("{}:{h}", store::VECTORS_COMPLETE),
                    dims: *dims,
                    model: model.clone(),
                };
                let exists: bool = tx
                    .query_one("SELECT to_regclass($1) IS NOT NULL", &[&space.table])
                    .await?
                    .get(0);
                if !exists {
                    opened.new[i] = true;
                    tx.batch_execute(&format!(
                        "CREATE TABLE {t} (
                             id BIGINT PRIMARY KEY
                                 REFERENCES klaw_memory_chunks (id) ON DELETE CASCADE,
                             embedding vector({dims}) NOT NULL);
                         CREATE INDEX {t}_hnsw ON {t}
                             USING hnsw (embedding vector_cosine_ops);",
                        t = space.table
                    ))
                    .await?;
                    tx.execute(
                        "INSERT INTO klaw_memory_meta (key, value) VALUES ($1, $2)
                         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        &[&format!("space:{h}"), model],
                    )
                    .await?;
                }
                spaces.push(space);
            }
            tx.commit().await?;
            Ok::<_, StoreError>((spaces, opened))
        })?;
        Ok((
            PgStore {
                pg,
                spaces,
                lists: ListSettings::default(),
                proven: 0.into(),
                fell_back: 0.into(),
                builds: Default::default(),
            },
            opened,
        ))
    }

    /// Sets when words get impact lists and how long they are ([`ListSettings`]'s
    /// default unless a test or a bench sets smaller ones). Lists made before keep
    /// their size.
    pub fn set_lists(&mut self, settings: ListSettings) {
        self.lists = settings;
    }

    /// How many text searches (the bounded ones: not
    /// [`search_text_exhaustive`](Self::search_text_exhaustive)) tried the impact lists
    /// since the store was opened: `(proven by them, fell back to the postings)`.
    pub fn list_stats(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.proven.load(Relaxed), self.fell_back.load(Relaxed))
    }

    /// Builds now (waiting) the impact list of every word held by more than the
    /// threshold's chunks that has none (what the searches would otherwise ask for in the
    /// background, one word at a time): after a large import, say. A word another engine
    /// is building is left to it. Returns how many lists were made.
    pub fn make_lists(&self) -> Result<usize, StoreError> {
        let settings = self.lists;
        let words: Vec<String> = self.run(async |c| {
            Ok(c.query(
                "SELECT t.lexeme FROM klaw_memory_terms t WHERE t.ndoc > $1
                   AND NOT EXISTS (SELECT 1 FROM klaw_memory_lists l WHERE l.lexeme = t.lexeme)
                 ORDER BY t.ndoc DESC, t.lexeme",
                &[&settings.threshold],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect())
        })?;
        let mut made = 0;
        for w in &words {
            made += usize::from(self.make_list(w)?);
        }
        Ok(made)
    }

    /// Builds now (waiting) the impact list of `lexeme` (a word or a stem as stored) if
    /// it is held by more than the threshold's chunks and has none, and no other engine
    /// is building it: whether it was made.
    pub fn make_list(&self, lexeme: &str) -> Result<bool, StoreError> {
        let built = self
            .pg
            .handle
            .block_on(lists::build(&self.pg.pool, lexeme, self.lists))?;
        Ok(built == lists::Built::Made)
    }

    /// The lists' builds this store's searches started in the background since it was
    /// opened: `(tried, failed)` (a failed one is logged and tried again later, after 5
    /// seconds, then 10, ..., at most about 10 minutes).
    pub fn list_builds(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.builds.tried.load(Relaxed),
            self.builds.failed.load(Relaxed),
        )
    }

    /// Waits until the lists this store's searches asked for are built (or their builds
    /// failed): for tests and benches, which look at the lists afterwards.
    pub fn wait_for_lists(&self) {
        self.builds.wait(&self.pg.handle);
    }

    fn space(&self, i: usize) -> &PgSpace {
        self.spaces.get(i).unwrap_or(&self.spaces[0])
    }

    /// Runs `f` with a connection of the pool, on its runtime, and waits.
    /// A connection that was lost under it (the server restarted, an administrator
    /// ended it, the network dropped it) is taken out of the pool and `f` runs again on
    /// another: its transaction was rolled back by the server, so nothing is done twice.
    /// Lost is told by the connection, not by the error: closed, or (its end not yet
    /// read: the server sends the error before it closes) failing an empty query. Each
    /// pooled connection may be lost at once (every one ended together), so `f` is
    /// tried up to once for each and once on a new one.
    fn run<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        F: AsyncFn(&mut deadpool_postgres::Object) -> Result<T, StoreError>,
    {
        self.pg.handle.block_on(async {
            let mut tries = self.pg.pool.status().max_size + 1;
            loop {
                let mut client = self.pg.pool.get().await.map_err(sql_err)?;
                let failed = match f(&mut client).await {
                    Err(e) => e,
                    ok => return ok,
                };
                tries -= 1;
                let lost = client.is_closed() || client.simple_query("").await.is_err();
                if !lost || tries == 0 {
                    return Err(failed);
                }
                // not given back: the pool makes a new one in its place
                drop(deadpool_postgres::Object::take(client));
            }
        })
    }

    /// Waits for, then holds, the lock under which space `space`'s missing vectors are
    /// filled (a model change): one engine embeds them, the others wait and then find the
    /// space complete. A PostgreSQL advisory lock on a connection of its own, held until
    /// the [`SpaceLock`] is dropped, or until the engine's connection ends (it died); the
    /// filling meanwhile uses the pool's other connections (the engine's pool has 8).
    pub(crate) fn lock_space(&self, space: usize) -> Result<SpaceLock, StoreError> {
        let key = format!("klaw_memory_fill:{}", self.space(space).table);
        self.pg.handle.block_on(async {
            let client = self.pg.pool.get().await.map_err(sql_err)?;
            client
                .execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", &[&key])
                .await?;
            Ok(SpaceLock {
                client: Some(client),
            })
        })
    }

    /// How many vector spaces (models) the store has.
    pub fn spaces(&self) -> usize {
        self.spaces.len()
    }

    /// How many chunks are stored.
    pub fn len(&self) -> Result<usize, StoreError> {
        let n: i64 = self.run(async |c| {
            Ok(c.query_one("SELECT chunks FROM klaw_memory_stats", &[])
                .await?
                .get(0))
        })?;
        Ok(usize::try_from(n).unwrap_or_default())
    }

    /// Whether no chunk is stored.
    pub fn is_empty(&self) -> Result<bool, StoreError> {
        Ok(self.len()? == 0)
    }

    /// Stores chunks with their vectors in one transaction: all or none. A chunk whose
    /// text is already stored (same content hash, by this engine or another, even one
    /// storing it at this moment) is skipped.
    pub fn insert(&mut self, chunks: &[NewChunk]) -> Result<InsertReport, StoreError> {
        let mut rows = Vec::with_capacity(chunks.len());
        for c in chunks {
            if c.more_vectors.len() + 1 != self.spaces.len() {
                return Err(StoreError::WrongSpaces {
                    expected: self.spaces.len(),
                    got: c.more_vectors.len() + 1,
                });
            }
            let vectors = std::iter::once(&c.vector)
                .chain(&c.more_vectors)
                .zip(&self.spaces)
                .map(|(v, s)| vector_text(v, s.dims))
                .collect::<Result<Vec<_>, _>>()?;
            let context = c.context.as_deref().filter(|x| !x.is_empty());
            let (toks, n) = tokens(&c.content);
            let (tsv, tfs) = tsvector(&toks);
            rows.push((
                store::content_hash(&c.content, context),
                tsv,
                i32::try_from(n).unwrap_or(i32::MAX),
                vectors,
                tfs,
            ));
        }
        let tables: Vec<String> = self.spaces.iter().map(|s| s.table.clone()).collect();
        // the batch as columns, each one array: one statement for the chunks, one per
        // space for their vectors (not a round trip per chunk)
        let contents: Vec<&str> = chunks.iter().map(|c| c.content.as_str()).collect();
        let sources: Vec<&str> = chunks.iter().map(|c| c.source.as_str()).collect();
        let created: Vec<Option<i64>> = chunks.iter().map(|c| c.created_at).collect();
        let contexts: Vec<Option<&str>> = chunks
            .iter()
            .map(|c| c.context.as_deref().filter(|x| !x.is_empty()))
            .collect();
        let hashes: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        let tsvs: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
        let ntoks: Vec<i32> = rows.iter().map(|r| r.2).collect();
        let mut attempt = 0;
        loop {
            let r = self.run(async |c| {
                let tx = c.transaction().await?;
                // a chunk already stored (or twice in the batch) is skipped by its hash;
                // the ids follow the batch's order
                let ins = tx
                    .prepare(
                        "INSERT INTO klaw_memory_chunks
                             (content, source, created_at, content_hash, context, tsv, ntok)
                         SELECT u.content, u.source,
                                coalesce(u.created_at, extract(epoch FROM now())::bigint),
                                u.hash, u.context, u.tsv::tsvector, u.ntok
                         FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[],
                                     $5::text[], $6::text[], $7::int4[])
                              WITH ORDINALITY
                              AS u(content, source, created_at, hash, context, tsv, ntok, at)
                         ORDER BY u.at
                         ON CONFLICT (content_hash) DO NOTHING RETURNING id, content_hash",
                    )
                    .await?;
                let stored = tx
                    .query(
                        &ins,
                        &[
                            &contents, &sources, &created, &hashes, &contexts, &tsvs, &ntoks,
                        ],
                    )
                    .await?;
                // each stored chunk's row in the batch: the first with its hash
                let mut at: std::collections::HashMap<&str, usize> =
                    std::collections::HashMap::with_capacity(rows.len());
                for (i, h) in hashes.iter().enumerate().rev() {
                    at.insert(h, i);
                }
                let mut report = InsertReport::default();
                let mut tokens_added: i64 = 0;
                let mut terms = TermCounts::default();
                let mut ids = Vec::with_capacity(stored.len());
                let mut which = Vec::with_capacity(stored.len());
                for r in &stored {
                    let (id, hash): (i64, &str) = (r.get(0), r.get(1));
                    let Some(&i) = at.get(hash) else { continue };
                    ids.push(id);
                    which.push(i);
                    report.inserted += 1;
                    tokens_added += i64::from(rows[i].2);
                    terms.add(&rows[i].4, rows[i].2);
                }
                report.duplicates = chunks.len() - report.inserted;
                for (s, t) in tables.iter().enumerate() {
                    let vectors: Vec<&str> = which.iter().map(|&i| rows[i].3[s].as_str()).collect();
                    let st = tx
                        .prepare(&format!(
                            "INSERT INTO {t} (id, embedding)
                             SELECT a.id, a.v::vector FROM unnest($1::int8[], $2::text[]) a(id, v)"
                        ))
                        .await?;
                    tx.execute(&st, &[&ids, &vectors]).await?;
                }
                if report.inserted > 0 {
                    terms.store(&tx).await?;
                    // after the words' rows are locked: a list made meanwhile is seen
                    let lexemes: Vec<&str> = terms.0.keys().map(String::as_str).collect();
                    let kept: Vec<lists::Stored<'_>> = ids
                        .iter()
                        .zip(&which)
                        .map(|(&id, &i)| (id, rows[i].2, rows[i].4.as_slice()))
                        .collect();
                    lists::keep_on_insert(&tx, &lexemes, &kept).await?;
                    tx.execute(
                        "UPDATE klaw_memory_stats SET chunks = chunks + $1, tokens = tokens + $2",
                        &[&(report.inserted as i64), &tokens_added],
                    )
                    .await?;
                }
                tx.commit().await?;
                Ok(report)
            });
            match r {
                Err(e) if retryable(&e) && attempt < 3 => attempt += 1,
                other => return other,
            }
        }
    }

    /// Removes every chunk whose source is `source` (its vectors with it) in one
    /// transaction; returns how many.
    pub fn remove_source(&mut self, source: &str) -> Result<usize, StoreError> {
        self.remove_where("source = $1", source)
    }

    /// Removes every chunk whose source starts with `prefix` (compared exactly, no
    /// wildcards); returns how many.
    pub fn remove_source_prefix(&mut self, prefix: &str) -> Result<usize, StoreError> {
        self.remove_where("left(source, length($1)) = $1", prefix)
    }

    fn remove_where(&mut self, condition: &str, value: &str) -> Result<usize, StoreError> {
        // the words' counts go down with their chunks (in one statement: all or none)
        let sql = format!(
            "WITH gone AS (DELETE FROM klaw_memory_chunks WHERE {condition}
                           RETURNING id, tsv, ntok),
             listed AS (DELETE FROM klaw_memory_impacts i USING gone WHERE i.id = gone.id),
             terms AS (UPDATE klaw_memory_terms t SET ndoc = t.ndoc - d.n
                       FROM (SELECT u.lexeme, count(*) AS n FROM gone, unnest(gone.tsv) u
                             GROUP BY u.lexeme) d
                       WHERE t.lexeme = d.lexeme)
             UPDATE klaw_memory_stats SET chunks = chunks - (SELECT count(*) FROM gone),
                 tokens = tokens - (SELECT coalesce(sum(ntok), 0) FROM gone)
             RETURNING (SELECT count(*) FROM gone)"
        );
        let mut attempt = 0;
        loop {
            let r: Result<i64, StoreError> =
                self.run(async |c| Ok(c.query_one(&sql, &[&value]).await?.get(0)));
            match r {
                Err(e) if retryable(&e) && attempt < 3 => attempt += 1,
                other => return Ok(usize::try_from(other?).unwrap_or_default()),
            }
        }
    }

    /// A value the caller keeps in the database.
    pub fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.run(async |c| {
            Ok(
                c.query_opt("SELECT value FROM klaw_memory_meta WHERE key = $1", &[&key])
                    .await?
                    .map(|r| r.get(0)),
            )
        })
    }

    /// Sets a [`meta`](Self::meta) value.
    pub fn set_meta(&mut self, key: &str, value: &str) -> Result<(), StoreError> {
        self.run(async |c| {
            c.execute(
                "INSERT INTO klaw_memory_meta (key, value) VALUES ($1, $2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &[&key, &value],
            )
            .await?;
            Ok(())
        })
    }

    /// Whether some chunks may have no vector in space `space` (a new space).
    pub fn vectors_pending_in(&self, space: usize) -> Result<bool, StoreError> {
        let s = self.space(space);
        Ok(self.meta(&s.complete_key)?.as_deref() != Some(s.model.as_str()))
    }

    /// The chunks without a vector in space `space`, `(id, text to embed)`.
    pub fn chunks_without_vectors_in(
        &self,
        space: usize,
    ) -> Result<Vec<(i64, String)>, StoreError> {
        let sql = format!(
            "SELECT id, content, context FROM klaw_memory_chunks c
             WHERE NOT EXISTS (SELECT 1 FROM {} v WHERE v.id = c.id) ORDER BY id",
            self.space(space).table
        );
        self.run(async |c| {
            Ok(c.query(&sql, &[])
                .await?
                .iter()
                .map(|r| {
                    let (content, context): (String, Option<String>) = (r.get(1), r.get(2));
                    (r.get(0), store::embed_text(&content, context.as_deref()))
                })
                .collect())
        })
    }

    /// Stores vectors of existing chunks in space `space`, in one transaction; with
    /// `finish`, records that every chunk has one.
    pub fn write_vectors_in(
        &mut self,
        space: usize,
        vectors: &[(i64, Vec<f32>)],
        finish: bool,
    ) -> Result<(), StoreError> {
        let s = self.space(space);
        let texts = vectors
            .iter()
            .map(|(id, v)| Ok((*id, vector_text(v, s.dims)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let sql = format!(
            "INSERT INTO {} (id, embedding) SELECT $1, $2::text::vector
             WHERE EXISTS (SELECT 1 FROM klaw_memory_chunks WHERE id = $1)
             ON CONFLICT (id) DO UPDATE SET embedding = excluded.embedding",
            s.table
        );
        let (key, model) = (s.complete_key.clone(), s.model.clone());
        self.run(async |c| {
            let tx = c.transaction().await?;
            let st = tx.prepare(&sql).await?;
            for (id, v) in &texts {
                tx.execute(&st, &[id, v]).await?;
            }
            if finish {
                tx.execute(
                    "INSERT INTO klaw_memory_meta (key, value) VALUES ($1, $2)
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    &[&key, &model],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    /// Full-text search among the chunks of `period`: the best `k` by BM25.
    pub fn search_text_in(
        &self,
        query: &str,
        k: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        match any_of(&fts::query_terms(query)) {
            Some(q) => self.search_tsquery(&q, k.min(store::MAX_K), period, true),
            None => Ok(Vec::new()),
        }
    }

    /// [`search_text_in`](Self::search_text_in), or with `hybrid` the query of
    /// [`hybrid_text_side`](Self::hybrid_text_side) (more than half of the words), ranking
    /// every chunk that matches (no bound on the chunks ranked): what the bounded ranking
    /// is checked against.
    pub fn search_text_exhaustive(
        &self,
        query: &str,
        k: usize,
        hybrid: bool,
    ) -> Result<Vec<Hit>, StoreError> {
        let terms = fts::query_terms(query);
        let q = if hybrid {
            most_of(&terms)
        } else {
            any_of(&terms)
        };
        match q {
            Some(q) => self.search_tsquery(&q, k.min(store::MAX_K), Period::default(), false),
            None => Ok(Vec::new()),
        }
    }

    /// The text side of a hybrid search, as [`MemoryStore::hybrid_text_side`]: chunks
    /// with more than half of the query's words (or one of its codes).
    ///
    /// [`MemoryStore::hybrid_text_side`]: super::store::MemoryStore::hybrid_text_side
    pub fn hybrid_text_side(
        &self,
        query: &str,
        k: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        let terms = fts::query_terms(query);
        if let Some(q) = most_of(&terms) {
            return self.search_tsquery(&q, k.min(store::MAX_K), period, true);
        }
        let mut text = self.search_text_in(query, k, period)?;
        text.retain(|h| {
            let (share, code) = fts::coverage(&terms, &h.content);
            share > store::HYBRID_MIN_COVERAGE || code
        });
        Ok(text)
    }

    /// The chunks matching `q`, ranked by BM25 as FTS5 ranks them.
    ///
    /// Only a bounded set of chunks is ranked (MaxScore): each phrase's IDF comes from
    /// `klaw_memory_terms` (a lookup, not a count), with a bound on what it can add to a
    /// chunk's score (its weight at its largest frequency in its shortest chunk). The
    /// chunks with one of the phrases of most weight are ranked first (the rare words:
    /// few chunks, found by the GIN index); when the `k`-th of them scores more than the
    /// other phrases' bounds together, no chunk without one of them can enter the best
    /// `k`, and those are the answer. Else the next phrase joins, until all have (what
    /// ranking every match gives, which the answer always equals). Without `bounded`, every
    /// match is ranked at once.
    fn search_tsquery(
        &self,
        q: &TextQuery,
        k: usize,
        period: Period,
        bounded: bool,
    ) -> Result<Vec<Hit>, StoreError> {
        if k == 0 {
            return Ok(Vec::new());
        }
        let (from, to) = (
            period.from.unwrap_or(i64::MIN),
            period.to.unwrap_or(i64::MAX),
        );
        let ranking = |filter: &str| {
            format!(
                "SELECT c.id, c.content, c.source, c.created_at, f.s
             FROM (SELECT m.id, (
                       SELECT coalesce(sum(q.w * (cardinality(u.positions) * {k1p})
                           / (cardinality(u.positions)
                              + {K1} * ({one_b} + {B} * m.ntok / $4::float8))), 0)
                       FROM unnest(ts_filter(setweight(m.tsv, 'A', $2::text[]), '{{a}}')) u
                       JOIN unnest($2::text[], $3::float8[]) q(t, w) ON u.lexeme = q.t
                   ) AS s
                   FROM klaw_memory_chunks m
                   WHERE {filter} AND ts_match_vq(m.tsv, $8::text::tsquery)
                     AND m.created_at >= $6 AND m.created_at < $7
                   ORDER BY s DESC, m.id LIMIT $5) f
             JOIN klaw_memory_chunks c ON c.id = f.id
             ORDER BY f.s DESC, c.id",
                k1p = K1 + 1.0,
                one_b = 1.0 - B,
            )
        };
        // the chunks with one of the phrases of a tsquery, or the chunks of some ids
        let sql = ranking("m.tsv @@ $1::text::tsquery");
        let by_ids = ranking("m.id = ANY($1::int8[])");
        self.run(async |c| {
            let (n, tokens): (i64, i64) = {
                let st = c
                    .prepare_cached("SELECT chunks, tokens FROM klaw_memory_stats")
                    .await?;
                let r = c.query_one(&st, &[]).await?;
                (r.get(0), r.get(1))
            };
            let avgdl = if n > 0 { tokens as f64 / n as f64 } else { 1.0 };
            let lexemes: Vec<String> = q.phrases.iter().map(|(t, _)| t.clone()).collect();
            let stats = term_stats(c, &lexemes).await?;
            // each phrase's IDF as FTS5's BM25 computes it, times its count, and the most
            // it can add to a chunk's score
            let mut weights = Vec::with_capacity(q.phrases.len());
            let mut bounds = Vec::with_capacity(q.phrases.len());
            let mut ndocs = Vec::with_capacity(q.phrases.len());
            for (t, times) in &q.phrases {
                let (hits, maxtf, minntok) = stats.get(t).copied().unwrap_or((0, 0, 0));
                ndocs.push(hits);
                let idf = ((n - hits) as f64 + 0.5) / (hits as f64 + 0.5);
                let idf = if idf.ln() <= 0.0 { 1e-6 } else { idf.ln() };
                let w = idf * times;
                weights.push(w);
                let tf = f64::from(maxtf);
                let most = tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * f64::from(minntok) / avgdl));
                bounds.push(if hits > 0 { w * most } else { 0.0 });
            }
            // the phrases found in some chunk, the weightiest first
            let mut order: Vec<usize> = (0..bounds.len()).filter(|&i| bounds[i] > 0.0).collect();
            order.sort_by(|&a, &b| bounds[b].total_cmp(&bounds[a]));
            if bounded {
                let ranking = lists::Ranking {
                    q,
                    k,
                    lexemes: &lexemes,
                    weights: &weights,
                    bounds: &bounds,
                    ndocs: &ndocs,
                    avgdl,
                    sql: &by_ids,
                    from,
                    to,
                };
                use std::sync::atomic::Ordering::Relaxed;
                let mut unmade = Vec::new();
                let proven = lists::search(c, &ranking, self.lists, &mut unmade).await?;
                if !unmade.is_empty() {
                    // built in the background; this search ranks the postings
                    self.builds
                        .request(&self.pg.pool, &self.pg.handle, &unmade, self.lists);
                }
                match proven {
                    Some(rows) => {
                        self.proven.fetch_add(1, Relaxed);
                        return Ok(rows.iter().map(|r| hit(r, FoundBy::Text)).collect());
                    }
                    None if q.need == 1 && ndocs.iter().any(|&d| d > self.lists.threshold) => {
                        self.fell_back.fetch_add(1, Relaxed);
                    }
                    None => {}
                }
            }
            let start = if bounded { 1 } else { order.len() };
            // not a statement prepared once: its generic plan cannot tell a rare word's
            // tsquery from a common one's, and scans the table
            let mut rows = Vec::new();
            for taken in start..=order.len() {
                let (first, rest) = order.split_at(taken);
                // every match has one of the phrases taken: they are the candidates
                let covered = rest.is_empty() || {
                    // (a phrase no chunk has is as good as taken)
                    let mut taken = first.to_vec();
                    taken.extend((0..ndocs.len()).filter(|&i| ndocs[i] == 0));
                    q.covered_by(&taken)
                };
                // fewer than k chunks have the phrases taken: they cannot settle the best k
                let reach: i64 = first.iter().map(|&i| ndocs[i]).sum();
                if !covered && reach < k as i64 {
                    continue;
                }
                // the candidates through the GIN index: the chunks with one of the phrases
                // taken (only their entries are read), then those the query matches (a
                // filter on each: ts_match_vq is @@ that the index does not serve)
                let tsquery = if rest.is_empty() {
                    q.tsquery.clone()
                } else {
                    let any: Vec<String> =
                        first.iter().map(|&i| quote_lexeme(&lexemes[i])).collect();
                    any.join(" | ")
                };
                rows = c
                    .query(
                        &sql,
                        &[
                            &tsquery,
                            &lexemes,
                            &weights,
                            &avgdl,
                            &(k as i64),
                            &from,
                            &to,
                            &q.tsquery,
                        ],
                    )
                    .await?;
                let others: f64 = rest.iter().map(|&i| bounds[i]).sum();
                let kth = rows
                    .get(k - 1)
                    .map_or(f64::NEG_INFINITY, |r| r.get::<_, f64>(4));
                // a margin for the sums' rounding
                if covered || kth > others * (1.0 + 1e-9) + 1e-12 {
                    break;
                }
            }
            Ok(rows.iter().map(|r| hit(r, FoundBy::Text)).collect())
        })
    }

    /// Vector search in space `space` among the chunks of `period`: the `k` nearest by
    /// the HNSW index (cosine), best first (ties by id).
    pub fn search_space(
        &self,
        space: usize,
        vector: &[f32],
        k: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        let s = self.space(space);
        let q = vector_text(vector, s.dims)?;
        let k = k.min(store::MAX_K);
        if k == 0 {
            return Ok(Vec::new());
        }
        let ef = self
            .pg
            .ef_search
            .max(u32::try_from(k).unwrap_or(u32::MAX))
            .min(1000);
        let within = if period.is_all() {
            ""
        } else {
            "WHERE v.id IN (SELECT id FROM klaw_memory_chunks WHERE created_at >= $3 AND created_at < $4)"
        };
        let sql = format!(
            "SELECT c.id, c.content, c.source, c.created_at, 1 - n.d
             FROM (SELECT v.id, v.embedding <=> $1::text::vector AS d FROM {} v {within}
                   ORDER BY v.embedding <=> $1::text::vector LIMIT $2) n
             JOIN klaw_memory_chunks c ON c.id = n.id
             ORDER BY n.d, c.id",
            s.table
        );
        let (from, to) = (
            period.from.unwrap_or(i64::MIN),
            period.to.unwrap_or(i64::MAX),
        );
        self.run(async |c| {
            let tx = c.transaction().await?;
            tx.batch_execute(&format!(
                "SET LOCAL hnsw.ef_search = {ef}; SET LOCAL hnsw.iterative_scan = relaxed_order"
            ))
            .await?;
            let k = k as i64;
            let params: Vec<&(dyn ToSql + Sync)> = if period.is_all() {
                vec![&q, &k]
            } else {
                vec![&q, &k, &from, &to]
            };
            let rows = tx.query(&sql, &params).await?;
            tx.commit().await?;
            Ok(rows.iter().map(|r| hit(r, FoundBy::Vector)).collect())
        })
    }

    /// The exact `k` nearest in the first space (a scan of every vector, no index): what
    /// the HNSW index's recall is measured against.
    pub fn search_vector_exact(&self, vector: &[f32], k: usize) -> Result<Vec<Hit>, StoreError> {
        let s = self.space(0);
        let q = vector_text(vector, s.dims)?;
        let sql = format!(
            "SELECT c.id, c.content, c.source, c.created_at, 1 - n.d
             FROM (SELECT v.id, v.embedding <=> $1::text::vector AS d FROM {} v
                   ORDER BY d LIMIT $2) n
             JOIN klaw_memory_chunks c ON c.id = n.id ORDER BY n.d, c.id",
            s.table
        );
        self.run(async |c| {
            let tx = c.transaction().await?;
            tx.batch_execute("SET LOCAL enable_indexscan = off").await?;
            let rows = tx.query(&sql, &[&q, &(k as i64)]).await?;
            tx.commit().await?;
            Ok(rows.iter().map(|r| hit(r, FoundBy::Vector)).collect())
        })
    }

    /// The vector side of a hybrid search: `depth` candidates (at least `k`).
    pub fn vector_pool(
        &self,
        space: usize,
        vector: &[f32],
        k: usize,
        depth: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        self.search_space(space, vector, depth.max(k), period)
    }

    /// Fuses a hybrid search's sides as SQLite's store does.
    pub(crate) fn fuse_spaces(
        &self,
        query: &str,
        text: Vec<Hit>,
        sides: Vec<SpaceSide>,
        k: usize,
        weights: Weights,
        spaces: Spaces,
    ) -> Result<Vec<Hit>, StoreError> {
        store::fuse_sides(self, query, text, sides, k, weights, spaces)
    }

    /// The chunks of `source` (or under `source#` with `prefix`), in stored order.
    pub(crate) fn chunks_of(
        &self,
        source: &str,
        prefix: bool,
    ) -> Result<Vec<StoredChunk>, StoreError> {
        let (sql, key) = if prefix {
            (
                "SELECT id, content, source FROM klaw_memory_chunks
                 WHERE left(source, length($1)) = $1 ORDER BY created_at, id",
                format!("{source}#"),
            )
        } else {
            (
                "SELECT id, content, source FROM klaw_memory_chunks WHERE source = $1 ORDER BY id",
                source.to_owned(),
            )
        };
        self.run(async |c| {
            Ok(c.query(sql, &[&key])
                .await?
                .iter()
                .map(|r| StoredChunk {
                    id: r.get(0),
                    content: r.get(1),
                    source: r.get(2),
                })
                .collect())
        })
    }

    /// The source of chunk `id`, if stored.
    pub(crate) fn source_of(&self, id: i64) -> Result<Option<String>, StoreError> {
        self.run(async |c| {
            Ok(c.query_opt(
                "SELECT source FROM klaw_memory_chunks WHERE id = $1",
                &[&id],
            )
            .await?
            .map(|r| r.get(0)))
        })
    }

    /// Every distinct source.
    pub(crate) fn sources(&self) -> Result<Vec<String>, StoreError> {
        self.run(async |c| {
            Ok(
                c.query("SELECT DISTINCT source FROM klaw_memory_chunks", &[])
                    .await?
                    .iter()
                    .map(|r| r.get(0))
                    .collect(),
            )
        })
    }
}

impl FuseSource for PgStore {
    fn space_dims(&self, space: usize) -> usize {
        self.space(space).dims
    }

    fn doc_freqs_of(&self, terms: &[(String, String)]) -> Result<(Vec<u64>, u64), StoreError> {
        if terms.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let lexemes: Vec<String> = terms
            .iter()
            .flat_map(|(w, s)| [w.clone(), s.clone()])
            .collect();
        self.run(async |c| {
            let st = c
                .prepare_cached("SELECT chunks FROM klaw_memory_stats")
                .await?;
            let n: i64 = c.query_one(&st, &[]).await?.get(0);
            let stats = term_stats(c, &lexemes).await?;
            let df = |t: &str| stats.get(t).map_or(0, |s| s.0);
            let dfs = terms
                .iter()
                .map(|(w, s)| u64::try_from(df(w).max(df(s))).unwrap_or(0))
                .collect();
            Ok((dfs, u64::try_from(n).unwrap_or(0)))
        })
    }

    fn cosines_in(&self, space: usize, query: &[f32], ids: &[i64]) -> Result<Vec<f64>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let s = self.space(space);
        let q = vector_text(query, s.dims)?;
        let sql = format!(
            "SELECT id, 1 - (embedding <=> $1::text::vector) FROM {} WHERE id = ANY($2)",
            s.table
        );
        let ids = ids.to_vec();
        let found: std::collections::HashMap<i64, f64> = self.run(async |c| {
            Ok(c.query(&sql, &[&q, &ids])
                .await?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect())
        })?;
        Ok(ids
            .iter()
            .map(|id| found.get(id).copied().unwrap_or(0.0))
            .collect())
    }

    fn nearest_in(
        &self,
        space: usize,
        vector: &[f32],
        k: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        self.search_space(space, vector, k, period)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tsvector_holds_the_words_and_stems_with_their_positions() {
        let (t, n) = tokens("Running runs, it's o'clock");
        assert_eq!(n, t.len());
        let (v, tfs) = tsvector(&t);
        assert!(v.contains("'running':1"), "{v}");
        // "run" is the stem of both "running" and "runs"
        assert!(tfs.contains(&("run".to_owned(), 2)), "{tfs:?}");
        assert!(v.contains("'run':"), "{v}");
        assert_eq!(quote_lexeme("o'c\\"), "'o''c\\\\'");
    }

    #[test]
    fn a_query_is_covered_by_the_phrases_every_match_has() {
        let terms = fts::query_terms("alpha beta gamma");
        let most = most_of(&terms).unwrap();
        // two of three: a chunk without alpha and beta has one term at most
        assert!(most.covered_by(&[0, 1]));
        assert!(!most.covered_by(&[0]));
        let any = any_of(&terms).unwrap();
        assert!(!any.covered_by(&[0, 1]));
        assert!(any.covered_by(&[0, 1, 2]));
        // a code matches alone: it must be taken
        let code = most_of(&fts::query_terms("alpha beta INV2093")).unwrap();
        let at = code
            .phrases
            .iter()
            .position(|(p, _)| p == "inv2093")
            .unwrap();
        let others: Vec<usize> = (0..code.phrases.len()).filter(|&i| i != at).collect();
        assert!(!code.covered_by(&others));
    }

    #[test]
    fn most_of_counts_each_term_in_its_groups() {
        let terms = fts::query_terms("alpha beta gamma");
        let q = most_of(&terms).unwrap();
        // need 2 of 3: 3 groups, each term in 2
        assert_eq!(q.tsquery.matches('&').count(), 3, "{}", q.tsquery);
        assert!(q.phrases.iter().all(|(_, t)| *t == 2.0), "{:?}", q.phrases);
    }
}
