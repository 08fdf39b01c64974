//! Helpers shared by the test modules of this crate.

pub(crate) mod reference;
