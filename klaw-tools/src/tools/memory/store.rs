//! The memory store: one SQLite database with the chunks, an FTS5 index over their text
//! and stems, and a sqlite-vec `vec0` index over their vectors.
//!
//! Vectors are L2-normalised on the way in; for unit vectors `1 - d²/2` is the cosine,
//! which is the score reported. Vector search goes through a compact copy of the vectors
//! kept in memory ([`super::vectors`]) and re-scores its best candidates with the float
//! vectors from `vec0`, see [`MemoryStore::search_vector`].
//! The database records the embedding model's fingerprint and the dimensions; opening it
//! with another model is a [`StoreError::FingerprintMismatch`], never a silent mix.

use super::fts;
use super::fuse::{self, Candidate, Evidence, FoundBy, Fusion, Weights};
use super::vectors::{self, VectorCache};
use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};
use std::cell::RefCell;
use std::path::Path;

/// A failure of the memory store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite reported an error.
    #[error("memory database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The index was built with another embedding model; its vectors must be recomputed.
    #[error(
        "the memory index was built with model {stored}, not {requested}: its vectors must be re-embedded"
    )]
    FingerprintMismatch {
        /// The fingerprint stored in the database.
        stored: String,
        /// The fingerprint the caller opened it with.
        requested: String,
    },
    /// A vector's length differs from the index's dimensions.
    #[error("a vector has {got} dimensions, the index has {expected}")]
    WrongDimensions {
        /// The index's dimensions.
        expected: usize,
        /// The vector's length.
        got: usize,
    },
    /// A vector is zero or holds a NaN or an infinity.
    #[error("a vector is zero or not finite")]
    BadVector,
    /// sqlite-vec could not be registered with SQLite.
    #[error("sqlite-vec could not be registered: {0}")]
    Extension(String),
}

impl StoreError {
    /// Whether the caller should re-embed everything with the new model.
    pub fn is_fingerprint_mismatch(&self) -> bool {
        matches!(self, StoreError::FingerprintMismatch { .. })
    }
}

/// A chunk to store, with its vector from the embedding model.
#[derive(Debug, Clone)]
pub struct NewChunk {
    /// The text.
    pub content: String,
    /// Where it came from (a conversation, a file, `memory_save`, ...).
    pub source: String,
    /// Unix seconds; `None` means now.
    pub created_at: Option<i64>,
    /// Text that is embedded with the chunk but neither shown nor searched by words: what
    /// makes it understood (a conversation turn's previous turn, its date). Re-embedding
    /// uses it again.
    pub context: Option<String>,
    /// Its embedding, `dims` long (normalised by the store).
    pub vector: Vec<f32>,
}

impl NewChunk {
    /// What the model embeds for this chunk: [`embed_text`] of its content and context.
    pub fn embed_text(&self) -> String {
        embed_text(&self.content, self.context.as_deref())
    }
}

/// What the model embeds for a chunk: its context (if any) on a line before its content.
pub(super) fn embed_text(content: &str, context: Option<&str>) -> String {
    match context {
        Some(c) if !c.is_empty() => format!("{c}\n{content}"),
        _ => content.to_owned(),
    }
}

/// A span of time a search is limited to, in Unix seconds: `from` inclusive, `to`
/// exclusive; `None` leaves that side open. The default is all time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Period {
    /// The earliest time kept.
    pub from: Option<i64>,
    /// The first time no longer kept.
    pub to: Option<i64>,
}

impl Period {
    /// Whether the period is all time.
    pub fn is_all(&self) -> bool {
        self.from.is_none() && self.to.is_none()
    }

    /// Whether `t` (Unix seconds) is in it.
    pub fn contains(&self, t: i64) -> bool {
        self.from.is_none_or(|f| t >= f) && self.to.is_none_or(|e| t < e)
    }

    fn bounds(&self) -> (i64, i64) {
        (self.from.unwrap_or(i64::MIN), self.to.unwrap_or(i64::MAX))
    }
}

/// What [`MemoryStore::insert`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InsertReport {
    /// Chunks stored.
    pub inserted: usize,
    /// Chunks skipped because the same text was already stored.
    pub duplicates: usize,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hit {
    /// The chunk's id.
    pub id: i64,
    /// The chunk's text.
    pub content: String,
    /// Where it came from.
    pub source: String,
    /// When it happened (or was stored), `YYYY-MM-DD` (UTC).
    pub date: String,
    /// The same time in Unix seconds.
    pub created_at: i64,
    /// Higher is better: `-bm25` for text, the cosine for vectors, the fused score for hybrid.
    pub score: f64,
    /// Which side found it.
    pub found_by: FoundBy,
}

/// The memory database. See the module docs.
#[derive(Debug)]
pub struct MemoryStore {
    conn: Connection,
    dims: usize,
    /// The model as [`VECTORS_COMPLETE`] records it: `fingerprint (dims dims)`.
    model: String,
    /// The vectors' in-memory copy, loaded on the first vector search.
    cache: RefCell<Option<VectorCache>>,
}

/// The SHA-256 of a chunk's text, hex: how exact duplicates are recognised. A chunk with
/// a context hashes both (the same short reply in two conversations is two memories).
pub(super) fn content_hash(content: &str, context: Option<&str>) -> String {
    let mut h = Sha256::new();
    h.update(content.as_bytes());
    if let Some(c) = context.filter(|c| !c.is_empty()) {
        // the content's length too: a NUL in the content cannot move the boundary
        h.update([0u8]);
        h.update((content.len() as u64).to_le_bytes());
        h.update(c.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn normalised(v: &[f32], dims: usize) -> Result<Vec<u8>, StoreError> {
    if v.len() != dims {
        return Err(StoreError::WrongDimensions {
            expected: dims,
            got: v.len(),
        });
    }
    let norm = v
        .iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt();
    if !norm.is_finite() || norm == 0.0 {
        return Err(StoreError::BadVector);
    }
    Ok(v.iter()
        .flat_map(|x| ((f64::from(*x) / norm) as f32).to_le_bytes())
        .collect())
}

/// What [`inspect`] finds in a store's file, without the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StoreInfo {
    /// Chunks stored.
    pub(super) chunks: usize,
    /// The fingerprint of the model that built it, if recorded.
    pub(super) fingerprint: Option<String>,
    /// The vectors' dimensions, if recorded.
    pub(super) dims: Option<usize>,
    /// The [`meta`](MemoryStore::meta) value asked for, if any.
    pub(super) meta: Option<String>,
}

/// Looks into the store at `path` read-only (no model, no sqlite-vec, nothing written),
/// reading also the meta value under `meta_key`: `None` when the file does not exist.
pub(super) fn inspect(path: &Path, meta_key: &str) -> Result<Option<StoreInfo>, StoreError> {
    if !path.exists() {
        return Ok(None);
    }
    let conn = Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(2))?;
    let n: i64 = conn.query_row("SELECT count(*) FROM chunks", [], |r| r.get(0))?;
    Ok(Some(StoreInfo {
        chunks: usize::try_from(n).unwrap_or_default(),
        fingerprint: read_meta(&conn, "fingerprint")?,
        dims: read_meta(&conn, "dims")?.and_then(|d| d.parse().ok()),
        meta: read_meta(&conn, meta_key)?,
    }))
}

/// The `meta` value under `key`, if any.
fn read_meta(conn: &Connection, key: &str) -> Result<Option<String>, StoreError> {
    Ok(conn
        .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .optional()?)
}

/// The text side of [`MemoryStore::search_hybrid`] counts a chunk only if it contains more
/// than this share of the query's words.
pub(super) const HYBRID_MIN_COVERAGE: f64 = 0.5;
// `fts::min_should_match` asks for more than half of the words: the same rule.
const _: () = assert!(HYBRID_MIN_COVERAGE == 0.5);

/// The meta key that says every chunk has a vector of the model it names (the value:
/// `fingerprint (dims dims)`), so opening need not look for chunks without one (a scan of
/// every chunk, 160 ms at 100k). Any other value, or none (a store made before the key),
/// means "maybe some are missing": re-embedding for another model removes it in the
/// transaction that drops the vectors, and [`MemoryStore::finish_vectors`] writes it in
/// the transaction of the last vectors; a process that dies in between leaves it
/// missing, and the next open completes the work.
const VECTORS_COMPLETE: &str = "vectors_complete";

/// How much of the database file SQLite maps into memory (address space, not RAM).
const MMAP_BYTES: i64 = 4 << 30;

/// sqlite-vec's largest `k`; larger requests are capped.
pub(super) const MAX_K: usize = 4096;

/// Vector search re-scores `k` times this many candidates of the in-memory scan with the
/// float vectors ...
pub const RESCORE_FACTOR: usize = 4;

/// ... and at least this many.
pub const MIN_RESCORED: usize = 40;

const HIT_COLUMNS: &str =
    "c.id, c.content, c.source, date(c.created_at, 'unixepoch'), c.created_at";

impl MemoryStore {
    /// Opens (or creates) the database at `path` for vectors of `dims` dimensions from the
    /// model with `fingerprint`.
    ///
    /// A database made with another fingerprint or other dimensions gives
    /// [`StoreError::FingerprintMismatch`]; [`MemoryStore::open_reembed`] opens it for
    /// re-embedding.
    pub fn open(path: &Path, dims: usize, fingerprint: &str) -> Result<Self, StoreError> {
        let store = Self::connect(path, dims, fingerprint)?;
        store.init(fingerprint, false)?;
        Ok(store)
    }

    /// Opens the database for a new model: when the fingerprint or the dimensions differ,
    /// drops every vector and records the new model, keeping the chunks. The caller then
    /// embeds [`MemoryStore::chunks_without_vectors`] and stores them with
    /// [`MemoryStore::set_vectors`].
    pub fn open_reembed(path: &Path, dims: usize, fingerprint: &str) -> Result<Self, StoreError> {
        let store = Self::connect(path, dims, fingerprint)?;
        store.init(fingerprint, true)?;
        Ok(store)
    }

    fn connect(path: &Path, dims: usize, fingerprint: &str) -> Result<Self, StoreError> {
        klaw_sqlite_vec::register().map_err(StoreError::Extension)?;
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // Full-text search and loading the vectors' in-memory copy read many pages:
        // through a memory map instead of a `read` per page (the file's pages are the OS
        // page cache's, shared, not this process's heap).
        conn.pragma_update(None, "mmap_size", MMAP_BYTES)?;
        Ok(MemoryStore {
            conn,
            dims,
            model: format!("{fingerprint} ({dims} dims)"),
            cache: RefCell::new(None),
        })
    }

    fn init(&self, fingerprint: &str, reembed: bool) -> Result<(), StoreError> {
        // Immediate: opening may write (a new table, the context column, another model),
        // and two processes opening one database must not both read then try to write.
        let tx = rusqlite::Transaction::new_unchecked(
            &self.conn,
            rusqlite::TransactionBehavior::Immediate,
        )?;
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS chunks (
                 id INTEGER PRIMARY KEY,
                 content TEXT NOT NULL,
                 source TEXT NOT NULL,
                 created_at INTEGER NOT NULL,
                 content_hash TEXT NOT NULL UNIQUE,
                 context TEXT
             );
             CREATE INDEX IF NOT EXISTS chunks_created_at ON chunks (created_at);
             CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
                 content, stems, tokenize = 'unicode61 remove_diacritics 2'
             );",
        )?;
        // Made before chunks had a context: add the column (no chunk has one).
        let has_context: bool = tx.query_row(
            "SELECT count(*) FROM pragma_table_info('chunks') WHERE name = 'context'",
            [],
            |r| r.get::<_, i64>(0).map(|n| n > 0),
        )?;
        if !has_context {
            tx.execute_batch("ALTER TABLE chunks ADD COLUMN context TEXT;")?;
        }
        let stored_fp = read_meta(&tx, "fingerprint")?;
        let stored_dims = read_meta(&tx, "dims")?;
        let requested = self.model.clone();
        let same = stored_fp.as_deref() == Some(fingerprint)
            && stored_dims.as_deref() == Some(self.dims.to_string().as_str());
        if let (Some(fp), false) = (&stored_fp, same) {
            if !reembed {
                return Err(StoreError::FingerprintMismatch {
                    stored: format!("{fp} ({} dims)", stored_dims.unwrap_or_default()),
                    requested,
                });
            }
            // the flag goes with the vectors: a process that dies before every chunk has
            // its new vector leaves the work to the next open
            tx.execute("DELETE FROM meta WHERE key = ?1", [VECTORS_COMPLETE])?;
            tx.execute_batch(
                "DROP TABLE IF EXISTS chunks_vec; DROP TABLE IF EXISTS chunks_codes;",
            )?;
        }
        tx.execute_batch(&format!(
            "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vec USING vec0(
                 embedding float[{}] distance_metric=l2
             );",
            self.dims
        ))?;
        let had_codes: bool = tx.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'chunks_codes'",
            [],
            |r| r.get::<_, i64>(0).map(|n| n > 0),
        )?;
        if !had_codes {
            // New, or made before the codes existed: quantise the vectors there are.
            tx.execute_batch(
                "CREATE TABLE chunks_codes (
                     id INTEGER PRIMARY KEY, scale REAL NOT NULL, codes BLOB NOT NULL
                 );",
            )?;
            fill_codes(&tx)?;
        }
        if !same {
            // only when it changes: every commit makes other processes reload their copy
            // of the vectors (`PRAGMA data_version`)
            tx.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('fingerprint', ?1), ('dims', ?2)",
                params![fingerprint, self.dims.to_string()],
            )?;
        }
        tx.commit()?;
        // the index's document frequencies, for the IDF of hybrid search's text evidence
        // (a temporary table: nothing is written to the file)
        self.conn.execute_batch(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_vocab
                 USING fts5vocab(main, chunks_fts, row);",
        )?;
        Ok(())
    }

    /// The vectors' dimensions.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The SQLite journal mode (`wal` once opened).
    pub fn journal_mode(&self) -> Result<String, StoreError> {
        Ok(self
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))?)
    }

    /// How many chunks are stored.
    pub fn len(&self) -> Result<usize, StoreError> {
        let n: i64 = self
            .conn
            .query_row("SELECT count(*) FROM chunks", [], |r| r.get(0))?;
        Ok(usize::try_from(n).unwrap_or_default())
    }

    /// Whether no chunk is stored.
    pub fn is_empty(&self) -> Result<bool, StoreError> {
        Ok(self.len()? == 0)
    }

    /// Stores chunks with their vectors in one transaction: all or none. A chunk whose
    /// text is already stored (same [`content_hash`]) is skipped.
    pub fn insert(&mut self, chunks: &[NewChunk]) -> Result<InsertReport, StoreError> {
        let vectors = chunks
            .iter()
            .map(|c| normalised(&c.vector, self.dims))
            .collect::<Result<Vec<_>, _>>()?;
        let tx = self.conn.transaction()?;
        let mut report = InsertReport::default();
        let changes = {
            let mut ins = tx.prepare(
                "INSERT INTO chunks (content, source, created_at, content_hash, context)
                 VALUES (?1, ?2, coalesce(?3, unixepoch()), ?4, ?5)
                 ON CONFLICT (content_hash) DO NOTHING",
            )?;
            let mut fts =
                tx.prepare("INSERT INTO chunks_fts (rowid, content, stems) VALUES (?1, ?2, ?3)")?;
            let mut vec = VecWriter::new(&tx)?;
            for (c, v) in chunks.iter().zip(&vectors) {
                let context = c.context.as_deref().filter(|x| !x.is_empty());
                let n = ins.execute(params![
                    c.content,
                    c.source,
                    c.created_at,
                    content_hash(&c.content, context),
                    context
                ])?;
                if n == 0 {
                    report.duplicates += 1;
                    continue;
                }
                let id = tx.last_insert_rowid();
                fts.execute(params![id, c.content, fts::stem_text(&c.content)])?;
                vec.insert(id, v)?;
                report.inserted += 1;
            }
            vec.changes
        };
        tx.commit()?;
        self.after_commit(changes);
        Ok(report)
    }

    /// Removes every chunk whose source is `source` (text, stems and vector) in one
    /// transaction; returns how many.
    pub fn remove_source(&mut self, source: &str) -> Result<usize, StoreError> {
        self.remove_where("source = ?1", source)
    }

    /// Removes every chunk whose source starts with `prefix` (compared exactly, no
    /// wildcards), in one transaction; returns how many. The docs index keeps a file's
    /// sections as `path#anchor` and removes a file with the prefix `path#`.
    pub fn remove_source_prefix(&mut self, prefix: &str) -> Result<usize, StoreError> {
        self.remove_where("substr(source, 1, length(?1)) = ?1", prefix)
    }

    fn remove_where(&mut self, condition: &str, value: &str) -> Result<usize, StoreError> {
        let tx = self.conn.transaction()?;
        let ids: Vec<i64> = {
            let mut st = tx.prepare(&format!("SELECT id FROM chunks WHERE {condition}"))?;
            let rows = st.query_map([value], |r| r.get(0))?;
            rows.collect::<Result<_, _>>()?
        };
        let changes = {
            let mut fts = tx.prepare("DELETE FROM chunks_fts WHERE rowid = ?1")?;
            let mut vec = VecWriter::new(&tx)?;
            let mut chunk = tx.prepare("DELETE FROM chunks WHERE id = ?1")?;
            for id in &ids {
                fts.execute([id])?;
                vec.delete(*id)?;
                chunk.execute([id])?;
            }
            vec.changes
        };
        tx.commit()?;
        self.after_commit(changes);
        Ok(ids.len())
    }

    /// A value the caller keeps in the database (e.g. what an index was built from).
    /// The keys `fingerprint`, `dims` and `vectors_complete` are the store's own.
    pub fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        read_meta(&self.conn, key)
    }

    /// Sets a [`meta`](Self::meta) value.
    pub fn set_meta(&mut self, key: &str, value: &str) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
            params![key, value],
        )?;
        Ok(())
    }

    /// Whether some chunks may have no vector of this model: re-embedding for it was
    /// started and not finished (see [`MemoryStore::open_reembed`]), or the store was made
    /// before this was recorded. When `false`,
    /// [`chunks_without_vectors`](Self::chunks_without_vectors) is empty and need not be
    /// asked.
    pub fn vectors_pending(&self) -> Result<bool, StoreError> {
        Ok(self.meta(VECTORS_COMPLETE)?.as_deref() != Some(self.model.as_str()))
    }

    /// Chunks that have no vector (after [`MemoryStore::open_reembed`]), as `(id, text to
    /// embed)` ([`embed_text`]: the content, after its context if it has one). Reads
    /// every chunk: ask [`vectors_pending`](Self::vectors_pending) first.
    pub fn chunks_without_vectors(&self) -> Result<Vec<(i64, String)>, StoreError> {
        let mut st = self.conn.prepare(
            "SELECT id, content, context FROM chunks
             WHERE id NOT IN (SELECT rowid FROM chunks_vec) ORDER BY id",
        )?;
        let rows = st.query_map([], |r| {
            let (content, context): (String, Option<String>) = (r.get(1)?, r.get(2)?);
            Ok((r.get(0)?, embed_text(&content, context.as_deref())))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Stores vectors for existing chunks, `(id, vector)`, in one transaction.
    pub fn set_vectors(&mut self, vectors: &[(i64, Vec<f32>)]) -> Result<(), StoreError> {
        self.write_vectors(vectors, false)
    }

    /// [`set_vectors`](Self::set_vectors) for the last of the chunks without a vector
    /// (or none), recording in the same transaction that every chunk has one: the next
    /// open skips [`chunks_without_vectors`](Self::chunks_without_vectors).
    pub fn finish_vectors(&mut self, vectors: &[(i64, Vec<f32>)]) -> Result<(), StoreError> {
        self.write_vectors(vectors, true)
    }

    fn write_vectors(
        &mut self,
        vectors: &[(i64, Vec<f32>)],
        finish: bool,
    ) -> Result<(), StoreError> {
        let blobs = vectors
            .iter()
            .map(|(id, v)| Ok((*id, normalised(v, self.dims)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let tx = self.conn.transaction()?;
        let changes = {
            let mut vec = VecWriter::new(&tx)?;
            for (id, blob) in &blobs {
                vec.delete(*id)?;
                vec.insert(*id, blob)?;
            }
            vec.changes
        };
        if finish && read_meta(&tx, VECTORS_COMPLETE)?.as_deref() != Some(self.model.as_str()) {
            tx.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
                params![VECTORS_COMPLETE, self.model],
            )?;
        }
        tx.commit()?;
        self.after_commit(changes);
        Ok(())
    }

    /// Full-text search: the best `k` chunks by bm25 over their words and stems. A query
    /// with no words gives no hits; no query is an FTS5 syntax error.
    pub fn search_text(&self, query: &str, k: usize) -> Result<Vec<Hit>, StoreError> {
        self.search_text_in(query, k, Period::default())
    }

    /// [`search_text`](Self::search_text) among the chunks of `period`.
    pub fn search_text_in(
        &self,
        query: &str,
        k: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        let k = k.min(MAX_K);
        match fts::match_query(query) {
            Some(m) => self.search_fts(&m, k, period),
            None => Ok(Vec::new()),
        }
    }

    /// The best `k` chunks matching the FTS5 expression `m` by bm25. The chunks' rows are
    /// read for those `k` only (ranking in a subquery): a common word matches tens of
    /// thousands of chunks.
    fn search_fts(&self, m: &str, k: usize, period: Period) -> Result<Vec<Hit>, StoreError> {
        // `+rowid`: not an FTS5 rowid lookup per chunk of the period (one MATCH each,
        // seconds for a wide period) but a filter on the MATCH's rows. Without a period,
        // no filter at all.
        let within = if period.is_all() {
            ""
        } else {
            "AND +rowid IN (SELECT id FROM chunks WHERE created_at >= ?3 AND created_at < ?4)"
        };
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT {HIT_COLUMNS}, f.s
             FROM (SELECT rowid, -bm25(chunks_fts) AS s FROM chunks_fts
                   WHERE chunks_fts MATCH ?1 {within} ORDER BY s DESC, rowid LIMIT ?2) f
             JOIN chunks c ON c.id = f.rowid
             ORDER BY f.s DESC, c.id"
        ))?;
        let text = |r: &rusqlite::Row<'_>| hit(r, FoundBy::Text);
        let rows = if period.is_all() {
            st.query_map(params![m, k as i64], text)?
        } else {
            let (from, to) = period.bounds();
            st.query_map(params![m, k as i64, from, to], text)?
        };
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Vector search: the `k` nearest chunks, scored by cosine.
    ///
    /// The in-memory copy of the vectors ([`super::vectors`]) proposes the `k ×`
    /// [`RESCORE_FACTOR`] (at least [`MIN_RESCORED`]) nearest by their compact codes;
    /// those are re-scored with their float vectors and the best `k` kept, best first
    /// (ties by id). The copy is loaded on the first call, and again after another
    /// connection changed the database.
    pub fn search_vector(&self, vector: &[f32], k: usize) -> Result<Vec<Hit>, StoreError> {
        self.search_vector_in(vector, k, Period::default())
    }

    /// [`search_vector`](Self::search_vector) among the chunks of `period`.
    pub fn search_vector_in(
        &self,
        vector: &[f32],
        k: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        let wanted = k.saturating_mul(RESCORE_FACTOR).max(MIN_RESCORED);
        self.search_vector_rescoring(vector, k, wanted, period)
    }

    /// The vector side of a hybrid search proposing `depth` candidates (at least the `k`
    /// asked for): the `depth` nearest by the in-memory codes, re-scored with their float
    /// vectors (at least [`MIN_RESCORED`]). The pool is ranked again by the fusion, so
    /// re-scoring `4 × depth`, or `4 × k` as [`search_vector_in`](Self::search_vector_in)
    /// does, would buy little for its cost: each float vector is read from `vec0`, whose
    /// chunk of vectors is one long blob walked page by page to the vector (issue 32:
    /// with `4 × k`, topK 50 read 200 where topK 10 read 50, and most of the extra time
    /// went there).
    pub(super) fn vector_pool(
        &self,
        vector: &[f32],
        k: usize,
        depth: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        let pool = depth.max(k);
        self.search_vector_rescoring(vector, pool, pool.max(MIN_RESCORED), period)
    }

    /// The best `k` of the `wanted` nearest by the in-memory codes, re-scored exactly.
    fn search_vector_rescoring(
        &self,
        vector: &[f32],
        k: usize,
        wanted: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        let blob = normalised(vector, self.dims)?;
        let k = k.min(MAX_K);
        if k == 0 {
            return Ok(Vec::new());
        }
        let query = floats(&blob);
        let candidates = if period.is_all() {
            self.with_cache(|c| c.candidates(&query, wanted))?
        } else {
            let (from, to) = period.bounds();
            let mut st = self.conn.prepare_cached(
                "SELECT id FROM chunks WHERE created_at >= ?1 AND created_at < ?2",
            )?;
            let ids: std::collections::HashSet<i64> = st
                .query_map(params![from, to], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            let keep = |id: i64| ids.contains(&id);
            self.with_cache(|c| c.candidates_among(&query, wanted, Some(&keep)))?
        };
        let mut scored: Vec<(f64, i64)> = Vec::with_capacity(candidates.len());
        {
            let mut get = self
                .conn
                .prepare_cached("SELECT embedding FROM chunks_vec WHERE rowid = ?1")?;
            for id in candidates {
                let stored: Option<Vec<u8>> = get.query_row([id], |r| r.get(0)).optional()?;
                if let Some(stored) = stored {
                    let cos: f64 = floats(&stored)
                        .iter()
                        .zip(&query)
                        .map(|(a, b)| f64::from(*a) * f64::from(*b))
                        .sum();
                    scored.push((cos, id));
                }
            }
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.truncate(k);
        let mut get = self.conn.prepare_cached(&format!(
            "SELECT {HIT_COLUMNS}, ?2 FROM chunks c WHERE c.id = ?1"
        ))?;
        let mut hits = Vec::with_capacity(scored.len());
        for (cos, id) in scored {
            if let Some(h) = get
                .query_row(params![id, cos], |r| hit(r, FoundBy::Vector))
                .optional()?
            {
                hits.push(h);
            }
        }
        Ok(hits)
    }

    /// Runs `f` on the in-memory copy of the vectors, loading it first if there is none
    /// or another connection has committed a change since it was loaded.
    fn with_cache<T>(&self, f: impl FnOnce(&mut VectorCache) -> T) -> Result<T, StoreError> {
        let version: i64 = self
            .conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))?;
        let mut slot = self.cache.borrow_mut();
        let cache = match slot.take() {
            Some(c) if c.version() == version => slot.insert(c),
            _ => slot.insert(self.load_cache(version)?),
        };
        Ok(f(cache))
    }

    /// Reads the in-memory copy from `chunks_codes`. Codes out of step with the chunks
    /// (written by a binary that did not know them, or by hand) are made again from the
    /// float vectors first.
    fn load_cache(&self, version: i64) -> Result<VectorCache, StoreError> {
        let chunks: i64 = self
            .conn
            .query_row("SELECT count(*) FROM chunks", [], |r| r.get(0))?;
        if let Some(cache) = self.read_codes(version)?
            && i64::try_from(cache.len()) == Ok(chunks)
        {
            return Ok(cache);
        }
        tracing::info!(
            "the memory index's int8 codes are out of step with its vectors: making them again"
        );
        let tx = self.conn.unchecked_transaction()?;
        tx.execute("DELETE FROM chunks_codes", [])?;
        fill_codes(&tx)?;
        tx.commit()?;
        Ok(self
            .read_codes(version)?
            .unwrap_or_else(|| VectorCache::new(self.dims, version)))
    }

    /// `chunks_codes` as an in-memory copy; `None` if a row has the wrong length.
    fn read_codes(&self, version: i64) -> Result<Option<VectorCache>, StoreError> {
        let mut cache = VectorCache::new(self.dims, version);
        let mut st = self
            .conn
            .prepare("SELECT id, scale, codes FROM chunks_codes")?;
        let mut rows = st.query([])?;
        while let Some(row) = rows.next()? {
            let blob: Vec<u8> = row.get(2)?;
            if blob.len() != self.dims {
                return Ok(None);
            }
            let codes = blob.into_iter().map(u8::cast_signed).collect();
            cache.insert_codes(row.get(0)?, codes, row.get(1)?);
        }
        tracing::debug!(vectors = cache.len(), "memory vectors loaded");
        Ok(Some(cache))
    }

    /// Applies committed vector changes to the in-memory copy, if loaded (this
    /// connection's commits do not change `PRAGMA data_version`).
    fn after_commit(&self, changes: Vec<VecChange>) {
        if let Some(cache) = self.cache.borrow_mut().as_mut() {
            for change in changes {
                match change {
                    VecChange::Set { id, codes, scale } => cache.insert_codes(id, codes, scale),
                    VecChange::Deleted(id) => cache.remove(id),
                }
            }
        }
    }

    /// Vector search over every float vector (sqlite-vec's brute-force scan): the exact
    /// `k` nearest, which [`search_vector`](Self::search_vector) approximates on a big
    /// store. For comparison and tests.
    pub fn search_vector_exact(&self, vector: &[f32], k: usize) -> Result<Vec<Hit>, StoreError> {
        let blob = normalised(vector, self.dims)?;
        let k = k.min(MAX_K);
        if k == 0 {
            return Ok(Vec::new());
        }
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT {HIT_COLUMNS}, 1.0 - v.distance * v.distance / 2.0 AS s
             FROM (SELECT rowid, distance FROM chunks_vec
                   WHERE embedding MATCH ?1 AND k = ?2) v
             JOIN chunks c ON c.id = v.rowid
             ORDER BY v.distance, c.id"
        ))?;
        let rows = st.query_map(params![blob, k as i64], |r| hit(r, FoundBy::Vector))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Hybrid search: the top `k` of each side fused by [`Fusion::DEFAULT`] (`weights`
    /// per side); the best `k` fused results. The same as
    /// [`hybrid_text_side`](Self::hybrid_text_side), [`search_vector`](Self::search_vector)
    /// and [`fuse`](Self::fuse) in turn.
    pub fn search_hybrid(
        &self,
        query: &str,
        vector: &[f32],
        k: usize,
        weights: Weights,
    ) -> Result<Vec<Hit>, StoreError> {
        let depth = Fusion::DEFAULT.depth(k);
        let text = self.hybrid_text_side(query, depth, Period::default())?;
        let vecs = self.vector_pool(vector, k, depth, Period::default())?;
        self.fuse(query, vector, text, vecs, k, weights, Fusion::DEFAULT)
    }

    /// Fuses a hybrid search's text side and vector side (each best first) for `query`,
    /// whose vector is `vector`, with `fusion`: the best `k`, each marked with the side(s)
    /// that found it. [`Fusion::Lift`] scores a chunk only the text side found by its
    /// cosine too (read from `vec0`; 0 for a chunk without a vector yet).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn fuse(
        &self,
        query: &str,
        vector: &[f32],
        text: Vec<Hit>,
        vecs: Vec<Hit>,
        k: usize,
        weights: Weights,
        fusion: Fusion,
    ) -> Result<Vec<Hit>, StoreError> {
        let (evidence, lift, stretch, bm25_part, spread) = match fusion {
            Fusion::Rrf => return Ok(fuse_hits(text, vecs, k, weights)),
            Fusion::Lift {
                evidence,
                lift,
                stretch,
                bm25,
                spread,
                ..
            } => (evidence, lift, stretch, bm25.clamp(0.0, 1.0), spread),
        };
        let bm25: std::collections::HashMap<i64, f64> =
            text.iter().map(|h| (h.id, h.score)).collect();
        let best_bm25 = text.iter().map(|h| h.score).fold(0.0_f64, f64::max);
        let in_vec: std::collections::HashSet<i64> = vecs.iter().map(|h| h.id).collect();
        let mut hits: Vec<Hit> = Vec::with_capacity(text.len() + vecs.len());
        for h in vecs.into_iter().chain(text) {
            if !hits.iter().any(|x| x.id == h.id) {
                hits.push(h);
            }
        }
        let query_vector = floats(&normalised(vector, self.dims)?);
        let terms = match evidence {
            Evidence::Idf | Evidence::IdfNeutral(_) | Evidence::IdfAcross(_) => {
                fts::query_terms(query)
            }
            Evidence::Bm25 => Vec::new(),
        };
        let script = fts::mostly_cyrillic(query);
        let idf = self.idf(&terms)?;
        let mut get = self
            .conn
            .prepare_cached("SELECT embedding FROM chunks_vec WHERE rowid = ?1")?;
        let mut candidates = Vec::with_capacity(hits.len());
        for h in &hits {
            let cosine = if in_vec.contains(&h.id) {
                h.score
            } else {
                let stored: Option<Vec<u8>> = get.query_row([h.id], |r| r.get(0)).optional()?;
                stored.map_or(0.0, |b| {
                    floats(&b)
                        .iter()
                        .zip(&query_vector)
                        .map(|(a, b)| f64::from(*a) * f64::from(*b))
                        .sum()
                })
            };
            let text_score = bm25.get(&h.id).copied();
            let evidence = match evidence {
                Evidence::Bm25 => {
                    text_score.map_or(0.0, |s| if best_bm25 > 0.0 { s / best_bm25 } else { 0.0 })
                }
                Evidence::Idf | Evidence::IdfNeutral(_) | Evidence::IdfAcross(_) => {
                    let relative = match text_score {
                        Some(s) if best_bm25 > 0.0 => s / best_bm25,
                        _ => 0.0,
                    };
                    fts::idf_coverage(&terms, &idf, &h.content)
                        * (1.0 - bm25_part + bm25_part * relative)
                }
            };
            candidates.push(Candidate {
                id: h.id,
                cosine,
                evidence,
                found_by: match (text_score.is_some(), in_vec.contains(&h.id)) {
                    (true, true) => FoundBy::Both,
                    (true, false) => FoundBy::Text,
                    _ => FoundBy::Vector,
                },
            });
        }
        let foreign = |h: &Hit| {
            let s = fts::mostly_cyrillic(&h.content);
            s.is_some() && s != script
        };
        // the vector side's best is the first of `hits`
        let neutral = match evidence {
            Evidence::IdfNeutral(level) => Some(level),
            Evidence::IdfAcross(level)
                if hits
                    .first()
                    .is_some_and(|h| in_vec.contains(&h.id) && foreign(h)) =>
            {
                Some(level)
            }
            _ => None,
        };
        if let Some(level) = neutral
            && script.is_some()
        {
            // the text side cannot judge a chunk in another script: it gets the best
            // evidence of the query's script, so the cosine alone ranks it against those
            let foreign: Vec<bool> = hits.iter().map(foreign).collect();
            let best = candidates
                .iter()
                .zip(&foreign)
                .filter(|(_, f)| !**f)
                .map(|(c, _)| c.evidence)
                .fold(0.0_f64, f64::max)
                * level;
            for (c, f) in candidates.iter_mut().zip(&foreign) {
                if *f {
                    c.evidence = best;
                }
            }
        }
        Ok(in_fused_order(
            fuse::lift(&candidates, weights, lift, stretch, spread),
            hits,
            k,
        ))
    }

    /// The [IDF](fts::idf) of each of `terms` in this index: a term's chunks are those
    /// with its word or its stem (the larger count of the two).
    fn idf(&self, terms: &[(String, String)]) -> Result<Vec<f64>, StoreError> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let n = self.with_cache(|c| c.len())? as u64;
        let mut st = self
            .conn
            .prepare_cached("SELECT doc FROM temp.chunks_vocab WHERE term = ?1")?;
        let mut df = |t: &str| -> Result<u64, StoreError> {
            let d: Option<i64> = st.query_row([t], |r| r.get(0)).optional()?;
            Ok(d.map_or(0, |d| u64::try_from(d).unwrap_or(0)))
        };
        terms
            .iter()
            .map(|(w, s)| Ok(fts::idf(df(w)?.max(df(s)?), n)))
            .collect()
    }

    /// The text side of a hybrid search: the best `k` chunks by bm25 among those that
    /// contain more than [`HYBRID_MIN_COVERAGE`] of the query's words (as words or stems;
    /// stop words left out), like a search engine's "minimum should match", or one of its
    /// codes ([`fts::is_code`]: `QX7L9M`, `INV2093`). Rank fusion saw ranks, not how weak
    /// a match is: without this, a chunk sharing one name with a question in the other
    /// language outranked the vector side's answer just by being found twice (the default
    /// fusion weighs the words itself; the rule keeps the text side fast).
    ///
    /// The rule is an FTS5 expression ([`fts::min_should_match`]), so only those chunks
    /// are ranked; for a query of more than [`fts::MAX_MIN_SHOULD_MATCH_TERMS`] words the
    /// best `k` of all are filtered with [`fts::coverage`] instead.
    /// Only chunks of `period` count.
    pub fn hybrid_text_side(
        &self,
        query: &str,
        k: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        let terms = fts::query_terms(query);
        if let Some(m) = fts::min_should_match(&terms) {
            return self.search_fts(&m, k.min(MAX_K), period);
        }
        let mut text = self.search_text_in(query, k, period)?;
        text.retain(|h| {
            let (share, code) = fts::coverage(&terms, &h.content);
            share > HYBRID_MIN_COVERAGE || code
        });
        Ok(text)
    }
}

/// Fuses a hybrid search's text side and vector side (best first) with Reciprocal Rank
/// Fusion (k = 60, `weights` per side): the best `k`, scored by RRF, each marked with
/// the side(s) that found it.
pub(super) fn fuse_hits(text: Vec<Hit>, vecs: Vec<Hit>, k: usize, weights: Weights) -> Vec<Hit> {
    let ids = |h: &[Hit]| h.iter().map(|x| x.id).collect::<Vec<_>>();
    let fused = fuse::rrf(&ids(&text), &ids(&vecs), weights, fuse::RRF_K);
    in_fused_order(fused, text.into_iter().chain(vecs), k)
}

/// The best `k` of `fused`, each the hit of its id among `hits` with the fused score and
/// the sides that found it.
fn in_fused_order(
    fused: Vec<fuse::Fused<i64>>,
    hits: impl IntoIterator<Item = Hit>,
    k: usize,
) -> Vec<Hit> {
    let mut by_id: std::collections::HashMap<i64, Hit> =
        hits.into_iter().map(|h| (h.id, h)).collect();
    fused
        .into_iter()
        .take(k)
        .filter_map(|f| {
            by_id.remove(&f.id).map(|h| Hit {
                score: f.score,
                found_by: f.found_by,
                ..h
            })
        })
        .collect()
}

/// Little-endian `f32`s of a vector blob.
fn floats(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// A committed change to a chunk's vector, for the in-memory copy.
enum VecChange {
    /// Chunk `id` has this vector ([`vectors::quantize`]d).
    Set { id: i64, codes: Vec<i8>, scale: f32 },
    /// Chunk `id` has no vector any more.
    Deleted(i64),
}

/// Writes chunks' vectors to `chunks_vec` and their int8 codes to `chunks_codes`, or
/// deletes both, inside the caller's transaction, and remembers the changes for the
/// in-memory copy ([`MemoryStore::after_commit`]).
struct VecWriter<'t> {
    insert: rusqlite::Statement<'t>,
    delete: rusqlite::Statement<'t>,
    insert_codes: rusqlite::Statement<'t>,
    delete_codes: rusqlite::Statement<'t>,
    changes: Vec<VecChange>,
}

impl<'t> VecWriter<'t> {
    fn new(tx: &'t rusqlite::Transaction<'_>) -> Result<Self, StoreError> {
        Ok(VecWriter {
            insert: tx.prepare("INSERT INTO chunks_vec (rowid, embedding) VALUES (?1, ?2)")?,
            delete: tx.prepare("DELETE FROM chunks_vec WHERE rowid = ?1")?,
            insert_codes: tx
                .prepare("INSERT INTO chunks_codes (id, scale, codes) VALUES (?1, ?2, ?3)")?,
            delete_codes: tx.prepare("DELETE FROM chunks_codes WHERE id = ?1")?,
            changes: Vec::new(),
        })
    }

    /// `blob` is a normalised vector.
    fn insert(&mut self, id: i64, blob: &[u8]) -> Result<(), StoreError> {
        self.insert.execute(params![id, blob])?;
        let (codes, scale) = vectors::quantize(&floats(blob));
        self.insert_codes
            .execute(params![id, scale, codes_blob(&codes)])?;
        self.changes.push(VecChange::Set { id, codes, scale });
        Ok(())
    }

    fn delete(&mut self, id: i64) -> Result<(), StoreError> {
        self.delete.execute([id])?;
        self.delete_codes.execute([id])?;
        self.changes.push(VecChange::Deleted(id));
        Ok(())
    }
}

fn codes_blob(codes: &[i8]) -> Vec<u8> {
    codes.iter().map(|c| c.cast_unsigned()).collect()
}

/// Fills `chunks_codes` from the float vectors in `chunks_vec` (inside the caller's
/// transaction): for a database made before the codes, or codes out of step.
fn fill_codes(conn: &Connection) -> Result<(), StoreError> {
    let mut read = conn.prepare("SELECT rowid, embedding FROM chunks_vec")?;
    let mut write =
        conn.prepare("INSERT INTO chunks_codes (id, scale, codes) VALUES (?1, ?2, ?3)")?;
    let mut rows = read.query([])?;
    while let Some(row) = rows.next()? {
        let blob: Vec<u8> = row.get(1)?;
        let (codes, scale) = vectors::quantize(&floats(&blob));
        write.execute(params![row.get::<_, i64>(0)?, scale, codes_blob(&codes)])?;
    }
    Ok(())
}

fn hit(r: &rusqlite::Row<'_>, found_by: FoundBy) -> rusqlite::Result<Hit> {
    Ok(Hit {
        id: r.get(0)?,
        content: r.get(1)?,
        source: r.get(2)?,
        // SQLite has no date past year 9999: an empty date rather than a failed search
        date: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
        created_at: r.get(4)?,
        score: r.get(5)?,
        found_by,
    })
}

#[cfg(test)]
mod tests;
