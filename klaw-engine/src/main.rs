//! The `klaw-engine` binary: see `klaw-engine --help`.

// The test fixtures (feature `fixtures`) register themselves when linked.
#[cfg(feature = "fixtures")]
use klaw_test_fixtures as _;

fn main() -> std::process::ExitCode {
    klaw_engine::main()
}
