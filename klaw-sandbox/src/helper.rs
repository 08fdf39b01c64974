//! The sandbox helper: a copy of the engine's own binary, started as
//! `<program> __klaw-sandbox <policy-json> <command>...`, that applies the policy and
//! supervises the command (see [`run_helper_if_requested`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::policy::{HELPER_ARG, SERVE_ARG};

/// The first argument that makes the helper the keeper of `render_js`'s browser
/// ([`browser_main`]).
pub const BROWSER_ARG: &str = "__klaw-browser";

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
    exit_code(result)
}

/// The one call every program that runs sandboxed commands makes first in `main`.
///
/// Commands are started through a copy of the current executable acting as the sandbox
/// helper (`<program> __klaw-sandbox <policy> <command>...`). When this process is such
/// a copy, this runs the helper ([`helper_main`]) (or, started with [`SERVE_ARG`], the
/// sandbox server of a serving engine, [`serve_main`]) and returns its exit code, which
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
    match args.next() {
        Some(a) if a == HELPER_ARG => Some(helper_main(args.collect())),
        Some(a) if a == SERVE_ARG => Some(serve_main(args.collect())),
        Some(a) if a == BROWSER_ARG => Some(browser_main(args.collect())),
        _ => None,
    }
}

/// The sandbox server's entry point (`<program> __klaw-sandbox-serve <policy-json>`,
/// started by a serving engine's shell tools, see [`Server`](crate::Server)): `args`
/// are what follows [`SERVE_ARG`]. Serves until the engine's socket on its stdin ends,
/// then exits. Like [`helper_main`], call it before anything else in `main` (no thread
/// may exist: the server forks a supervisor per command).
pub fn serve_main(args: Vec<OsString>) -> ExitCode {
    #[cfg(target_os = "linux")]
    let result = crate::server::serve(args);
    #[cfg(not(target_os = "linux"))]
    let result: Result<u8, String> = {
        drop(args);
        Err(crate::UNSUPPORTED.to_owned())
    };
    exit_code(result)
}

/// The browser keeper's entry point (`<program> __klaw-browser <profile> <browser>
/// <args>...`, started by `render_js` with the two ends of the browser's DevTools pipe
/// as its stdin and stdout): `args` are what follows [`BROWSER_ARG`]. Starts the
/// browser (as an unprivileged user of its own when root, DevTools on descriptors 3
/// and 4), and when the engine's end of the pipe hangs up (the engine dropped it or
/// died, SIGKILL included) or the browser exits, kills the browser's whole tree and
/// removes the profile directory. Like [`helper_main`], call it first in `main`.
pub fn browser_main(args: Vec<OsString>) -> ExitCode {
    #[cfg(target_os = "linux")]
    let result = crate::browser::run(args);
    #[cfg(not(target_os = "linux"))]
    let result: Result<u8, String> = {
        drop(args);
        Err(crate::UNSUPPORTED.to_owned())
    };
    exit_code(result)
}

/// The helper's exit code for `result`; an error is printed first.
fn exit_code(result: Result<u8, String>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("klaw-sandbox: {e}");
            ExitCode::from(125)
        }
    }
}

/// The whole `main` of a program that is only the sandbox helper (`klaw-engine-sandbox`,
/// klaw-tools' `klaw-sandbox`): the helper when started as one, else a usage line naming
/// `program` on stderr and exit code 2.
pub fn helper_only_main(program: &str) -> ExitCode {
    run_helper_if_requested().unwrap_or_else(|| {
        eprintln!(
            "usage: {program} {HELPER_ARG} <policy-json> <command> [args...] (started by Klaw's shell tools)"
        );
        ExitCode::from(2)
    })
}

/// The helper program to use for a `program` (usually the current executable): a small
/// binary named `name` beside it when there is one that can be trusted as much as the
/// program itself, else `program`, which plays the helper too
/// ([`run_helper_if_requested`]).
///
/// Starting a small helper is faster than starting a copy of a large program (fewer
/// pages to map and relocate: a few milliseconds a command). Trusted means: a regular
/// file (not a link) in the same directory, executable, owned by the program's owner or
/// by root, and writable by nobody else (no group or other write bit): whoever could
/// replace it could replace the program too.
pub fn helper_beside(program: &Path, name: &str) -> PathBuf {
    program
        .parent()
        .map(|dir| dir.join(name))
        .filter(|helper| trusted_beside(program, helper))
        .unwrap_or_else(|| program.to_path_buf())
}

#[cfg(unix)]
fn trusted_beside(program: &Path, helper: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(p), Ok(h)) = (
        std::fs::metadata(program),
        std::fs::symlink_metadata(helper),
    ) else {
        return false;
    };
    h.is_file()
        && h.mode() & 0o100 != 0
        && h.mode() & 0o022 == 0
        && (h.uid() == p.uid() || h.uid() == 0)
}

#[cfg(not(unix))]
fn trusted_beside(_program: &Path, _helper: &Path) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn file(path: &Path, mode: u32) {
        std::fs::write(path, b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_trusted_helper_beside_the_program_is_chosen_else_the_program() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("engine");
        file(&program, 0o755);
        let helper = dir.path().join("engine-sandbox");
        // none: the program itself
        assert_eq!(helper_beside(&program, "engine-sandbox"), program);
        file(&helper, 0o755);
        assert_eq!(helper_beside(&program, "engine-sandbox"), helper);
        // writable by the group or by others, or not executable: not trusted
        for mode in [0o775, 0o757, 0o644] {
            std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(
                helper_beside(&program, "engine-sandbox"),
                program,
                "{mode:o}"
            );
        }
        // a link (to anything) or a directory: not trusted
        std::fs::remove_file(&helper).unwrap();
        std::os::unix::fs::symlink(&program, &helper).unwrap();
        assert_eq!(helper_beside(&program, "engine-sandbox"), program);
        std::fs::remove_file(&helper).unwrap();
        std::fs::create_dir(&helper).unwrap();
        assert_eq!(helper_beside(&program, "engine-sandbox"), program);
        // a program with no directory
        assert_eq!(
            helper_beside(Path::new("/"), "engine-sandbox"),
            Path::new("/")
        );
    }
}
