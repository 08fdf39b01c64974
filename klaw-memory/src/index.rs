//! A searchable index: the store with the [`Embedder`] that fills it, and the
//! per-context [`Memory`] that opens each index once and shares one model between them.
//!
//! An [`Index`] is what the rest of Klaw sees of memory: it is opened, texts are added
//! to it ([`Index::save`], or kept in step with a set of documents by [`Index::sync`]),
//! searched, and removed from by source. The `memory_*` tools use the index
//! `memory.sqlite` in the data directory; the `docs_*` tools use their own
//! (`docs.sqlite`), so documentation never shows up in the agent's memories. Every call
//! here blocks (SQLite, the model): tools run them with `spawn_blocking`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::backend::Store;
use super::chunk::{ChunkOptions, chunk};
use super::embed::{EmbedError, Embedder, EmbedderConfig};
use super::fuse::{Fusion, Spaces, Weights};
use super::store::{
    self, Hit, InsertReport, MemoryStore, NewChunk, Period, SpaceSide, SpacesOpened, StoreError,
};
use klaw_core::{ToolContext, ToolError, ToolSchema};

/// The memory index's file in the data directory.
pub const MEMORY_DB: &str = "memory.sqlite";

/// What an index on PostgreSQL shows as its [`Index::path`]: it has no file.
#[cfg(feature = "postgres")]
pub const PG_MEMORY_NAME: &str = "postgresql:klaw_memory";

/// Texts embedded per model call when (re-)indexing many chunks.
const EMBED_BATCH: usize = 64;

/// Texts embedded per model call by [`Index::sync`]: its chunks are sorted by length
/// first, and the model pads a batch to its longest text.
const SYNC_EMBED_BATCH: usize = 32;

/// The meta key of the `{key: version}` map [`Index::sync`] records. Named for the docs
/// index, which recorded the same map under it before `sync` moved here: an index built
/// then is kept, not rebuilt.
const SYNC_META: &str = "docs:files";

/// What [`Index::warm`] searches: questions of the lengths and languages a memory is
/// asked in. The first few distinct searches of a process are each slower than the
/// next ones (the model's first inputs of new lengths, the full-text index's pages read
/// in): after one short warm-up word the first real search took 14.4–16.9 ms, 1.7–2.2×
/// a warm one (`memory_start` bench, 100k chunks); after these three 11.8–14.1 ms,
/// 1.4–1.9×.
const WARM_UP_QUERIES: [&str; 3] = [
    "Что мы решили на прошлой неделе о сроках проекта и кто отвечает за следующий шаг?",
    "warm-up",
    "when is the next meeting with the design team scheduled",
];

/// How memory is configured: which model, which runtime, fusion weights, chunking. The
/// engine registers one built from `engine.json` as a service
/// ([`ToolContextBuilder::service`](klaw_core::ToolContextBuilder::service)); without it the
/// defaults apply (the model and runtime `make setup` installs under `~/.cache/klaw`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MemoryConfig {
    /// The model directory (`model.onnx`, `tokenizer.json`, `klaw-model.json`); `None`:
    /// the default model in the cache.
    pub model_dir: Option<PathBuf>,
    /// More models' directories (`memory.model` listing several): each gets a vector
    /// space of its own in every index beside `model_dir`'s, every chunk is embedded by
    /// each, and hybrid search adds up their scores (see `doc/memory.md`, "Two models").
    /// Empty (the default): one model.
    pub more_model_dirs: Vec<PathBuf>,
    /// The ONNX Runtime library; `None`: the one in the cache.
    pub runtime_library: Option<PathBuf>,
    /// ONNX Runtime intra-op threads; `None`: one per core.
    pub threads: Option<usize>,
    /// Hybrid search weights of the text and vector sides.
    pub weights: Weights,
    /// How saved text is cut into chunks.
    pub chunk: ChunkOptions,
}

impl MemoryConfig {
    /// The embedding model's configuration: reads its `klaw-model.json` and checks that
    /// its files and the runtime library exist.
    pub fn embedder_config(&self) -> Result<EmbedderConfig, EmbedError> {
        let (model_dir, lib) = match (&self.model_dir, &self.runtime_library) {
            (Some(m), Some(l)) => (m.clone(), l.clone()),
            (m, l) => {
                let (dm, dl) = EmbedderConfig::default_paths()?;
                (m.clone().unwrap_or(dm), l.clone().unwrap_or(dl))
            }
        };
        let mut cfg = EmbedderConfig::load(model_dir, lib)?;
        if let Some(t) = self.threads {
            cfg.threads = t;
        }
        Ok(cfg)
    }

    /// Every model's configuration, [`embedder_config`](Self::embedder_config)'s first,
    /// then those of [`more_model_dirs`](Self::more_model_dirs) with the same runtime
    /// and threads.
    pub fn embedder_configs(&self) -> Result<Vec<EmbedderConfig>, EmbedError> {
        let first = self.embedder_config()?;
        let mut out = Vec::with_capacity(1 + self.more_model_dirs.len());
        for dir in &self.more_model_dirs {
            let mut cfg = EmbedderConfig::load(dir.clone(), first.runtime_library.clone())?;
            if let Some(t) = self.threads {
                cfg.threads = t;
            }
            out.push(cfg);
        }
        out.insert(0, first);
        Ok(out)
    }
}

/// Why a memory operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// The embedding model or runtime is missing or failed.
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The text to save has no words.
    #[error("nothing to save: the text is empty")]
    Empty,
    /// [`Index::open_models`] was given no model.
    #[error("no embedding model given: memory.model must name at least one")]
    NoModel,
    /// [`Index::open_models`] was given one model twice (by two names or paths).
    #[error(
        "the embedding model {name} is listed twice (fingerprint {fingerprint}): list each model once in memory.model"
    )]
    SameModelTwice {
        /// The model's name.
        name: String,
        /// Its fingerprint.
        fingerprint: String,
    },
    /// A chunk given to [`Index::sync`] has a source outside its document: neither the
    /// document's key nor `key#...`.
    #[error("the chunk source `{found}` is not `{key}` or `{key}#...`")]
    ForeignSource {
        /// The document's key.
        key: String,
        /// The chunk's source.
        found: String,
    },
}

impl From<MemoryError> for ToolError {
    fn from(e: MemoryError) -> Self {
        match &e {
            MemoryError::Embed(inner) if inner.needs_setup() => {
                ToolError::unavailable(format!("memory is not set up: {inner}"))
            }
            MemoryError::Empty => ToolError::invalid_arguments("/content", e.to_string()),
            _ => ToolError::failed(e.to_string()),
        }
    }
}

/// How [`Index::search`] ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToolSchema)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// По смыслу и по словам: совпавшие редкие слова поднимают близкий по смыслу текст
    #[default]
    #[schema(
        description_en = "By meaning and by words: rare words in common lift a text close in meaning"
    )]
    Hybrid,
    /// Только по словам (полнотекстовый индекс)
    #[schema(description_en = "By words only (the full-text index)")]
    Text,
    /// Только по смыслу (векторы)
    #[schema(description_en = "By meaning only (the vectors)")]
    Vector,
}

/// A text to index: its content, where it came from and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// The text; cut into chunks when indexed.
    pub content: String,
    /// Where it came from (`manual`, a file path, a conversation).
    pub source: String,
    /// Unix seconds; `None` means now.
    pub created_at: Option<i64>,
    /// Embedded with each of its chunks, not shown or searched by words: what makes the
    /// text understood (a conversation turn's previous turn and date, say).
    pub context: Option<String>,
}

/// What [`Index::save`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SaveReport {
    /// Chunks the texts were cut into.
    pub chunks: usize,
    /// Chunks stored.
    pub inserted: usize,
    /// Chunks already stored (the same text), not stored again.
    pub duplicates: usize,
}

impl SaveReport {
    fn add(&mut self, r: InsertReport) {
        self.inserted += r.inserted;
        self.duplicates += r.duplicates;
    }
}

/// A piece of a [`SyncDoc`], already cut to size by the caller: stored and embedded as
/// it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Where it came from: the document's key, or `key#fragment` for a part of it (a
    /// section, say).
    pub source: String,
    /// The text.
    pub content: String,
}

/// A document [`Index::sync`] keeps in step: its key, the version it is at, its chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncDoc {
    /// Names the document among those synced (a path, say).
    pub key: String,
    /// Any text that changes whenever the chunks would (a hash of the document and of
    /// how it is chunked): a document whose recorded version is this one is left as it is.
    pub version: String,
    /// Its chunks, each with the source `key` or `key#fragment`.
    pub chunks: Vec<Chunk>,
}

/// What [`Index::sync`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SyncReport {
    /// Documents (re-)indexed: new or changed (or all, when forced).
    pub indexed: usize,
    /// Documents already indexed at their version.
    pub unchanged: usize,
    /// Documents no longer in the set, removed from the index.
    pub removed: usize,
    /// Chunks stored for the (re-)indexed documents.
    pub chunks: usize,
    /// How long it took.
    pub elapsed: Duration,
}

/// What [`Index::inspect`] finds in an index file, without the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexInfo {
    /// Chunks stored.
    pub chunks: usize,
    /// The fingerprint of the model that built it, if recorded.
    pub fingerprint: Option<String>,
    /// The vectors' dimensions, if recorded.
    pub dims: Option<usize>,
    /// The version of each document [`Index::sync`] indexed, by key (empty when it never
    /// ran, or its record cannot be read, which `sync` treats the same).
    pub synced: BTreeMap<String, String>,
}

/// One index: a store and the model whose vectors it holds (or the models, one vector
/// space each: [`Index::open_models`]). Shared between calls; the store is behind a lock,
/// the models run outside it.
#[derive(Debug)]
pub struct Index {
    path: PathBuf,
    store: Mutex<Store>,
    /// The models, one per vector space of the store, in its order (at least one).
    models: Vec<Embedder>,
    weights: Weights,
    /// Hybrid search's fusion per model, each with its model's lift.
    fusions: Vec<Fusion>,
    /// How hybrid search adds up the spaces' scores (with several models).
    spaces: Spaces,
    chunk: ChunkOptions,
    /// Per model, chunks embedded when the index was opened.
    reembedded: Vec<usize>,
}

impl Index {
    /// Opens (or creates) the index at `path` for `embedder`'s model.
    ///
    /// An index built with another model is re-embedded now, with a warning in the log
    /// ([`Index::reembedded`] says how many chunks); chunks left without a vector by an
    /// interrupted re-embedding are completed. Vectors of two models never mix. The store
    /// records when every chunk has a vector, so an open looks for those without one only
    /// after an unfinished re-embedding (or once, in a store made before it recorded it).
    pub fn open(
        path: &Path,
        embedder: Embedder,
        config: &MemoryConfig,
    ) -> Result<Self, MemoryError> {
        Self::open_models(path, vec![embedder], config)
    }

    /// [`open`](Self::open) for several models (`memory.model` as a list), the first
    /// leading: one vector space per model in the store, each chunk embedded by every
    /// model, and hybrid search adding up the spaces' scores (see `doc/memory.md`, "Two
    /// models"). A model already in the index keeps its vectors, wherever it is in the
    /// list; a model new to it is embedded now for every chunk (an index of one model
    /// opened with that model first and another after embeds only for the other); a
    /// space whose model is no longer listed is dropped. A re-embedding that was
    /// interrupted is completed, space by space.
    pub fn open_models(
        path: &Path,
        models: Vec<Embedder>,
        config: &MemoryConfig,
    ) -> Result<Self, MemoryError> {
        check_models(&models)?;
        let specs: Vec<(usize, &str)> =
            models.iter().map(|m| (m.dims(), m.fingerprint())).collect();
        let names = |new: &[bool]| -> String {
            models
                .iter()
                .zip(new)
                .filter(|(_, n)| **n)
                .map(|(m, _)| m.config().name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (store, opened) = match MemoryStore::open_models(path, &specs, false) {
            Ok(s) => s,
            Err(e) if e.is_fingerprint_mismatch() => {
                let (store, opened) = MemoryStore::open_models(path, &specs, true)?;
                tracing::warn!(index = %path.display(), "{e}; re-embedding every chunk with model {}", names(&opened.new));
                (store, opened)
            }
            Err(e) => return Err(e.into()),
        };
        Self::with_store(path, Store::Sqlite(store), opened, models, config)
    }

    /// [`open_models`](Self::open_models) on the PostgreSQL of `pg` (the `postgres`
    /// feature; `storage.url`) instead of a SQLite file: the memory every engine sharing
    /// that database shares (see `doc/memory.md`, "PostgreSQL"). A model new to it gets
    /// its vector space and every chunk is embedded for it now; the spaces of other
    /// models are kept (another engine may use them). `name` stands for the path in
    /// [`path`](Self::path) and the log.
    #[cfg(feature = "postgres")]
    pub fn open_postgres(
        name: &Path,
        pg: super::pg::PgMemory,
        models: Vec<Embedder>,
        config: &MemoryConfig,
    ) -> Result<Self, MemoryError> {
        check_models(&models)?;
        let specs: Vec<(usize, &str)> =
            models.iter().map(|m| (m.dims(), m.fingerprint())).collect();
        let (store, opened) = super::pg::PgStore::open_models(pg, &specs)?;
        Self::with_store(name, Store::Pg(store), opened, models, config)
    }

    /// What [`open_models`](Self::open_models) does once the store is open: fill its
    /// new spaces, and the index around it.
    fn with_store(
        path: &Path,
        mut store: Store,
        opened: SpacesOpened,
        models: Vec<Embedder>,
        config: &MemoryConfig,
    ) -> Result<Self, MemoryError> {
        let names = |new: &[bool]| -> String {
            models
                .iter()
                .zip(new)
                .filter(|(_, n)| **n)
                .map(|(m, _)| m.config().name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if opened.new.iter().any(|n| *n) && models.len() > 1 && opened.dropped.is_empty() {
            tracing::info!(index = %path.display(), "a new vector space: embedding every chunk with model {}", names(&opened.new));
        }
        let mut reembedded = Vec::with_capacity(models.len());
        for (space, embedder) in models.iter().enumerate() {
            reembedded.push(complete_space(&mut store, space, embedder)?);
        }
        if reembedded.iter().any(|n| *n > 0) {
            tracing::info!(index = %path.display(), chunks = ?reembedded, "re-embedded");
        }
        let fusions = models
            .iter()
            .map(|m| Fusion::for_model(m.config().hybrid_lift))
            .collect();
        Ok(Self {
            path: path.to_owned(),
            store: Mutex::new(store),
            models,
            weights: config.weights,
            fusions,
            spaces: Spaces::DEFAULT,
            chunk: config.chunk,
            reembedded,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The model (the first, with several).
    pub fn embedder(&self) -> &Embedder {
        &self.models[0]
    }

    /// Every model, one per vector space, the first leading.
    pub fn embedders(&self) -> &[Embedder] {
        &self.models
    }

    /// Chunks re-embedded when the index was opened (another model had built it), in
    /// all its vector spaces together.
    pub fn reembedded(&self) -> usize {
        self.reembedded.iter().sum()
    }

    /// [`reembedded`](Self::reembedded) per model, in [`embedders`](Self::embedders)'
    /// order.
    pub fn reembedded_by_model(&self) -> &[usize] {
        &self.reembedded
    }

    /// Looks into the index at `path` read-only (no model, no sqlite-vec, nothing
    /// written): `None` when the file does not exist.
    pub fn inspect(path: &Path) -> Result<Option<IndexInfo>, MemoryError> {
        let Some(info) = store::inspect(path, SYNC_META)? else {
            return Ok(None);
        };
        Ok(Some(IndexInfo {
            chunks: info.chunks,
            fingerprint: info.fingerprint,
            dims: info.dims,
            synced: parse_versions(info.meta.as_deref()).unwrap_or_default(),
        }))
    }

    /// The store, locked. Hold it briefly: every other call on this index waits.
    pub(crate) fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Chunks, embeds and stores one text in one transaction. Saving the same text again
    /// stores nothing new.
    pub fn save(&self, doc: &Document) -> Result<SaveReport, MemoryError> {
        let report = self.save_all(std::slice::from_ref(doc))?;
        if report.chunks == 0 {
            return Err(MemoryError::Empty);
        }
        Ok(report)
    }

    /// Chunks, embeds and stores many texts in one transaction (all or none); texts
    /// with no words are skipped.
    pub fn save_all(&self, docs: &[Document]) -> Result<SaveReport, MemoryError> {
        self.save_all_reporting(docs, &|_, _| {})
    }

    /// [`save_all`](Self::save_all), telling `progress` how many chunks of how many are
    /// embedded after each batch.
    pub fn save_all_reporting(
        &self,
        docs: &[Document],
        progress: &dyn Fn(usize, usize),
    ) -> Result<SaveReport, MemoryError> {
        let mut chunks = Vec::new();
        for d in docs {
            for c in chunk(&d.content, &self.chunk) {
                chunks.push(NewChunk {
                    content: c,
                    source: d.source.clone(),
                    created_at: d.created_at,
                    context: d.context.clone(),
                    vector: Vec::new(),
                    more_vectors: Vec::new(),
                });
            }
        }
        let mut report = SaveReport {
            chunks: chunks.len(),
            ..SaveReport::default()
        };
        self.embed(&mut chunks, EMBED_BATCH, progress)?;
        if !chunks.is_empty() {
            report.add(self.store().insert(&chunks)?);
        }
        Ok(report)
    }

    /// The best `k` chunks for `query`. The query is embedded (for `hybrid` and `vector`)
    /// outside the store's lock; in `hybrid` mode the text side is searched meanwhile, on
    /// this thread, while another embeds the query.
    pub fn search(&self, query: &str, k: usize, mode: SearchMode) -> Result<Vec<Hit>, MemoryError> {
        self.search_in(query, k, mode, Period::default())
    }

    /// Makes the first real search as fast as the next ones: loads the model, builds
    /// the vectors' in-memory copy and runs a few hybrid searches (`WARM_UP_QUERIES`:
    /// the model's first runs allocate its buffers, the full-text index is read in). A search that arrives
    /// meanwhile waits for the parts being loaded (the model's load, the store's lock)
    /// instead of loading them a second time. `mcp` and `run` call it at start-up.
    pub fn warm(&self) -> Result<(), MemoryError> {
        for m in &self.models {
            m.load()?;
        }
        // At the tool's default topK: as many chunks are read as a real search reads.
        for query in WARM_UP_QUERIES {
            self.search(query, 10, SearchMode::Hybrid)?;
        }
        Ok(())
    }

    /// [`search`](Self::search) among the chunks of `period` (by their time, see
    /// [`Document::created_at`]).
    pub fn search_in(
        &self,
        query: &str,
        k: usize,
        mode: SearchMode,
        period: Period,
    ) -> Result<Vec<Hit>, MemoryError> {
        self.search_fused(query, k, mode, period, self.fusion())
    }

    /// The fusion hybrid search uses: the default with the (first) model's lift.
    pub(crate) fn fusion(&self) -> Fusion {
        self.fusions[0]
    }

    /// [`search_in`](Self::search_in) with hybrid's two sides fused by `fusion` (in the
    /// first space; the others with their model's default).
    pub(crate) fn search_fused(
        &self,
        query: &str,
        k: usize,
        mode: SearchMode,
        period: Period,
        fusion: Fusion,
    ) -> Result<Vec<Hit>, MemoryError> {
        self.search_spaces(query, k, mode, period, fusion, self.spaces)
    }

    /// [`search_fused`](Self::search_fused) with several models' spaces added up by
    /// `spaces`.
    pub(crate) fn search_spaces(
        &self,
        query: &str,
        k: usize,
        mode: SearchMode,
        period: Period,
        fusion: Fusion,
        spaces: Spaces,
    ) -> Result<Vec<Hit>, MemoryError> {
        let embed = |m: &Embedder| -> Result<Vec<f32>, MemoryError> {
            let mut v = m.embed_queries(&[query])?;
            v.pop()
                .ok_or_else(|| EmbedError::Inference("no vector for the query".into()).into())
        };
        // Every model's query vector, each on a thread of its own while `meanwhile` runs
        // here; with nothing to do meanwhile, the first model's on this thread (without a
        // thread, the OS refused one: one after the other).
        type Meanwhile<'a> = &'a dyn Fn() -> Result<Vec<Hit>, MemoryError>;
        let embed_all = |meanwhile: Option<Meanwhile<'_>>| {
            let here = usize::from(meanwhile.is_none()).min(self.models.len());
            std::thread::scope(|s| {
                let handles: Vec<_> = self.models[here..]
                    .iter()
                    .map(|m| {
                        std::thread::Builder::new()
                            .spawn_scoped(s, move || embed(m))
                            .ok()
                    })
                    .collect();
                let other = meanwhile.map(|f| f());
                let vectors = self.models[..here]
                    .iter()
                    .map(embed)
                    .chain(handles.into_iter().zip(&self.models[here..]).map(|(h, m)| {
                        match h {
                            Some(handle) => handle
                                .join()
                                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                            None => embed(m),
                        }
                    }))
                    .collect::<Result<Vec<_>, _>>();
                (vectors, other)
            })
        };
        match mode {
            SearchMode::Text => Ok(self.store().search_text_in(query, k, period)?),
            SearchMode::Vector => {
                let vectors = embed_all(None).0?;
                let store = self.store();
                if let [v] = vectors.as_slice() {
                    return Ok(store.search_vector_in(v, k, period)?);
                }
                Ok(store.search_vector_spaces(&vectors, k, period)?)
            }
            SearchMode::Hybrid => {
                let depth = fusion.depth(k);
                let (vectors, text) = embed_all(Some(&|| {
                    Ok(self
                        .store()
                        .fusion_text_side(query, depth, period, fusion)?)
                }));
                let (vectors, text) = (vectors?, text.transpose()?.unwrap_or_default());
                let store = self.store();
                let mut sides = Vec::with_capacity(vectors.len());
                for (space, vector) in vectors.into_iter().enumerate() {
                    let fusion = if space == 0 {
                        fusion
                    } else {
                        self.fusions[space]
                    };
                    let vecs = match fusion {
                        Fusion::Rrf => store.search_space(space, &vector, depth, period)?,
                        Fusion::Lift { .. } => {
                            store.vector_pool(space, &vector, k, depth, period)?
                        }
                    };
                    sides.push(SpaceSide {
                        space,
                        vector,
                        vecs,
                        fusion,
                    });
                }
                Ok(store.fuse_spaces(query, text, sides, k, self.weights, spaces)?)
            }
        }
    }

    /// Removes every chunk from `source`; returns how many.
    pub fn remove_source(&self, source: &str) -> Result<usize, MemoryError> {
        Ok(self.store().remove_source(source)?)
    }

    /// Brings the index in step with `docs`: (re-)indexes the documents whose version
    /// differs from the one recorded (or that are new), removes the documents recorded
    /// that are no longer in `docs`, and leaves the others alone; `force` empties the
    /// index first and indexes everything.
    ///
    /// A document is replaced whole: the chunks whose source is its key or begins with
    /// `key#` are removed and its chunks stored, embedded in batches of similar length.
    /// Each document's version is recorded once its chunks are stored, so a run that is
    /// interrupted is finished by the next one. An index synced this way is meant for
    /// that set of documents alone: the first sync (or a record that cannot be read)
    /// empties it.
    pub fn sync(&self, docs: &[SyncDoc], force: bool) -> Result<SyncReport, MemoryError> {
        self.sync_reporting(docs, force, &|_, _, _| {})
    }

    /// [`sync`](Self::sync), telling `progress` how many documents of how many are done,
    /// and which one is being indexed.
    pub fn sync_reporting(
        &self,
        docs: &[SyncDoc],
        force: bool,
        progress: &dyn Fn(usize, usize, &str),
    ) -> Result<SyncReport, MemoryError> {
        let started = Instant::now();
        let mut report = SyncReport::default();
        for doc in docs {
            if let Some(c) = doc.chunks.iter().find(|c| !belongs(&c.source, &doc.key)) {
                return Err(MemoryError::ForeignSource {
                    key: doc.key.clone(),
                    found: c.source.clone(),
                });
            }
        }
        let stored = self.store().meta(SYNC_META)?;
        let mut known = match parse_versions(stored.as_deref()) {
            Some(map) if !force => map,
            // Forced, never synced, or a record that cannot be read: start from nothing.
            _ => {
                let mut store = self.store();
                store.remove_source_prefix("")?;
                store.set_meta(SYNC_META, "{}")?;
                BTreeMap::new()
            }
        };
        let record = |known: &BTreeMap<String, String>| -> Result<(), MemoryError> {
            let json = serde_json::to_string(known).unwrap_or_else(|_| "{}".into());
            self.store().set_meta(SYNC_META, &json)?;
            Ok(())
        };

        for (done, doc) in docs.iter().enumerate() {
            if known.get(&doc.key) == Some(&doc.version) {
                report.unchanged += 1;
                continue;
            }
            progress(done, docs.len(), &doc.key);
            self.remove_document(&doc.key)?;
            let mut new: Vec<NewChunk> = doc
                .chunks
                .iter()
                .map(|c| NewChunk {
                    content: c.content.clone(),
                    source: c.source.clone(),
                    created_at: None,
                    context: None,
                    vector: Vec::new(),
                    more_vectors: Vec::new(),
                })
                .collect();
            new.sort_by_key(|c| c.content.len());
            self.embed(&mut new, SYNC_EMBED_BATCH, &|_, _| {})?;
            if !new.is_empty() {
                self.store().insert(&new)?;
            }
            report.indexed += 1;
            report.chunks += new.len();
            known.insert(doc.key.clone(), doc.version.clone());
            record(&known)?;
        }

        let gone: Vec<String> = known
            .keys()
            .filter(|k| !docs.iter().any(|d| &d.key == *k))
            .cloned()
            .collect();
        for key in gone {
            self.remove_document(&key)?;
            known.remove(&key);
            record(&known)?;
            report.removed += 1;
        }
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// Removes a synced document's chunks: those from `key` and from `key#...`.
    fn remove_document(&self, key: &str) -> Result<usize, MemoryError> {
        let mut store = self.store();
        Ok(store.remove_source(key)? + store.remove_source_prefix(&format!("{key}#"))?)
    }

    /// Fills in the chunks' vectors, `batch` texts per model call.
    /// Embeds `chunks` in batches of `batch`, telling `progress` how many of how many
    /// are done after each.
    /// With several models, each embeds every chunk (the first's vector in
    /// [`NewChunk::vector`], the others' in [`NewChunk::more_vectors`]).
    fn embed(
        &self,
        chunks: &mut [NewChunk],
        batch: usize,
        progress: &dyn Fn(usize, usize),
    ) -> Result<(), MemoryError> {
        let total = chunks.len();
        let mut done = 0;
        for batch in chunks.chunks_mut(batch) {
            let texts: Vec<String> = batch.iter().map(NewChunk::embed_text).collect();
            let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
            for (n, model) in self.models.iter().enumerate() {
                let vectors = model.embed_passages(&texts)?;
                for (c, v) in batch.iter_mut().zip(vectors) {
                    if n == 0 {
                        c.vector = v;
                        c.more_vectors.clear();
                    } else {
                        c.more_vectors.push(v);
                    }
                }
            }
            done += batch.len();
            progress(done, total);
        }
        Ok(())
    }

    /// How many chunks are stored.
    pub fn len(&self) -> Result<usize, MemoryError> {
        Ok(self.store().len()?)
    }

    /// Whether no chunk is stored.
    pub fn is_empty(&self) -> Result<bool, MemoryError> {
        Ok(self.len()? == 0)
    }
}

/// The memory subsystem of one [`ToolContext`]: one model and each index opened once.
/// Tools reach it with `ctx.shared_state::<Memory>()`.
#[derive(Debug, Default)]
pub struct Memory {
    /// The models (at least one once configured), loaded on first use.
    embedders: Mutex<Option<Vec<Embedder>>>,
    indexes: Mutex<HashMap<PathBuf, Arc<Index>>>,
}

impl Memory {
    /// The context's memory configuration: the [`MemoryConfig`] service, else defaults.
    pub fn config(ctx: &ToolContext) -> MemoryConfig {
        ctx.service::<MemoryConfig>()
            .map(|c| (*c).clone())
            .unwrap_or_default()
    }

    /// The model (configured once; loaded on first use); the first, with several.
    pub fn embedder(&self, ctx: &ToolContext) -> Result<Embedder, MemoryError> {
        self.embedders(ctx)?
            .into_iter()
            .next()
            .ok_or(MemoryError::NoModel)
    }

    /// Every model of [`MemoryConfig`] (`model_dir`'s first, then `more_model_dirs`'),
    /// configured once, each loaded on first use.
    pub fn embedders(&self, ctx: &ToolContext) -> Result<Vec<Embedder>, MemoryError> {
        let mut slot = self
            .embedders
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = slot.as_ref() {
            return Ok(e.clone());
        }
        let e: Vec<Embedder> = Self::config(ctx)
            .embedder_configs()?
            .into_iter()
            .map(Embedder::new)
            .collect();
        *slot = Some(e.clone());
        Ok(e)
    }

    /// The index in `file` under the data directory, opened on first use (which may
    /// re-embed it, see [`Index::open`]). Errors are not remembered: a later call tries
    /// again (after `make setup`, say).
    pub fn index(&self, ctx: &ToolContext, file: &str) -> Result<Arc<Index>, MemoryError> {
        let path = ctx.data_dir().join(file);
        let mut indexes = self.indexes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = indexes.get(&path) {
            return Ok(Arc::clone(i));
        }
        let models = self.embedders(ctx)?;
        #[cfg(feature = "postgres")]
        if file == MEMORY_DB
            && let Some(pg) = ctx.service::<super::pg::PgMemory>()
        {
            let index = Arc::new(Index::open_postgres(
                Path::new(PG_MEMORY_NAME),
                (*pg).clone(),
                models,
                &Self::config(ctx),
            )?);
            indexes.insert(path, Arc::clone(&index));
            return Ok(index);
        }
        let index = Arc::new(Index::open_models(&path, models, &Self::config(ctx))?);
        indexes.insert(path, Arc::clone(&index));
        Ok(index)
    }

    /// The agent's memory ([`MEMORY_DB`]).
    pub fn memory(&self, ctx: &ToolContext) -> Result<Arc<Index>, MemoryError> {
        self.index(ctx, MEMORY_DB)
    }

    /// Whether the agent's memory may hold something: its file exists, or it is on
    /// PostgreSQL (a [`PgMemory`](super::pg::PgMemory) service: the engine's
    /// `storage.url`), where it is shared and may have been filled by another engine.
    pub fn exists(ctx: &ToolContext) -> bool {
        #[cfg(feature = "postgres")]
        if ctx.service::<super::pg::PgMemory>().is_some() {
            return true;
        }
        ctx.data_dir().join(MEMORY_DB).exists()
    }

    /// Opens and warms ([`Index::warm`]) the agent's memory when it exists (nothing is
    /// created): `Ok(false)` when there is none. Blocks; a search that comes meanwhile
    /// waits for it instead of opening the index or loading the model a second time.
    pub fn warm(&self, ctx: &ToolContext) -> Result<bool, MemoryError> {
        if !Self::exists(ctx) {
            return Ok(false);
        }
        self.memory(ctx)?.warm()?;
        Ok(true)
    }
}

/// Embeds, in space `space` of `store`, the chunks that have no vector there yet (when
/// the store says some may be missing: a new space, or an interrupted re-embedding), and
/// records that every chunk has one; returns how many were embedded.
fn complete_space(
    store: &mut Store,
    space: usize,
    embedder: &Embedder,
) -> Result<usize, MemoryError> {
    // a scan of every chunk: only when re-embedding was started and not finished, or the
    // store does not say (made before it recorded it)
    if !store.vectors_pending_in(space)? {
        return Ok(0);
    }
    // once, by one engine of those sharing the memory: the others wait, then find none
    // missing; meanwhile engines of the old model search their own space
    store.filling_space(space, |store| fill_space(store, space, embedder))
}

/// [`complete_space`] once it holds the space's lock.
fn fill_space(store: &mut Store, space: usize, embedder: &Embedder) -> Result<usize, MemoryError> {
    if !store.vectors_pending_in(space)? {
        return Ok(0);
    }
    let missing = store.chunks_without_vectors_in(space)?;
    let mut batches = missing.chunks(EMBED_BATCH).peekable();
    while let Some(batch) = batches.next() {
        let texts: Vec<&str> = batch.iter().map(|(_, c)| c.as_str()).collect();
        let vectors = embedder.embed_passages(&texts)?;
        let pairs: Vec<(i64, Vec<f32>)> = batch.iter().map(|(id, _)| *id).zip(vectors).collect();
        if batches.peek().is_some() {
            store.set_vectors_in(space, &pairs)?;
        } else {
            // the last vectors and "none is missing" in one transaction
            store.finish_vectors_in(space, &pairs)?;
        }
    }
    if missing.is_empty() {
        store.finish_vectors_in(space, &[])?;
    }
    Ok(missing.len())
}

/// At least one model, and none twice.
fn check_models(models: &[Embedder]) -> Result<(), MemoryError> {
    if models.is_empty() {
        return Err(MemoryError::NoModel);
    }
    for (i, m) in models.iter().enumerate() {
        if models[..i]
            .iter()
            .any(|x| x.fingerprint() == m.fingerprint())
        {
            return Err(MemoryError::SameModelTwice {
                name: m.config().name.clone(),
                fingerprint: m.fingerprint().to_owned(),
            });
        }
    }
    Ok(())
}

/// Whether a chunk from `source` is part of the synced document `key`.
fn belongs(source: &str, key: &str) -> bool {
    source
        .strip_prefix(key)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('#'))
}

/// The `{key: version}` map [`Index::sync`] records; `None` when there is none or it
/// cannot be read.
fn parse_versions(json: Option<&str>) -> Option<BTreeMap<String, String>> {
    serde_json::from_str(json?).ok()
}

/// Runs blocking memory work (the model, SQLite) on tokio's blocking pool.
pub(super) async fn blocking<T, F>(f: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
{
    crate::run_blocking("memory", f).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_holds_its_key_and_its_fragments_only() {
        assert!(belongs("a.md", "a.md"));
        assert!(belongs("a.md#alpha", "a.md"));
        assert!(belongs("a.md#", "a.md"));
        assert!(!belongs("a.mdx", "a.md"));
        assert!(!belongs("a.md.bak#x", "a.md"));
        assert!(!belongs("b.md#a.md", "a.md"));
        assert!(!belongs("", "a.md"));
    }

    #[test]
    fn an_unreadable_sync_record_is_none() {
        assert_eq!(parse_versions(None), None);
        assert_eq!(parse_versions(Some("not json")), None);
        assert_eq!(
            parse_versions(Some(r#"{"a.md":"1"}"#)),
            Some(BTreeMap::from([("a.md".to_owned(), "1".to_owned())]))
        );
    }
}
