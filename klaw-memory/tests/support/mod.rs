//! Helpers shared by the test modules of this crate.

#[cfg(feature = "postgres")]
pub(crate) mod pg;
pub(crate) mod reference;
