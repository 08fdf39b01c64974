//! Dropping capabilities: only system calls, no allocation, so the forked child of a
//! sandboxed command may run it (`crate::landlock`'s restrictions, `crate::sys`'s entry
//! into the kept sandbox).

/// Empties the capability bounding set, as far as this process may (it takes
/// `CAP_SETPCAP`: root's, or any user's in a user namespace of its own).
///
/// One `PR_CAPBSET_DROP` per capability (dropping one that is not in the set succeeds),
/// and none after the first refused for want of `CAP_SETPCAP`: every other would be
/// refused too.
pub(crate) fn drop_bounding_set() {
    use rustix::thread::{CapabilitySet, remove_capability_from_bounding_set};
    for cap in CapabilitySet::all().iter() {
        if remove_capability_from_bounding_set(cap) == Err(rustix::io::Errno::PERM) {
            break;
        }
    }
}

/// Drops every capability (bounding, ambient, effective, permitted, inheritable). Only
/// system calls, no allocation: it runs in the forked child.
pub(crate) fn drop_capabilities() -> std::io::Result<()> {
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
    .map_err(std::io::Error::from)
}
