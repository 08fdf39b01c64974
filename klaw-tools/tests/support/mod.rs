//! Helpers shared by the test binaries of this crate.

pub(crate) mod reference;
