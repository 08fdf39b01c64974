//! bubblewrap, kept: the sandbox server of a serving engine in mode `bwrap`
//! (`crate::server`). bubblewrap builds the sandbox once, with the arguments of a
//! one-shot command ([`crate::bwrap::args`]; `/proc` unmasked, as each command covers it
//! with its own, masked), around a holder that only waits; the server opens the
//! holder's namespaces, and each command enters them from outside.
//!
//! Per command, the supervisor stays in the host's mount and PID namespaces (out of the
//! command's reach: it has no pid there), switches to the unprivileged user when the
//! engine is root (the holder's user), joins the holder's user namespace (the one that
//! owns its mount namespace) and makes a PID namespace whose PID 1 its command is (when
//! it ends the kernel ends every process left in it). The command's process, before
//! `exec`:
//! - joins the holder's mount namespace (the read-only system directories, the
//!   workspace, the hidden data dir, read-only root and `/dev`) and its UTS and cgroup
//!   namespaces, and makes a mount and IPC namespace of its own; unless the network is
//!   allowed, it joins a network namespace of its own, its loopback up, which the
//!   server made while the previous command ran ([`Kept::prepare_network`]), or makes
//!   one,
//! - mounts a `/proc` of its PID namespace, read-only and masked as bubblewrap's, a
//!   fresh bounded `/tmp` and `/dev/shm`, and a devpts instance of its own on `/dev/pts`,
//! - joins the nested user namespace bubblewrap made with `--disable-userns` (as a
//!   one-shot command runs), starts a session of its own, drops every capability, sets
//!   no-new-privileges and installs the seccomp filter of the one-shot path.
//!
//! What commands of one server share is what a one-shot command sees of the host too:
//! the system directories, the workspace — never a process, a `/tmp`, a terminal, a
//! loopback, System V IPC or a mount of another command.

use std::ffi::CString;
use std::io::{BufRead, Read};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Stdio;

use crate::bwrap;
pub(crate) use crate::namespaces::{Entry, Namespaces};
use crate::policy::{Bwrap, HelperPolicy, Policy};

/// What the holder runs: it says it is ready (bubblewrap has built everything by then),
/// then waits for end of file on its stdin, which the server holds.
const HOLDER: [&str; 3] = ["/bin/sh", "-c", "echo ready; read line"];

/// The namespaces of the server's kept sandbox (set once, at its start).
static NAMESPACES: std::sync::OnceLock<Namespaces> = std::sync::OnceLock::new();

/// The kept sandbox: bubblewrap and its holder, ended when dropped.
#[derive(Debug)]
pub(crate) struct Kept {
    bwrap: std::process::Child,
    /// The holder's stdin: it ends at this pipe's end of file.
    _holder: std::process::ChildStdin,
    /// The network is allowed (commands share the host's).
    network: bool,
    /// A network namespace made for the next command (without network).
    ready: Option<OwnedFd>,
}

impl Kept {
    /// Builds the sandbox for `policy` (the server's: one workspace, the hidden data dir,
    /// the network setting) under `bwrap`, and opens its namespaces (see
    /// [`namespaces`]). As root, the caller has mounted the workspace idmapped in this
    /// process's mount namespace already; bubblewrap runs as the unprivileged user.
    pub(crate) fn start(bwrap: &Bwrap, policy: &HelperPolicy) -> Result<Kept, String> {
        use std::os::unix::process::CommandExt;
        let workspace = policy.write.first().ok_or("no workspace given")?;
        let sandbox = Policy {
            workspace: workspace.clone(),
            cwd: workspace.clone(),
            hidden: policy.hidden.clone(),
            read_only: policy.read_only.clone(),
            network: policy.network,
            stdin: None,
        };
        let root = rustix::process::geteuid().is_root();
        let argv = HOLDER.map(String::from);
        let mut cmd = std::process::Command::new(&bwrap.path);
        cmd.args(bwrap::args(bwrap, &sandbox, &argv, root, true))
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if root {
            let id = crate::unprivileged::UNPRIVILEGED_ID;
            // With no supplementary groups: the standard library drops them when root
            // sets a uid.
            cmd.uid(id).gid(id);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start `{}`: {e}", bwrap.path.display()))?;
        let mut kept = Kept {
            _holder: child.stdin.take().ok_or("no stdin for bubblewrap")?,
            bwrap: child,
            network: policy.network,
            ready: None,
        };
        let mut line = String::new();
        let stdout = kept.bwrap.stdout.take().ok_or("no stdout for bubblewrap")?;
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        if line != "ready\n" {
            let mut why = String::new();
            if let Some(mut stderr) = kept.bwrap.stderr.take() {
                let _ = stderr.read_to_string(&mut why);
            }
            return Err(format!(
                "bubblewrap could not build the kept sandbox: {}",
                why.trim()
            ));
        }
        drop(kept.bwrap.stderr.take());
        let holder = crate::tree::children(
            i32::try_from(kept.bwrap.id()).map_err(|_| "bubblewrap's pid is out of range")?,
        );
        let [holder] = holder[..] else {
            return Err("bubblewrap's holder is not its only child".into());
        };
        let namespaces = namespaces(holder, workspace, policy.network, root)?;
        NAMESPACES
            .set(namespaces)
            .map_err(|_| "this server has a kept sandbox already")?;
        Ok(kept)
    }

    /// Without network, makes the next command's network namespace (its loopback up),
    /// unless one is ready: a command's own, as bubblewrap makes for a one-shot command,
    /// but made while the previous command runs (it costs about as much CPU as the rest
    /// of entering the sandbox). A failure is left to the command, which then makes
    /// its own.
    pub(crate) fn prepare_network(&mut self) {
        if self.network || self.ready.is_some() {
            return;
        }
        if let Some(ns) = get() {
            self.ready = network_namespace(ns).ok();
        }
    }

    /// The network namespace made for the next command, if one is ready (it is that
    /// command's alone: the server keeps no copy).
    pub(crate) fn take_network(&mut self) -> Option<OwnedFd> {
        self.ready.take()
    }

    /// bubblewrap's pid (the server's child while the sandbox is kept).
    pub(crate) fn pid(&self) -> i32 {
        i32::try_from(self.bwrap.id()).unwrap_or(i32::MAX)
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        let _ = self.bwrap.kill();
        let _ = self.bwrap.wait();
    }
}

/// A new network namespace of the kept sandbox's user namespace, its loopback up:
/// made by a child of the server (which itself joins nothing), sent back as a
/// descriptor, and nothing else in it.
fn network_namespace(ns: &Namespaces) -> std::io::Result<OwnedFd> {
    use std::os::fd::AsFd;
    let (ours, theirs) = crate::ipc::socket_pair()?;
    match crate::sys::fork_single_threaded()? {
        None => {
            drop(ours);
            let unprivileged = if ns.root {
                crate::unprivileged::become_unprivileged(crate::unprivileged::UNPRIVILEGED_ID)
            } else {
                Ok(())
            };
            let code = match unprivileged.and_then(|()| crate::sys::kept_network_namespace(ns)) {
                Ok(net) => crate::ipc::send(&theirs, b"n", &[net.as_fd()]).is_err(),
                Err(_) => true,
            };
            std::process::exit(i32::from(code));
        }
        Some(pid) => {
            drop(theirs);
            let got = crate::ipc::receive(ours.as_fd());
            let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
            match got {
                Ok(Some((_, mut fds))) if fds.len() == 1 => Ok(fds.remove(0)),
                Ok(_) => Err(std::io::Error::other("no network namespace was made")),
                Err(e) => Err(e),
            }
        }
    }
}

/// The namespaces of the server's kept sandbox, once [`Kept::start`] made them.
pub(crate) fn get() -> Option<&'static Namespaces> {
    NAMESPACES.get()
}

/// Opens the namespaces of the holder `pid` and prepares the rest a command needs.
fn namespaces(pid: i32, workspace: &Path, network: bool, root: bool) -> Result<Namespaces, String> {
    let open = |name: &str| -> Result<OwnedFd, String> {
        std::fs::File::open(format!("/proc/{pid}/ns/{name}"))
            .map(OwnedFd::from)
            .map_err(|e| format!("cannot open the kept sandbox's {name} namespace: {e}"))
    };
    let identity = |fd: &OwnedFd| -> Result<(u64, u64), String> {
        let m = std::fs::File::from(fd.try_clone().map_err(|e| e.to_string())?)
            .metadata()
            .map_err(|e| e.to_string())?;
        Ok((m.dev(), m.ino()))
    };
    let ours = |name: &str| -> Option<(u64, u64)> {
        let m = std::fs::metadata(format!("/proc/self/ns/{name}")).ok()?;
        Some((m.dev(), m.ino()))
    };
    let mnt = open("mnt")?;
    let user = crate::sys::owning_user_namespace(&mnt)
        .map_err(|e| format!("cannot find the kept sandbox's user namespace: {e}"))?;
    let holder_user = open("user")?;
    let inner = (identity(&holder_user)? != identity(&user)?).then_some(holder_user);
    let mut others = Vec::new();
    for (name, kind) in [
        ("uts", libc::CLONE_NEWUTS),
        ("cgroup", libc::CLONE_NEWCGROUP),
    ] {
        let fd = open(name)?;
        if Some(identity(&fd)?) != ours(name) {
            others.push((fd, kind));
        }
    }
    let filter = crate::seccomp::filter(
        crate::seccomp::NETWORK_FAMILIES,
        crate::seccomp::Ipc::Private,
    )
    .map_err(|e| e.to_string())?;
    let covered = match [bwrap::TMP_DIR, bwrap::SHM_DIR]
        .into_iter()
        .find(|dir| workspace.starts_with(dir))
    {
        Some(dir) => {
            let mut dirs = Vec::new();
            let mut at = workspace;
            while at != Path::new(dir) {
                dirs.push(c_path(at)?);
                at = at
                    .parent()
                    .ok_or("the workspace is not under its directory")?;
            }
            dirs.reverse();
            Some((c_path(workspace)?, dirs))
        }
        None => None,
    };
    let c_str = |p: &str| CString::new(p).map_err(|e| e.to_string());
    Ok(Namespaces {
        covered,
        user,
        inner,
        mnt,
        others,
        network,
        filter,
        root,
        proc_read_only: bwrap::PROC_READ_ONLY
            .iter()
            .filter(|d| Path::new(d).exists())
            .map(|d| c_str(d))
            .collect::<Result<_, _>>()?,
        proc_masked: bwrap::proc_masked()
            .iter()
            .map(|f| c_str(f))
            .collect::<Result<_, _>>()?,
        tmp_options: c_str(&format!("mode=0755,size={}", bwrap::TMP_SIZE))?,
        shm_options: c_str(&format!("mode=0755,size={}", bwrap::SHM_SIZE))?,
    })
}

/// `path` for a system call.
pub(crate) fn c_path(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{} has a NUL byte", path.display()))
}
