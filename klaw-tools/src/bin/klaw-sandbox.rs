//! The sandbox helper on its own: `klaw-sandbox __klaw-sandbox <policy> <command>...`.
//!
//! `klaw-engine` has its own (`klaw-engine-sandbox`) and plays the role itself too; this
//! binary serves klaw-tools' own tests and benches (and programs that embed klaw-tools
//! without the engine: point the `SandboxHelper` service at it).

fn main() -> std::process::ExitCode {
    match klaw_sandbox::run_helper_if_requested() {
        Some(code) => code,
        None => {
            eprintln!(
                "usage: klaw-sandbox {} <policy-json> <command> [args...] (started by Klaw's shell tools)",
                klaw_sandbox::HELPER_ARG
            );
            std::process::ExitCode::from(2)
        }
    }
}
