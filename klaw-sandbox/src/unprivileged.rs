//! Running a sandbox as an unprivileged user when the engine is root.
//!
//! A command that runs as kernel uid 0, even without capabilities, still passes every
//! owner check on root's files: it reads `/etc/shadow`, writes root-owned files with
//! owner write permission (the host's sysctls among them, where `/proc/sys` is
//! writable), and every file it makes is root's. So when the engine is root, the
//! sandbox runs as [`UNPRIVILEGED_ID`] instead, and sees the workspace through an
//! *idmapped mount*: the workspace's owner appears as that id, so the workspace stays
//! writable, and whatever the command creates is stored as owned by the workspace's
//! owner, as if the owner had made it. Nothing on the host changes owner.

use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};

use rustix::fs::{Mode, OFlags, ResolveFlags};
use std::path::{Path, PathBuf};

use rustix::mount::{MountFlags, MountPropagationFlags, MoveMountFlags, OpenTreeFlags};

use crate::sys;

/// The user and group id (on the host) that commands run as when the engine is root:
/// near the top of the 32-bit range, where no account lives (`2^31 - 2`).
pub const UNPRIVILEGED_ID: u32 = 2_147_483_646;

/// The user and group id (on the host) that `render_js`'s browser runs as when the
/// engine is root: unprivileged, and not [`UNPRIVILEGED_ID`], so that no command can
/// signal, trace or read the browser's processes or its profile (`2^31 - 3`).
pub const BROWSER_ID: u32 = 2_147_483_645;

/// Mounts `workspace`, idmapped so that its owner (user and group) appears as `id`
/// and `nosuid`/`nodev`, over itself in a new mount namespace of the calling process,
/// so that programs it starts as `id` find and can write the workspace at its usual
/// path.
///
/// The first directory above the workspace that `id` could not pass through (no
/// execute permission for others, such as `/root`) is covered, in that namespace only,
/// by an empty tmpfs holding just the path down to the workspace; nothing else of it is
/// visible there.
///
/// Call it as root, single-threaded (the sandbox helper), before
/// [`become_unprivileged`]. Fails where the filesystem cannot be idmapped (overlayfs,
/// for one, as its mounts themselves cannot be) or idmapped mounts are missing
/// (Linux 5.12+).
pub fn idmapped_workspace(workspace: &Path, id: u32) -> io::Result<()> {
    idmapped_workspace_with(workspace, &[], id)
}

/// [`idmapped_workspace`], and each directory of `read_only` (outside the workspace,
/// absolute; the folders of skills) mounted over itself read-only, idmapped so that
/// its owner appears as `id` (or, where its filesystem cannot be idmapped, read-only
/// as it is), so that `id` can read it even beneath a directory it could not pass
/// through (that directory is covered as the workspace's is). Writes there are refused
/// by the kernel (`EROFS`). A directory that cannot be opened (gone) is left out.
pub fn idmapped_workspace_with(workspace: &Path, read_only: &[PathBuf], id: u32) -> io::Result<()> {
    sys::single_threaded()?;
    // The workspace by descriptor, reached without following any symbolic link, so a
    // link swapped in for it (or a parent) is refused rather than mapped.
    let dir = open_dir_unfollowed(workspace)?;
    let owner = rustix::fs::fstat(&dir)?;
    let userns = sys::user_namespace((owner.st_uid, id), (owner.st_gid, id))?;
    let tree = rustix::mount::open_tree(
        &dir,
        "",
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_RECURSIVE
            | OpenTreeFlags::AT_EMPTY_PATH,
    )?;
    // Also makes the copy private: nothing mounted in it propagates to the host.
    sys::idmap_tree(tree.as_fd(), Some(userns.as_fd()), false)?;
    // Opened while their paths are still the host's (a covering below would hide them);
    // the shorter first, so that one inside another is mounted on top of it.
    let mut read_only: Vec<&PathBuf> = read_only.iter().collect();
    read_only.sort_by_key(|d| d.as_os_str().len());
    let trees: Vec<(&PathBuf, rustix::fd::OwnedFd)> = read_only
        .into_iter()
        .filter_map(|d| read_only_tree(d, id).ok().map(|t| (d, t)))
        .collect();
    sys::unshare_mount_namespace()?;
    // Nothing mounted here propagates back to the host's namespace.
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::DOWNSTREAM | MountPropagationFlags::REC,
    )?;
    match first_closed_ancestor(workspace)? {
        Some(closed) => {
            rustix::mount::mount(
                "tmpfs",
                &closed,
                "tmpfs",
                MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
                c"mode=0755,size=1m",
            )?;
            make_dirs_0755(workspace)?;
            // Only this namespace sees the new directories: the path is safe to use.
            rustix::mount::move_mount(
                tree.as_fd(),
                "",
                rustix::fs::CWD,
                workspace,
                MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
            )?;
        }
        None => {
            // Opened again in this namespace (the first descriptor's mount belongs to
            // the host's), and it must still be the same directory.
            let here = open_dir_unfollowed(workspace)?;
            let again = rustix::fs::fstat(&here)?;
            if (again.st_dev, again.st_ino) != (owner.st_dev, owner.st_ino) {
                return Err(io::Error::other(
                    "the workspace was replaced while being mapped",
                ));
            }
            rustix::mount::move_mount(
                tree.as_fd(),
                "",
                &here,
                "",
                MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
            )?;
        }
    }
    let mut mounted: Vec<&Path> = Vec::new();
    for (dir, tree) in trees {
        mount_over(dir, &tree, &mounted)?;
        mounted.push(dir);
    }
    Ok(())
}

/// A detached copy of the mount tree at `dir` (reached without following a symbolic
/// link), read-only, `nosuid`, `nodev`, private, and idmapped so that `dir`'s owner
/// appears as `id` where its filesystem allows (else read-only as it is).
fn read_only_tree(dir: &Path, id: u32) -> io::Result<rustix::fd::OwnedFd> {
    let fd = open_dir_unfollowed(dir)?;
    let owner = rustix::fs::fstat(&fd)?;
    let tree = rustix::mount::open_tree(
        &fd,
        "",
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_RECURSIVE
            | OpenTreeFlags::AT_EMPTY_PATH,
    )?;
    let mapped = sys::user_namespace((owner.st_uid, id), (owner.st_gid, id))
        .and_then(|userns| sys::idmap_tree(tree.as_fd(), Some(userns.as_fd()), true));
    if mapped.is_err() {
        sys::idmap_tree(tree.as_fd(), None, true)?;
    }
    Ok(tree)
}

/// Mounts `tree` on `dir` in this (new) mount namespace: the first directory above it
/// that others may not pass through is covered by an empty tmpfs first (unless a
/// covering made here holds it already, or it is one of the folders `mounted` here,
/// which `id` reads through its idmapped mount), and the path down to `dir` made in it.
fn mount_over(dir: &Path, tree: &rustix::fd::OwnedFd, mounted: &[&Path]) -> io::Result<()> {
    let mut ancestors: Vec<&Path> = dir.ancestors().skip(1).collect();
    ancestors.reverse();
    for above in ancestors {
        if mounted.contains(&above) {
            continue;
        }
        match std::fs::metadata(above) {
            Ok(m) if m.mode() & 0o001 == 0 => {
                rustix::mount::mount(
                    "tmpfs",
                    above,
                    "tmpfs",
                    MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
                    c"mode=0755,size=1m",
                )?;
                break;
            }
            Ok(_) => {}
            // Inside a covering made here: the rest of the path is made below.
            Err(e) if e.kind() == io::ErrorKind::NotFound => break,
            Err(e) => return Err(e),
        }
    }
    if !dir.is_dir() {
        make_dirs_0755(dir)?;
    }
    let here = open_dir_unfollowed(dir)?;
    rustix::mount::move_mount(
        tree.as_fd(),
        "",
        &here,
        "",
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )?;
    Ok(())
}

/// Makes `dir` and its missing parents with mode 0755 whatever this process's umask
/// (which the command inherits), then puts the umask back.
fn make_dirs_0755(dir: &Path) -> io::Result<()> {
    let umask = rustix::process::umask(Mode::empty());
    let made = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir);
    rustix::process::umask(umask);
    made
}

/// The directory at `dir` as an `O_PATH` descriptor (close-on-exec), reached without
/// following a symbolic link in any component of the path (`RESOLVE_NO_SYMLINKS`): a
/// link swapped in for it or for a directory above it fails the open (`ELOOP`) instead
/// of leading elsewhere, and anything but a directory fails it (`ENOTDIR`). The
/// descriptor names the directory for `fstat` and the mount calls; it cannot read it.
fn open_dir_unfollowed(dir: &Path) -> rustix::io::Result<rustix::fd::OwnedFd> {
    rustix::fs::openat2(
        rustix::fs::CWD,
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS,
    )
}

/// [`become_unprivileged`] in a forked child before `exec`, which has one thread by
/// construction: only the three system calls, no check that reads `/proc` (it would
/// allocate, which a child forked from a threaded process must not do).
pub(crate) fn become_unprivileged_forked(id: u32) -> io::Result<()> {
    use rustix::process::{Gid, Uid};
    let gid = Gid::from_raw(id);
    let uid = Uid::from_raw(id);
    rustix::thread::set_thread_groups(&[])?;
    rustix::thread::set_thread_res_gid(gid, gid, gid)?;
    rustix::thread::set_thread_res_uid(uid, uid, uid)?;
    Ok(())
}

/// The first directory above `path` (from `/` down) that others may not pass through.
fn first_closed_ancestor(path: &Path) -> io::Result<Option<PathBuf>> {
    let mut ancestors: Vec<&Path> = path.ancestors().skip(1).collect();
    ancestors.reverse();
    for dir in ancestors {
        if std::fs::metadata(dir)?.mode() & 0o001 == 0 {
            return Ok(Some(dir.to_path_buf()));
        }
    }
    Ok(None)
}

/// Drops the calling thread (the whole process, when it has one thread) to user and
/// group `id`, with no supplementary groups. Root's capabilities go with it.
pub fn become_unprivileged(id: u32) -> io::Result<()> {
    use rustix::process::{Gid, Uid};
    sys::single_threaded()?;
    // Per-thread system calls: the helper is single-threaded when it calls this, so
    // its one thread is the whole process.
    let gid = Gid::from_raw(id);
    let uid = Uid::from_raw(id);
    rustix::thread::set_thread_groups(&[])?;
    rustix::thread::set_thread_res_gid(gid, gid, gid)?;
    rustix::thread::set_thread_res_uid(uid, uid, uid)?;
    Ok(())
}
