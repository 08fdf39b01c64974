//! # klaw-memory
//!
//! Memory: what the agent remembers and searches. Text is chunked, embedded by meaning
//! (an ONNX sentence-embedding model), and stored in SQLite with full-text (FTS5) and
//! vector (sqlite-vec) indexes; hybrid search ranks by the cosine, lifted by the query's
//! rare words a chunk holds (`fuse.rs`). See `doc/memory.md`. Written on `klaw-core`
//! alone; `klaw-tools` re-exports it as `klaw_tools::tools::memory` (its `memory`
//! feature), and the engine links it so its tools register.
//!
//! The tools: `memory_search`, `memory_save`, `memory_get` (a whole document back), and core memory (`memory_core_get`,
//! `memory_core_update`, `memory_core_delete`); see `doc/tools/memory.md`.
//!
//! The rest of Klaw (the `docs_*` tools, the engine's `memory` commands and `doctor`)
//! uses one API: an [`Index`], opened on a file with an [`Embedder`] and a
//! [`MemoryConfig`] (or reached through the context's [`Memory`]), that texts are saved
//! to ([`Index::save`], [`Index::save_all`]) or kept in step with a set of documents
//! ([`Index::sync`]), that is searched ([`Index::search`] in a [`SearchMode`], giving
//! [`Hit`]s), and removed from by source ([`Index::remove_source`]);
//! [`Index::inspect`] looks into a file without the model. [`import`] reads files and
//! chat exports into an index (`klaw-engine memory import`). The store, the full-text
//! rules, the fusion and the vectors' in-memory copy behind it are private.

mod backend;
mod chunk;
pub mod conversation;
mod core;
mod embed;
mod fts;
mod fuse;
mod get;
pub mod import;
mod index;
#[cfg(feature = "postgres")]
mod pg;
mod save;
mod search;
mod store;
mod vectors;

#[doc(hidden)]
pub use self::core::suite as core_suite;
pub use self::core::{
    Core, CoreDeleted, CoreMemory, CoreMemoryView, CoreSection, CoreStore, CoreStoreService,
    CoreUpdated, Entries, FileCore, MAX_CORE_BYTES, MAX_KEY_CHARS, MAX_VALUE_CHARS,
    memory_core_delete, memory_core_get, memory_core_update,
};
pub use chunk::ChunkOptions;
pub use embed::{EmbedError, Embedder, EmbedderConfig, InputFormat, TextKind};
pub use fuse::{FoundBy, Weights};
pub use get::{MAX_GET_LINES, MemoryDocument, memory_get};
#[cfg(feature = "postgres")]
pub use index::PG_MEMORY_NAME;
pub use index::{
    Chunk, Document, Index, IndexInfo, MEMORY_DB, Memory, MemoryConfig, MemoryError, SaveReport,
    SearchMode, SyncDoc, SyncReport,
};
#[cfg(feature = "postgres")]
pub use pg::{DEFAULT_EF_SEARCH, PgMemory, PgReport};
pub use save::{MAX_SAVE_BYTES, MAX_SOURCE_CHARS, MemorySaved, memory_save};
pub use search::{MAX_QUERY_CHARS, MAX_TOP_K, MemoryHit, MemorySearchResults, memory_search};
pub use store::{Hit, Period, StoreError};

/// Not an API: the internals the benches under `benches/` measure on their own (a store
/// filled with chosen vectors, a search with a ready query vector, the vectors'
/// in-memory copy). Hidden from the docs; it changes whenever the internals do.
#[doc(hidden)]
pub mod bench_support {
    pub use super::fuse::{Evidence, Fusion, Spaces};
    pub use super::store::{MIN_RESCORED, MemoryStore, NewChunk, RESCORE_FACTOR};
    pub use super::vectors::VectorCache;

    /// Makes the vector scan use its portable loops (`true`) or the best ones for the
    /// CPU (`false`, the default): to measure what the CPU's own loops bring, in one
    /// process.
    pub fn use_portable_kernels(yes: bool) {
        super::vectors::force_portable_kernels(yes);
    }

    /// Makes the vector scan use the loops named `name` (`portable`, `avx2`,
    /// `avx2-prefetch`; `best`: the default for the CPU); false if the CPU has none of
    /// that name.
    pub fn use_kernels(name: &str) -> bool {
        super::vectors::force_kernels(name)
    }

    /// Makes the vector scan's sign bits keep `1 / divisor` of the vectors for the int8
    /// pass (4 by default): to measure what recall another share costs.
    pub fn set_keep_divisor(divisor: usize) {
        super::vectors::set_keep_divisor(divisor);
    }

    /// Makes the vector scan's int8 codes ask for huge pages (`true`, the default) or
    /// stay in a plain `Vec` (`false`): to measure what huge pages bring, in one process.
    /// A loaded copy moves at its next search.
    pub fn use_huge_pages(yes: bool) {
        super::vectors::use_huge_pages(yes);
    }

    /// [`Index::search`](super::Index::search) with hybrid's two sides fused by `fusion`
    /// (the retrieval sets compare the candidates).
    pub fn search_fused(
        index: &super::Index,
        query: &str,
        k: usize,
        mode: super::SearchMode,
        fusion: Fusion,
    ) -> Result<Vec<super::Hit>, super::MemoryError> {
        index.search_fused(query, k, mode, super::Period::default(), fusion)
    }

    /// [`Index::search`](super::Index::search) of an index of several models with their
    /// spaces added up by `spaces` (the retrieval sets compare the candidates).
    pub fn search_spaces(
        index: &super::Index,
        query: &str,
        k: usize,
        mode: super::SearchMode,
        spaces: Spaces,
    ) -> Result<Vec<super::Hit>, super::MemoryError> {
        index.search_spaces(
            query,
            k,
            mode,
            super::Period::default(),
            index.fusion(),
            spaces,
        )
    }

    /// The fusion `index`'s hybrid search uses (the default with its model's lift).
    pub fn fusion(index: &super::Index) -> Fusion {
        index.fusion()
    }

    pub use super::backend::Store;
    #[cfg(feature = "postgres")]
    pub use super::pg::{ListSettings, PgStore};

    /// A hybrid search on a PostgreSQL store with the query's vector ready (the default
    /// fusion, one space): what `Index::search` does after embedding the query.
    #[cfg(feature = "postgres")]
    pub fn pg_hybrid(
        store: &PgStore,
        query: &str,
        vector: &[f32],
        k: usize,
    ) -> Result<Vec<super::Hit>, super::StoreError> {
        let fusion = Fusion::DEFAULT;
        let depth = fusion.depth(k);
        let period = super::Period::default();
        let most = store.hybrid_text_side(query, depth, period)?;
        let text = super::store::text_side_for(store, query, fusion, most, depth, |q| {
            store.search_text_in(q, depth, period)
        })?;
        let vecs = store.vector_pool(0, vector, k, depth, period)?;
        let side = super::store::SpaceSide {
            space: 0,
            vector: vector.to_vec(),
            vecs,
            fusion,
        };
        store.fuse_spaces(
            query,
            text,
            vec![side],
            k,
            super::Weights::default(),
            Spaces::DEFAULT,
        )
    }

    /// The store behind `index`, locked; every other call on the index waits
    /// ([`Store::sqlite`] for a SQLite index's internals).
    pub fn store(index: &super::Index) -> std::sync::MutexGuard<'_, Store> {
        index.store()
    }
}

/// Runs blocking work of a tool (SQLite, the embedding model) on tokio's blocking pool;
/// if it panics, the tool fails with "the {what} operation stopped unexpectedly" instead
/// of taking the engine down.
async fn run_blocking<T, F>(what: &'static str, f: F) -> Result<T, klaw_core::ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, klaw_core::ToolError> + Send + 'static,
{
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        klaw_core::ToolError::failed(format!("the {what} operation stopped unexpectedly"))
            .with_source(e)
    })?
}
