//! The integration tests of klaw-memory, one test binary (one link step): each file
//! beside this one is a module, `support/` their shared helpers. Pick some with a
//! filter: `cargo test -p klaw-memory --test all -- retrieval_sets:: --nocapture`
//! (`make eval`).
//!
//! The model files come from `make setup` (`make test` runs it first); without them the
//! tests that need them fail with its hint.

mod support;

mod embed;
mod embed_minilm;
mod embed_use;
mod memory_index;
mod memory_tools;
#[cfg(feature = "postgres")]
mod pg;
mod retrieval;
mod retrieval_sets;
