//! The seccomp filter every sandboxed command runs under, in both backends: the helper
//! installs it on itself before a Landlock command starts, and hands it to bubblewrap
//! (`--add-seccomp-fd`), which installs it right before it runs the command.
//!
//! The kernel checks, converts and JIT-compiles the program at every installation, that
//! is at every command's start, and walks it for every system call number to fill its
//! action cache (the calls it may then allow without running the program): so it is
//! one program, kept short, that finds a call number by binary search. [`filter`]
//! compiles it here rather than through `seccompiler`, whose programs test each listed
//! number in turn (a unit test checks that both decide every call alike).
//!
//! Listed calls fail with `EPERM` (`clone3` and `openat2`, whose flags seccomp cannot
//! see, with `ENOSYS`, so programs fall back to the calls filtered here; inotify and
//! fanotify with `ENOSYS` too, so programs fall back to polling); everything
//! else is allowed: ptrace and other processes' memory, mounts and namespaces, kernel
//! modules, BPF, perf, userfaultfd, io_uring, keyrings, file handles, terminal input
//! injection, device nodes, set-user-ID/set-group-ID bits (by `chmod`, `open` and
//! `mknod`), resource limits of other processes, and socket families beyond those
//! allowed (UNIX only without a network; never `AF_VSOCK` or `AF_PACKET`). Where the
//! command shares the host's IPC namespace (Landlock), System V IPC (`shm*`, `msg*`,
//! `sem*`) looks absent (`ENOSYS`), as on a kernel built without it.

use std::collections::BTreeMap;

use seccompiler::{BpfProgram, sock_filter};

/// `ioctl` requests that type into a terminal (the same on x86_64 and aarch64).
const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541C;

/// The socket families of a command that may use a network: its own namespace's under
/// bubblewrap, the host's under Landlock with `network`. The others (`AF_VSOCK`, which
/// reaches a hypervisor past every namespace, `AF_PACKET`, ...) stay denied.
pub const NETWORK_FAMILIES: &[i32] = &[
    libc::AF_UNIX,
    libc::AF_INET,
    libc::AF_INET6,
    libc::AF_NETLINK,
];

/// Where a sandboxed command's System V IPC objects (shared memory, message queues,
/// semaphores) would live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ipc {
    /// In an IPC namespace of the sandbox's own (bubblewrap): allowed, and gone with it.
    Private,
    /// In the host's IPC namespace (Landlock, which does not cover System V IPC): the
    /// calls look absent, so a command can neither reach the segments of the engine's
    /// user nor leave segments pinned on the host after its call.
    Host,
}

/// A test of one argument of a call, on its low 32 bits (every argument tested here
/// is an `int`, a mode or flags, whatever the upper half holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Test {
    /// Equals the value.
    Eq(u32),
    /// Differs from the value.
    Ne(u32),
    /// Has at least one of the bits.
    Any(u32),
    /// Equals the value once masked: `(arg & mask) == value`.
    Masked(u32, u32),
}

/// A condition: argument `arg` (0 to 5) passes `test`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cond {
    arg: u8,
    test: Test,
}

/// What a listed call gets: `errno` when any of `rules` holds (each rule: all its
/// conditions), or always when there are none; otherwise it is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Listed {
    errno: i32,
    rules: Vec<Vec<Cond>>,
}

/// A rule of one condition.
fn when(arg: u8, test: Test) -> Vec<Cond> {
    vec![Cond { arg, test }]
}

/// Why a seccomp filter could not be built or installed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SeccompError {
    /// The filter could not be built: no filter for this architecture, or a program too
    /// long for the kernel.
    #[error("{0}")]
    Build(String),
    /// The kernel refused the filter.
    #[error("seccomp: {0}")]
    Install(#[source] seccompiler::Error),
}

/// The filter: listed calls fail with `EPERM`, `clone3`, `openat2`, inotify and
/// fanotify (and, with [`Ipc::Host`], System V IPC) with `ENOSYS`, and `fcntl(F_NOTIFY)`
/// with `EINVAL`; everything else is allowed. `socket(2)` fails for every family not in
/// `families`.
pub fn filter(families: &[i32], ipc: Ipc) -> Result<BpfProgram, SeccompError> {
    compile(&listed(families, ipc)).map_err(SeccompError::Build)
}

/// The calls [`filter`] refuses, by number, and when.
fn listed(families: &[i32], ipc: Ipc) -> BTreeMap<u32, Listed> {
    let mut rules: BTreeMap<i64, Vec<Vec<Cond>>> = BTreeMap::new();
    for call in [
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_reboot,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
    ] {
        rules.insert(call, Vec::new());
    }
    #[cfg(target_arch = "x86_64")]
    for call in [libc::SYS_iopl, libc::SYS_ioperm] {
        rules.insert(call, Vec::new());
    }
    // Typing into a terminal (TIOCSTI) or the Linux console (TIOCLINUX): a command has
    // no controlling terminal (the helper starts a new session), and these stay denied
    // on any terminal it might get hold of.
    rules.insert(
        libc::SYS_ioctl,
        vec![when(1, Test::Eq(TIOCSTI)), when(1, Test::Eq(TIOCLINUX))],
    );
    // New namespaces through clone(2) (unshare and setns are denied above): any
    // CLONE_NEW* flag in the flags (the first argument on x86_64 and aarch64).
    rules.insert(libc::SYS_clone, vec![when(0, Test::Any(NAMESPACE_FLAGS))]);
    // Reaching other processes of the same user (the engine): resource limits and
    // scheduling only for the command itself (pid 0), no `kill(-1, ...)`.
    for call in [
        libc::SYS_prlimit64,
        libc::SYS_sched_setaffinity,
        libc::SYS_sched_setattr,
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_migrate_pages,
        libc::SYS_move_pages,
    ] {
        rules.insert(call, vec![when(0, Test::Ne(0))]);
    }
    // setpriority(which, who, ...) and ioprio_set(which, who, ...): only `which` =
    // the process itself (PRIO_PROCESS 0, IOPRIO_WHO_PROCESS 1) with `who` 0.
    rules.insert(
        libc::SYS_setpriority,
        vec![when(0, Test::Ne(0)), when(1, Test::Ne(0))],
    );
    rules.insert(
        libc::SYS_ioprio_set,
        vec![when(0, Test::Ne(1)), when(1, Test::Ne(0))],
    );
    rules.insert(libc::SYS_kill, vec![when(0, Test::Eq(u32::MAX))]);
    // Device nodes (FIFOs and sockets stay allowed), and files made with a set-ID bit
    // (`mknod("s", S_IFREG | 04755)` makes a set-uid file as `chmod` would):
    // mknodat(dirfd, path, mode, dev) and mknod(path, mode, dev).
    let mknod = |mode: u8| {
        vec![
            when(mode, Test::Masked(libc::S_IFMT, libc::S_IFCHR)),
            when(mode, Test::Masked(libc::S_IFMT, libc::S_IFBLK)),
            when(mode, Test::Any(SET_ID)),
        ]
    };
    rules.insert(libc::SYS_mknodat, mknod(2));
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_mknod, mknod(1));
    // Set-user-ID and set-group-ID bits: a set-uid file made in the workspace would run
    // as its owner for whoever runs it on the host (neither Landlock nor bubblewrap
    // covers chmod). `chmod +x` stays allowed. (Ownership changes need no rule: a
    // command has no CAP_CHOWN, and can only give its files to itself.)
    for (call, mode) in [
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (libc::SYS_fchmodat2, 2),
    ] {
        rules.insert(call, vec![when(mode, Test::Any(SET_ID))]);
    }
    // The same bits given when a file is created: open/openat with O_CREAT or O_TMPFILE
    // and a set-ID mode (creat always creates). Without O_CREAT the mode register holds
    // garbage, so the flag is part of each rule.
    let created = |flags: u8, mode: u8| {
        let set_id = Cond {
            arg: mode,
            test: Test::Any(SET_ID),
        };
        let (o_creat, o_tmpfile) = (libc::O_CREAT.unsigned_abs(), libc::O_TMPFILE.unsigned_abs());
        [Test::Any(o_creat), Test::Masked(o_tmpfile, o_tmpfile)]
            .into_iter()
            .map(|test| vec![Cond { arg: flags, test }, set_id])
            .collect::<Vec<_>>()
    };
    rules.insert(libc::SYS_openat, created(2, 3));
    #[cfg(target_arch = "x86_64")]
    {
        rules.insert(libc::SYS_open, created(1, 2));
        rules.insert(libc::SYS_creat, vec![when(1, Test::Any(SET_ID))]);
        rules.insert(libc::SYS_chmod, vec![when(1, Test::Any(SET_ID))]);
    }
    // socket(domain, ...) with a domain outside `families` (every one, if empty).
    rules.insert(
        libc::SYS_socket,
        if families.is_empty() {
            Vec::new()
        } else {
            vec![
                families
                    .iter()
                    .map(|&f| Cond {
                        arg: 0,
                        test: Test::Ne(f.unsigned_abs()),
                    })
                    .collect(),
            ]
        },
    );
    let mut listed: BTreeMap<i64, Listed> = rules
        .into_iter()
        .map(|(call, rules)| {
            let errno = libc::EPERM;
            (call, Listed { errno, rules })
        })
        .collect();
    // clone3(2) passes its flags in memory, where seccomp cannot look: make it look
    // absent (ENOSYS), so the C library falls back to clone(2), filtered above.
    // openat2(2) likewise passes its flags and mode in memory: absent, the C library and
    // programs fall back to openat(2).
    // File notifications (inotify, fanotify): absent, as on a kernel built without
    // them, so programs fall back to polling (`tail -f`). Neither Landlock nor a mount
    // namespace mediates them: a watch on a directory reports the names of its entries
    // and every other process's opens, reads and writes of them, for paths the command
    // may not list or read (the data dir and the home under Landlock; `/etc/shadow`
    // among the system files both sandboxes show), and seccomp cannot tell one path from
    // another.
    // System V IPC in the host's namespace: absent, as on a kernel without it.
    let mut absent = vec![libc::SYS_clone3, libc::SYS_openat2];
    absent.extend(NOTIFICATIONS);
    if ipc == Ipc::Host {
        absent.extend(SYSV_IPC);
    }
    for call in absent {
        let errno = libc::ENOSYS;
        listed.insert(
            call,
            Listed {
                errno,
                rules: Vec::new(),
            },
        );
    }
    // Directory notifications through `fcntl(fd, F_NOTIFY, ...)` (dnotify): the timing
    // of other processes' opens and writes in a directory the command could open, names
    // aside. As a kernel built without them answers.
    listed.insert(
        libc::SYS_fcntl,
        Listed {
            errno: libc::EINVAL,
            rules: vec![when(1, Test::Eq(libc::F_NOTIFY.unsigned_abs()))],
        },
    );
    // The x32 ABI reaches the same calls with bit 30 set (and a few under their own
    // numbers); where the kernel runs x32 calls, deny those too. (Where it does not,
    // they fail with ENOSYS whatever the filter says, and the program stays shorter.)
    #[cfg(target_arch = "x86_64")]
    if crate::sys::x32_calls_run() {
        const X32: i64 = 0x4000_0000;
        let native: Vec<(i64, Listed)> = listed.iter().map(|(k, v)| (*k, v.clone())).collect();
        for (call, what) in native {
            listed.insert(call | X32, what);
        }
        // x32 ptrace, process_vm_readv, process_vm_writev.
        for call in [521, 539, 540] {
            let errno = libc::EPERM;
            let rules = Vec::new();
            listed.insert(call | X32, Listed { errno, rules });
        }
    }
    listed
        .into_iter()
        .filter_map(|(call, what)| Some((u32::try_from(call).ok()?, what)))
        .collect()
}

/// The System V IPC calls (x86_64 and aarch64 have each under its own number; no
/// `ipc(2)` multiplexer).
const SYSV_IPC: [i64; 12] = [
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmdt,
    libc::SYS_shmctl,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
];

/// The file notification calls: inotify's (`inotify_init` exists only on x86_64; the
/// others on x86_64 and aarch64 alike) and fanotify's. A watch once added is
/// read and removed through its descriptor, so these are the only way in.
#[cfg(target_arch = "x86_64")]
const NOTIFICATIONS: [i64; 5] = [
    libc::SYS_inotify_init,
    libc::SYS_inotify_init1,
    libc::SYS_inotify_add_watch,
    libc::SYS_fanotify_init,
    libc::SYS_fanotify_mark,
];
#[cfg(not(target_arch = "x86_64"))]
const NOTIFICATIONS: [i64; 4] = [
    libc::SYS_inotify_init1,
    libc::SYS_inotify_add_watch,
    libc::SYS_fanotify_init,
    libc::SYS_fanotify_mark,
];

/// The `CLONE_NEW*` flags: each one creates a namespace.
const NAMESPACE_FLAGS: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWTIME)
    .unsigned_abs();

/// The set-user-ID and set-group-ID bits of a mode.
const SET_ID: u32 = libc::S_ISUID | libc::S_ISGID;

/// Installs `filter` on the calling thread (and so on every process it starts).
pub fn install(filter: &BpfProgram) -> Result<(), SeccompError> {
    seccompiler::apply_filter(filter).map_err(SeccompError::Install)
}

pub(crate) use crate::sys::install_forked;

/// A filter as the kernel and bubblewrap read it: `struct sock_filter` after
/// `struct sock_filter`, in native byte order.
pub fn to_bytes(filter: &BpfProgram) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(filter.len() * 8);
    for insn in filter {
        bytes.extend_from_slice(&insn.code.to_ne_bytes());
        bytes.push(insn.jt);
        bytes.push(insn.jf);
        bytes.extend_from_slice(&insn.k.to_ne_bytes());
    }
    bytes
}

/// The longest program the kernel takes (`BPF_MAXINSNS`).
const MAX_LEN: usize = 4096;

/// At most this many call numbers are tested one by one; above it, a comparison halves
/// the numbers left.
const LEAF: usize = 4;

/// `AUDIT_ARCH_*` of the architecture this is built for, as the kernel reports a
/// system call's (those `seccompiler` knows; elsewhere [`filter`] fails).
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: Option<u32> = Some(0xC000_003E);
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: Option<u32> = Some(0xC000_00B7);
#[cfg(target_arch = "riscv64")]
const AUDIT_ARCH: Option<u32> = Some(0xC000_00F3);
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64"
)))]
const AUDIT_ARCH: Option<u32> = None;

/// Where `struct seccomp_data` holds the call number, the architecture, and the low 32
/// bits of argument `i` (`16 + 8 * i`, the high ones 4 further on on a little-endian
/// machine, the other way round on a big-endian one).
const NR: u32 = 0;
const ARCH: u32 = 4;
fn arg_low(i: u8) -> u32 {
    16 + 8 * u32::from(i) + if cfg!(target_endian = "big") { 4 } else { 0 }
}

/// The program: another architecture's calls kill the process (as `seccompiler`'s
/// programs do; their numbers mean other calls), then a binary search over the listed
/// call numbers, each with its rules; every other call is allowed.
///
/// The kernel fills its action cache by running the program for each call number
/// with only the number and the architecture known: every call that is not listed
/// reaches "allow" through comparisons of the number alone, so it is cached as allowed
/// and never runs the program again.
fn compile(listed: &BTreeMap<u32, Listed>) -> Result<BpfProgram, String> {
    let arch = AUDIT_ARCH.ok_or_else(|| {
        format!(
            "no seccomp filter for this architecture ({})",
            std::env::consts::ARCH
        )
    })?;
    let calls: Vec<(u32, &Listed)> = listed.iter().map(|(nr, l)| (*nr, l)).collect();
    let mut program = vec![
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, ARCH),
        jump(libc::BPF_JEQ, arch, 1, 0),
        ret(libc::SECCOMP_RET_KILL_PROCESS),
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, NR),
    ];
    program.extend(search(&calls)?);
    if program.len() > MAX_LEN {
        return Err(format!(
            "the seccomp filter is too long ({} instructions; the kernel takes {MAX_LEN})",
            program.len()
        ));
    }
    Ok(program)
}

/// The binary search over `calls` (sorted by number; the number is loaded): halves
/// until at most [`LEAF`] are left.
fn search(calls: &[(u32, &Listed)]) -> Result<Vec<sock_filter>, String> {
    if calls.len() <= LEAF {
        return leaf(calls);
    }
    let (low, high) = calls.split_at(calls.len() / 2);
    let pivot = high[0].0;
    let (low, high) = (search(low)?, search(high)?);
    let mut code = Vec::with_capacity(low.len() + high.len() + 2);
    match u8::try_from(low.len()) {
        // Number >= pivot: over the lower half.
        Ok(over) => code.push(jump(libc::BPF_JGE, pivot, over, 0)),
        // Too far for a conditional jump: through an unconditional one.
        Err(_) => {
            code.push(jump(libc::BPF_JGE, pivot, 0, 1));
            code.push(stmt(libc::BPF_JMP | libc::BPF_JA, offset(low.len())?));
        }
    }
    code.extend(low);
    code.extend(high);
    Ok(code)
}

/// A few calls tested one by one (the number is loaded): each refused outright or
/// followed by its rules, then "allow" for any other number, then the `errno`s.
fn leaf(calls: &[(u32, &Listed)]) -> Result<Vec<sock_filter>, String> {
    let mut errnos: Vec<i32> = Vec::new();
    let mut blocks = Vec::with_capacity(calls.len());
    for (_, what) in calls {
        if what.rules.is_empty() {
            if !errnos.contains(&what.errno) {
                errnos.push(what.errno);
            }
            blocks.push(Vec::new());
        } else {
            blocks.push(rules(what)?);
        }
    }
    let body: usize = blocks.iter().map(|b| b.len() + 1).sum();
    let mut code = Vec::with_capacity(body + 1 + errnos.len());
    for ((nr, what), block) in calls.iter().zip(blocks) {
        if block.is_empty() {
            // To this errno's return, after the body and the "allow".
            let at = errnos.iter().position(|e| *e == what.errno).unwrap_or(0);
            let to = body + 1 + at - code.len() - 1;
            code.push(jump(libc::BPF_JEQ, *nr, near(to)?, 0));
        } else {
            code.push(jump(libc::BPF_JEQ, *nr, 0, near(block.len())?));
            code.extend(block);
        }
    }
    code.push(ret(libc::SECCOMP_RET_ALLOW));
    code.extend(errnos.into_iter().map(errno));
    Ok(code)
}

/// The rules of one call (its number matched): `errno` at the first rule that holds,
/// "allow" when none does.
fn rules(what: &Listed) -> Result<Vec<sock_filter>, String> {
    let mut code = Vec::new();
    for rule in &what.rules {
        // The conditional jumps taken when a condition fails, and on which branch.
        let mut fails: Vec<(usize, bool)> = Vec::new();
        for cond in rule {
            code.push(stmt(
                libc::BPF_LD | libc::BPF_W | libc::BPF_ABS,
                arg_low(cond.arg),
            ));
            let (op, k, fail_if_true) = match cond.test {
                Test::Eq(v) => (libc::BPF_JEQ, v, false),
                Test::Ne(v) => (libc::BPF_JEQ, v, true),
                Test::Any(bits) => (libc::BPF_JSET, bits, false),
                Test::Masked(mask, v) => {
                    code.push(stmt(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K, mask));
                    (libc::BPF_JEQ, v, false)
                }
            };
            fails.push((code.len(), fail_if_true));
            code.push(jump(op, k, 0, 0));
        }
        code.push(errno(what.errno));
        // A failed condition goes on to the next rule, right after this one's return.
        let end = code.len();
        for (at, fail_if_true) in fails {
            let over = near(end - at - 1)?;
            let insn = &mut code[at];
            if fail_if_true {
                insn.jt = over;
            } else {
                insn.jf = over;
            }
        }
    }
    code.push(ret(libc::SECCOMP_RET_ALLOW));
    Ok(code)
}

/// A conditional jump's offset, which must fit in a byte (a leaf is far shorter).
fn near(offset: usize) -> Result<u8, String> {
    u8::try_from(offset).map_err(|_| format!("a seccomp jump is too long ({offset})"))
}

/// An unconditional jump's offset.
fn offset(offset: usize) -> Result<u32, String> {
    u32::try_from(offset).map_err(|_| format!("a seccomp jump is too long ({offset})"))
}

/// An instruction without a branch.
fn stmt(code: u32, k: u32) -> sock_filter {
    sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

/// A conditional jump `op` (`BPF_JEQ`, `BPF_JGE`, `BPF_JSET`) against `k`.
fn jump(op: u32, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter {
        code: (libc::BPF_JMP | op | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

/// Returns `action`.
fn ret(action: u32) -> sock_filter {
    stmt(libc::BPF_RET | libc::BPF_K, action)
}

/// Fails the call with `e`.
fn errno(e: i32) -> sock_filter {
    ret(libc::SECCOMP_RET_ERRNO | (e.unsigned_abs() & libc::SECCOMP_RET_DATA))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    };

    use super::*;

    /// The rules of [`filter`] compiled by `seccompiler` (one program per `errno`, each
    /// testing the listed numbers in turn): the reference the compact program is
    /// checked against. A test of several bits becomes one rule per bit.
    fn reference(families: &[i32], ipc: Ipc) -> Vec<BpfProgram> {
        let mut by_errno: BTreeMap<i32, BTreeMap<i64, Vec<SeccompRule>>> = BTreeMap::new();
        for (nr, what) in listed(families, ipc) {
            // Each rule as the alternatives (one per bit of an `Any`) it stands for.
            let mut rules = Vec::new();
            for rule in &what.rules {
                let mut alternatives: Vec<Vec<SeccompCondition>> = vec![Vec::new()];
                for cond in rule {
                    let c = |op, v: u32| {
                        SeccompCondition::new(cond.arg, SeccompCmpArgLen::Dword, op, v.into())
                            .unwrap()
                    };
                    let options: Vec<SeccompCondition> = match cond.test {
                        Test::Eq(v) => vec![c(SeccompCmpOp::Eq, v)],
                        Test::Ne(v) => vec![c(SeccompCmpOp::Ne, v)],
                        Test::Masked(m, v) => vec![c(SeccompCmpOp::MaskedEq(m.into()), v)],
                        Test::Any(bits) => (0..32)
                            .map(|b| 1_u32 << b)
                            .filter(|b| bits & b != 0)
                            .map(|b| c(SeccompCmpOp::MaskedEq(b.into()), b))
                            .collect(),
                    };
                    alternatives = alternatives
                        .iter()
                        .flat_map(|a| {
                            options.iter().map(move |o| {
                                let mut a = a.clone();
                                a.push(o.clone());
                                a
                            })
                        })
                        .collect();
                }
                rules.extend(
                    alternatives
                        .into_iter()
                        .map(|a| SeccompRule::new(a).unwrap()),
                );
            }
            by_errno
                .entry(what.errno)
                .or_default()
                .insert(i64::from(nr), rules);
        }
        let arch = std::env::consts::ARCH.try_into().unwrap();
        by_errno
            .into_iter()
            .map(|(errno, rules)| {
                let action = SeccompAction::Errno(errno.unsigned_abs());
                SeccompFilter::new(rules, SeccompAction::Allow, action, arch)
                    .unwrap()
                    .try_into()
                    .unwrap()
            })
            .collect()
    }

    /// `AUDIT_ARCH_*` of this machine, as the filter checks it.
    const NATIVE: u32 = AUDIT_ARCH.unwrap();
    /// `AUDIT_ARCH_I386`: another architecture's calls (the filter kills them).
    const OTHER: u32 = 0x4000_0003;

    /// A `struct seccomp_data` as the kernel lays it out for a filter: `nr`, `arch`,
    /// `instruction_pointer`, `args[6]`, in native byte order.
    fn data(nr: u32, arch: u32, args: [u64; 6]) -> [u8; 64] {
        let mut d = [0_u8; 64];
        d[0..4].copy_from_slice(&nr.to_ne_bytes());
        d[4..8].copy_from_slice(&arch.to_ne_bytes());
        for (i, a) in args.iter().enumerate() {
            d[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        d
    }

    /// Runs a classic BPF program over `data` as the kernel would: its return value.
    /// Only the instructions a seccomp filter of ours may hold; any other fails the test.
    fn run(program: &[sock_filter], data: &[u8; 64]) -> u32 {
        let mut a: u32 = 0;
        let mut pc = 0_usize;
        loop {
            let insn = &program[pc];
            pc += 1;
            let code = u32::from(insn.code);
            let k = insn.k;
            let jump = |taken: bool| usize::from(if taken { insn.jt } else { insn.jf });
            match code {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                    let at = usize::try_from(k).unwrap();
                    assert!(at % 4 == 0 && at + 4 <= 64, "load at {at}");
                    a = u32::from_ne_bytes(data[at..at + 4].try_into().unwrap());
                }
                c if c == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K => a &= k,
                c if c == libc::BPF_JMP | libc::BPF_JA => pc += usize::try_from(k).unwrap(),
                c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => pc += jump(a == k),
                c if c == libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K => pc += jump(a > k),
                c if c == libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K => pc += jump(a >= k),
                c if c == libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K => pc += jump(a & k != 0),
                c if c == libc::BPF_RET | libc::BPF_K => return k,
                other => panic!("unexpected instruction {other:#x}"),
            }
        }
    }

    /// The verdict of `filters` installed in that order: the kernel runs them all,
    /// newest first, and keeps the strongest action (lowest as a signed number; on a
    /// tie, the first found).
    fn installed(filters: &[&[sock_filter]], data: &[u8; 64]) -> u32 {
        let action = |r: u32| (r & libc::SECCOMP_RET_ACTION_FULL).cast_signed();
        let mut verdict = libc::SECCOMP_RET_ALLOW;
        for filter in filters.iter().rev() {
            let r = run(filter, data);
            if action(r) < action(verdict) {
                verdict = r;
            }
        }
        verdict
    }

    /// What the `programs` compare: the system call numbers (constants compared after the
    /// number is loaded) and the argument values (compared or masked after an argument
    /// is loaded), each argument value also with its high half set (the rules compare
    /// the low 32 bits) and beside 0, 1 and all ones.
    fn constants(programs: &[&[sock_filter]]) -> (BTreeSet<u32>, BTreeSet<u64>) {
        let (mut numbers, mut values) = (BTreeSet::new(), BTreeSet::from([0, 1, u64::MAX]));
        for program in programs {
            // Every path (the program jumps forward only), with the offset last loaded.
            let mut todo = vec![(0_usize, 0_u32)];
            let mut done = BTreeSet::new();
            while let Some((pc, loaded)) = todo.pop() {
                if !done.insert((pc, loaded)) {
                    continue;
                }
                let insn = &program[pc];
                let code = u32::from(insn.code);
                let mut compared = || match loaded {
                    0 => {
                        numbers.insert(insn.k);
                    }
                    16.. => {
                        let k = u64::from(insn.k);
                        values.extend([k, k | 0xffff_ffff_0000_0000, k.wrapping_sub(1)]);
                    }
                    _ => {}
                };
                if code == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS {
                    todo.push((pc + 1, insn.k));
                } else if code == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K {
                    compared();
                    todo.push((pc + 1, loaded));
                } else if code == libc::BPF_JMP | libc::BPF_JA {
                    todo.push((pc + 1 + usize::try_from(insn.k).unwrap(), loaded));
                } else if code & 0x07 == libc::BPF_JMP {
                    compared();
                    todo.push((pc + 1 + usize::from(insn.jt), loaded));
                    todo.push((pc + 1 + usize::from(insn.jf), loaded));
                }
            }
        }
        (numbers, values)
    }

    /// Argument patterns for one call: none set, each of the first four arguments alone
    /// at each value, and (`pairs`) each two of them at each two values.
    fn patterns(values: &BTreeSet<u64>, pairs: bool) -> Vec<[u64; 6]> {
        let mut out = vec![[0; 6]];
        for i in 0..4 {
            for &v in values {
                let mut a = [0; 6];
                a[i] = v;
                out.push(a);
                if pairs {
                    for j in i + 1..4 {
                        for &w in values {
                            let mut b = a;
                            b[j] = w;
                            out.push(b);
                        }
                    }
                }
            }
        }
        out
    }

    /// The compact program decides every call as `seccompiler`'s programs of the same
    /// rules installed together (the kernel's rule for several filters), for every
    /// system call number (x32 ones too, and another architecture's), with the argument
    /// values the rules compare, in every configuration; and each verdict (allowed,
    /// `EPERM`, `ENOSYS`, killed) occurs, so the comparison is not empty.
    #[test]
    fn the_compact_program_decides_as_seccompiler() {
        let families: [&[i32]; 3] = [&[], &[libc::AF_UNIX], NETWORK_FAMILIES];
        let mut seen = BTreeSet::new();
        for (n, families) in families.into_iter().enumerate() {
            for ipc in [Ipc::Host, Ipc::Private] {
                let reference = reference(families, ipc);
                let reference: Vec<&[sock_filter]> = reference.iter().map(|p| &p[..]).collect();
                let one = filter(families, ipc).unwrap();
                assert!(one.len() <= MAX_LEN);
                let (listed, values) = constants(&reference);
                // Every two arguments at every two values once (the rules that look at
                // two arguments are the same in every configuration).
                let dense = patterns(&values, n == 0 && ipc == Ipc::Host);
                let sparse = patterns(&BTreeSet::from([0, 1, u64::MAX]), false);
                let numbers = (0..600_u32).chain((0..600).map(|n| n | 0x4000_0000));
                for nr in numbers.chain([u32::MAX, 0x8000_0000]) {
                    let cases = if listed.contains(&nr) {
                        &dense
                    } else {
                        &sparse
                    };
                    for (arch, args) in cases.iter().map(|a| (NATIVE, a)).chain([(OTHER, &[0; 6])])
                    {
                        let d = data(nr, arch, *args);
                        let two = installed(&reference, &d);
                        assert_eq!(
                            run(&one, &d),
                            two,
                            "call {nr:#x}, arch {arch:#x}, {args:x?}, {families:?}, {ipc:?}"
                        );
                        seen.insert((nr, two));
                    }
                }
            }
        }
        // Each verdict occurs, and each call whose verdict depends on its arguments
        // gets both (the patterns reach the rules).
        let errno = |e: i32| libc::SECCOMP_RET_ERRNO | e.unsigned_abs();
        let verdicts: BTreeSet<u32> = seen.iter().map(|(_, v)| *v).collect();
        for verdict in [
            libc::SECCOMP_RET_ALLOW,
            errno(libc::EPERM),
            errno(libc::ENOSYS),
            libc::SECCOMP_RET_KILL_PROCESS,
        ] {
            assert!(verdicts.contains(&verdict), "{verdict:#x} never seen");
        }
        for call in [
            libc::SYS_clone,
            libc::SYS_openat,
            libc::SYS_socket,
            libc::SYS_ioctl,
            libc::SYS_kill,
            libc::SYS_fchmodat,
            libc::SYS_mknodat,
            libc::SYS_prlimit64,
            libc::SYS_setpriority,
            libc::SYS_ioprio_set,
        ] {
            let nr = u32::try_from(call).unwrap();
            for v in [libc::SECCOMP_RET_ALLOW, errno(libc::EPERM)] {
                assert!(seen.contains(&(nr, v)), "call {call} never got {v:#x}");
            }
        }
    }
}
