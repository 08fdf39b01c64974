//! The sandbox helper on its own: `klaw-sandbox __klaw-sandbox <policy> <command>...`.
//!
//! `klaw-engine` has its own (`klaw-engine-sandbox`) and plays the role itself too; this
//! binary serves klaw-tools' own tests and benches (and programs that embed klaw-tools
//! without the engine: point the `SandboxHelper` service at it).

fn main() -> std::process::ExitCode {
    klaw_sandbox::helper_only_main("klaw-sandbox")
}
