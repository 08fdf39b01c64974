//! The seccomp filter every sandboxed command runs under, in both backends: the helper
//! installs it on itself before a Landlock command starts, and hands it to bubblewrap
//! (`--add-seccomp-fd`), which installs it right before it runs the command. It is one
//! program (two compiled rule sets, one after the other: see [`filter`]), so the kernel
//! checks, converts, compiles and walks one program per command, not two.
//!
//! Listed calls fail with `EPERM` (`clone3` and `openat2`, whose flags seccomp cannot
//! see, with `ENOSYS`, so programs fall back to the calls filtered here); everything
//! else is allowed: ptrace and other processes' memory, mounts and namespaces, kernel
//! modules, BPF, perf, userfaultfd, io_uring, keyrings, file handles, terminal input
//! injection, device nodes, set-user-ID/set-group-ID bits (by `chmod`, `open` and
//! `mknod`), resource limits of other processes, and socket families beyond those
//! allowed (UNIX only without a network; never `AF_VSOCK` or `AF_PACKET`). Where the
//! command shares the host's IPC namespace (Landlock), System V IPC (`shm*`, `msg*`,
//! `sem*`) looks absent (`ENOSYS`), as on a kernel built without it.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, sock_filter,
};

/// `ioctl` requests that type into a terminal (the same on x86_64 and aarch64).
const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;

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

/// The filter: listed calls fail with `EPERM`, `clone3` and `openat2` (and, with
/// [`Ipc::Host`], System V IPC) with `ENOSYS`; everything else is allowed. `socket(2)`
/// fails for every family not in `families`.
///
/// One program that decides exactly as the two rule sets ([`programs`]) would if
/// installed one after the other ([`chain`]): each installed filter costs the kernel a
/// check, a conversion, a compilation and a walk per system call number for its action
/// cache, at every command's start.
pub fn filter(families: &[i32], ipc: Ipc) -> Result<BpfProgram, String> {
    let (denied, absent) = programs(families, ipc)?;
    chain(&denied, &absent)
}

/// The two rule sets of [`filter`], each compiled alone: the calls that fail with
/// `EPERM`, and those that look absent (`ENOSYS`).
fn programs(families: &[i32], ipc: Ipc) -> Result<(BpfProgram, BpfProgram), String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
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
        [TIOCSTI, TIOCLINUX]
            .into_iter()
            .map(|request| arg_is(1, request))
            .collect::<Result<_, _>>()?,
    );
    // New namespaces through clone(2) (unshare and setns are denied above): any
    // CLONE_NEW* flag in the flags (the first argument on x86_64 and aarch64).
    rules.insert(
        libc::SYS_clone,
        NAMESPACE_FLAGS
            .iter()
            .map(|&flag| arg_has(0, u64::from(flag.unsigned_abs())))
            .collect::<Result<_, _>>()?,
    );
    // Reaching other processes of the same user (the engine): resource limits and
    // scheduling only for the command itself (pid 0), no `kill(-1, ...)`.
    let not_self = |index: u8| -> Result<SeccompRule, String> {
        let c = SeccompCondition::new(index, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, 0)
            .map_err(|e| e.to_string())?;
        SeccompRule::new(vec![c]).map_err(|e| e.to_string())
    };
    for call in [
        libc::SYS_prlimit64,
        libc::SYS_sched_setaffinity,
        libc::SYS_sched_setattr,
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_migrate_pages,
        libc::SYS_move_pages,
    ] {
        rules.insert(call, vec![not_self(0)?]);
    }
    // setpriority(which, who, ...) and ioprio_set(which, who, ...): only `which` =
    // the process itself (PRIO_PROCESS 0, IOPRIO_WHO_PROCESS 1) with `who` 0.
    rules.insert(libc::SYS_setpriority, vec![not_self(0)?, not_self(1)?]);
    let not_process = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, 1)
        .map_err(|e| e.to_string())?;
    rules.insert(
        libc::SYS_ioprio_set,
        vec![
            SeccompRule::new(vec![not_process]).map_err(|e| e.to_string())?,
            not_self(1)?,
        ],
    );
    rules.insert(libc::SYS_kill, vec![arg_is(0, u64::from(u32::MAX))?]);
    // Device nodes (FIFOs and sockets stay allowed), and files made with a set-ID bit
    // (`mknod("s", S_IFREG | 04755)` makes a set-uid file as `chmod` would):
    // mknodat(dirfd, path, mode, dev) and mknod(path, mode, dev).
    let mknod = |mode_arg: u8| -> Result<Vec<SeccompRule>, String> {
        let mut rules = device_nodes(mode_arg)?;
        rules.extend(setid_modes(mode_arg)?);
        Ok(rules)
    };
    rules.insert(libc::SYS_mknodat, mknod(2)?);
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_mknod, mknod(1)?);
    // Set-user-ID and set-group-ID bits: a set-uid file made in the workspace would run
    // as its owner for whoever runs it on the host (neither Landlock nor bubblewrap
    // covers chmod). `chmod +x` stays allowed. (Ownership changes need no rule: a
    // command has no CAP_CHOWN, and can only give its files to itself.)
    for (call, mode_arg) in [
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (libc::SYS_fchmodat2, 2),
    ] {
        rules.insert(call, setid_modes(mode_arg)?);
    }
    // The same bits given when a file is created: open/openat with O_CREAT or O_TMPFILE
    // and a set-ID mode (creat always creates). Without O_CREAT the mode register holds
    // garbage, so the flag is part of each rule.
    rules.insert(libc::SYS_openat, created_setid(2, 3)?);
    #[cfg(target_arch = "x86_64")]
    {
        rules.insert(libc::SYS_open, created_setid(1, 2)?);
        rules.insert(libc::SYS_creat, setid_modes(1)?);
        rules.insert(libc::SYS_chmod, setid_modes(1)?);
    }
    // socket(domain, ...) with a domain outside `families` (every one, if empty).
    if families.is_empty() {
        rules.insert(libc::SYS_socket, Vec::new());
    } else {
        let outside = families
            .iter()
            .map(|&f| {
                SeccompCondition::new(
                    0,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Ne,
                    f.unsigned_abs().into(),
                )
                .map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?;
        rules.insert(
            libc::SYS_socket,
            vec![SeccompRule::new(outside).map_err(|e| e.to_string())?],
        );
    }
    // The x32 ABI reaches the same calls with bit 30 set (and a few under their own
    // numbers); where the kernel runs x32 calls, deny those too. (Where it does not,
    // they fail with ENOSYS whatever the filter says, and half the filter's length is
    // saved: the kernel compiles and walks it again at every command's start.)
    #[cfg(target_arch = "x86_64")]
    if crate::sys::x32_calls_run() {
        const X32: i64 = 0x4000_0000;
        let native: Vec<(i64, Vec<SeccompRule>)> =
            rules.iter().map(|(k, v)| (*k, v.clone())).collect();
        for (call, conditions) in native {
            rules.insert(call | X32, conditions);
        }
        // x32 ptrace, process_vm_readv, process_vm_writev.
        for call in [521, 539, 540] {
            rules.insert(call | X32, Vec::new());
        }
    }
    let denied = compile(rules, libc::EPERM)?;
    // clone3(2) passes its flags in memory, where seccomp cannot look: make it look
    // absent (ENOSYS), so the C library falls back to clone(2), filtered above.
    // openat2(2) likewise passes its flags and mode in memory: absent, the C library and
    // programs fall back to openat(2).
    // System V IPC in the host's namespace: absent, as on a kernel without it.
    let mut calls = vec![libc::SYS_clone3, libc::SYS_openat2];
    if ipc == Ipc::Host {
        calls.extend(SYSV_IPC);
    }
    let mut absent: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for call in calls {
        absent.insert(call, Vec::new());
        #[cfg(target_arch = "x86_64")]
        if crate::sys::x32_calls_run() {
            absent.insert(call | 0x4000_0000, Vec::new());
        }
    }
    Ok((denied, compile(absent, libc::ENOSYS)?))
}

/// The longest program the kernel takes (`BPF_MAXINSNS`).
const MAX_LEN: usize = 4096;

/// One program that decides as `first` and `second` installed in that order: `first`,
/// whose every "allow" goes on to `second` instead (a forward jump to its start).
///
/// The kernel runs every installed filter and keeps the strongest action (the newest
/// filter's on a tie), so the two agree wherever `first` allows (the verdict is
/// `second`'s) and wherever `first` refuses a call that `second` allows. They would
/// differ only where both refuse a call with the same kind of action (two `errno`s:
/// the installed pair answers with `second`'s, the chain with `first`'s): the two rule
/// sets of [`programs`] list no call in common (a test checks the verdicts).
fn chain(first: &[sock_filter], second: &[sock_filter]) -> Result<BpfProgram, String> {
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    const JA: u16 = (libc::BPF_JMP | libc::BPF_JA) as u16;
    let len = first.len() + second.len();
    if len > MAX_LEN {
        return Err(format!(
            "the seccomp filter is too long ({len} instructions; the kernel takes {MAX_LEN})"
        ));
    }
    let mut program = Vec::with_capacity(len);
    for (i, insn) in first.iter().enumerate() {
        if insn.code == RET_K && insn.k == libc::SECCOMP_RET_ALLOW {
            // To the first instruction of `second`: `k` instructions after the next.
            let k = u32::try_from(first.len() - i - 1).map_err(|e| e.to_string())?;
            program.push(sock_filter {
                code: JA,
                jt: 0,
                jf: 0,
                k,
            });
        } else {
            program.push(insn.clone());
        }
    }
    program.extend_from_slice(second);
    Ok(program)
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

/// Installs `filter` on the calling thread (and so on every process it starts).
pub fn install(filter: &BpfProgram) -> Result<(), String> {
    seccompiler::apply_filter(filter).map_err(|e| format!("seccomp: {e}"))
}

/// Installs `filter` on the calling thread. Only system calls (`prctl`, `seccomp`), no
/// allocation, even on failure: it runs in a forked child before `exec`.
pub(crate) fn install_forked(filter: &BpfProgram) -> std::io::Result<()> {
    seccompiler::apply_filter(filter).map_err(|_| std::io::Error::last_os_error())
}

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

/// Compiles a filter: the calls in `rules` fail with `errno`, the rest are allowed.
fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<BpfProgram, String> {
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno.unsigned_abs()),
        arch,
    )
    .map_err(|e| e.to_string())?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())
}

/// The `CLONE_NEW*` flags: each one creates a namespace.
const NAMESPACE_FLAGS: &[i32] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWTIME,
];

/// A condition that holds when argument `index` has every bit of `flag` set.
fn has_bits(index: u8, flag: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(
        index,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::MaskedEq(flag),
        flag,
    )
    .map_err(|e| e.to_string())
}

/// A rule that matches when argument `index` has every bit of `flag` set.
fn arg_has(index: u8, flag: u64) -> Result<SeccompRule, String> {
    SeccompRule::new(vec![has_bits(index, flag)?]).map_err(|e| e.to_string())
}

/// Rules matching a file type (argument `index`, a mode) that is a character or block
/// device.
fn device_nodes(index: u8) -> Result<Vec<SeccompRule>, String> {
    [libc::S_IFCHR, libc::S_IFBLK]
        .into_iter()
        .map(|kind| {
            let c = SeccompCondition::new(
                index,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(u64::from(libc::S_IFMT)),
                u64::from(kind),
            )
            .map_err(|e| e.to_string())?;
            SeccompRule::new(vec![c]).map_err(|e| e.to_string())
        })
        .collect()
}

/// Rules matching a mode (argument `index`) with the set-user-ID or set-group-ID bit.
fn setid_modes(index: u8) -> Result<Vec<SeccompRule>, String> {
    [libc::S_ISUID, libc::S_ISGID]
        .into_iter()
        .map(|bit| arg_has(index, u64::from(bit)))
        .collect()
}

/// Rules matching a file creation (argument `flags` has `O_CREAT`, or all of
/// `O_TMPFILE`) whose mode (argument `mode`) has the set-user-ID or set-group-ID bit.
fn created_setid(flags: u8, mode: u8) -> Result<Vec<SeccompRule>, String> {
    let mut rules = Vec::new();
    for create in [libc::O_CREAT, libc::O_TMPFILE] {
        for bit in [libc::S_ISUID, libc::S_ISGID] {
            let both = vec![
                has_bits(flags, u64::from(create.unsigned_abs()))?,
                has_bits(mode, u64::from(bit))?,
            ];
            rules.push(SeccompRule::new(both).map_err(|e| e.to_string())?);
        }
    }
    Ok(rules)
}

/// A rule that matches when argument `index` (its low 32 bits) equals `value`.
fn arg_is(index: u8, value: u64) -> Result<SeccompRule, String> {
    let c = SeccompCondition::new(index, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
        .map_err(|e| e.to_string())?;
    SeccompRule::new(vec![c]).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// `AUDIT_ARCH_*` of this machine, as the filter checks it.
    #[cfg(target_arch = "x86_64")]
    const NATIVE: u32 = 0xC000_003E;
    #[cfg(target_arch = "aarch64")]
    const NATIVE: u32 = 0xC000_00B7;
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

    /// What `programs` compare: the system call numbers (constants compared after the
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

    /// The one program decides every call as the two rule sets installed one after the
    /// other (the kernel's rules for several filters), for every system call number
    /// (x32 ones too), with many argument patterns, in every configuration; and each
    /// verdict (allowed, `EPERM`, `ENOSYS`, killed) occurs, so the comparison is not
    /// empty.
    #[test]
    fn the_one_program_decides_as_the_two_filters() {
        let families: [&[i32]; 3] = [&[], &[libc::AF_UNIX], NETWORK_FAMILIES];
        let mut seen = BTreeSet::new();
        for (n, families) in families.into_iter().enumerate() {
            for ipc in [Ipc::Host, Ipc::Private] {
                let (denied, absent) = programs(families, ipc).unwrap();
                let one = filter(families, ipc).unwrap();
                assert!(one.len() <= MAX_LEN);
                let (listed, values) = constants(&[&denied, &absent]);
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
                        let two = installed(&[&denied, &absent], &d);
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
