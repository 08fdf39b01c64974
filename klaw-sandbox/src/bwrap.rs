//! The bubblewrap backend: a private mount, PID, IPC, UTS and network namespace per
//! command, built from read-only system directories, the workspace read-write, the
//! read-only folders (the skills', at their own paths) and a private `/tmp` and
//! `/dev/shm`, both bounded. Everything else is read-only: the root
//! and `/dev` are memory filesystems that bubblewrap builds, which would otherwise take
//! writes as large as the host's memory.

use std::ffi::OsString;
use std::path::Path;

use crate::policy::{Bwrap, Policy, SYSTEM_DIRS, read_only_outside};

/// Where a command's private `/tmp` is.
pub(crate) const TMP_DIR: &str = "/tmp";

/// Where a command's private POSIX shared memory is.
pub(crate) const SHM_DIR: &str = "/dev/shm";

/// The size of a command's private `/tmp` (a tmpfs, so memory): 512 MiB.
pub(crate) const TMP_SIZE: u64 = 512 << 20;

/// The size of a command's private `/dev/shm` (POSIX shared memory; a tmpfs): 64 MiB,
/// as a container runtime gives by default.
pub(crate) const SHM_SIZE: u64 = 64 << 20;

/// Parts of /proc bound read-only (the ones runc and Docker make read-only).
pub(crate) const PROC_READ_ONLY: &[&str] = &[
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/irq",
    "/proc/bus",
    "/proc/fs",
];

/// Files of /proc hidden under /dev/null (runc's masked paths that are files).
const PROC_MASKED: &[&str] = &[
    "/proc/kcore",
    "/proc/keys",
    "/proc/key-users",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/latency_stats",
    "/proc/kallsyms",
];

/// The [`PROC_MASKED`] files this kernel has (looked up once: bwrap cannot bind over a
/// file that does not exist).
pub(crate) fn proc_masked() -> &'static [&'static str] {
    static FOUND: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    FOUND.get_or_init(|| {
        PROC_MASKED
            .iter()
            .copied()
            .filter(|f| Path::new(f).exists())
            .collect()
    })
}

/// The `bwrap` arguments that run `argv` under `policy` (`bwrap` itself not included).
///
/// With `unprivileged` (the engine is root, and bubblewrap runs as an unprivileged user
/// that sees the workspace through an idmapped mount), the command sees itself as uid 0
/// of its own user namespace, which the host sees as that unprivileged user.
///
/// With `kept` (the holder of a kept sandbox, `crate::kept`), `/proc` is left unmasked:
/// no command ever sees it, each covers it with a `/proc` of its own, masked the same
/// way (and a mount of `/proc` needs one fully visible in its mount namespace); every
/// command then copies and tears down nine mounts fewer.
pub(crate) fn args(
    bwrap: &Bwrap,
    policy: &Policy,
    argv: &[String],
    unprivileged: bool,
    kept: bool,
) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |items: &[&dyn AsRef<std::ffi::OsStr>]| {
        a.extend(items.iter().map(|i| i.as_ref().to_os_string()));
    };
    push(&[
        &"--die-with-parent",
        &"--new-session",
        // The command itself is PID 1 of its namespace: no bubblewrap process sits inside
        // the sandbox for it to trace or write the memory of (and so forge the exit code
        // it reports), and when it ends the kernel ends every process left inside.
        &"--as-pid-1",
        &"--unshare-all",
        &"--cap-drop",
        &"ALL",
    ]);
    if bwrap.disable_userns || unprivileged {
        // A user namespace of our own, which `--unshare-all` only tries.
        push(&[&"--unshare-user"]);
    }
    if bwrap.disable_userns {
        // No user namespace inside (so no capabilities regained in one).
        push(&[&"--disable-userns", &"--assert-userns-disabled"]);
    }
    if unprivileged {
        push(&[&"--uid", &"0", &"--gid", &"0"]);
    }
    if policy.network {
        push(&[&"--share-net"]);
    }
    for dir in SYSTEM_DIRS {
        let path = Path::new(dir);
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(path) {
                    push(&[&"--symlink", &target, &path]);
                }
            }
            Ok(_) => push(&[&"--ro-bind", &path, &path]),
            Err(_) => {}
        }
    }
    push(&[&"--proc", &"/proc"]);
    // What container runtimes make read-only or hide in /proc: a command running as
    // root must not write the host's sysctls (`/proc/sys/kernel/core_pattern` runs a
    // program as host root), trigger SysRq, or read kernel memory and keyrings. The
    // host's directories are bound read-only over the new /proc's (sysctls are global).
    if !kept {
        for dir in PROC_READ_ONLY {
            push(&[&"--ro-bind-try", dir, dir]);
        }
        for file in proc_masked() {
            push(&[&"--ro-bind", &"/dev/null", file]);
        }
    }
    push(&[&"--dev", &"/dev"]);
    // /tmp and /dev/shm are tmpfs, so in memory: bounded (a bubblewrap without
    // `--size` fails the probe, so it is not used).
    for (dir, size) in [(TMP_DIR, TMP_SIZE), (SHM_DIR, SHM_SIZE)] {
        push(&[&"--size", &size.to_string(), &"--tmpfs", &dir]);
    }
    push(&[&"--bind", &policy.workspace, &policy.workspace]);
    // The folders shown read-only (the skills'), at their own paths; the shorter first,
    // so that one inside another is bound on top of it.
    let mut read_only = read_only_outside(&policy.workspace, &policy.hidden, &policy.read_only);
    read_only.sort_by_key(|d| d.as_os_str().len());
    for dir in &read_only {
        push(&[&"--ro-bind", dir, dir]);
    }
    // A data dir inside the workspace is hidden under an empty tmpfs, read-only; the
    // read-only folders beneath it (its skills) are shown again on it.
    for hidden in &policy.hidden {
        if hidden.starts_with(&policy.workspace) && hidden.exists() {
            push(&[&"--tmpfs", hidden]);
            for dir in policy
                .read_only
                .iter()
                .filter(|d| *d != hidden && d.starts_with(hidden) && d.is_dir())
            {
                push(&[&"--ro-bind", dir, dir]);
            }
            push(&[&"--remount-ro", hidden]);
        }
    }
    // Last, once every mount point exists: the root and /dev that bubblewrap built are
    // memory filesystems without a bound, so nothing may be written there (the mounts
    // on them, /tmp, /dev/shm, the workspace and the devices, stay as they are).
    push(&[&"--remount-ro", &"/dev", &"--remount-ro", &"/"]);
    push(&[
        &"--setenv",
        &"HOME",
        &"/tmp",
        &"--setenv",
        &"TMPDIR",
        &"/tmp",
        &"--chdir",
    ]);
    push(&[&policy.cwd, &"--"]);
    a.extend(argv.iter().map(OsString::from));
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn binds_the_workspace_and_isolates_the_network_by_default() {
        let policy = Policy {
            workspace: PathBuf::from("/w"),
            cwd: PathBuf::from("/w/sub"),
            hidden: vec![],
            read_only: vec![],
            network: false,
            stdin: None,
        };
        let bwrap = Bwrap {
            helper: PathBuf::from("/klaw"),
            path: PathBuf::from("/usr/bin/bwrap"),
            disable_userns: true,
        };
        let a: Vec<String> = args(&bwrap, &policy, &["true".into()], false, false)
            .into_iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let joined = a.join(" ");
        assert!(joined.contains("--unshare-all"), "{joined}");
        assert!(joined.contains("--disable-userns"), "{joined}");
        assert!(!joined.contains("--share-net"), "{joined}");
        assert!(joined.contains("--bind /w /w"), "{joined}");
        assert!(
            joined.contains(&format!(
                "--size {TMP_SIZE} --tmpfs /tmp --size {SHM_SIZE} --tmpfs /dev/shm"
            )),
            "{joined}"
        );
        // The root and /dev (unbounded memory filesystems) read-only, after every mount.
        assert!(
            joined.contains("--remount-ro /dev --remount-ro / --setenv"),
            "{joined}"
        );
        assert!(
            joined.contains("--proc /proc --ro-bind-try /proc/sys /proc/sys"),
            "{joined}"
        );
        for file in proc_masked() {
            assert!(
                joined.contains(&format!("--ro-bind /dev/null {file}")),
                "{joined}"
            );
        }
        assert!(joined.ends_with("--chdir /w/sub -- true"), "{joined}");
    }

    #[test]
    fn read_only_folders_are_bound_read_only_unless_they_hold_the_workspace() {
        let policy = Policy {
            workspace: PathBuf::from("/usr/lib"),
            cwd: PathBuf::from("/usr/lib"),
            hidden: vec![],
            read_only: ["/usr/share", "/usr", "/usr/lib/x", "/no/such/dir"]
                .map(PathBuf::from)
                .to_vec(),
            network: false,
            stdin: None,
        };
        let bwrap = Bwrap {
            helper: PathBuf::from("/klaw"),
            path: PathBuf::from("/usr/bin/bwrap"),
            disable_userns: true,
        };
        let joined = args(&bwrap, &policy, &["true".into()], false, false)
            .into_iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            joined
                .contains("--bind /usr/lib /usr/lib --ro-bind /usr/share /usr/share --remount-ro"),
            "{joined}"
        );
        // After the system directories: only /usr/share (/usr holds the workspace, the rest is
        // inside it or missing).
        let (_, after) = joined.split_once("--bind /usr/lib /usr/lib").unwrap();
        for absent in ["/usr ", "/usr/lib/x", "/no/such/dir"] {
            assert!(!after.contains(absent), "{absent}: {joined}");
        }
    }
}
