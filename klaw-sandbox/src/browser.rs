//! The browser's keeper: `<helper> __klaw-browser <profile> <browser> <args>...`, the
//! parent of `render_js`'s headless Chromium, which makes sure the browser never
//! outlives the engine and leaves no profile behind.
//!
//! The engine starts the keeper in a process group of its own with the two ends of
//! the browser's DevTools pipe as its stdin (what the engine writes) and stdout (what
//! the browser writes). The keeper:
//! - is a child subreaper, so every process the browser starts stays its descendant
//!   (a shell wrapper such as Debian's `chromium-headless-shell`, zygotes, renderers);
//! - starts the browser with those two pipes as its descriptors 3 and 4
//!   (`--remote-debugging-pipe`: no TCP port), a clean environment whose `HOME` and
//!   `TMPDIR` are the profile, a parent-death signal, and, when the keeper is root, as
//!   [`BROWSER_ID`](crate::unprivileged::BROWSER_ID) (so Chromium's own sandbox can
//!   stay on, and the browser is neither root nor the user commands run as);
//! - waits until the engine's end of the pipe hangs up (the engine dropped the browser
//!   or exited, by any signal, SIGKILL included: the kernel closes its descriptors) or
//!   the browser exits; then kills every descendant, reaps them, removes the profile
//!   directory and exits.

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use rustix::event::{PollFd, PollFlags};

/// The keeper's work: `args` are what follows [`BROWSER_ARG`] (the profile directory,
/// the browser, its arguments). Returns the exit code.
pub(crate) fn run(args: Vec<OsString>) -> Result<u8, String> {
    let mut args = args.into_iter();
    let profile = PathBuf::from(args.next().ok_or("no profile directory")?);
    let program = args.next().ok_or("no browser")?;
    if !profile.is_absolute() || !profile.is_dir() {
        return Err(format!("{} is not a directory", profile.display()));
    }
    crate::close_inherited_fds_on_exec();
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .map_err(|e| format!("PR_SET_CHILD_SUBREAPER: {e}"))?;
    let result = keep(&profile, program, args.collect());
    // Whatever happened, nothing of the browser stays: its processes, then its files.
    let _ = crate::tree::kill_descendants(rustix::process::getpid().as_raw_nonzero().get());
    reap_all();
    let _ = std::fs::remove_dir_all(&profile);
    result
}

/// Starts the browser and waits for the engine to hang up or the browser to exit.
fn keep(profile: &std::path::Path, program: OsString, args: Vec<OsString>) -> Result<u8, String> {
    let root = rustix::process::geteuid().is_root();
    if root {
        // The browser's user must pass through every directory above its profile.
        use std::os::unix::fs::MetadataExt;
        for dir in profile.ancestors().skip(1) {
            if std::fs::metadata(dir).is_ok_and(|m| m.mode() & 0o001 == 0) {
                return Err(format!(
                    "the browser's user cannot reach its profile {}: {} is closed to \
                     others; point TMPDIR at a directory others may pass through (/tmp)",
                    profile.display(),
                    dir.display()
                ));
            }
        }
        let id = Some(rustix::process::Uid::from_raw(
            crate::unprivileged::BROWSER_ID,
        ));
        let group = Some(rustix::process::Gid::from_raw(
            crate::unprivileged::BROWSER_ID,
        ));
        rustix::fs::chown(profile, id, group)
            .map_err(|e| format!("cannot hand the profile to the browser's user: {e}"))?;
    }
    let mut cmd = Command::new(&program);
    cmd.args(&args)
        .env_clear()
        .env("PATH", crate::DEFAULT_PATH)
        .env("LANG", "C.UTF-8")
        .env("HOME", profile)
        .env("TMPDIR", profile)
        .env("XDG_CONFIG_HOME", profile)
        .env("XDG_CACHE_HOME", profile)
        .env("XDG_DATA_HOME", profile)
        .env("XDG_RUNTIME_DIR", profile)
        .current_dir(profile)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if root {
        // The standard library drops the supplementary groups too.
        cmd.uid(crate::unprivileged::BROWSER_ID)
            .gid(crate::unprivileged::BROWSER_ID);
    }
    let held = crate::sys::devtools_pipe(&mut cmd)?;
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", program.to_string_lossy()))?;
    drop(held);
    // Our copy of the browser's writing end goes, so that the engine reads the end of
    // the pipe when the browser is gone.
    let null = std::fs::File::options()
        .write(true)
        .open("/dev/null")
        .map_err(|e| format!("/dev/null: {e}"))?;
    rustix::stdio::dup2_stdout(null.as_fd()).map_err(|e| format!("dup2: {e}"))?;
    let pidfd = crate::sys::pidfd(child.id()).map_err(|e| format!("pidfd: {e}"))?;
    let stdin = std::io::stdin();
    loop {
        // No event asked of the engine's end: only its hang-up wakes us (what the
        // browser reads there is none of our business).
        let mut fds = [
            PollFd::new(&stdin, PollFlags::empty()),
            PollFd::new(&pidfd, PollFlags::IN),
        ];
        match rustix::event::poll(&mut fds, None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(format!("poll: {e}")),
        }
        if !fds[0].revents().is_empty() || !fds[1].revents().is_empty() {
            return Ok(0);
        }
    }
}

/// Waits for every child (the keeper is subreaper: the browser's whole tree).
fn reap_all() {
    loop {
        match rustix::process::wait(rustix::process::WaitOptions::empty()) {
            Ok(Some(_)) => {}
            Err(rustix::io::Errno::INTR) => {}
            _ => return,
        }
    }
}
