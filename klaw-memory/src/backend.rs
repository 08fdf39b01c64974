//! Where an [`Index`](super::Index) keeps its chunks: a SQLite file ([`MemoryStore`]) or,
//! with the `postgres` feature, the PostgreSQL of `storage.url` (`PgStore`). [`Store`]
//! gives the index one set of calls over both; each forwards to the backend's own.

use super::fuse::{Fusion, Spaces, Weights};
#[cfg(feature = "postgres")]
use super::pg::PgStore;
use super::store::{
    Hit, InsertReport, MemoryStore, NewChunk, Period, SpaceSide, StoreError, StoredChunk,
};

/// An index's store: SQLite or PostgreSQL.
#[derive(Debug)]
pub enum Store {
    /// A SQLite file.
    Sqlite(MemoryStore),
    /// The PostgreSQL of `storage.url`.
    #[cfg(feature = "postgres")]
    Pg(PgStore),
}

/// Calls `$call` on whichever backend `$self` is.
macro_rules! each {
    ($self:expr, $s:ident => $call:expr) => {
        match $self {
            Store::Sqlite($s) => $call,
            #[cfg(feature = "postgres")]
            Store::Pg($s) => $call,
        }
    };
}

impl Store {
    /// The SQLite store, if this is one (the benches measure its internals).
    pub fn sqlite(&self) -> Option<&MemoryStore> {
        match self {
            Store::Sqlite(s) => Some(s),
            #[cfg(feature = "postgres")]
            Store::Pg(_) => None,
        }
    }

    /// The SQLite store, if this is one, to change.
    pub fn sqlite_mut(&mut self) -> Option<&mut MemoryStore> {
        match self {
            Store::Sqlite(s) => Some(s),
            #[cfg(feature = "postgres")]
            Store::Pg(_) => None,
        }
    }

    /// The PostgreSQL store, if this is one.
    #[cfg(feature = "postgres")]
    pub fn postgres(&self) -> Option<&PgStore> {
        match self {
            Store::Pg(s) => Some(s),
            Store::Sqlite(_) => None,
        }
    }

    /// How many vector spaces (models).
    pub fn spaces(&self) -> usize {
        each!(self, s => s.spaces())
    }

    /// How many chunks are stored.
    pub fn len(&self) -> Result<usize, StoreError> {
        each!(self, s => s.len())
    }

    /// Whether no chunk is stored.
    pub fn is_empty(&self) -> Result<bool, StoreError> {
        Ok(self.len()? == 0)
    }

    /// Stores chunks (see [`MemoryStore::insert`]).
    pub fn insert(&mut self, chunks: &[NewChunk]) -> Result<InsertReport, StoreError> {
        each!(self, s => s.insert(chunks))
    }

    /// Removes a source's chunks.
    pub fn remove_source(&mut self, source: &str) -> Result<usize, StoreError> {
        each!(self, s => s.remove_source(source))
    }

    /// Removes the chunks whose source starts with `prefix`.
    pub fn remove_source_prefix(&mut self, prefix: &str) -> Result<usize, StoreError> {
        each!(self, s => s.remove_source_prefix(prefix))
    }

    /// A value kept in the store.
    pub fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        each!(self, s => s.meta(key))
    }

    /// Sets a [`meta`](Self::meta) value.
    pub fn set_meta(&mut self, key: &str, value: &str) -> Result<(), StoreError> {
        each!(self, s => s.set_meta(key, value))
    }

    /// Whether some chunks may lack a vector in space `space`.
    pub fn vectors_pending_in(&self, space: usize) -> Result<bool, StoreError> {
        each!(self, s => s.vectors_pending_in(space))
    }

    /// Runs `fill` (filling space `space`'s missing vectors) as the one engine doing it:
    /// on PostgreSQL under a lock the engines sharing the memory take in turn (the others
    /// wait, then find the space complete); SQLite's file has one engine.
    pub fn filling_space<T, E: From<StoreError>>(
        &mut self,
        space: usize,
        fill: impl FnOnce(&mut Store) -> Result<T, E>,
    ) -> Result<T, E> {
        #[cfg(feature = "postgres")]
        if let Store::Pg(s) = self {
            let _lock = s.lock_space(space)?;
            return fill(self);
        }
        let _ = space;
        fill(self)
    }

    /// The chunks without a vector in space `space`.
    pub fn chunks_without_vectors_in(
        &self,
        space: usize,
    ) -> Result<Vec<(i64, String)>, StoreError> {
        each!(self, s => s.chunks_without_vectors_in(space))
    }

    /// Stores vectors of existing chunks in space `space`.
    pub fn set_vectors_in(
        &mut self,
        space: usize,
        vectors: &[(i64, Vec<f32>)],
    ) -> Result<(), StoreError> {
        match self {
            Store::Sqlite(s) => s.set_vectors_in(space, vectors),
            #[cfg(feature = "postgres")]
            Store::Pg(s) => s.write_vectors_in(space, vectors, false),
        }
    }

    /// [`set_vectors_in`](Self::set_vectors_in) of the last, recording that every chunk
    /// has a vector there.
    pub fn finish_vectors_in(
        &mut self,
        space: usize,
        vectors: &[(i64, Vec<f32>)],
    ) -> Result<(), StoreError> {
        match self {
            Store::Sqlite(s) => s.finish_vectors_in(space, vectors),
            #[cfg(feature = "postgres")]
            Store::Pg(s) => s.write_vectors_in(space, vectors, true),
        }
    }

    /// Full-text search among the chunks of `period`.
    pub fn search_text_in(
        &self,
        query: &str,
        k: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        each!(self, s => s.search_text_in(query, k, period))
    }

    /// Vector search in the first space among the chunks of `period`.
    pub fn search_vector_in(
        &self,
        vector: &[f32],
        k: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        each!(self, s => s.search_space(0, vector, k, period))
    }

    /// Vector search in space `space`.
    pub fn search_space(
        &self,
        space: usize,
        vector: &[f32],
        k: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        each!(self, s => s.search_space(space, vector, k, period))
    }

    /// Vector search over every space.
    pub fn search_vector_spaces(
        &self,
        vectors: &[Vec<f32>],
        k: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        each!(self, s => super::store::search_vector_spaces(s, vectors, k, period))
    }

    /// The text side of a hybrid search.
    pub fn hybrid_text_side(
        &self,
        query: &str,
        k: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        each!(self, s => s.hybrid_text_side(query, k, period))
    }

    /// The text side a hybrid search fused by `fusion` fuses: the
    /// [`hybrid_text_side`](Self::hybrid_text_side) of `depth`, topped up by the any-word
    /// search over the query's rarer words if `fusion` tops up (`store::text_side_for`).
    pub fn fusion_text_side(
        &self,
        query: &str,
        depth: usize,
        period: Period,
        fusion: Fusion,
    ) -> Result<Vec<Hit>, StoreError> {
        let most = self.hybrid_text_side(query, depth, period)?;
        each!(self, s => super::store::text_side_for(s, query, fusion, most, depth, |q| {
            s.search_text_in(q, depth, period)
        }))
    }

    /// The vector side of a hybrid search.
    pub fn vector_pool(
        &self,
        space: usize,
        vector: &[f32],
        k: usize,
        depth: usize,
        period: Period,
    ) -> Result<Vec<Hit>, StoreError> {
        each!(self, s => s.vector_pool(space, vector, k, depth, period))
    }

    /// Fuses a hybrid search's sides.
    pub(crate) fn fuse_spaces(
        &self,
        query: &str,
        text: Vec<Hit>,
        sides: Vec<SpaceSide>,
        k: usize,
        weights: Weights,
        spaces: Spaces,
    ) -> Result<Vec<Hit>, StoreError> {
        each!(self, s => s.fuse_spaces(query, text, sides, k, weights, spaces))
    }

    /// The chunks of a source (`memory_get`).
    pub(crate) fn chunks_of(
        &self,
        source: &str,
        prefix: bool,
    ) -> Result<Vec<StoredChunk>, StoreError> {
        each!(self, s => s.chunks_of(source, prefix))
    }

    /// The source of a chunk.
    pub(crate) fn source_of(&self, id: i64) -> Result<Option<String>, StoreError> {
        each!(self, s => s.source_of(id))
    }

    /// Every distinct source.
    pub(crate) fn sources(&self) -> Result<Vec<String>, StoreError> {
        each!(self, s => s.sources())
    }
}
