//! The kept sandbox's namespaces as plain data: what the server made once (`crate::kept`)
//! and what the system calls that enter them (`crate::sys`) read.

use std::ffi::CString;
use std::os::fd::OwnedFd;

use seccompiler::BpfProgram;

/// The kept sandbox's namespaces and what a command needs to enter them; made once by
/// the server and inherited by its forked supervisors (every descriptor close-on-exec).
#[derive(Debug)]
pub(crate) struct Namespaces {
    /// The user namespace that owns the holder's mount namespace.
    pub(crate) user: OwnedFd,
    /// The nested user namespace the holder runs in (`--disable-userns`), if any.
    pub(crate) inner: Option<OwnedFd>,
    /// The holder's mount namespace.
    pub(crate) mnt: OwnedFd,
    /// The holder's other namespaces that differ from the server's, each with its type
    /// (`CLONE_NEW*`): UTS and cgroup.
    pub(crate) others: Vec<(OwnedFd, i32)>,
    /// The network is allowed: commands use the server's; else each makes one of its
    /// own (loopback only), as a one-shot command has.
    pub(crate) network: bool,
    /// The seccomp filter.
    pub(crate) filter: BpfProgram,
    /// The engine is root: commands switch to the unprivileged user first.
    pub(crate) root: bool,
    /// The parts of `/proc` bound read-only over themselves.
    pub(crate) proc_read_only: Vec<CString>,
    /// The files of `/proc` hidden under `/dev/null`.
    pub(crate) proc_masked: Vec<CString>,
    /// The mount options of `/tmp` and `/dev/shm`.
    pub(crate) tmp_options: CString,
    pub(crate) shm_options: CString,
    /// A workspace under `/tmp` or `/dev/shm`, which the command's fresh one would
    /// cover: the workspace, and the directories to make in the fresh one down to it,
    /// where it is mounted again (as bubblewrap binds it after making `/tmp`).
    pub(crate) covered: Option<(CString, Vec<CString>)>,
}

/// What one command enters: the kept sandbox, and the network namespace made ahead
/// for it, if any (else it makes its own).
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) ns: &'static Namespaces,
    pub(crate) network: Option<OwnedFd>,
}
