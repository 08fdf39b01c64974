//! Memory: what the agent remembers and searches. Text is chunked, embedded by meaning
//! (an ONNX sentence-embedding model), and stored in SQLite with full-text (FTS5) and
//! vector (sqlite-vec) indexes; search fuses both with Reciprocal Rank Fusion. See
//! `doc/memory.md`.

pub mod chunk;
pub mod embed;
pub mod fts;
pub mod fuse;
pub mod index;
pub mod store;

pub use embed::{EmbedError, Embedder, EmbedderConfig, TextKind};
pub use index::{Document, Index, Memory, MemoryConfig, MemoryError, SaveReport, SearchMode};
