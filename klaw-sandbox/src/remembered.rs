//! Probe results remembered across processes until the machine restarts, so that a
//! short-lived program (`klaw-engine call exec ...`) does not run the sandbox's probe
//! again on every start.
//!
//! Only successes are remembered, each under a key made of everything the answer
//! depends on: the helper program (its path and the identity of its file: device, inode,
//! size, times), bubblewrap's (when it is asked about), the boot (`boot_id`: a restart,
//! a new kernel), the user and group, and the sysctls that decide whether user namespaces
//! may be made. A changed binary, bubblewrap upgraded or removed, a restart or such a
//! sysctl changed gives another key, so the probe runs again.
//!
//! The answers live in `$XDG_RUNTIME_DIR/klaw` (a per-user memory filesystem, emptied at
//! restart), else in `$XDG_CACHE_HOME/klaw` or `~/.cache/klaw`, in a directory and files
//! that must belong to this user and be writable by no one else; anything else is
//! ignored. A wrong answer could not weaken the sandbox: the helper applies every
//! restriction itself and refuses to run a command when one cannot be applied, so an
//! answer that no longer holds makes commands fail, never run unsandboxed.

use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Sysctls that decide whether bubblewrap may make user namespaces (those this kernel
/// has are part of the key).
const SYSCTLS: &[&str] = &[
    "/proc/sys/user/max_user_namespaces",
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
];

/// The key of the question `what` about `programs` (the helper, and bubblewrap when it
/// is asked about), or `None` when one cannot be read (then nothing is remembered).
pub(crate) fn key(what: &str, programs: &[&Path]) -> Option<String> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    "klaw-sandbox probe 1".hash(&mut h);
    what.hash(&mut h);
    for program in programs {
        let m = std::fs::metadata(program).ok()?;
        program.hash(&mut h);
        (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec()).hash(&mut h);
        (m.ctime(), m.ctime_nsec()).hash(&mut h);
    }
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()?
        .hash(&mut h);
    for sysctl in SYSCTLS {
        std::fs::read_to_string(sysctl)
            .unwrap_or_default()
            .hash(&mut h);
    }
    (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    )
        .hash(&mut h);
    Some(format!("sandbox-probe-{:016x}", h.finish()))
}

/// The remembered answer under `key`, if there is one that can be trusted.
pub(crate) fn recall(key: &str) -> Option<String> {
    let dir = dir()?;
    trusted(&std::fs::symlink_metadata(&dir).ok()?)?;
    let mut file = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dir.join(key))
        .ok()?;
    trusted(&file.metadata().ok()?)?;
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    Some(text)
}

/// Remembers `answer` under `key` (best effort: an error only costs a probe later).
pub(crate) fn remember(key: &str, answer: &str) {
    let Some(dir) = dir() else { return };
    if std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .is_err()
    {
        return;
    }
    if std::fs::symlink_metadata(&dir)
        .ok()
        .and_then(|m| trusted(&m))
        .is_none()
    {
        return;
    }
    let Ok(mut tmp) = tempfile::NamedTempFile::new_in(&dir) else {
        return;
    };
    if tmp.write_all(answer.as_bytes()).is_ok() && tmp.persist(dir.join(key)).is_ok() {
        forget_old(&dir, boot_time());
    }
}

/// How many answers are kept: a few per program that probes (the engine, its helper,
/// the test binaries of a build); the oldest beyond them are removed.
const KEPT: usize = 32;

/// Removes the answers no key can name any more: those written before the machine
/// started (`boot`, seconds since the epoch; their key holds an older boot id), and
/// the oldest beyond [`KEPT`] (most belong to binaries since rebuilt). Only this user's
/// own `sandbox-probe-*` files are touched.
fn forget_old(dir: &Path, boot: Option<i64>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut answers: Vec<(i64, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("sandbox-probe-")
        })
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            (m.is_file() && trusted(&m).is_some()).then(|| (m.mtime(), e.path()))
        })
        .collect();
    answers.sort_by_key(|a| std::cmp::Reverse(a.0));
    for (i, (mtime, path)) in answers.iter().enumerate() {
        if i >= KEPT || boot.is_some_and(|boot| *mtime < boot) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// When the machine started, in seconds since the epoch (`btime` in `/proc/stat`).
fn boot_time() -> Option<i64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// Where the answers live (see the module's documentation).
fn dir() -> Option<PathBuf> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let base = absolute("XDG_RUNTIME_DIR")
        .or_else(|| absolute("XDG_CACHE_HOME"))
        .or_else(|| absolute("HOME").map(|h| h.join(".cache")))?;
    Some(base.join("klaw"))
}

/// `Some` when `m` (not a link) belongs to this user and no one else may write it.
fn trusted(m: &std::fs::Metadata) -> Option<()> {
    let mine = m.uid() == rustix::process::geteuid().as_raw();
    (mine && !m.file_type().is_symlink() && m.mode() & 0o022 == 0).then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_change_with_the_question_and_the_program() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::write(&a, "one").unwrap();
        let k1 = key("bwrap", &[&a]).unwrap();
        assert_eq!(key("bwrap", &[&a]).unwrap(), k1);
        assert_ne!(key("landlock", &[&a]).unwrap(), k1);
        std::fs::write(&a, "a longer one").unwrap();
        assert_ne!(key("bwrap", &[&a]).unwrap(), k1);
        assert!(key("bwrap", &[&dir.path().join("missing")]).is_none());
    }

    /// Answers do not pile up: the oldest beyond the kept number go, and those from
    /// before the boot; other files stay.
    #[test]
    fn old_answers_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, age: u64| {
            let path = dir.path().join(name);
            std::fs::write(&path, "bwrap").unwrap();
            let at = std::time::SystemTime::now() - std::time::Duration::from_secs(age);
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(at).unwrap();
        };
        let left = || {
            let mut names: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        // Ages 100 s (the newest) to 136 s: the five oldest go.
        for i in 0..KEPT + 5 {
            write(&format!("sandbox-probe-{i:03}"), 100 + i as u64);
        }
        write("notes", 100_000);
        forget_old(dir.path(), None);
        let mut kept: Vec<String> = (0..KEPT).map(|i| format!("sandbox-probe-{i:03}")).collect();
        kept.insert(0, "notes".into());
        assert_eq!(left(), kept);
        // A boot 50 s ago: only what was written since stays.
        write("sandbox-probe-since-boot", 10);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        forget_old(dir.path(), Some(i64::try_from(now).unwrap() - 50));
        assert_eq!(left(), ["notes", "sandbox-probe-since-boot"]);
    }
}
