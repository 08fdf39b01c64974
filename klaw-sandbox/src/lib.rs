//! Klaw's command sandbox: runs a command so that it can touch only its workspace, ends
//! its whole process tree when asked, and never runs as the kernel's root. Used by the
//! shell tools of `klaw-tools`, and by anything else that starts commands for a model.
//!
//! | [`Mode`] | what runs the command |
//! |---|---|
//! | `bwrap` | bubblewrap (started by the helper, which hands it the seccomp filter): private mount/PID/network namespaces + seccomp; fails if bwrap does not work |
//! | `landlock` | the helper: Landlock + seccomp + no capabilities, supervised from outside |
//! | `auto` | bwrap if it works, else Landlock; **fails closed** if neither works |
//! | `off` | the helper without restrictions (it still ends the whole tree), or, if the helper is missing, the command alone in its own process group |
//!
//! How to run a command: [`select`] the backend for a mode once (it probes; where the
//! answer is already known, [`select_known`] gives it without a probe), [`wrap`] the
//! command line for it, start the program it gives, and end it with
//! [`tree::kill_tree`]. The helper is a program started with [`HELPER_ARG`]: a copy of
//! the calling program (every program that runs commands calls
//! [`run_helper_if_requested`] first in `main`), or a small binary beside it that does
//! only that and starts faster ([`helper_beside`]; `klaw-engine-sandbox`).
//!
//! A serving engine, which runs many commands, may keep one long-lived helper per
//! workspace and policy instead ([`Server`]): it does the set-up once and forks a
//! supervisor per command; under bubblewrap it keeps one sandbox, built once, which
//! each command enters with namespaces of its own (`kept`).
//!
//! The parts:
//! - [`seccomp`]: the one seccomp filter of both backends.
//! - [`tree`]: ending a command's whole process tree.
//! - [`unprivileged`]: when the engine is root, commands run as an unprivileged user
//!   that sees the workspace through an idmapped mount.
//! - [`browser_main`]: the keeper of `render_js`'s browser (started with
//!   [`BROWSER_ARG`]), which ends the browser and removes its profile when the engine
//!   goes, however it goes.
//! - [`close_inherited_fds`]: every file descriptor above 2 is closed when the command
//!   starts, whatever the engine inherited from whoever started it (a terminal, a file
//!   in the data dir, a socket). Rust marks the descriptors it opens close-on-exec, but
//!   not the ones a process is born with. [`close_inherited_fds_on_exec`] does the
//!   same for the calling process, for a process that starts commands itself (the
//!   sandbox helper), so it can start them without a `pre_exec` hook (which would
//!   turn the standard library's `posix_spawn` into a slower `fork`).
//! - [`release_free_memory`]: gives the memory glibc's allocator holds free back to the
//!   system (the engine calls it once its calls have been idle for a moment).
//!
//! The kernel calls that Rust's standard library and `rustix` offer only as `unsafe`
//! sit in one private module, so that `klaw-tools` can forbid unsafe code. Everything
//! but mode `off` is Linux-only: elsewhere [`select`] answers [`Error::Unavailable`]
//! ("not supported on this OS") for the other modes, and the crate still builds.
//!
//! ```
//! use std::process::Command;
//! let mut cmd = Command::new("true");
//! klaw_sandbox::close_inherited_fds(&mut cmd);
//! assert!(cmd.status().unwrap().success());
//! ```

mod backend;
#[cfg(target_os = "linux")]
mod browser;
mod helper;
mod policy;

#[cfg(target_os = "linux")]
mod bwrap;
#[cfg(target_os = "linux")]
mod caps;
#[cfg(target_os = "linux")]
mod ipc;
#[cfg(target_os = "linux")]
mod kept;
#[cfg(target_os = "linux")]
mod landlock;
#[cfg(target_os = "linux")]
mod namespaces;
#[cfg(target_os = "linux")]
mod remembered;
#[cfg(target_os = "linux")]
pub mod seccomp;
#[cfg(target_os = "linux")]
mod server;
#[cfg(target_os = "linux")]
mod supervisor;
#[cfg(target_os = "linux")]
mod sys;
#[cfg(target_os = "linux")]
pub mod tree;
/// Ending a command's process tree, off Linux: its process group only (descendants that
/// left the group with `setsid` are not found; the sandbox is not supported here).
#[cfg(not(target_os = "linux"))]
pub mod tree {
    /// Kills the process group `root` leads.
    pub fn kill_tree(root: i32) {
        if let Some(pid) = rustix::process::Pid::from_raw(root) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}
#[cfg(target_os = "linux")]
pub mod unprivileged;

pub use backend::{Backend, DEFAULT_PATH, describe, find_program, select, select_known, wrap};
pub use helper::{
    BROWSER_ARG, browser_main, helper_beside, helper_main, helper_only_main,
    run_helper_if_requested, serve_main,
};
pub use policy::{Bwrap, HELPER_ARG, Policy, SERVE_ARG, UNPROVEN, UNPROVEN_NOTE};
#[cfg(target_os = "linux")]
pub use policy::{NEVER_READ_ONLY, SYSTEM_DIRS, read_only_refusal};
#[cfg(target_os = "linux")]
pub use server::{ServedCommand, Server, SpawnError, Started};
#[cfg(target_os = "linux")]
pub use sys::{
    children_in_new_pid_namespace, close_inherited_fds, close_inherited_fds_on_exec,
    release_free_memory,
};

/// Why sandboxed commands cannot run on this OS.
pub(crate) const UNSUPPORTED: &str = "the OS sandbox (bubblewrap, Landlock + seccomp) is \
    supported on Linux only, so commands are refused here; set `sandbox` to `off` to run \
    them unsandboxed";

/// The OS sandbox commands run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// bubblewrap where it works, else Landlock + seccomp; refused if neither works.
    #[default]
    Auto,
    /// bubblewrap only; commands fail if it does not work.
    Bwrap,
    /// Landlock + seccomp only.
    Landlock,
    /// No sandbox (time and output limits still apply, and the tree still ends).
    Off,
}

impl Mode {
    /// The mode's name in configuration: `auto`, `bwrap`, `landlock` or `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Bwrap => "bwrap",
            Mode::Landlock => "landlock",
            Mode::Off => "off",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        [Mode::Auto, Mode::Bwrap, Mode::Landlock, Mode::Off]
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| format!("unknown sandbox `{s}`: expected auto, bwrap, landlock or off"))
    }
}

/// Why a command cannot be run in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No backend of the chosen mode works here (the message says why and what to do);
    /// commands are refused rather than run unsandboxed.
    #[error("{0}")]
    Unavailable(String),
    /// The command line is empty.
    #[error("the command is empty")]
    EmptyCommand,
    /// The policy could not be encoded for the helper.
    #[error("cannot encode the sandbox policy: {0}")]
    Policy(String),
}

/// Does nothing off Linux (the sandbox is not supported there, and neither is closing
/// what the engine inherited: commands in mode `off` inherit it).
#[cfg(not(target_os = "linux"))]
pub fn close_inherited_fds(_cmd: &mut std::process::Command) {}

/// Does nothing off Linux: the sandbox is not supported there.
#[cfg(not(target_os = "linux"))]
pub fn close_inherited_fds_on_exec() {}

/// Does nothing off Linux (the allocator there is not glibc's).
#[cfg(not(target_os = "linux"))]
pub fn release_free_memory() -> bool {
    false
}

/// Fails off Linux: the sandbox is not supported there.
#[cfg(not(target_os = "linux"))]
pub fn children_in_new_pid_namespace() -> std::io::Result<()> {
    Err(std::io::Error::other("PID namespaces are Linux-only"))
}
