//! The Landlock + seccomp backend, applied by the helper (`__klaw-sandbox`) to itself
//! before it starts the command, so every descendant inherits it.
//!
//! - Landlock: read and execute in the system directories, read and write in the
//!   workspace and a private temporary directory, nothing anywhere else (the home
//!   directory and the data dir are unreachable); TCP bind and connect denied unless the
//!   network is allowed; signals and abstract UNIX sockets scoped to the sandbox.
//! - seccomp: sockets other than UNIX ones denied unless the network is allowed; the
//!   calls that reach around the sandbox (ptrace, mount, namespaces, kernel modules,
//!   BPF, io_uring, keyrings, `open_by_handle_at`) denied.
//! - Capabilities: all dropped, including from the bounding set, so a command started by
//!   root is not root-capable inside.

use std::collections::BTreeMap;
use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

use super::SYSTEM_DIRS;

/// Device files a command may write (everything else in `/dev` is read-only).
const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// What the helper enforces, as it receives it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct HelperPolicy {
    /// Apply Landlock and seccomp (false: only supervise the tree).
    pub(crate) landlock: bool,
    /// Allow the network.
    pub(crate) network: bool,
    /// Directories with read and write access (the workspace, the private temp dir).
    pub(crate) write: Vec<PathBuf>,
    /// The command's working directory.
    pub(crate) cwd: PathBuf,
    /// Only check that the policy can be applied, then exit.
    #[serde(default)]
    pub(crate) probe: bool,
}

/// Applies Landlock, seccomp and the capability drop to the calling (single-threaded)
/// process.
pub(crate) fn restrict(policy: &HelperPolicy) -> Result<(), String> {
    landlock(policy)?;
    seccomp(policy.network)?;
    drop_capabilities()
}

fn landlock(policy: &HelperPolicy) -> Result<(), String> {
    let fs = ABI::V5;
    let all = AccessFs::from_all(fs);
    // No device nodes, even for root.
    let write: BitFlags<AccessFs> = all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    let read = AccessFs::from_read(fs);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(|e| e.to_string())?;
    if !policy.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(ABI::V4))
            .map_err(|e| e.to_string())?;
    }
    ruleset = ruleset
        .scope(Scope::from_all(ABI::V6))
        .map_err(|e| e.to_string())?;
    let status = ruleset
        .create()
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(SYSTEM_DIRS, read))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(["/proc", "/dev", "/sys"], read))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(
            WRITABLE_DEVICES,
            AccessFs::from_file(fs) & !AccessFs::Execute,
        ))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(&policy.write, write))
        .map_err(|e| e.to_string())?
        .restrict_self()
        .map_err(|e| e.to_string())?;
    match status.ruleset {
        RulesetStatus::NotEnforced => Err("Landlock is not enforced by this kernel".into()),
        RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => Ok(()),
    }
}

/// The seccomp filter: listed calls fail with `EPERM`, everything else is allowed.
fn seccomp(network: bool) -> Result<(), String> {
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
        libc::SYS_mknodat,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
    ] {
        rules.insert(call, Vec::new());
    }
    #[cfg(target_arch = "x86_64")]
    for call in [libc::SYS_mknod, libc::SYS_iopl, libc::SYS_ioperm] {
        rules.insert(call, Vec::new());
    }
    if !network {
        // socket(domain, ...) with any domain but AF_UNIX.
        let not_unix = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )
        .map_err(|e| e.to_string())?;
        rules.insert(
            libc::SYS_socket,
            vec![SeccompRule::new(vec![not_unix]).map_err(|e| e.to_string())?],
        );
    }
    // The x32 ABI reaches the same calls with bit 30 set (and a few under their own
    // numbers); where the kernel enables it, deny those too.
    #[cfg(target_arch = "x86_64")]
    {
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
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    seccompiler::apply_filter(&program).map_err(|e| format!("seccomp: {e}"))
}

fn drop_capabilities() -> Result<(), String> {
    use rustix::thread::{
        CapabilitySet, CapabilitySets, capability_is_in_bounding_set, clear_ambient_capability_set,
        remove_capability_from_bounding_set, set_capabilities,
    };
    for cap in CapabilitySet::all().iter() {
        if capability_is_in_bounding_set(cap).unwrap_or(false) {
            // Fails without CAP_SETPCAP (an unprivileged user has nothing to drop).
            let _ = remove_capability_from_bounding_set(cap);
        }
    }
    let _ = clear_ambient_capability_set();
    set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
    .map_err(|e| format!("dropping capabilities: {e}"))
}
