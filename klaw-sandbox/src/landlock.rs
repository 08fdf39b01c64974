//! The Landlock + seccomp backend. The helper (`__klaw-sandbox`) supervises the command
//! from outside the sandbox: it makes everything below ready ([`prepare`]), then the
//! command's process applies it to itself right before `exec`
//! ([`Prepared::apply`]), so the command and every descendant inherit it while the
//! supervisor stays out of their reach, and no second copy of the helper is started.
//!
//! - Landlock: read and execute in the system directories and the read-only folders
//!   (the skills'), read and write in the workspace and a private temporary directory,
//!   nothing anywhere else (the home directory and the rest of the data dir are
//!   unreachable); UNIX sockets reachable by path only
//!   beneath the writable directories (ABI 9); TCP bind and connect denied unless the
//!   network is allowed; signals and abstract UNIX sockets scoped to the sandbox (ABI 6).
//!   ABI 3 (truncation) is required; newer rights are used where the kernel has them.
//! - seccomp: sockets other than UNIX ones denied unless the network is allowed, and
//!   UNIX ones too where Landlock cannot confine them by path (below ABI 9); the
//!   calls that reach around the sandbox (ptrace, mount, namespaces, kernel modules,
//!   BPF, io_uring, keyrings, `open_by_handle_at`) denied; System V IPC, which
//!   Landlock does not cover and which lives in the host's IPC namespace, absent.
//! - Capabilities: all dropped, including from the bounding set, so a command started by
//!   root is not root-capable inside. A supervisor that is not root may not drop from
//!   the bounding set (that takes `CAP_SETPCAP`): its command first joins a user
//!   namespace of its own user (its uid and gid mapped to themselves, files of every
//!   other owner shown as `nobody`), where it may, wherever the machine allows one.

use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};

use crate::caps::{drop_bounding_set, drop_capabilities};
use crate::policy::{HelperPolicy, SYSTEM_DIRS};
use crate::seccomp;

/// The device files a command may open (read and write); the rest of `/dev` (terminals,
/// disks, `/dev/tty`) is denied.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// The restrictions of one command, made ready in the supervisor (everything that
/// allocates, opens a path or compiles happens there: the Landlock ruleset with its
/// rules, the seccomp filter, the working directory's names), then applied by
/// [`Prepared::apply`] in the command's process right before `exec`, which only
/// makes system calls. No second copy of the (large) helper binary is started.
pub(crate) struct Prepared {
    ruleset: RulesetCreated,
    filter: seccompiler::BpfProgram,
    /// The kernel's Landlock ABI, capped at [`NEWEST`], as the filter was chosen for.
    abi: ABI,
    /// Switch to [`UNPRIVILEGED_ID`](crate::unprivileged::UNPRIVILEGED_ID) first (the
    /// supervisor is root).
    unprivileged: bool,
    /// A user namespace of the supervisor's (not root) user, mapping only its own uid
    /// and gid, which the command joins to empty its bounding set; `None` where none can
    /// be made (then the bounding set stays, and no-new-privileges makes it moot).
    userns: Option<&'static OwnedFd>,
    /// The workspace and the working directory beneath it (empty: the workspace),
    /// entered by descriptor; `None` for the probe, which runs no command.
    enter: Option<(CString, CString)>,
    /// Where a failed step is reported to the supervisor (one byte, [`Step`]).
    report: OwnedFd,
}

/// A step of [`Prepared::apply`], as reported to the supervisor when it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Step {
    /// Switching to the unprivileged user.
    User = 1,
    /// Entering the working directory.
    WorkingDir = 2,
    /// Applying the Landlock ruleset.
    Landlock = 3,
    /// Installing the seccomp filter.
    Seccomp = 4,
    /// Dropping capabilities.
    Capabilities = 5,
}

impl Step {
    fn from_byte(b: u8) -> Option<Step> {
        [
            Step::User,
            Step::WorkingDir,
            Step::Landlock,
            Step::Seccomp,
            Step::Capabilities,
        ]
        .into_iter()
        .find(|s| *s as u8 == b)
    }

    /// What failed, for the supervisor's message (the error follows it).
    pub(crate) fn describe(self, policy: &HelperPolicy) -> String {
        match self {
            Step::User => "cannot switch to an unprivileged user".into(),
            Step::WorkingDir => format!(
                "the working directory {} is no longer beneath the workspace as checked",
                policy.cwd.display()
            ),
            Step::Landlock => format!(
                "Landlock could not be enforced (ABI {} (Linux 6.2) or newer is required)",
                REQUIRED as i32
            ),
            Step::Seccomp => "seccomp".into(),
            Step::Capabilities => "dropping capabilities".into(),
        }
    }
}

/// The supervisor's end of [`Prepared`]'s report: which step failed, if one did.
pub(crate) struct Report(OwnedFd);

impl Report {
    /// The failed step, once the child has exited or reached `exec` (read after its
    /// start failed; the write end closes at `exec`, so this never blocks for long).
    pub(crate) fn failed(&self) -> Option<Step> {
        let mut byte = [0_u8; 1];
        match rustix::io::read(&self.0, &mut byte) {
            Ok(1) => Step::from_byte(byte[0]),
            _ => None,
        }
    }
}

/// Makes ready the restrictions of `policy` for a command started by this supervisor
/// (see [`Prepared`]); `unprivileged` when the supervisor is root.
pub(crate) fn prepare(
    policy: &HelperPolicy,
    unprivileged: bool,
) -> Result<(Prepared, Report), String> {
    let abi = crate::sys::landlock_abi().min(NEWEST);
    require(abi)?;
    // Without `ResolveUnix` (ABI 9) Landlock does not stop `connect(2)` to a UNIX
    // socket by path (a host's docker.sock, systemd or ssh-agent): refuse UNIX sockets
    // too, unless the network is allowed anyway (`socketpair` stays allowed).
    let deny_unix = !policy.network && abi < ABI::V9;
    let families: &[i32] = match (policy.network, deny_unix) {
        (true, _) => seccomp::NETWORK_FAMILIES,
        (false, false) => &[libc::AF_UNIX],
        (false, true) => &[],
    };
    // The command shares the host's IPC namespace: System V IPC looks absent.
    let filter = seccomp::filter(families, seccomp::Ipc::Host).map_err(|e| e.to_string())?;
    let ruleset = ruleset(policy)?;
    let userns = if unprivileged || policy.probe {
        None
    } else {
        own_user_namespace()
    };
    let enter = if policy.probe {
        None
    } else {
        let workspace = policy.write.first().ok_or("no workspace given")?;
        let relative = policy.cwd.strip_prefix(workspace).map_err(|_| {
            format!(
                "the working directory {} is outside the workspace",
                policy.cwd.display()
            )
        })?;
        let c =
            |p: &std::path::Path| CString::new(p.as_os_str().as_bytes()).map_err(|e| e.to_string());
        Some((c(workspace)?, c(relative)?))
    };
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| format!("pipe: {e}"))?;
    Ok((
        Prepared {
            ruleset,
            filter,
            abi,
            unprivileged,
            userns,
            enter,
            report: write,
        },
        Report(read),
    ))
}

impl Prepared {
    /// Applies the restrictions to the calling process: as root, first the switch to
    /// the unprivileged user; then the working directory, Landlock, seccomp and the
    /// capability drop. Runs in the forked child before `exec`, so it only makes system
    /// calls on what [`prepare`] made: no allocation, no lock, and no change to memory
    /// (the child may share the supervisor's, `crate::sys::spawn_restricted`). A failed
    /// step is reported to the supervisor before the error is returned.
    pub(crate) fn apply(&self) -> std::io::Result<()> {
        self.steps().map_err(|(step, e)| {
            let _ = rustix::io::write(&self.report, &[step as u8]);
            e
        })
    }

    fn steps(&self) -> Result<(), (Step, std::io::Error)> {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        if self.unprivileged {
            // While root may still do it: no capability can come back through `exec`.
            drop_bounding_set();
            crate::unprivileged::become_unprivileged_forked(crate::unprivileged::UNPRIVILEGED_ID)
                .map_err(|e| (Step::User, e))?;
        } else if let Some(userns) = &self.userns
            && crate::sys::join_own_user_namespace(userns).is_ok()
        {
            // Not root: only in a user namespace of its own may the process drop from
            // its bounding set (CAP_SETPCAP there). Best effort: where it cannot join,
            // the set stays as it was, and no-new-privileges (Landlock and seccomp set
            // it) already keeps `exec` from gaining any capability in it.
            drop_bounding_set();
        }
        // As the command's user, before seccomp (which makes `openat2` look absent):
        // beneath the workspace and without following any symbolic link, so a link
        // swapped in after the engine checked the directory cannot move the command's
        // starting point outside.
        if let Some((workspace, relative)) = &self.enter {
            let moved = |e: rustix::io::Errno| (Step::WorkingDir, std::io::Error::from(e));
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let root = rustix::fs::openat2(
                rustix::fs::CWD,
                workspace.as_c_str(),
                flags,
                Mode::empty(),
                ResolveFlags::NO_SYMLINKS,
            )
            .map_err(moved)?;
            let dir = if relative.is_empty() {
                root
            } else {
                rustix::fs::openat2(
                    &root,
                    relative.as_c_str(),
                    flags,
                    Mode::empty(),
                    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
                )
                .map_err(moved)?
            };
            rustix::process::fchdir(&dir).map_err(moved)?;
        }
        let landlock_failed = || (Step::Landlock, std::io::Error::last_os_error());
        // A copy of the descriptor (the ruleset itself stays the supervisor's).
        let ruleset = self.ruleset.try_clone().map_err(|e| (Step::Landlock, e))?;
        let status = ruleset.restrict_self().map_err(|_| landlock_failed())?;
        let enforced = !matches!(status.ruleset, RulesetStatus::NotEnforced);
        if !enforced || ABI::from(status.landlock).min(NEWEST) != self.abi {
            return Err((
                Step::Landlock,
                std::io::Error::from_raw_os_error(libc::EOPNOTSUPP),
            ));
        }
        seccomp::install_forked(&self.filter).map_err(|e| (Step::Seccomp, e))?;
        drop_capabilities().map_err(|e| (Step::Capabilities, e))
    }
}

/// The newest Landlock ABI this build knows: every right up to it is handled where the
/// kernel supports it (best effort), except those [`REQUIRED`] makes mandatory.
const NEWEST: ABI = ABI::V9;

/// The oldest Landlock ABI the sandbox accepts: ABI 3 (Linux 6.2) is the first that
/// controls truncation; below it `truncate(2)` and `O_TRUNC` would empty any readable
/// file on the host.
const REQUIRED: ABI = ABI::V3;

/// Refuses a kernel whose Landlock ABI is older than [`REQUIRED`].
fn require(abi: ABI) -> Result<(), String> {
    if abi < REQUIRED {
        Err(format!(
            "this kernel's Landlock (ABI {}) cannot deny truncating files; Landlock ABI 3 \
             (Linux 6.2) or newer is required",
            abi as i32
        ))
    } else {
        Ok(())
    }
}

/// The Landlock ruleset of `policy`, with its rules, ready to be applied.
fn ruleset(policy: &HelperPolicy) -> Result<RulesetCreated, String> {
    let fs = NEWEST;
    let all = AccessFs::from_all(fs);
    // No device nodes, even for root. `ResolveUnix` (connecting to UNIX sockets by path)
    // is part of `all`, so only sockets beneath the writable directories are reachable.
    let write: BitFlags<AccessFs> = all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    let read = AccessFs::from_read(fs);
    let mut ruleset = Ruleset::default()
        // Truncation must be enforced: without it a command could empty host files.
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(REQUIRED))
        .map_err(|e| {
            format!("Landlock ABI 3 (Linux 6.2) or newer is required to deny truncating files: {e}")
        })?
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(|e| e.to_string())?;
    if !policy.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(fs))
            .map_err(|e| e.to_string())?;
    }
    ruleset = ruleset
        .scope(Scope::from_all(fs))
        .map_err(|e| e.to_string())?;
    ruleset
        .create()
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(SYSTEM_DIRS, read))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(["/proc", "/sys"], read))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(
            DEVICES,
            AccessFs::from_file(fs) & !(AccessFs::Execute | AccessFs::ResolveUnix),
        ))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(&policy.write, write))
        .map_err(|e| e.to_string())?
        // The folders shown read-only (the skills'): read and run, never write.
        .add_rules(path_beneath_rules(read_only(policy), read))
        .map_err(|e| e.to_string())
}

/// The read-only folders of `policy` (see [`Policy::read_only`](crate::Policy::read_only))
/// beside its workspace.
fn read_only(policy: &HelperPolicy) -> Vec<std::path::PathBuf> {
    match policy.write.first() {
        Some(workspace) => {
            crate::policy::read_only_outside(workspace, &policy.hidden, &policy.read_only)
        }
        None => Vec::new(),
    }
}

/// The user namespace for the commands of this (not root) user: its uid and gid mapped
/// to themselves, nothing else; `None` where the machine allows none (user namespaces
/// disabled or refused to this user). Made once per process: the sandbox server makes
/// it at its set-up, so that every supervisor it forks finds it made; the commands
/// share it as they share their uid (none keeps a capability in it past `exec`).
pub(crate) fn own_user_namespace() -> Option<&'static OwnedFd> {
    static USERNS: std::sync::OnceLock<Option<OwnedFd>> = std::sync::OnceLock::new();
    USERNS
        .get_or_init(|| {
            let uid = rustix::process::geteuid().as_raw();
            let gid = rustix::process::getegid().as_raw();
            crate::sys::user_namespace((uid, uid), (gid, gid)).ok()
        })
        .as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn landlock_without_truncate_control_is_refused() {
        for old in [ABI::Unsupported, ABI::V1, ABI::V2] {
            let e = require(old).unwrap_err();
            assert!(e.contains("Linux 6.2"), "{e}");
        }
        for ok in [ABI::V3, ABI::V5, NEWEST] {
            require(ok).unwrap();
        }
    }
}
