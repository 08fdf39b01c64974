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
use super::fuse::{self, Candidate, Evidence, FoundBy, Fusion, Spaces, Weights};
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
    Extension(#[from] klaw_sqlite_vec::RegisterError),
    /// A chunk to store has vectors for another number of models than the store has
    /// vector spaces.
    #[error("a chunk has vectors of {got} models, the index has {expected} vector spaces")]
    WrongSpaces {
        /// The store's vector spaces.
        expected: usize,
        /// The chunk's vectors.
        got: usize,
    },
    /// The same model was asked for twice (one vector space per model).
    #[error("the model {0} is listed twice: one vector space per model")]
    SameModelTwice(String),
    /// PostgreSQL reported an error (the memory on `storage.url`).
    #[error("memory database (PostgreSQL) error: {0}")]
    Postgres(String),
    /// PostgreSQL ended a transaction for another's sake (a deadlock, a serialization
    /// failure: two engines importing overlapping files); running it again can succeed.
    #[error("memory database (PostgreSQL) conflict: {0}")]
    PostgresConflict(String),
    /// The PostgreSQL database of `storage.url` has no pgvector.
    #[error(
        "the PostgreSQL database has no vector extension (pgvector): install pgvector on the \
         server and run `CREATE EXTENSION vector;` in the database (as a user allowed to)"
    )]
    NoVectorExtension,
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
    /// Its embeddings by the other models of a store with several vector spaces, in
    /// their order (empty with one model).
    pub more_vectors: Vec<Vec<f32>>,
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

/// A stored chunk as `memory_get` reads it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredChunk {
    /// Its id.
    pub id: i64,
    /// Its text.
    pub content: String,
    /// Its source.
    pub source: String,
}

/// The memory database. See the module docs.
#[derive(Debug)]
pub struct MemoryStore {
    conn: Connection,
    /// One per model, in the order the models were given: the first is the one every
    /// call without a space number uses.
    spaces: Vec<Space>,
}

/// One model's vectors: a `vec0` table of the float vectors, a table of their int8
/// codes, and the codes' in-memory copy.
///
/// The first model a store was made with keeps its vectors in `chunks_vec` and
/// `chunks_codes` and its identity in the meta keys `fingerprint`, `dims` and
/// [`VECTORS_COMPLETE`] (as a store of one model always had). Every other model's space
/// is named after its model (`space_<h>_vec`, `space_<h>_codes`, the meta keys
/// `space:<h>` and `vectors_complete:<h>`, `h` a hash of the model; see [`space_hash`]),
/// so a model keeps its vectors whatever its place in the list.
#[derive(Debug)]
struct Space {
    /// The `vec0` table.
    vec_table: String,
    /// The int8 codes' table.
    codes_table: String,
    /// The meta key that says every chunk has a vector in this space.
    complete_key: String,
    dims: usize,
    /// The model as the space records it: `fingerprint (dims dims)`.
    model: String,
    /// The vectors' in-memory copy, loaded on the first vector search.
    cache: RefCell<Option<VectorCache>>,
}

impl Space {
    fn legacy(dims: usize, model: String) -> Self {
        Space {
            vec_table: "chunks_vec".into(),
            codes_table: "chunks_codes".into(),
            complete_key: VECTORS_COMPLETE.into(),
            dims,
            model,
            cache: RefCell::new(None),
        }
    }

    fn named(dims: usize, model: String) -> Self {
        let h = space_hash(&model);
        Space {
            vec_table: format!("space_{h}_vec"),
            codes_table: format!("space_{h}_codes"),
            complete_key: format!("{VECTORS_COMPLETE}:{h}"),
            dims,
            model,
            cache: RefCell::new(None),
        }
    }
}

/// What names a model's vector space other than the first: 16 hex digits of the
/// SHA-256 of `fingerprint (dims dims)`.
pub(super) fn space_hash(model: &str) -> String {
    Sha256::digest(model.as_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The hash of a named space's codes table (`space_<h>_codes`), `None` for another table.
fn space_of_table(name: &str) -> Option<&str> {
    let h = name.strip_prefix("space_")?.strip_suffix("_codes")?;
    (h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit())).then_some(h)
}

/// What opening a store of several models did to its vector spaces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpacesOpened {
    /// The models (`fingerprint (dims dims)`) whose vectors were dropped: no longer
    /// listed.
    pub dropped: Vec<String>,
    /// For each model asked for, in order: whether its space is new (or was emptied for
    /// it) and must be filled.
    pub new: Vec<bool>,
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

pub(super) fn normalised(v: &[f32], dims: usize) -> Result<Vec<u8>, StoreError> {
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

/// The most chunks a word may be found in for the text side's
/// [top-up](text_side_for) to search by it: its cost stays bounded whatever the store's
/// size (issue 49: the any-word search over every word of a question made of common
/// words ranked tens of thousands of chunks at 100k, 1.5 times the hybrid's p50), and a
/// word found in that many chunks lifts a turn little (its IDF is low).
pub(super) const TOP_UP_MAX_CHUNKS: u64 = 1_000;

/// The text side a hybrid search with `fusion` fuses: `most` (a
/// [`hybrid_text_side`](MemoryStore::hybrid_text_side), best first), and with a fusion
/// that [tops up](Fusion::with_top_up) (the default), when it holds fewer than `k`, topped
/// up to `k` by the chunks `any` finds (the any-word search of the query it is given,
/// best first) not among them. That query is the words of `query` found in at most
/// [`TOP_UP_MAX_CHUNKS`] chunks of `db` (none: no top-up). A turn that holds fewer than
/// half of a question's words (inflected otherwise, or a question with its own filler
/// words) is then still a candidate, and the lift weighs its words like any other's
/// (issue 49). [`Fusion::Rrf`] fuses ranks, not how weak a match is: it keeps `most`.
pub(super) fn text_side_for(
    db: &impl FuseSource,
    query: &str,
    fusion: Fusion,
    mut most: Vec<Hit>,
    k: usize,
    any: impl FnOnce(&str) -> Result<Vec<Hit>, StoreError>,
) -> Result<Vec<Hit>, StoreError> {
    if !fusion.tops_up() || most.len() >= k {
        return Ok(most);
    }
    let terms = fts::query_terms(query);
    let (dfs, _) = db.doc_freqs_of(&terms)?;
    let rare: Vec<&str> = terms
        .iter()
        .zip(dfs)
        .filter(|(_, df)| *df <= TOP_UP_MAX_CHUNKS)
        .map(|((w, _), _)| w.as_str())
        .collect();
    if rare.is_empty() {
        return Ok(most);
    }
    let seen: std::collections::HashSet<i64> = most.iter().map(|h| h.id).collect();
    let room = k - most.len();
    most.extend(
        any(&rare.join(" "))?
            .into_iter()
            .filter(|h| !seen.contains(&h.id))
            .take(room),
    );
    Ok(most)
}
// `fts::min_should_match` asks for more than half of the words: the same rule.
const _: () = assert!(HYBRID_MIN_COVERAGE == 0.5);

/// The meta key that says every chunk has a vector of the model it names (the value:
/// `fingerprint (dims dims)`), so opening need not look for chunks without one (a scan of
/// every chunk, 160 ms at 100k). Any other value, or none (a store made before the key),
/// means "maybe some are missing": re-embedding for another model removes it in the
/// transaction that drops the vectors, and [`MemoryStore::finish_vectors`] writes it in
/// the transaction of the last vectors; a process that dies in between leaves it
/// missing, and the next open completes the work.
pub(super) const VECTORS_COMPLETE: &str = "vectors_complete";

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
        Ok(Self::open_models(path, &[(dims, fingerprint)], false)?.0)
    }

    /// Opens the database for a new model: when the fingerprint or the dimensions differ,
    /// drops every vector and records the new model, keeping the chunks. The caller then
    /// embeds [`MemoryStore::chunks_without_vectors`] and stores them with
    /// [`MemoryStore::set_vectors`].
    pub fn open_reembed(path: &Path, dims: usize, fingerprint: &str) -> Result<Self, StoreError> {
        Ok(Self::open_models(path, &[(dims, fingerprint)], true)?.0)
    }

    /// Opens (or creates) the database for several models, `(dims, fingerprint)` each,
    /// one vector space per model (see [`Space`]): space `i` holds model `i`'s vectors.
    /// A model that has a space keeps it, wherever it is in the list; a model without
    /// one gets a new, empty space (to be filled: [`SpacesOpened::new`]); a space whose
    /// model is not listed is dropped, but only with `reembed` (without, that is a
    /// [`StoreError::FingerprintMismatch`], as [`open`](Self::open) gives).
    pub fn open_models(
        path: &Path,
        models: &[(usize, &str)],
        reembed: bool,
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
        klaw_sqlite_vec::register()?;
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // Full-text search and loading the vectors' in-memory copy read many pages:
        // through a memory map instead of a `read` per page (the file's pages are the OS
        // page cache's, shared, not this process's heap).
        conn.pragma_update(None, "mmap_size", MMAP_BYTES)?;
        let (spaces, opened) = init(&conn, &wanted, reembed)?;
        // the index's document frequencies, for the IDF of hybrid search's text evidence
        // (a temporary table: nothing is written to the file)
        conn.execute_batch(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_vocab
                 USING fts5vocab(main, chunks_fts, row);",
        )?;
        Ok((MemoryStore { conn, spaces }, opened))
    }

    /// How many vector spaces (models) the store has.
    pub fn spaces(&self) -> usize {
        self.spaces.len()
    }

    /// The first space (every call without a space number).
    fn first(&self) -> &Space {
        &self.spaces[0]
    }

    /// Space `i`; the first if there is none (callers pass their own model's number).
    fn space(&self, i: usize) -> &Space {
        self.spaces.get(i).unwrap_or(&self.spaces[0])
    }

    /// The vectors' dimensions (of the first space).
    pub fn dims(&self) -> usize {
        self.first().dims
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
        // per chunk, its vector in each space
        let vectors = chunks
            .iter()
            .map(|c| {
                if c.more_vectors.len() + 1 != self.spaces.len() {
                    return Err(StoreError::WrongSpaces {
                        expected: self.spaces.len(),
                        got: c.more_vectors.len() + 1,
                    });
                }
                std::iter::once(&c.vector)
                    .chain(&c.more_vectors)
                    .zip(&self.spaces)
                    .map(|(v, s)| normalised(v, s.dims))
                    .collect::<Result<Vec<_>, _>>()
            })
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
            let mut vec = VecWriters::new(&tx, &self.spaces)?;
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
            vec.changes()
        };
        tx.commit()?;
        self.after_commit_all(changes);
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
            let mut vec = VecWriters::new(&tx, &self.spaces)?;
            let mut chunk = tx.prepare("DELETE FROM chunks WHERE id = ?1")?;
            for id in &ids {
                fts.execute([id])?;
                vec.delete(*id)?;
                chunk.execute([id])?;
            }
            vec.changes()
        };
        tx.commit()?;
        self.after_commit_all(changes);
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
        self.vectors_pending_in(0)
    }

    /// [`vectors_pending`](Self::vectors_pending) of space `space`.
    pub fn vectors_pending_in(&self, space: usize) -> Result<bool, StoreError> {
        let s = self.space(space);
        Ok(self.meta(&s.complete_key)?.as_deref() != Some(s.model.as_str()))
    }

    /// Chunks that have no vector (after [`MemoryStore::open_reembed`]), as `(id, text to
    /// embed)` ([`embed_text`]: the content, after its context if it has one). Reads
    /// every chunk: ask [`vectors_pending`](Self::vectors_pending) first.
    pub fn chunks_without_vectors(&self) -> Result<Vec<(i64, String)>, StoreError> {
        self.chunks_without_vectors_in(0)
    }

    /// [`chunks_without_vectors`](Self::chunks_without_vectors) in space `space`.
    pub fn chunks_without_vectors_in(
        &self,
        space: usize,
    ) -> Result<Vec<(i64, String)>, StoreError> {
        let mut st = self.conn.prepare(&format!(
            "SELECT id, content, context FROM chunks
             WHERE id NOT IN (SELECT rowid FROM {}) ORDER BY id",
            self.space(space).vec_table
        ))?;
        let rows = st.query_map([], |r| {
            let (content, context): (String, Option<String>) = (r.get(1)?, r.get(2)?);
            Ok((r.get(0)?, embed_text(&content, context.as_deref())))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Stores vectors for existing chunks, `(id, vector)`, in one transaction.
    pub fn set_vectors(&mut self, vectors: &[(i64, Vec<f32>)]) -> Result<(), StoreError> {
        self.write_vectors(0, vectors, false)
    }

    /// [`set_vectors`](Self::set_vectors) in space `space`.
    pub fn set_vectors_in(
        &mut self,
        space: usize,
        vectors: &[(i64, Vec<f32>)],
    ) -> Result<(), StoreError> {
        self.write_vectors(space, vectors, false)
    }

    /// [`set_vectors`](Self::set_vectors) for the last of the chunks without a vector
    /// (or none), recording in the same transaction that every chunk has one: the next
    /// open skips [`chunks_without_vectors`](Self::chunks_without_vectors).
    pub fn finish_vectors(&mut self, vectors: &[(i64, Vec<f32>)]) -> Result<(), StoreError> {
        self.write_vectors(0, vectors, true)
    }

    /// [`finish_vectors`](Self::finish_vectors) in space `space`.
    pub fn finish_vectors_in(
        &mut self,
        space: usize,
        vectors: &[(i64, Vec<f32>)],
    ) -> Result<(), StoreError> {
        self.write_vectors(space, vectors, true)
    }

    fn write_vectors(
        &mut self,
        space: usize,
        vectors: &[(i64, Vec<f32>)],
        finish: bool,
    ) -> Result<(), StoreError> {
        let space = space.min(self.spaces.len() - 1);
        let s = &self.spaces[space];
        let blobs = vectors
            .iter()
            .map(|(id, v)| Ok((*id, normalised(v, s.dims)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let tx = self.conn.transaction()?;
        let changes = {
            let mut vec = VecWriter::new(&tx, s)?;
            for (id, blob) in &blobs {
                vec.delete(*id)?;
                vec.insert(*id, blob)?;
            }
            vec.changes
        };
        if finish && read_meta(&tx, &s.complete_key)?.as_deref() != Some(s.model.as_str()) {
            tx.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
                params![s.complete_key, s.model],
            )?;
        }
        tx.commit()?;
        self.after_commit(space, changes);
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
        self.search_space(0, vector, k, period)
    }

    /// [`search_vector_in`](Self::search_vector_in) in space `space`, with that space's
    /// model's query vector.
    pub fn search_space(
        &self,
        space: usize,
        vector: &[f32],
        k: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        let wanted = k.saturating_mul(RESCORE_FACTOR).max(MIN_RESCORED);
        self.search_vector_rescoring(self.space(space), vector, k, wanted, period)
    }

    /// The vector side of a hybrid search proposing `depth` candidates (at least the `k`
    /// asked for): the `depth` nearest by the in-memory codes, re-scored with their float
    /// vectors (at least [`MIN_RESCORED`]). The pool is ranked again by the fusion, so
    /// re-scoring `4 × depth`, or `4 × k` as [`search_vector_in`](Self::search_vector_in)
    /// does, would buy little for its cost: each float vector is read from `vec0`, whose
    /// chunk of vectors is one long blob walked page by page to the vector (issue 32:
    /// with `4 × k`, topK 50 read 200 where topK 10 read 50, and most of the extra time
    /// went there). In space `space`.
    pub(super) fn vector_pool(
        &self,
        space: usize,
        vector: &[f32],
        k: usize,
        depth: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        let pool = depth.max(k);
        self.search_vector_rescoring(
            self.space(space),
            vector,
            pool,
            pool.max(MIN_RESCORED),
            period,
        )
    }

    /// The best `k` of the `wanted` nearest by the in-memory codes of `space`, re-scored
    /// exactly.
    fn search_vector_rescoring(
        &self,
        space: &Space,
        vector: &[f32],
        k: usize,
        wanted: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        let blob = normalised(vector, space.dims)?;
        let k = k.min(MAX_K);
        if k == 0 {
            return Ok(Vec::new());
        }
        let query = floats(&blob);
        let candidates = if period.is_all() {
            self.with_cache(space, |c| c.candidates(&query, wanted))?
        } else {
            let (from, to) = period.bounds();
            let mut st = self.conn.prepare_cached(
                "SELECT id FROM chunks WHERE created_at >= ?1 AND created_at < ?2",
            )?;
            let ids: std::collections::HashSet<i64> = st
                .query_map(params![from, to], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            let keep = |id: i64| ids.contains(&id);
            self.with_cache(space, |c| c.candidates_among(&query, wanted, Some(&keep)))?
        };
        let mut scored: Vec<(f64, i64)> = Vec::with_capacity(candidates.len());
        {
            let mut get = self.conn.prepare_cached(&format!(
                "SELECT embedding FROM {} WHERE rowid = ?1",
                space.vec_table
            ))?;
            for id in candidates {
                let stored: Option<Vec<u8>> = get.query_row([id], |r| r.get(0)).optional()?;
                if let Some(stored) = stored {
                    scored.push((dot(&floats(&stored), &query), id));
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

    /// The cosine of each of `ids` to `query` (normalised) in `space`: 0 for a chunk
    /// without a vector there (yet).
    fn cosines(&self, space: &Space, query: &[f32], ids: &[i64]) -> Result<Vec<f64>, StoreError> {
        let mut get = self.conn.prepare_cached(&format!(
            "SELECT embedding FROM {} WHERE rowid = ?1",
            space.vec_table
        ))?;
        ids.iter()
            .map(|id| {
                let stored: Option<Vec<u8>> = get.query_row([id], |r| r.get(0)).optional()?;
                Ok(stored.map_or(0.0, |b| dot(&floats(&b), query)))
            })
            .collect()
    }

    /// Runs `f` on the in-memory copy of `space`'s vectors, loading it first if there is
    /// none or another connection has committed a change since it was loaded.
    fn with_cache<T>(
        &self,
        space: &Space,
        f: impl FnOnce(&mut VectorCache) -> T,
    ) -> Result<T, StoreError> {
        let version: i64 = self
            .conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))?;
        let mut slot = space.cache.borrow_mut();
        let cache = match slot.take() {
            Some(c) if c.version() == version => slot.insert(c),
            _ => slot.insert(self.load_cache(space, version)?),
        };
        Ok(f(cache))
    }

    /// Reads the in-memory copy from the space's codes. Codes out of step with the chunks
    /// (written by a binary that did not know them, or by hand) are made again from the
    /// float vectors first.
    fn load_cache(&self, space: &Space, version: i64) -> Result<VectorCache, StoreError> {
        let chunks: i64 = self
            .conn
            .query_row("SELECT count(*) FROM chunks", [], |r| r.get(0))?;
        if let Some(cache) = self.read_codes(space, version)?
            && i64::try_from(cache.len()) == Ok(chunks)
        {
            return Ok(cache);
        }
        tracing::info!(
            "the memory index's int8 codes are out of step with its vectors: making them again"
        );
        let tx = self.conn.unchecked_transaction()?;
        tx.execute(&format!("DELETE FROM {}", space.codes_table), [])?;
        fill_codes(&tx, space)?;
        tx.commit()?;
        Ok(self
            .read_codes(space, version)?
            .unwrap_or_else(|| VectorCache::new(space.dims, version)))
    }

    /// The space's codes as an in-memory copy; `None` if a row has the wrong length.
    fn read_codes(&self, space: &Space, version: i64) -> Result<Option<VectorCache>, StoreError> {
        let mut cache = VectorCache::new(space.dims, version);
        let mut st = self.conn.prepare(&format!(
            "SELECT id, scale, codes FROM {}",
            space.codes_table
        ))?;
        let mut rows = st.query([])?;
        while let Some(row) = rows.next()? {
            let blob: Vec<u8> = row.get(2)?;
            if blob.len() != space.dims {
                return Ok(None);
            }
            let codes = blob.into_iter().map(u8::cast_signed).collect();
            cache.insert_codes(row.get(0)?, codes, row.get(1)?);
        }
        tracing::debug!(vectors = cache.len(), "memory vectors loaded");
        Ok(Some(cache))
    }

    /// Applies committed vector changes of space `space` to its in-memory copy, if loaded
    /// (this connection's commits do not change `PRAGMA data_version`).
    fn after_commit(&self, space: usize, changes: Vec<VecChange>) {
        if let Some(cache) = self.space(space).cache.borrow_mut().as_mut() {
            for change in changes {
                match change {
                    VecChange::Set { id, codes, scale } => cache.insert_codes(id, codes, scale),
                    VecChange::Deleted(id) => cache.remove(id),
                }
            }
        }
    }

    /// [`after_commit`](Self::after_commit) of every space's changes, in order.
    fn after_commit_all(&self, changes: Vec<Vec<VecChange>>) {
        for (space, changes) in changes.into_iter().enumerate() {
            self.after_commit(space, changes);
        }
    }

    /// Vector search over every float vector (sqlite-vec's brute-force scan): the exact
    /// `k` nearest, which [`search_vector`](Self::search_vector) approximates on a big
    /// store. For comparison and tests.
    pub fn search_vector_exact(&self, vector: &[f32], k: usize) -> Result<Vec<Hit>, StoreError> {
        let blob = normalised(vector, self.dims())?;
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
        let most = self.hybrid_text_side(query, depth, Period::default())?;
        let text = text_side_for(self, query, Fusion::DEFAULT, most, depth, |q| {
            self.search_text_in(q, depth, Period::default())
        })?;
        let vecs = self.vector_pool(0, vector, k, depth, Period::default())?;
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
        let side = SpaceSide {
            space: 0,
            vector: vector.to_vec(),
            vecs,
            fusion,
        };
        self.fuse_spaces(query, text, vec![side], k, weights, Spaces::DEFAULT)
    }

    /// [`fuse`](Self::fuse) with a vector side per space (the first space's first): each
    /// space scores every candidate of every side with its own cosines and fusion, and
    /// `spaces` adds the spaces' scores up. With one space, that space's fusion alone.
    /// [`Fusion::Rrf`] in the first space fuses the text side with the first space's
    /// vector side only.
    pub(super) fn fuse_spaces(
        &self,
        query: &str,
        text: Vec<Hit>,
        sides: Vec<SpaceSide>,
        k: usize,
        weights: Weights,
        spaces: Spaces,
    ) -> Result<Vec<Hit>, StoreError> {
        fuse_sides(self, query, text, sides, k, weights, spaces)
    }

    /// How many chunks hold each of `terms` (its word or its stem, the larger count of
    /// the two), and how many chunks there are.
    fn doc_freqs(&self, terms: &[(String, String)]) -> Result<(Vec<u64>, u64), StoreError> {
        if terms.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let n = self.with_cache(self.first(), |c| c.len())? as u64;
        let mut st = self
            .conn
            .prepare_cached("SELECT doc FROM temp.chunks_vocab WHERE term = ?1")?;
        let mut df = |t: &str| -> Result<u64, StoreError> {
            let d: Option<i64> = st.query_row([t], |r| r.get(0)).optional()?;
            Ok(d.map_or(0, |d| u64::try_from(d).unwrap_or(0)))
        };
        let dfs = terms
            .iter()
            .map(|(w, s)| Ok(df(w)?.max(df(s)?)))
            .collect::<Result<_, StoreError>>()?;
        Ok((dfs, n))
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

    /// The chunks whose source is `source` (`prefix` false) or begins with `source#`
    /// (`prefix` true: a conversation's turns, a file's sections), in the order they
    /// were stored: by time, then by id (`memory_get`).
    pub(crate) fn chunks_of(
        &self,
        source: &str,
        prefix: bool,
    ) -> Result<Vec<StoredChunk>, StoreError> {
        let (sql, key) = if prefix {
            (
                "SELECT id, content, source FROM chunks
                 WHERE substr(source, 1, length(?1)) = ?1 ORDER BY created_at, id",
                format!("{source}#"),
            )
        } else {
            (
                "SELECT id, content, source FROM chunks WHERE source = ?1 ORDER BY id",
                source.to_owned(),
            )
        };
        let mut st = self.conn.prepare(sql)?;
        let rows = st.query_map([key], |r| {
            Ok(StoredChunk {
                id: r.get(0)?,
                content: r.get(1)?,
                source: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The source of the chunk `id`, if it is stored.
    pub(crate) fn source_of(&self, id: i64) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT source FROM chunks WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()?)
    }

    /// Every distinct source stored (for "did you mean").
    pub(crate) fn sources(&self) -> Result<Vec<String>, StoreError> {
        let mut st = self.conn.prepare("SELECT DISTINCT source FROM chunks")?;
        let rows = st.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// Makes the tables a store needs and gives each of `wanted` (`(dims, fingerprint (dims
/// dims))`) its vector space, in one transaction (see [`MemoryStore::open_models`]).
fn init(
    conn: &Connection,
    wanted: &[(usize, String)],
    reembed: bool,
) -> Result<(Vec<Space>, SpacesOpened), StoreError> {
    // Immediate: opening may write (a new table, the context column, another model),
    // and two processes opening one database must not both read then try to write.
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
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
    let mismatch = |stored: &str| StoreError::FingerprintMismatch {
        stored: stored.to_owned(),
        requested: wanted
            .iter()
            .map(|(_, m)| m.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    };
    let mut opened = SpacesOpened {
        dropped: Vec::new(),
        new: vec![false; wanted.len()],
    };
    // The first space (`chunks_vec`): whose it is, and dropped if its model is not wanted.
    let legacy = read_meta(&tx, "fingerprint")?.map(|fp| {
        let dims = read_meta(&tx, "dims").ok().flatten().unwrap_or_default();
        format!("{fp} ({dims} dims)")
    });
    let mut legacy_owner = legacy
        .as_ref()
        .and_then(|m| wanted.iter().position(|(_, w)| w == m));
    if let (Some(stored), None) = (&legacy, legacy_owner) {
        if !reembed {
            return Err(mismatch(stored));
        }
        // the flag goes with the vectors: a process that dies before every chunk has
        // its new vector leaves the work to the next open
        tx.execute(
            "DELETE FROM meta WHERE key IN (?1, 'fingerprint', 'dims')",
            [VECTORS_COMPLETE],
        )?;
        tx.execute_batch("DROP TABLE IF EXISTS chunks_vec; DROP TABLE IF EXISTS chunks_codes;")?;
        opened.dropped.push(stored.clone());
    }
    // The named spaces: kept if their model is wanted (and not in the first space).
    let named: Vec<String> = {
        let mut st = tx.prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB 'space_*_codes'",
        )?;
        let names = st.query_map([], |r| r.get::<_, String>(0))?;
        names
            .collect::<Result<Vec<_>, _>>()?
            .iter()
            .filter_map(|n| space_of_table(n).map(str::to_owned))
            .collect()
    };
    let mut kept: Vec<String> = Vec::new();
    for h in named {
        let owner = wanted
            .iter()
            .position(|(_, m)| space_hash(m) == h)
            .filter(|i| Some(*i) != legacy_owner);
        if owner.is_some() {
            kept.push(h);
            continue;
        }
        let model = read_meta(&tx, &format!("space:{h}"))?.unwrap_or_else(|| h.clone());
        if !reembed {
            return Err(mismatch(&model));
        }
        tx.execute(
            "DELETE FROM meta WHERE key IN (?1, ?2)",
            params![format!("space:{h}"), format!("{VECTORS_COMPLETE}:{h}")],
        )?;
        tx.execute_batch(&format!(
            "DROP TABLE IF EXISTS space_{h}_vec; DROP TABLE IF EXISTS space_{h}_codes;"
        ))?;
        opened.dropped.push(model);
    }
    let mut spaces = Vec::with_capacity(wanted.len());
    for (i, (dims, model)) in wanted.iter().enumerate() {
        let h = space_hash(model);
        let space = if legacy_owner == Some(i) {
            Space::legacy(*dims, model.clone())
        } else if kept.contains(&h) {
            Space::named(*dims, model.clone())
        } else if legacy_owner.is_none() {
            // the first space is free (a new store, or its model is gone): this model's
            legacy_owner = Some(i);
            opened.new[i] = true;
            let fp = model.rsplit_once(" (").map_or(model.as_str(), |(fp, _)| fp);
            // only when it changes: every commit makes other processes reload their
            // copy of the vectors (`PRAGMA data_version`)
            tx.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('fingerprint', ?1), ('dims', ?2)",
                params![fp, dims.to_string()],
            )?;
            Space::legacy(*dims, model.clone())
        } else {
            opened.new[i] = true;
            tx.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
                params![format!("space:{h}"), model],
            )?;
            Space::named(*dims, model.clone())
        };
        tx.execute_batch(&format!(
            "CREATE VIRTUAL TABLE IF NOT EXISTS {} USING vec0(
                 embedding float[{dims}] distance_metric=l2
             );",
            space.vec_table
        ))?;
        let had_codes: bool = tx.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [&space.codes_table],
            |r| r.get::<_, i64>(0).map(|n| n > 0),
        )?;
        if !had_codes {
            // New, or made before the codes existed: quantise the vectors there are.
            tx.execute_batch(&format!(
                "CREATE TABLE {} (
                     id INTEGER PRIMARY KEY, scale REAL NOT NULL, codes BLOB NOT NULL
                 );",
                space.codes_table
            ))?;
            fill_codes(&tx, &space)?;
        }
        spaces.push(space);
    }
    tx.commit()?;
    Ok((spaces, opened))
}

/// What fusing a hybrid search's sides needs of a store: its spaces' dimensions, the IDF
/// of the query's terms, and the cosines of chunks the vector side did not propose. The
/// SQLite store and the PostgreSQL one (`pg.rs`) fuse with the same code.
pub(super) trait FuseSource {
    /// The dimensions of space `space`.
    fn space_dims(&self, space: usize) -> usize;
    /// How many chunks hold each of `terms` (word, stem): a term's chunks are those with
    /// its word or its stem (the larger count of the two); and how many chunks there are.
    fn doc_freqs_of(&self, terms: &[(String, String)]) -> Result<(Vec<u64>, u64), StoreError>;
    /// The [IDF](fts::idf) of each of `terms`, from [`doc_freqs_of`](Self::doc_freqs_of).
    fn idf_of(&self, terms: &[(String, String)]) -> Result<Vec<f64>, StoreError> {
        let (dfs, n) = self.doc_freqs_of(terms)?;
        Ok(dfs.into_iter().map(|df| fts::idf(df, n)).collect())
    }
    /// The cosine of each of `ids` to `query` (normalised) in space `space`: 0 for a
    /// chunk without a vector there (yet).
    fn cosines_in(&self, space: usize, query: &[f32], ids: &[i64]) -> Result<Vec<f64>, StoreError>;
    /// The `k` nearest chunks of `period` to `vector` in space `space`, best first.
    fn nearest_in(
        &self,
        space: usize,
        vector: &[f32],
        k: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError>;
}

/// Vector search over every space of `db`, `vectors[i]` the query's vector by space `i`'s
/// model: each space proposes its nearest (as [`FuseSource::nearest_in`]), and every chunk
/// proposed is scored by the sum of its cosines in all the spaces.
pub(super) fn search_vector_spaces(
    db: &impl FuseSource,
    vectors: &[Vec<f32>],
    k: usize,
    period: Period,
) -> Result<Vec<Hit>, StoreError> {
    let mut hits: Vec<Hit> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (space, v) in vectors.iter().enumerate() {
        for h in db.nearest_in(space, v, k, period)? {
            if seen.insert(h.id) {
                hits.push(h);
            }
        }
    }
    let ids: Vec<i64> = hits.iter().map(|h| h.id).collect();
    let mut total = vec![0.0; ids.len()];
    for (space, v) in vectors.iter().enumerate() {
        let query = floats(&normalised(v, db.space_dims(space))?);
        for (t, c) in total.iter_mut().zip(db.cosines_in(space, &query, &ids)?) {
            *t += c;
        }
    }
    let mut fused: Vec<fuse::Fused<i64>> = ids
        .iter()
        .zip(total)
        .map(|(id, score)| fuse::Fused {
            id: *id,
            score,
            found_by: FoundBy::Vector,
        })
        .collect();
    fused.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
    Ok(in_fused_order(fused, hits, k))
}

impl FuseSource for MemoryStore {
    fn space_dims(&self, space: usize) -> usize {
        self.space(space).dims
    }

    fn doc_freqs_of(&self, terms: &[(String, String)]) -> Result<(Vec<u64>, u64), StoreError> {
        self.doc_freqs(terms)
    }

    fn cosines_in(&self, space: usize, query: &[f32], ids: &[i64]) -> Result<Vec<f64>, StoreError> {
        self.cosines(self.space(space), query, ids)
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

/// [`MemoryStore::fuse_spaces`] on any [`FuseSource`].
pub(super) fn fuse_sides(
    db: &impl FuseSource,
    query: &str,
    text: Vec<Hit>,
    sides: Vec<SpaceSide>,
    k: usize,
    weights: Weights,
    spaces: Spaces,
) -> Result<Vec<Hit>, StoreError> {
    let Some(first) = sides.first() else {
        return Ok(text.into_iter().take(k).collect());
    };
    if first.fusion == Fusion::Rrf {
        let vecs = sides.into_iter().next().map(|s| s.vecs).unwrap_or_default();
        return Ok(fuse_hits(text, vecs, k, weights));
    }
    let script = fts::mostly_cyrillic(query);
    let foreign = |h: &Hit| {
        let s = fts::mostly_cyrillic(&h.content);
        s.is_some() && s != script
    };
    // across languages by the first space's meaning: its best chunk is in another
    // script than the query
    let across = script.is_some() && first.vecs.first().is_some_and(foreign);
    let bm25: std::collections::HashMap<i64, f64> = text.iter().map(|h| (h.id, h.score)).collect();
    let best_bm25 = text.iter().map(|h| h.score).fold(0.0_f64, f64::max);
    let in_vec: std::collections::HashSet<i64> = sides
        .iter()
        .flat_map(|s| s.vecs.iter().map(|h| h.id))
        .collect();
    // every side's candidates, the first space's vector side first
    let mut hits: Vec<Hit> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for h in sides
        .iter()
        .flat_map(|s| s.vecs.iter().cloned())
        .chain(text)
    {
        if seen.insert(h.id) {
            hits.push(h);
        }
    }
    let ids: Vec<i64> = hits.iter().map(|h| h.id).collect();
    let found_by: Vec<FoundBy> = ids
        .iter()
        .map(|id| match (bm25.contains_key(id), in_vec.contains(id)) {
            (true, true) => FoundBy::Both,
            (true, false) => FoundBy::Text,
            _ => FoundBy::Vector,
        })
        .collect();
    let is_foreign: Vec<bool> = hits.iter().map(foreign).collect();
    let terms = fts::query_terms(query);
    let idf = db.idf_of(&terms)?;
    let mut total: std::collections::HashMap<i64, f64> = std::collections::HashMap::new();
    for (n, side) in sides.iter().enumerate() {
        let Fusion::Lift {
            evidence,
            lift,
            stretch,
            bm25: bm25_part,
            spread,
            ..
        } = side.fusion
        else {
            continue;
        };
        let bm25_part = bm25_part.clamp(0.0, 1.0);
        let query_vector = floats(&normalised(&side.vector, db.space_dims(side.space))?);
        let own: std::collections::HashMap<i64, f64> =
            side.vecs.iter().map(|h| (h.id, h.score)).collect();
        let missing: Vec<i64> = ids
            .iter()
            .copied()
            .filter(|id| !own.contains_key(id))
            .collect();
        let looked_up: std::collections::HashMap<i64, f64> = missing
            .iter()
            .copied()
            .zip(db.cosines_in(side.space, &query_vector, &missing)?)
            .collect();
        let mut candidates: Vec<Candidate<i64>> = Vec::with_capacity(hits.len());
        for (i, h) in hits.iter().enumerate() {
            let cosine = own
                .get(&h.id)
                .or_else(|| looked_up.get(&h.id))
                .copied()
                .unwrap_or(0.0)
                + if n > 0 && is_foreign[i] {
                    spaces.across_gap
                } else {
                    0.0
                };
            let text_score = bm25.get(&h.id).copied();
            let evidence = match evidence {
                Evidence::Bm25 => {
                    text_score.map_or(0.0, |s| if best_bm25 > 0.0 { s / best_bm25 } else { 0.0 })
                }
                Evidence::Idf
                | Evidence::IdfNeutral(_)
                | Evidence::IdfAcross(_)
                | Evidence::IdfGraded(_) => {
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
                // found by the text side or another space only: not this space's
                // vector side (for the spread of its cosines)
                found_by: if own.contains_key(&h.id) {
                    found_by[i]
                } else {
                    FoundBy::Text
                },
            });
        }
        // the space's own vector side's best decides whether its meaning points
        // across languages
        let neutral = match evidence {
            Evidence::IdfNeutral(level) => Some(level),
            Evidence::IdfAcross(level) | Evidence::IdfGraded(level)
                if side.vecs.first().is_some_and(foreign) =>
            {
                Some(level)
            }
            _ => None,
        };
        let graded = matches!(evidence, Evidence::IdfGraded(_));
        let (top, low) = (
            side.vecs.first().map_or(0.0, |h| h.score),
            side.vecs.last().map_or(0.0, |h| h.score),
        );
        if let Some(level) = neutral
            && script.is_some()
        {
            // the text side cannot judge a chunk in another script: it gets the best
            // evidence of the query's script, so the cosine alone ranks it against
            // those
            let best = candidates
                .iter()
                .zip(&is_foreign)
                .filter(|(_, f)| !**f)
                .map(|(c, _)| c.evidence)
                .fold(0.0_f64, f64::max)
                * level;
            for (c, f) in candidates.iter_mut().zip(&is_foreign) {
                if *f {
                    c.evidence = if !graded {
                        best
                    } else if top > low {
                        let place = ((c.cosine - low) / (top - low)).clamp(0.0, 1.0);
                        c.evidence.max(best * place.sqrt())
                    } else {
                        c.evidence.max(best)
                    };
                }
            }
        }
        let weight = spaces.weight(n, across);
        let scored = fuse::lift(&candidates, weights, lift, stretch, spread);
        let floor = match scored.first() {
            Some(best) if n > 0 && spaces.cap > 0.0 => best.score - spaces.cap,
            _ => f64::NEG_INFINITY,
        };
        for f in scored {
            *total.entry(f.id).or_default() += weight * f.score.max(floor);
        }
    }
    let mut fused: Vec<fuse::Fused<i64>> = ids
        .iter()
        .zip(&found_by)
        .map(|(id, found_by)| fuse::Fused {
            id: *id,
            score: total.get(id).copied().unwrap_or(0.0),
            found_by: *found_by,
        })
        .collect();
    fused.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
    Ok(in_fused_order(fused, hits, k))
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

/// The dot product of two vectors (the cosine of unit vectors).
fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(a, b)| f64::from(*a) * f64::from(*b))
        .sum()
}

/// One space's vector side of a hybrid search, for [`MemoryStore::fuse_spaces`].
#[derive(Debug, Clone)]
pub(super) struct SpaceSide {
    /// The space.
    pub(super) space: usize,
    /// The query's vector by the space's model.
    pub(super) vector: Vec<f32>,
    /// The space's vector side, best first.
    pub(super) vecs: Vec<Hit>,
    /// How the space fuses its cosines with the text evidence (its model's lift).
    pub(super) fusion: Fusion,
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

/// Writes chunks' vectors to a space's `vec0` table and their int8 codes to its codes
/// table, or deletes both, inside the caller's transaction, and remembers the changes for
/// the in-memory copy ([`MemoryStore::after_commit`]).
struct VecWriter<'t> {
    insert: rusqlite::Statement<'t>,
    delete: rusqlite::Statement<'t>,
    insert_codes: rusqlite::Statement<'t>,
    delete_codes: rusqlite::Statement<'t>,
    changes: Vec<VecChange>,
}

impl<'t> VecWriter<'t> {
    fn new(tx: &'t rusqlite::Transaction<'_>, space: &Space) -> Result<Self, StoreError> {
        let (v, c) = (&space.vec_table, &space.codes_table);
        Ok(VecWriter {
            insert: tx.prepare(&format!(
                "INSERT INTO {v} (rowid, embedding) VALUES (?1, ?2)"
            ))?,
            delete: tx.prepare(&format!("DELETE FROM {v} WHERE rowid = ?1"))?,
            insert_codes: tx.prepare(&format!(
                "INSERT INTO {c} (id, scale, codes) VALUES (?1, ?2, ?3)"
            ))?,
            delete_codes: tx.prepare(&format!("DELETE FROM {c} WHERE id = ?1"))?,
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

/// A [`VecWriter`] per space: a chunk's vectors are written to every space, or deleted
/// from every space, together.
struct VecWriters<'t>(Vec<VecWriter<'t>>);

impl<'t> VecWriters<'t> {
    fn new(tx: &'t rusqlite::Transaction<'_>, spaces: &[Space]) -> Result<Self, StoreError> {
        Ok(VecWriters(
            spaces
                .iter()
                .map(|s| VecWriter::new(tx, s))
                .collect::<Result<_, _>>()?,
        ))
    }

    /// `blobs`: the chunk's normalised vector in each space, in order.
    fn insert(&mut self, id: i64, blobs: &[Vec<u8>]) -> Result<(), StoreError> {
        for (w, blob) in self.0.iter_mut().zip(blobs) {
            w.insert(id, blob)?;
        }
        Ok(())
    }

    fn delete(&mut self, id: i64) -> Result<(), StoreError> {
        for w in &mut self.0 {
            w.delete(id)?;
        }
        Ok(())
    }

    /// Each space's changes, in order.
    fn changes(self) -> Vec<Vec<VecChange>> {
        self.0.into_iter().map(|w| w.changes).collect()
    }
}

fn codes_blob(codes: &[i8]) -> Vec<u8> {
    codes.iter().map(|c| c.cast_unsigned()).collect()
}

/// Fills a space's codes table from the float vectors in its `vec0` table (inside the
/// caller's transaction): for a database made before the codes, or codes out of step.
fn fill_codes(conn: &Connection, space: &Space) -> Result<(), StoreError> {
    let mut read = conn.prepare(&format!("SELECT rowid, embedding FROM {}", space.vec_table))?;
    let mut write = conn.prepare(&format!(
        "INSERT INTO {} (id, scale, codes) VALUES (?1, ?2, ?3)",
        space.codes_table
    ))?;
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
