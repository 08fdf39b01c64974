//! A command's private temporary directory (`TMPDIR` and `HOME` of every backend but
//! bubblewrap, which gives the command a `/tmp` of its own): made for one command and
//! removed when it ends, however it ends and whatever it did to the permissions inside
//! (`chmod 000` on a directory it filled). What an engine that was killed left behind
//! is removed when the next engine first chooses its sandbox, and what cannot be removed is
//! logged, never left silently.
//!
//! Each directory is named after the engine that made it, `klaw-exec-<pid>.<start>-*`
//! (`<start>`: the process's start time in clock ticks since boot, so a later process
//! with the same pid, such as an engine that is PID 1 of a container again after a
//! restart, is not taken for the one that made it).

use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use rustix::fs::{Mode, OFlags};

/// The prefix of every command's temporary directory.
const PREFIX: &str = "klaw-exec-";

/// How deep [`unlock`] goes (a tree deeper than this is left to the log).
const MAX_DEPTH: usize = 512;

/// A command's private temporary directory, removed on drop.
#[derive(Debug)]
pub(crate) struct CommandTmp {
    path: PathBuf,
}

impl CommandTmp {
    /// Makes a new directory in the system's temporary directory.
    pub(crate) fn new() -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{}-", this_engine()))
            .tempdir_in(std::env::temp_dir())?;
        let path = std::fs::canonicalize(dir.path())?;
        // Removed by `Drop` below, which restores permissions first (TempDir's drop
        // would give up on the first directory the command locked).
        let _ = dir.keep();
        Ok(Self { path })
    }

    /// The directory's canonical path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for CommandTmp {
    fn drop(&mut self) {
        let path = std::mem::take(&mut self.path);
        // Left empty (the usual case): one `rmdir`, here. Anything else is removed off
        // the async threads.
        match std::fs::remove_dir(&path) {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(_) => {}
        }
        // Off the async threads where there are some: processes of a tree that was just
        // killed may still be exiting (and writing), so removal retries for a moment.
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(move || remove_or_log(&path, true))),
            Err(_) => {
                remove_or_log(&path, true);
            }
        }
    }
}

/// Removes `path`, and says in the log when it cannot. With `retry`, tries again for
/// about a second (a killed tree's last processes may still be writing in it).
fn remove_or_log(path: &Path, retry: bool) -> bool {
    let pauses: &[u64] = if retry { &[20, 100, 300, 600] } else { &[] };
    let mut result = remove(path);
    for &ms in pauses {
        if result.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(ms));
        result = remove(path);
    }
    match result {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(
                target: "klaw::shell",
                "cannot remove a command's temporary directory {}: {e}; the next start \
                 of the engine tries again",
                path.display()
            );
            false
        }
    }
}

/// Removes the directory tree at `path` (a missing one is fine), first giving its owner
/// back the right to enter and empty every directory in it.
fn remove(path: &Path) -> io::Result<()> {
    let gone = |r: io::Result<()>| match r {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r,
    };
    if gone(std::fs::remove_dir_all(path)).is_ok() {
        return Ok(());
    }
    // Root passes every permission check; anyone else first undoes `chmod 000`.
    if !rustix::process::geteuid().is_root() {
        unlock(path)?;
    }
    gone(std::fs::remove_dir_all(path))
}

/// Gives the owner read, write and search permission on `path` and every directory
/// beneath it. Each is opened by descriptor without following a symbolic link, so a
/// link swapped in for a directory while this runs changes nothing it points to.
fn unlock(path: &Path) -> io::Result<()> {
    let open = |at: &dyn AsFd, name: &Path| {
        rustix::fs::openat(
            at,
            name,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
    };
    let mut stack = vec![(open(&rustix::fs::CWD, path)?, 0)];
    while let Some((dir, depth)) = stack.pop() {
        // chmod through the descriptor's /proc entry (fchmod refuses an O_PATH one).
        let proc = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&dir));
        rustix::fs::chmod(proc.as_str(), Mode::RWXU)?;
        if depth >= MAX_DEPTH {
            continue;
        }
        let listed = rustix::fs::openat(
            &dir,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        for entry in rustix::fs::Dir::read_from(&listed)? {
            let entry = entry?;
            let name = entry.file_name();
            if matches!(name.to_bytes(), b"." | b"..") {
                continue;
            }
            let is_dir = match entry.file_type() {
                rustix::fs::FileType::Directory => true,
                // Some filesystems do not say in the listing.
                rustix::fs::FileType::Unknown => {
                    rustix::fs::statat(&dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok_and(
                        |st| {
                            rustix::fs::FileType::from_raw_mode(st.st_mode)
                                == rustix::fs::FileType::Directory
                        },
                    )
                }
                _ => false,
            };
            let name = std::os::unix::ffi::OsStrExt::from_bytes(name.to_bytes());
            if is_dir && let Ok(sub) = open(&dir, Path::new::<std::ffi::OsStr>(name)) {
                stack.push((sub, depth + 1));
            }
        }
    }
    Ok(())
}

/// This process as it names its directories: `<pid>.<start>`.
fn this_engine() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        let pid = std::process::id();
        format!("{pid}.{}", start_time(pid).unwrap_or(0))
    })
}

/// The start time of process `pid` (clock ticks since boot, field 22 of its `stat`).
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from its end.
    let after_name = stat.rsplit_once(')')?.1;
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the engine a directory name's `<pid>.<start>` tag names still runs. An
/// unreadable `/proc` entry (`hidepid`) counts as running: its directory is kept.
fn still_running(tag: &str) -> bool {
    let Some((pid, start)) = tag.split_once('.') else {
        return true;
    };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return true;
    };
    match std::fs::metadata(format!("/proc/{pid}")) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(_) => true,
        Ok(_) => start_time(pid).is_none_or(|s| s == start),
    }
}

/// Removes what engines that are gone left in the system's temporary directory, once
/// per process, on the blocking pool (nothing waits for it: it touches only directories
/// of engines that no longer run). Call it inside the runtime.
pub(crate) fn sweep_in_background() {
    static SWEPT: OnceLock<()> = OnceLock::new();
    SWEPT.get_or_init(|| {
        drop(tokio::task::spawn_blocking(|| sweep(&std::env::temp_dir())));
    });
}

/// Removes from `parent` the command directories of engines that no longer run (this
/// process's own, and those of other running engines, are kept), saying in the log what
/// it removed and what it could not.
pub(crate) fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let me = rustix::process::geteuid().as_raw();
    // As root, commands' directories belong to the sandbox's user.
    #[cfg(target_os = "linux")]
    let sandbox_user = (me == 0).then_some(klaw_sandbox::unprivileged::UNPRIVILEGED_ID);
    #[cfg(not(target_os = "linux"))]
    let sandbox_user: Option<u32> = None;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(tag) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .map(|(tag, _)| tag)
        else {
            continue;
        };
        // Only real directories of this user (or, as root, of the sandbox's user): a
        // link or somebody else's directory of that name is not ours to touch.
        let path = entry.path();
        let ours = std::fs::symlink_metadata(&path).is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            m.is_dir() && (m.uid() == me || Some(m.uid()) == sandbox_user)
        });
        if !ours || still_running(tag) {
            continue;
        }
        if remove_or_log(&path, false) {
            tracing::info!(
                target: "klaw::shell",
                "removed {}, a command's temporary directory left by an engine that is gone",
                path.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A tree a command might leave: files in a directory it then locked.
    fn locked_tree(dir: &Path) {
        std::fs::create_dir_all(dir.join("k/s")).unwrap();
        std::fs::write(dir.join("k/s/f"), "x").unwrap();
        std::fs::set_permissions(dir.join("k/s"), std::fs::Permissions::from_mode(0o000)).unwrap();
        std::fs::set_permissions(dir.join("k"), std::fs::Permissions::from_mode(0o000)).unwrap();
    }

    #[test]
    fn a_locked_tree_is_removed() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("t");
        locked_tree(&dir);
        // A link to a directory outside keeps its target's permissions.
        let outside = parent.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o500)).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("link")).unwrap();
        unlock(&dir).unwrap();
        for locked in ["k", "k/s"] {
            let mode = std::fs::metadata(dir.join(locked))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o700, "{locked}");
        }
        locked_tree(&dir);
        assert!(remove_or_log(&dir, false));
        assert!(!dir.exists());
        let mode = std::fs::metadata(&outside).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o500);
        // Gone already: fine.
        assert!(remove_or_log(&dir, false));
    }

    #[test]
    fn a_command_dir_is_removed_when_dropped() {
        let tmp = CommandTmp::new().unwrap();
        let path = tmp.path().to_path_buf();
        assert!(
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("{PREFIX}{}-", this_engine()))
        );
        locked_tree(&path);
        drop(tmp);
        assert!(!path.exists());
    }

    #[test]
    fn the_sweep_removes_only_what_gone_engines_left() {
        let parent = tempfile::tempdir().unwrap();
        // An engine that is gone: a process that ended (its pid with a start time no
        // process has now).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        child.wait().unwrap();
        let gone = parent.path().join(format!("{PREFIX}{}.1-abc", child.id()));
        locked_tree(&gone);
        // This engine, and one with a malformed tag: kept.
        let mine = parent.path().join(format!("{PREFIX}{}-def", this_engine()));
        let odd = parent.path().join(format!("{PREFIX}xyz-ghi"));
        std::fs::create_dir(&mine).unwrap();
        std::fs::create_dir(&odd).unwrap();
        // A link with a gone engine's name: not followed, not removed.
        let target = parent.path().join("target");
        std::fs::create_dir(&target).unwrap();
        let link = parent.path().join(format!("{PREFIX}{}.1-jkl", child.id()));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        sweep(parent.path());
        assert!(!gone.exists());
        assert!(mine.exists() && odd.exists() && target.exists());
        assert!(std::fs::symlink_metadata(&link).is_ok());
    }

    #[test]
    fn start_times_tell_engines_apart() {
        let me = this_engine();
        assert!(still_running(me));
        let (pid, start) = me.split_once('.').unwrap();
        let start: u64 = start.parse().unwrap();
        assert!(start > 0);
        assert!(!still_running(&format!("{pid}.{}", start + 1)));
        assert!(still_running("not-a-tag"));
    }
}
