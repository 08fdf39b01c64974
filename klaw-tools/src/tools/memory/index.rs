//! A searchable index: a [`MemoryStore`] with the [`Embedder`] that fills it, and the
//! per-context [`Memory`] that opens each index once and shares one model between them.
//!
//! The `memory_*` tools use the index `memory.sqlite` in the data directory; the `docs_*`
//! tools use their own (`docs.sqlite`), so documentation never shows up in the agent's
//! memories. Every call here blocks (SQLite, the model): tools run them with
//! `spawn_blocking`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

use super::chunk::{ChunkOptions, chunk};
use super::embed::{EmbedError, Embedder, EmbedderConfig};
use super::fuse::Weights;
use super::store::{Hit, InsertReport, MemoryStore, NewChunk, StoreError, fuse_hits};
use crate::{ToolContext, ToolError, ToolSchema};

/// The memory index's file in the data directory.
pub const MEMORY_DB: &str = "memory.sqlite";

/// Texts embedded per model call when (re-)indexing many chunks.
const EMBED_BATCH: usize = 64;

/// How memory is configured: which model, which runtime, fusion weights, chunking. The
/// engine registers one built from `engine.json` as a service
/// ([`ToolContextBuilder::service`](crate::ToolContextBuilder::service)); without it the
/// defaults apply (the model and runtime `make setup` installs under `~/.cache/klaw`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MemoryConfig {
    /// The model directory (`model.onnx`, `tokenizer.json`, `klaw-model.json`); `None`:
    /// the default model in the cache.
    pub model_dir: Option<PathBuf>,
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
    /// По смыслу и по словам, объединённые (Reciprocal Rank Fusion)
    #[default]
    #[schema(description_en = "By meaning and by words, fused (Reciprocal Rank Fusion)")]
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

/// One index: a store and the model whose vectors it holds. Shared between calls; the
/// store is behind a lock, the model runs outside it.
#[derive(Debug)]
pub struct Index {
    path: PathBuf,
    store: Mutex<MemoryStore>,
    embedder: Embedder,
    weights: Weights,
    chunk: ChunkOptions,
    reembedded: usize,
}

impl Index {
    /// Opens (or creates) the index at `path` for `embedder`'s model.
    ///
    /// An index built with another model is re-embedded now, with a warning in the log
    /// ([`Index::reembedded`] says how many chunks); chunks left without a vector by an
    /// interrupted re-embedding are completed. Vectors of two models never mix.
    pub fn open(
        path: &Path,
        embedder: Embedder,
        config: &MemoryConfig,
    ) -> Result<Self, MemoryError> {
        let (dims, fp) = (embedder.dims(), embedder.fingerprint().to_owned());
        let mut store = match MemoryStore::open(path, dims, &fp) {
            Ok(s) => s,
            Err(e) if e.is_fingerprint_mismatch() => {
                tracing::warn!(index = %path.display(), "{e}; re-embedding every chunk with model {}", embedder.config().name);
                MemoryStore::open_reembed(path, dims, &fp)?
            }
            Err(e) => return Err(e.into()),
        };
        let missing = store.chunks_without_vectors()?;
        for batch in missing.chunks(EMBED_BATCH) {
            let texts: Vec<&str> = batch.iter().map(|(_, c)| c.as_str()).collect();
            let vectors = embedder.embed_passages(&texts)?;
            let pairs: Vec<(i64, Vec<f32>)> =
                batch.iter().map(|(id, _)| *id).zip(vectors).collect();
            store.set_vectors(&pairs)?;
        }
        if !missing.is_empty() {
            tracing::info!(index = %path.display(), chunks = missing.len(), "re-embedded");
        }
        Ok(Self {
            path: path.to_owned(),
            store: Mutex::new(store),
            embedder,
            weights: config.weights,
            chunk: config.chunk,
            reembedded: missing.len(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The model.
    pub fn embedder(&self) -> &Embedder {
        &self.embedder
    }

    /// Chunks re-embedded when the index was opened (another model had built it).
    pub fn reembedded(&self) -> usize {
        self.reembedded
    }

    /// The store, locked. Hold it briefly: every other call on this index waits.
    pub fn store(&self) -> MutexGuard<'_, MemoryStore> {
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
        let mut chunks = Vec::new();
        for d in docs {
            for c in chunk(&d.content, &self.chunk) {
                chunks.push(NewChunk {
                    content: c,
                    source: d.source.clone(),
                    created_at: d.created_at,
                    vector: Vec::new(),
                });
            }
        }
        let mut report = SaveReport {
            chunks: chunks.len(),
            ..SaveReport::default()
        };
        for batch in chunks.chunks_mut(EMBED_BATCH) {
            let texts: Vec<&str> = batch.iter().map(|c| c.content.as_str()).collect();
            let vectors = self.embedder.embed_passages(&texts)?;
            for (c, v) in batch.iter_mut().zip(vectors) {
                c.vector = v;
            }
        }
        if !chunks.is_empty() {
            report.add(self.store().insert(&chunks)?);
        }
        Ok(report)
    }

    /// The best `k` chunks for `query`. The query is embedded (for `hybrid` and `vector`)
    /// outside the store's lock; in `hybrid` mode the text side is searched meanwhile, on
    /// this thread, while another embeds the query.
    pub fn search(&self, query: &str, k: usize, mode: SearchMode) -> Result<Vec<Hit>, MemoryError> {
        let embed = || -> Result<Vec<f32>, MemoryError> {
            let mut v = self.embedder.embed_queries(&[query])?;
            v.pop()
                .ok_or_else(|| EmbedError::Inference("no vector for the query".into()).into())
        };
        match mode {
            SearchMode::Text => Ok(self.store().search_text(query, k)?),
            SearchMode::Vector => {
                let v = embed()?;
                Ok(self.store().search_vector(&v, k)?)
            }
            SearchMode::Hybrid => std::thread::scope(|s| {
                // without a thread (the OS refused one), one after the other
                let vector = std::thread::Builder::new().spawn_scoped(s, embed).ok();
                let text = self.store().hybrid_text_side(query, k);
                let vector = match vector {
                    Some(handle) => handle
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?,
                    None => embed()?,
                };
                let text = text?;
                let vecs = self.store().search_vector(&vector, k)?;
                Ok(fuse_hits(text, vecs, k, self.weights))
            }),
        }
    }

    /// Removes every chunk from `source`; returns how many.
    pub fn remove_source(&self, source: &str) -> Result<usize, MemoryError> {
        Ok(self.store().remove_source(source)?)
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
    embedder: Mutex<Option<Embedder>>,
    indexes: Mutex<HashMap<PathBuf, Arc<Index>>>,
}

impl Memory {
    /// The context's memory configuration: the [`MemoryConfig`] service, else defaults.
    pub fn config(ctx: &ToolContext) -> MemoryConfig {
        ctx.service::<MemoryConfig>()
            .map(|c| (*c).clone())
            .unwrap_or_default()
    }

    /// The model (configured once; loaded on first use).
    pub fn embedder(&self, ctx: &ToolContext) -> Result<Embedder, MemoryError> {
        let mut slot = self.embedder.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = slot.as_ref() {
            return Ok(e.clone());
        }
        let e = Embedder::new(Self::config(ctx).embedder_config()?);
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
        let embedder = self.embedder(ctx)?;
        let index = Arc::new(Index::open(&path, embedder, &Self::config(ctx))?);
        indexes.insert(path, Arc::clone(&index));
        Ok(index)
    }

    /// The agent's memory ([`MEMORY_DB`]).
    pub fn memory(&self, ctx: &ToolContext) -> Result<Arc<Index>, MemoryError> {
        self.index(ctx, MEMORY_DB)
    }
}

/// Runs blocking memory work (the model, SQLite) on tokio's blocking pool.
pub(crate) async fn blocking<T, F>(f: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
{
    crate::tools::run_blocking("memory", f).await
}
