//! Memory: what the agent remembers and searches. Text is chunked, embedded by meaning
//! (an ONNX sentence-embedding model), and stored in SQLite with full-text (FTS5) and
//! vector (sqlite-vec) indexes; search fuses both with Reciprocal Rank Fusion. See
//! `doc/memory.md`.
//!
//! The tools: `memory_search`, `memory_save`, and core memory (`memory_core_get`,
//! `memory_core_update`, `memory_core_delete`); see `doc/tools/memory.md`.

pub mod chunk;
pub mod core;
pub mod embed;
pub mod fts;
pub mod fuse;
pub mod index;
mod save;
mod search;
pub mod store;
pub mod vectors;

pub use self::core::{
    CoreDeleted, CoreMemory, CoreMemoryView, CoreSection, CoreUpdated, Entries, memory_core_delete,
    memory_core_get, memory_core_update,
};
pub use embed::{EmbedError, Embedder, EmbedderConfig, TextKind};
pub use index::{Document, Index, Memory, MemoryConfig, MemoryError, SaveReport, SearchMode};
pub use save::{MAX_SAVE_BYTES, MAX_SOURCE_CHARS, MemorySaved, memory_save};
pub use search::{MAX_QUERY_CHARS, MAX_TOP_K, MemoryHit, MemorySearchResults, memory_search};
