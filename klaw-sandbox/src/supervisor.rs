//! The helper's Linux side: the supervisor that starts and outlives the command (whose
//! process restricts itself before it runs the program), and the start of
//! bubblewrap with the seccomp filter.

use std::ffi::OsString;
use std::process::Stdio;

use crate::bwrap;
use crate::landlock::{self, Report};
use crate::policy::{Bwrap, HelperPolicy, PROBE_OK, Policy, UNPROVEN, UNPROVEN_NOTE};

/// Runs the helper with `args` (the policy as JSON, then the command) and returns the
/// exit code for the helper's process, or why it could not run the command.
pub(crate) fn run(args: Vec<OsString>) -> Result<u8, String> {
    // Nothing this process inherited reaches the command (a terminal, a file in the
    // data dir, a socket): only stdin, stdout, stderr and what is set up below.
    crate::close_inherited_fds_on_exec();
    let mut args = args.into_iter();
    let policy = args.next().ok_or("no policy given")?;
    let policy: HelperPolicy = serde_json::from_str(&policy.to_string_lossy())
        .map_err(|e| format!("invalid policy: {e}"))?;
    if let Some(bwrap) = &policy.bwrap {
        return Err(exec_bwrap(bwrap, &policy, args.collect()));
    }
    supervise(&policy, args, false, None)
}

/// The supervisor itself, in this process: starts the command `args` under `policy`,
/// waits for it, ends what it left, and returns its exit code. `mapped`: this process
/// already lives in a mount namespace with the workspace idmapped (a served command,
/// forked by `crate::server`). `kept`: the command enters the server's kept bubblewrap
/// sandbox (`crate::kept`).
pub(crate) fn supervise(
    policy: &HelperPolicy,
    mut args: impl Iterator<Item = OsString>,
    mapped: bool,
    kept: Option<crate::kept::Entry>,
) -> Result<u8, String> {
    use std::os::unix::process::ExitStatusExt;

    // A new session without a controlling terminal: the command cannot reach the
    // user's terminal (`/dev/tty`, TIOCSTI keystroke injection) nor get its signals.
    rustix::process::setsid().map_err(|e| format!("setsid: {e}"))?;
    // Not dumpable: the command cannot open our `/proc/<pid>/fd` (and hold the lifeline
    // pipe below open after the engine died), nor read our memory.
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(|e| format!("PR_SET_DUMPABLE: {e}"))?;
    // Keep every orphan of the tree as our child. No parent-death signal: it would kill
    // us before the lifeline below ends the tree, and the tree would outlive the engine.
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .map_err(|e| format!("PR_SET_CHILD_SUBREAPER: {e}"))?;
    let root = rustix::process::geteuid().is_root();
    if policy.landlock && root {
        // In this process's own mount namespace, which the command inherits: done here,
        // before the command may live in a PID namespace (below) whose process ids
        // `/proc` does not show.
        if !mapped {
            map_workspace(policy)?;
        }
        hand_over_temporary_dirs(policy)?;
    }
    // The restrictions apply to the command's own process, after the fork and before
    // `exec`: this supervisor stays outside the command's Landlock domain (a scoped
    // command cannot signal it) and, as root, outside its uid.
    let prepared = if policy.landlock {
        Some(landlock::prepare(policy, root)?)
    } else if policy.probe {
        println!("{PROBE_OK}");
        return Ok(0);
    } else {
        None
    };
    let prepared = match prepared {
        Some((prepared, report)) if policy.probe => return probe(policy, prepared, &report),
        other => other,
    };
    // The command's input: the file the engine wrote, opened here (before any
    // restriction, so the command needs no right to it), or nothing.
    let stdin: std::os::fd::OwnedFd = match &policy.stdin {
        Some(path) => std::fs::File::open(path)
            .map_err(|e| format!("cannot open the command's input {}: {e}", path.display()))?
            .into(),
        None => std::fs::File::options()
            .read(true)
            .write(true)
            .open("/dev/null")
            .map_err(|e| format!("cannot open /dev/null: {e}"))?
            .into(),
    };
    // Under the server's kept bubblewrap sandbox: into its user namespace, the command
    // PID 1 of a PID namespace of its own. (This process has one thread: the server
    // keeps bubblewrap only where the kernel has pidfds, so none is made below.)
    if let Some(entry) = &kept {
        // A fork of the sandbox server, which `fork_single_threaded` checked has one
        // thread: no `/proc` read here, on every command's way.
        let unprivileged = if entry.ns.root {
            crate::unprivileged::become_unprivileged_forked(crate::unprivileged::UNPRIVILEGED_ID)
        } else {
            Ok(())
        };
        unprivileged
            .and_then(|()| crate::sys::join_kept_user_namespace(entry.ns))
            .map_err(|e| format!("cannot enter the kept sandbox: {e}"))?;
    }
    let program = args.next().ok_or("no command given")?;
    // Our stdin is a pipe the engine holds open: end of file means the engine is gone
    // (or dropped the command, e.g. on timeout), so end the whole tree. Watched beside
    // the command's exit by one `poll` (below) where the kernel has pidfds (Linux 5.3),
    // else by a thread: no thread to start, and none to wake before this process ends.
    let pidfds = crate::sys::pidfds_work();
    if !pidfds {
        std::thread::spawn(|| {
            use std::io::Read;
            let mut buf = [0_u8; 64];
            while let Ok(n) = std::io::stdin().read(&mut buf) {
                if n == 0 {
                    break;
                }
            }
            leave(lifeline_ended());
        });
    }
    // As root, the command becomes PID 1 of a PID namespace of its own: when it ends,
    // the kernel ends every process left in it, however fast they move to new PIDs.
    // (Elsewhere the walk in `end_the_tree` does what it can, and says when it could
    // not.) After the thread above: no thread can be made once this is done.
    if policy.landlock && root {
        let _ = crate::children_in_new_pid_namespace();
    }
    let (child, report) = match prepared {
        // Restricted in its own process, which shares this one's memory until it runs
        // the program (nothing of this process is copied for it).
        Some((prepared, report)) => {
            let env = policy.env.as_deref();
            let child = crate::sys::Exec::new(&program, args, &policy.cwd, env, stdin)
                .and_then(|mut exec| crate::sys::spawn_restricted(&mut exec, &|| prepared.apply()));
            // The ruleset and the report's write end are closed here (so reading the
            // report below cannot block).
            drop(prepared);
            (child.map(Running::Restricted), Some(report))
        }
        // Into the server's kept bubblewrap sandbox, the same way: its process enters
        // the sandbox, then runs the program.
        None if let Some(entry) = &kept => {
            let cwd = crate::kept::c_path(&policy.cwd)?;
            let mut env: Vec<(OsString, OsString)> = policy
                .env
                .iter()
                .flatten()
                .filter(|(k, _)| k != "HOME" && k != "TMPDIR")
                .cloned()
                .collect();
            // As bubblewrap sets them for a one-shot command: its private /tmp.
            env.push(("HOME".into(), "/tmp".into()));
            env.push(("TMPDIR".into(), "/tmp".into()));
            // (It changes to its working directory once inside.)
            let root = std::path::Path::new("/");
            let child = crate::sys::Exec::new(&program, args, root, Some(&env), stdin)
                .and_then(|mut exec| crate::sys::spawn_kept(&mut exec, entry, &cwd));
            (child.map(Running::Restricted), None)
        }
        None => {
            let mut command = std::process::Command::new(&program);
            command
                .args(args)
                .current_dir(&policy.cwd)
                .stdin(Stdio::from(stdin));
            if let Some(env) = &policy.env {
                command.env_clear().envs(env.iter().map(|(k, v)| (k, v)));
            }
            (command.spawn().map(Running::Plain), None)
        }
    };
    let status = match child {
        Ok(child) if pidfds => match wait_or_lifeline(child) {
            Some(status) => Ok(status),
            None => return Ok(lifeline_ended()),
        },
        Ok(mut child) => child.wait(),
        Err(e) => Err(e),
    };
    let code = match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(c), _) => u8::try_from(c).unwrap_or(1),
            (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(255),
            (None, None) => 1,
        },
        Err(e) => match report.as_ref().and_then(Report::failed) {
            // The sandbox could not be set up: the command never ran.
            Some(step) => return Err(format!("{}: {e}", step.describe(policy))),
            None => {
                eprintln!(
                    "klaw-sandbox: cannot run `{}`: {e}",
                    program.to_string_lossy()
                );
                match e.kind() {
                    std::io::ErrorKind::NotFound => 127,
                    _ => 126,
                }
            }
        },
    };
    // End whatever the command left behind (daemons, `setsid` children): as subreaper
    // they are all our descendants.
    end_the_tree();
    Ok(code)
}

/// Where a served supervisor reports its exit code (one byte) before it exits: set by
/// `crate::server` in the supervisor it forks; unset in the helper, whose exit code
/// its parent reads.
pub(crate) static STATUS: std::sync::OnceLock<std::os::fd::OwnedFd> = std::sync::OnceLock::new();

/// Exits this supervisor with `code`, reporting it first where [`STATUS`] says.
pub(crate) fn leave(code: u8) -> ! {
    if let Some(status) = STATUS.get() {
        let _ = rustix::io::write(status, &[code]);
    }
    std::process::exit(i32::from(code))
}

/// The command's process: started by the standard library (no sandbox), or restricted
/// by `crate::sys::spawn_restricted`.
enum Running {
    Plain(std::process::Child),
    Restricted(rustix::process::Pid),
}

impl Running {
    fn id(&self) -> u32 {
        match self {
            Running::Plain(child) => child.id(),
            Running::Restricted(pid) => pid.as_raw_nonzero().get().unsigned_abs(),
        }
    }

    /// Waits for it to exit (and reaps it).
    fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        use std::os::unix::process::ExitStatusExt;
        match self {
            Running::Plain(child) => child.wait(),
            Running::Restricted(pid) => loop {
                match rustix::process::waitpid(Some(*pid), rustix::process::WaitOptions::empty()) {
                    Ok(Some((_, status))) => {
                        return Ok(std::process::ExitStatus::from_raw(status.as_raw()));
                    }
                    Ok(None) | Err(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(e.into()),
                }
            },
        }
    }
}

/// Waits for `child` to exit while watching the lifeline on stdin: its status, or `None`
/// once the lifeline ended (the engine is gone or dropped the command).
fn wait_or_lifeline(mut child: Running) -> Option<std::process::ExitStatus> {
    use std::os::fd::AsFd;
    // No pidfd after all (no descriptor left): no thread watches the lifeline either,
    // so the command is not left to outlive the engine; it is ended with its tree.
    let Ok(pidfd) = crate::sys::pidfd(child.id()) else {
        return None;
    };
    loop {
        match crate::sys::poll_two(std::io::stdin().as_fd(), pidfd.as_fd()) {
            Ok((_, true)) => return child.wait().ok(),
            Ok((true, false)) => {
                use std::io::Read;
                let mut buf = [0_u8; 64];
                if !matches!(std::io::stdin().read(&mut buf), Ok(n) if n > 0) {
                    return None;
                }
            }
            Ok((false, false)) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// Ends the whole tree once the lifeline ended: the helper's exit code, 137 (killed) or
/// [`UNPROVEN`] when some process kept moving to new process ids.
fn lifeline_ended() -> u8 {
    if end_the_tree() { 137 } else { UNPROVEN }
}

/// The Landlock probe: a child applies the restrictions, then exits instead of running
/// a program; prints [`PROBE_OK`] when it could.
fn probe(
    policy: &HelperPolicy,
    prepared: landlock::Prepared,
    report: &Report,
) -> Result<u8, String> {
    // A child applies the restrictions, then exits instead of running a program.
    let mut child = std::process::Command::new("/proc/self/exe");
    child.stdin(Stdio::null());
    crate::sys::restrict_before_exec(&mut child, move || prepared.apply(), true);
    let status = child.status();
    // The report's write end, held by the hook, is closed here: the read cannot block.
    drop(child);
    match status {
        Ok(s) if s.success() => {
            println!("{PROBE_OK}");
            Ok(0)
        }
        Ok(_) => Err("the probe of the sandbox failed".into()),
        Err(e) => Err(match report.failed() {
            Some(step) => format!("{}: {e}", step.describe(policy)),
            None => format!("cannot start the probe of the sandbox: {e}"),
        }),
    }
}

/// Kills every descendant of this supervisor and reaps them, so no zombie outlives it;
/// says on stderr when processes kept appearing. True when none was left.
fn end_the_tree() -> bool {
    // Reap what already ended. No child at all (`ECHILD`) proves the tree empty without
    // reading `/proc`: as subreaper this process inherits every orphan of the tree, so a
    // live descendant always has a live ancestor among our children.
    loop {
        match rustix::process::wait(rustix::process::WaitOptions::NOHANG) {
            Ok(Some(_)) => {}
            Err(rustix::io::Errno::CHILD) => return true,
            Ok(None) | Err(_) => break,
        }
    }
    let proven = crate::tree::kill_descendants(rustix::process::getpid().as_raw_nonzero().get());
    while let Ok(Some(_)) = rustix::process::wait(rustix::process::WaitOptions::NOHANG) {}
    if !proven {
        eprintln!("klaw-sandbox: {UNPROVEN_NOTE} (some kept moving to new process ids)");
    }
    proven
}

/// As root, before the command switches to
/// [`UNPRIVILEGED_ID`](crate::unprivileged::UNPRIVILEGED_ID): hands it the private
/// temporary directories (the writable directories after the workspace, made by the
/// engine for this command). The workspace it sees through the idmapped mount.
fn hand_over_temporary_dirs(policy: &HelperPolicy) -> Result<(), String> {
    use crate::unprivileged::UNPRIVILEGED_ID;
    let (_workspace, temporary) = policy.write.split_first().ok_or("no workspace given")?;
    let id = Some(rustix::process::Uid::from_raw(UNPRIVILEGED_ID));
    let group = Some(rustix::process::Gid::from_raw(UNPRIVILEGED_ID));
    for dir in temporary {
        rustix::fs::chown(dir, id, group)
            .map_err(|e| format!("cannot hand {} to the sandbox user: {e}", dir.display()))?;
    }
    Ok(())
}

/// As root: mounts the workspace (the first writable directory) idmapped for the
/// unprivileged user in this process's own mount namespace (which its children inherit),
/// or says why it cannot and what to do instead.
pub(crate) fn map_workspace(policy: &HelperPolicy) -> Result<(), String> {
    let workspace = policy.write.first().ok_or("no workspace given")?;
    let id = crate::unprivileged::UNPRIVILEGED_ID;
    let read_only = crate::policy::read_only_outside(workspace, &policy.hidden, &policy.read_only);
    crate::unprivileged::idmapped_workspace_with(workspace, &read_only, id).map_err(|e| {
        format!(
            "the engine runs as root, so commands run as an unprivileged user, but the \
             workspace {} cannot be mapped for it (an idmapped mount, which needs \
             CAP_SYS_ADMIN and a filesystem that supports it, e.g. not overlayfs): {e}; \
             run the engine as an unprivileged user (in a container, e.g. `docker run \
             --user 1000`), or keep the workspace on ext4, xfs, btrfs or tmpfs",
            workspace.display()
        )
    })
}

/// Replaces this process with bubblewrap running `argv` under `policy`, handing it the
/// seccomp filter to install right before it runs the command (`--add-seccomp-fd`, in a
/// memory file this process leaves open across `exec`). As root,
/// first switches to an unprivileged user that sees the workspace through an idmapped
/// mount (`crate::unprivileged`). Returns only on failure.
fn exec_bwrap(bwrap: &Bwrap, policy: &HelperPolicy, argv: Vec<OsString>) -> String {
    use std::os::fd::IntoRawFd;
    use std::os::unix::process::CommandExt;

    let Some(workspace) = policy.write.first() else {
        return "no workspace given".into();
    };
    let mut cmd = std::process::Command::new(&bwrap.path);
    // bubblewrap's own namespaces contain the network (its own loopback, unless
    // `network`), the host's UNIX sockets and System V IPC.
    let filter = match crate::seccomp::filter(
        crate::seccomp::NETWORK_FAMILIES,
        crate::seccomp::Ipc::Private,
    ) {
        Ok(f) => f,
        Err(e) => return e.to_string(),
    };
    let fd = match sealed_memfd(&crate::seccomp::to_bytes(&filter)) {
        Ok(fd) => fd,
        Err(e) => return format!("cannot pass the seccomp filter to bwrap: {e}"),
    };
    // Left open (not close-on-exec) on purpose: bubblewrap reads and closes it.
    cmd.arg("--add-seccomp-fd")
        .arg(fd.into_raw_fd().to_string());
    let root = rustix::process::geteuid().is_root();
    if root && let Err(e) = map_workspace(policy) {
        return e;
    }
    let sandbox = Policy {
        workspace: workspace.clone(),
        cwd: policy.cwd.clone(),
        hidden: policy.hidden.clone(),
        read_only: policy.read_only.clone(),
        network: policy.network,
        stdin: None,
    };
    let argv: Vec<String> = argv
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // The arguments are worked out while still root (they look at the data dir, which
    // the unprivileged user may not reach).
    cmd.args(bwrap::args(bwrap, &sandbox, &argv, root, false));
    if root {
        let id = crate::unprivileged::UNPRIVILEGED_ID;
        if let Err(e) = crate::unprivileged::become_unprivileged(id) {
            return format!("cannot switch to an unprivileged user: {e}");
        }
    }
    let e = cmd.exec();
    format!("cannot start `{}`: {e}", bwrap.path.display())
}

/// A memory file holding `bytes`, positioned at its start, sealed against changes,
/// and inherited across `exec`.
fn sealed_memfd(bytes: &[u8]) -> std::io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{MemfdFlags, SealFlags};
    let fd = rustix::fs::memfd_create("klaw-seccomp", MemfdFlags::ALLOW_SEALING)?;
    let mut file = std::fs::File::from(fd);
    std::io::Write::write_all(&mut file, bytes)?;
    std::io::Seek::rewind(&mut file)?;
    let fd = std::os::fd::OwnedFd::from(file);
    rustix::fs::fcntl_add_seals(
        &fd,
        SealFlags::WRITE | SealFlags::GROW | SealFlags::SHRINK | SealFlags::SEAL,
    )?;
    Ok(fd)
}
