//! The engine's sandbox helper on its own: `klaw-engine-sandbox __klaw-sandbox <policy>
//! <command>...`, started by the shell tools for each command (see `klaw_sandbox`).
//!
//! `klaw-engine` can play this role itself, but a small program starts faster than a
//! copy of the whole engine: the engine uses this one when it sits beside it
//! (`klaw_sandbox::helper_beside`), which every build and install of `klaw-engine` puts
//! there. It links the sandbox crate only, never the engine.

fn main() -> std::process::ExitCode {
    klaw_sandbox::helper_only_main("klaw-engine-sandbox")
}
