//! The sandbox helper: a copy of the engine's own binary, started as
//! `<program> __klaw-sandbox <policy-json> <command>...`, that applies the policy and
//! supervises the command (see [`run_helper_if_requested`]).

use std::ffi::OsString;
use std::process::ExitCode;

use crate::policy::HELPER_ARG;

/// The helper's entry point: `args` are what follows [`HELPER_ARG`] (the policy as
/// JSON, then the command). Applies the policy to this process, starts the command,
/// waits for it, ends whatever it left running, and exits with its status.
///
/// Call it before anything else in `main` (no threads may exist yet: Landlock and
/// seccomp restrict the calling thread). `klaw_engine::main` does.
pub fn helper_main(args: Vec<OsString>) -> ExitCode {
    #[cfg(target_os = "linux")]
    let result = crate::supervisor::run(args);
    #[cfg(not(target_os = "linux"))]
    let result: Result<u8, String> = {
        drop(args);
        Err(crate::UNSUPPORTED.to_owned())
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("klaw-sandbox: {e}");
            ExitCode::from(125)
        }
    }
}

/// The one call every program that runs sandboxed commands makes first in `main`.
///
/// Commands are started through a copy of the current executable acting as the sandbox
/// helper (`<program> __klaw-sandbox <policy> <command>...`). When this process is such
/// a copy, this runs the helper ([`helper_main`]) and returns its exit code, which
/// `main` must return at once, before it starts threads or reads anything else;
/// otherwise it does nothing and returns `None`. A binary that leaves it out still
/// works, but its commands are refused: the sandbox's probe finds no helper.
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     if let Some(code) = klaw_sandbox::run_helper_if_requested() {
///         return code;
///     }
///     // ... the program itself
///     std::process::ExitCode::SUCCESS
/// }
/// ```
pub fn run_helper_if_requested() -> Option<ExitCode> {
    let mut args = std::env::args_os();
    let _program = args.next();
    if args.next().is_some_and(|a| a == HELPER_ARG) {
        Some(helper_main(args.collect()))
    } else {
        None
    }
}
