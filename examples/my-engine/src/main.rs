//! Example: the Klaw engine with your own tools linked in.
//!
//! Run with: cargo run -p my-engine -- tools
//!
//! Every `#[tool]` in every crate linked into the binary registers itself; the
//! `use ... as _` line makes sure the tool crate is linked even though nothing in
//! this file calls it.

use weather_tools as _;

fn main() -> std::process::ExitCode {
    klaw_engine::main()
}
