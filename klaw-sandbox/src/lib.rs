//! Klaw's command sandbox, moving here piece by piece from `klaw-tools` (bubblewrap,
//! Landlock and the helper are next). The kernel calls that Rust's standard library and
//! `rustix` offer only as `unsafe` sit in one private module, so that `klaw-tools` can
//! forbid unsafe code.
//!
//! - [`seccomp`]: the one seccomp filter of both backends.
//! - [`tree`]: ending a command's whole process tree.
//!
//! - [`close_inherited_fds`]: every file descriptor above 2 is closed when the command
//!   starts, whatever the engine inherited from whoever started it (a terminal, a file
//!   in the data dir, a socket). Rust marks the descriptors it opens close-on-exec, but
//!   not the ones a process is born with. [`close_inherited_fds_on_exec`] does the
//!   same for the calling process, for a process that starts commands itself (the
//!   sandbox helper), so it can start them without a `pre_exec` hook (which would
//!   turn the standard library's `posix_spawn` into a slower `fork`).
//!
//! - [`unprivileged`]: when the engine is root, commands run as an unprivileged user
//!   that sees the workspace through an idmapped mount.
//!
//! ```
//! use std::process::Command;
//! let mut cmd = Command::new("true");
//! klaw_sandbox::close_inherited_fds(&mut cmd);
//! assert!(cmd.status().unwrap().success());
//! ```

#[cfg(target_os = "linux")]
pub mod seccomp;
#[cfg(target_os = "linux")]
mod sys;
#[cfg(target_os = "linux")]
pub mod tree;
#[cfg(target_os = "linux")]
pub mod unprivileged;

#[cfg(target_os = "linux")]
pub use sys::{children_in_new_pid_namespace, close_inherited_fds, close_inherited_fds_on_exec};

/// Does nothing off Linux: the sandbox is not supported there.
#[cfg(not(target_os = "linux"))]
pub fn close_inherited_fds(_cmd: &mut std::process::Command) {}

/// Does nothing off Linux: the sandbox is not supported there.
#[cfg(not(target_os = "linux"))]
pub fn close_inherited_fds_on_exec() {}

/// Fails off Linux: the sandbox is not supported there.
#[cfg(not(target_os = "linux"))]
pub fn children_in_new_pid_namespace() -> std::io::Result<()> {
    Err(std::io::Error::other("PID namespaces are Linux-only"))
}
