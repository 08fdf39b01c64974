//! Memory: chunking, a SQLite store with full-text (FTS5) and vector (sqlite-vec) indexes,
//! and hybrid search fused with Reciprocal Rank Fusion. See `doc/memory.md`.

pub mod chunk;
pub mod fts;
pub mod fuse;
pub mod store;
