//! Memory: what the agent remembers and searches (text embedded by meaning, stored, found).

pub mod embed;

pub use embed::{EmbedError, Embedder, EmbedderConfig, TextKind};
