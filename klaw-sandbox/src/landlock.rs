//! The Landlock + seccomp backend. The helper (`__klaw-sandbox`) supervises the command
//! from outside the sandbox: it starts a second copy of itself (the command's stage),
//! which applies all of this to itself and then becomes the command, so the command and
//! every descendant inherit it while the supervisor stays out of their reach.
//!
//! - Landlock: read and execute in the system directories, read and write in the
//!   workspace and a private temporary directory, nothing anywhere else (the home
//!   directory and the data dir are unreachable); UNIX sockets reachable by path only
//!   beneath the writable directories (ABI 9); TCP bind and connect denied unless the
//!   network is allowed; signals and abstract UNIX sockets scoped to the sandbox (ABI 6).
//!   ABI 3 (truncation) is required; newer rights are used where the kernel has them.
//! - seccomp: sockets other than UNIX ones denied unless the network is allowed, and
//!   UNIX ones too where Landlock cannot confine them by path (below ABI 9); the
//!   calls that reach around the sandbox (ptrace, mount, namespaces, kernel modules,
//!   BPF, io_uring, keyrings, `open_by_handle_at`) denied; System V IPC, which
//!   Landlock does not cover and which lives in the host's IPC namespace, absent.
//! - Capabilities: all dropped, including from the bounding set, so a command started by
//!   root is not root-capable inside.

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};

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

/// Applies Landlock, seccomp and the capability drop to the calling (single-threaded)
/// process.
pub(crate) fn restrict(policy: &HelperPolicy) -> Result<(), String> {
    let abi = landlock(policy)?;
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
    seccomp::install(&seccomp::filters(families, seccomp::Ipc::Host)?)?;
    drop_capabilities()
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

/// Applies the Landlock ruleset; returns the kernel's ABI (capped at [`NEWEST`]).
fn landlock(policy: &HelperPolicy) -> Result<ABI, String> {
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
    let status = ruleset
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
        .restrict_self()
        .map_err(|e| e.to_string())?;
    match status.ruleset {
        RulesetStatus::NotEnforced => Err("Landlock is not enforced by this kernel".into()),
        RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => {
            let abi = ABI::from(status.landlock);
            require(abi)?;
            Ok(abi)
        }
    }
}

/// Empties the capability bounding set, as far as this process may (it takes
/// `CAP_SETPCAP`; an unprivileged user has nothing to drop).
pub(crate) fn drop_bounding_set() {
    use rustix::thread::{
        CapabilitySet, capability_is_in_bounding_set, remove_capability_from_bounding_set,
    };
    for cap in CapabilitySet::all().iter() {
        if capability_is_in_bounding_set(cap).unwrap_or(false) {
            let _ = remove_capability_from_bounding_set(cap);
        }
    }
}

fn drop_capabilities() -> Result<(), String> {
    use rustix::thread::{
        CapabilitySet, CapabilitySets, clear_ambient_capability_set, set_capabilities,
    };
    drop_bounding_set();
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
