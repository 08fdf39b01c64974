//! The sandbox server: one long-lived helper per workspace, mode and policy, for an
//! engine that runs many commands (a serving engine). It does the expensive set-up
//! once and then, per command, forks a supervisor that does exactly what the one-shot
//! helper does after its set-up ([`supervise`](crate::supervisor::supervise)).
//!
//! - Started by the engine as `<helper> __klaw-sandbox-serve <policy-json>` with a
//!   `SOCK_SEQPACKET` socket as its stdin (its only way in: an anonymous socket pair,
//!   no path, no abstract name). It closes (marks close-on-exec) whatever else it
//!   inherited, starts a session of its own, makes itself not dumpable (no ptrace, no
//!   `/proc/<pid>/mem`, no `/proc/<pid>/fd` for anyone but root) and a child subreaper,
//!   and, as root under Landlock or bubblewrap, makes the workspace's idmapped mount in
//!   a mount namespace of its own, once; under bubblewrap it builds the kept sandbox
//!   (`crate::kept`). Then it answers "ready" (or why not) and serves.
//! - Per command, one message: the command (argv, working directory, private temporary
//!   directory, environment, input file) and four descriptors: the lifeline (a pipe the
//!   engine holds open), the command's stdout and stderr, and the status pipe. It forks
//!   (it has one thread, so the child is a sound copy); the child closes the socket and
//!   every other command's descriptor, puts the lifeline on its stdin and the output on
//!   its stdout and stderr, and supervises: its own session, subreaper, the command
//!   forked as root's unprivileged user in a PID namespace of its own (root) with
//!   Landlock, seccomp and no capabilities applied in the command's process, the whole
//!   tree ended on the lifeline's end of file and when the command ends. It writes its
//!   exit code (one byte) on the status pipe right before it exits; end of file without
//!   it means the supervisor was killed. The server answers with the supervisor's pid.
//! - The server reaps its supervisors (pidfds in its `poll`), and, as subreaper, ends
//!   whatever a supervisor that was killed left behind. It ends at the socket's end of
//!   file (the engine dropped it, or died); supervisors still running are unaffected:
//!   each ends with its own lifeline.
//!
//! What a command cannot do to the server: it runs under another uid when the engine
//! is root (and has no capabilities), its Landlock domain scopes signals (ABI 6) and
//! ptrace to the domain, seccomp denies `ptrace` and `process_vm_*`, the server is not
//! dumpable, and no descriptor of the server reaches a command (all close-on-exec).
//! Under bubblewrap a command lives in a PID namespace of its own, where neither the
//! server nor any supervisor has a pid. Mode `off` has no sandbox, so a command there
//! can end the server as it can end the engine itself; the engine then starts another.

use std::ffi::OsString;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rustix::net::{SendAncillaryBuffer, SendFlags};

use crate::backend::Backend;
use crate::ipc::{MAX_REQUEST, receive, send, socket_pair};
use crate::policy::{HelperPolicy, SERVE_ARG};

/// How long the engine waits for the server's answer before it gives up on it.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// A command for the server, as it travels.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Request {
    argv: Vec<String>,
    cwd: PathBuf,
    tmp: Option<PathBuf>,
    stdin: Option<PathBuf>,
    env: Vec<(OsString, OsString)>,
}

/// The server's answer: ready / started (with the supervisor's pid), or why not.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Answer {
    #[serde(default)]
    pid: Option<i32>,
    #[serde(default)]
    error: Option<String>,
}

/// A command for [`Server::spawn`].
#[derive(Debug, Clone)]
pub struct ServedCommand<'a> {
    /// The program and its arguments.
    pub argv: &'a [String],
    /// The working directory, canonical, inside the workspace.
    pub cwd: &'a Path,
    /// The command's private temporary directory (read-write for it).
    pub tmp: Option<&'a Path>,
    /// A file the command reads as its stdin (else nothing).
    pub stdin: Option<&'a Path>,
    /// The command's whole environment.
    pub env: Vec<(OsString, OsString)>,
}

/// A command the server started: the engine's ends of its pipes.
#[derive(Debug)]
pub struct Started {
    /// The supervisor's pid (the root of the command's tree, for a last-resort kill).
    pub pid: i32,
    /// Held open while the command may run; closing it ends the whole tree.
    pub lifeline: OwnedFd,
    /// The command's stdout.
    pub stdout: OwnedFd,
    /// The command's stderr.
    pub stderr: OwnedFd,
    /// Yields the supervisor's exit code (one byte), then end of file; end of file
    /// alone: the supervisor was killed.
    pub status: OwnedFd,
}

/// The engine's handle on one sandbox server (see the module docs). Dropping it ends
/// the server (commands still running end with their own lifelines).
#[derive(Debug)]
pub struct Server {
    socket: Mutex<OwnedFd>,
    child: Mutex<std::process::Child>,
}

impl Server {
    /// Starts the server for `backend` (Landlock, bubblewrap or the unrestricted helper
    /// of mode `off`; a command without the helper is not served) and this workspace,
    /// data dir, read-only folders ([`Policy::read_only`](crate::Policy::read_only))
    /// and network, and waits until it is ready. Blocks for the set-up
    /// (milliseconds; under bubblewrap, bubblewrap's own set-up once).
    pub fn start(
        backend: &Backend,
        workspace: &Path,
        hidden: &[PathBuf],
        read_only: &[PathBuf],
        network: bool,
    ) -> io::Result<Server> {
        let (helper, landlock, bwrap) = match backend {
            Backend::Landlock(h) => (h, true, None),
            Backend::Supervised(h) => (h, false, None),
            Backend::Bwrap(b) => (&b.helper, false, Some(b.clone())),
            Backend::Direct => return Err(io::Error::other("this sandbox is not served")),
        };
        let policy = HelperPolicy {
            landlock,
            bwrap,
            network,
            write: vec![workspace.to_path_buf()],
            cwd: workspace.to_path_buf(),
            hidden: hidden.to_vec(),
            read_only: read_only.to_vec(),
            ..HelperPolicy::default()
        };
        let json = serde_json::to_string(&policy).map_err(io::Error::other)?;
        let (ours, theirs) = socket_pair()?;
        for which in [
            rustix::net::sockopt::Timeout::Recv,
            rustix::net::sockopt::Timeout::Send,
        ] {
            rustix::net::sockopt::set_socket_timeout(&ours, which, Some(ANSWER_TIMEOUT))?;
        }
        let child = std::process::Command::new(helper)
            .arg(SERVE_ARG)
            .arg(json)
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let server = Server {
            socket: Mutex::new(ours),
            child: Mutex::new(child),
        };
        let socket = server.socket.lock().unwrap_or_else(PoisonError::into_inner);
        let answer = receive_answer(&socket)?;
        drop(socket);
        match answer.error {
            Some(e) => Err(io::Error::other(e)),
            None => Ok(server),
        }
    }

    /// Whether commands under `backend` may be served here: mode `off` (nothing to
    /// keep a command from, the server included); bubblewrap (the server stays outside
    /// the sandbox it keeps, and each command lives in a PID namespace of its own, where
    /// no process of the server has a pid); and Landlock where a command cannot signal
    /// the server: the engine is root (the command is another uid) or the kernel's
    /// Landlock scopes signals (ABI 6, Linux 6.12). Elsewhere a Landlock command of the
    /// engine's own uid could stop or kill the server (and so delay the commands after
    /// it), so each command gets a helper of its own.
    pub fn serves(backend: &Backend) -> bool {
        match backend {
            Backend::Supervised(_) => true,
            // A kept sandbox's supervisor watches its command by pidfd (Linux 5.3): a
            // thread could not be made once it has joined the sandbox.
            Backend::Bwrap(_) => crate::sys::pidfds_work(),
            Backend::Landlock(_) => {
                rustix::process::geteuid().is_root()
                    || crate::sys::landlock_abi() >= landlock::ABI::V6
            }
            Backend::Direct => false,
        }
    }

    /// Whether `command` is small enough to be served (else run it through the
    /// one-shot helper).
    pub fn fits(command: &ServedCommand<'_>) -> bool {
        let size: usize = command.argv.iter().map(|a| a.len() + 8).sum::<usize>()
            + command
                .env
                .iter()
                .map(|(k, v)| 4 * (k.len() + v.len()) + 32)
                .sum::<usize>();
        size < MAX_REQUEST / 2
    }

    /// Starts `command` in this server's sandbox. On an error the server should not be
    /// used again; [`SpawnError::delivered`] says whether the command may have started
    /// (the server took it, then died or did not answer: its lifeline is closed here, so
    /// whatever started is ending), in which case it must not be run again elsewhere.
    pub fn spawn(&self, command: &ServedCommand<'_>) -> Result<Started, SpawnError> {
        let before = |error| SpawnError {
            error,
            delivered: false,
        };
        use rustix::pipe::{PipeFlags, pipe_with};
        let request = Request {
            argv: command.argv.to_vec(),
            cwd: command.cwd.to_path_buf(),
            tmp: command.tmp.map(Path::to_path_buf),
            stdin: command.stdin.map(Path::to_path_buf),
            env: command.env.clone(),
        };
        let json = serde_json::to_vec(&request)
            .map_err(io::Error::other)
            .map_err(before)?;
        if json.len() > MAX_REQUEST {
            return Err(before(io::Error::other(
                "the command is too long to be served",
            )));
        }
        let pipe = || pipe_with(PipeFlags::CLOEXEC).map_err(|e| before(e.into()));
        let (lifeline_read, lifeline) = pipe()?;
        let (stdout, stdout_write) = pipe()?;
        let (stderr, stderr_write) = pipe()?;
        let (status, status_write) = pipe()?;
        let socket = self.socket.lock().unwrap_or_else(PoisonError::into_inner);
        let fds = [
            lifeline_read.as_fd(),
            stdout_write.as_fd(),
            stderr_write.as_fd(),
            status_write.as_fd(),
        ];
        // A message on a sequenced-packet socket arrives whole or not at all: an error
        // here means the server never got the command.
        send(&socket, &json, &fds).map_err(before)?;
        // Our copies of the command's ends: only the supervisor holds them now.
        drop((lifeline_read, stdout_write, stderr_write, status_write));
        let after = |error| SpawnError {
            error,
            delivered: true,
        };
        let answer = receive_answer(&socket).map_err(after)?;
        drop(socket);
        match (answer.pid, answer.error) {
            (Some(pid), None) => Ok(Started {
                pid,
                lifeline,
                stdout,
                stderr,
                status,
            }),
            // The server's own refusal (an invalid request, a failed fork): nothing ran.
            (_, Some(e)) => Err(before(io::Error::other(e))),
            (None, None) => Err(after(io::Error::other("the sandbox server gave no pid"))),
        }
    }
}

/// Why [`Server::spawn`] did not start a command.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct SpawnError {
    /// What went wrong.
    pub error: io::Error,
    /// Whether the server had taken the command when it failed: it may have started,
    /// so it must not be run again.
    pub delivered: bool,
}

impl Drop for Server {
    fn drop(&mut self) {
        // End of file on its socket ends the server; the kill makes sure, and the wait
        // leaves no zombie. Its supervisors are separate processes and keep running.
        let child = self.child.get_mut().unwrap_or_else(PoisonError::into_inner);
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The server's answer on `socket` (the engine's side).
fn receive_answer(socket: &OwnedFd) -> io::Result<Answer> {
    match receive(socket.as_fd()) {
        Ok(Some((bytes, _))) => serde_json::from_slice(&bytes).map_err(io::Error::other),
        Ok(None) => Err(io::Error::other("the sandbox server ended")),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            Err(io::Error::other("the sandbox server did not answer"))
        }
        Err(e) => Err(e),
    }
}

/// Sends `answer` on the server's socket (errors ignored: an engine that is gone
/// cannot be told).
fn answer(socket: BorrowedFd<'_>, answer: &Answer) {
    if let Ok(json) = serde_json::to_vec(answer) {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        let _ = rustix::net::sendmsg(
            socket,
            &[io::IoSlice::new(&json)],
            &mut control,
            SendFlags::NOSIGNAL,
        );
    }
}

/// The server's main (`<helper> __klaw-sandbox-serve <policy-json>`): returns its exit
/// code when the engine's socket ends, or why it could not serve.
pub(crate) fn serve(args: Vec<OsString>) -> Result<u8, String> {
    crate::close_inherited_fds_on_exec();
    let stdin = std::io::stdin();
    let socket = stdin.as_fd();
    let setup = set_up(args);
    let (policy, mut kept) = match setup {
        Ok(set) => {
            answer(socket, &Answer::default());
            set
        }
        Err(e) => {
            answer(
                socket,
                &Answer {
                    error: Some(e.clone()),
                    ..Answer::default()
                },
            );
            return Err(e);
        }
    };
    // A kept bubblewrap sandbox: bubblewrap's pidfd, watched beside the requests (when
    // it ends, so does the server: the engine starts another), and its pid, spared by
    // the sweep of orphans.
    let kept_pidfd = match kept
        .as_ref()
        .and_then(|k| rustix::process::Pid::from_raw(k.pid()))
    {
        Some(pid) => Some(
            rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
                .map_err(|e| format!("pidfd_open: {e}"))?,
        ),
        None => None,
    };
    let spared: Vec<i32> = kept.iter().map(crate::kept::Kept::pid).collect();
    if let Some(k) = kept.as_mut() {
        k.prepare_network();
    }
    let mut live: Vec<(rustix::process::Pid, OwnedFd)> = Vec::new();
    loop {
        use rustix::event::{PollFd, PollFlags};
        let (request, exited, kept_ended) = {
            let mut polled = vec![PollFd::new(&socket, PollFlags::IN)];
            polled.extend(kept_pidfd.iter().map(|fd| PollFd::new(fd, PollFlags::IN)));
            let first = polled.len();
            polled.extend(live.iter().map(|(_, fd)| PollFd::new(fd, PollFlags::IN)));
            match rustix::event::poll(&mut polled, None) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(format!("poll: {e}")),
            }
            let request = !polled[0].revents().is_empty();
            let kept_ended = polled[1..first].iter().any(|p| !p.revents().is_empty());
            let exited: Vec<bool> = polled[first..]
                .iter()
                .map(|p| !p.revents().is_empty())
                .collect();
            (request, exited, kept_ended)
        };
        if kept_ended {
            // bubblewrap is gone, perhaps reaped by the sweep below already: not killed
            // by pid again.
            std::mem::forget(kept);
            return Err("the kept bubblewrap sandbox ended".into());
        }
        reap(&mut live, &exited, &spared);
        if !request {
            continue;
        }
        match receive(socket) {
            Ok(None) => return Ok(0),
            Ok(Some((bytes, fds))) => match start(&policy, &bytes, fds, &mut live, kept.as_mut()) {
                Ok(pid) => {
                    answer(
                        socket,
                        &Answer {
                            pid: Some(pid.as_raw_nonzero().get()),
                            ..Answer::default()
                        },
                    );
                    // The next command's network namespace, made while this one runs.
                    if let Some(k) = kept.as_mut() {
                        k.prepare_network();
                    }
                }
                Err(e) => answer(
                    socket,
                    &Answer {
                        error: Some(e),
                        ..Answer::default()
                    },
                ),
            },
            Err(e) => answer(
                socket,
                &Answer {
                    error: Some(format!("cannot read the request: {e}")),
                    ..Answer::default()
                },
            ),
        }
    }
}

/// The server's one-time set-up: the policy from `args`, its own session, not
/// dumpable, subreaper; as root under Landlock or bubblewrap, the workspace's idmapped
/// mount; otherwise under Landlock, the commands' user namespace; under bubblewrap, the
/// kept sandbox.
fn set_up(args: Vec<OsString>) -> Result<(HelperPolicy, Option<crate::kept::Kept>), String> {
    let policy = args.first().ok_or("no policy given")?;
    let policy: HelperPolicy = serde_json::from_str(&policy.to_string_lossy())
        .map_err(|e| format!("invalid policy: {e}"))?;
    if policy.probe || policy.write.len() != 1 || (policy.landlock && policy.bwrap.is_some()) {
        return Err("the sandbox server takes a workspace and no other policy".into());
    }
    rustix::process::setsid().map_err(|e| format!("setsid: {e}"))?;
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(|e| format!("PR_SET_DUMPABLE: {e}"))?;
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .map_err(|e| format!("PR_SET_CHILD_SUBREAPER: {e}"))?;
    let root = rustix::process::geteuid().is_root();
    if (policy.landlock || policy.bwrap.is_some()) && root {
        crate::supervisor::map_workspace(&policy)?;
    }
    if policy.landlock && !root {
        // The commands' user namespace, made once (see `landlock::own_user_namespace`).
        let _ = crate::landlock::own_user_namespace();
    }
    let kept = match &policy.bwrap {
        Some(bwrap) => Some(crate::kept::Kept::start(bwrap, &policy)?),
        None => None,
    };
    Ok((policy, kept))
}

/// Starts the request in `bytes` with its descriptors: forks the supervisor, which
/// never returns from here.
fn start(
    base: &HelperPolicy,
    bytes: &[u8],
    fds: Vec<OwnedFd>,
    live: &mut Vec<(rustix::process::Pid, OwnedFd)>,
    kept: Option<&mut crate::kept::Kept>,
) -> Result<rustix::process::Pid, String> {
    let request: Request =
        serde_json::from_slice(bytes).map_err(|e| format!("invalid request: {e}"))?;
    let [lifeline, stdout, stderr, status]: [OwnedFd; 4] = fds
        .try_into()
        .map_err(|_| "a request takes four descriptors".to_owned())?;
    let mut policy = base.clone();
    policy.write.extend(request.tmp);
    policy.cwd = request.cwd;
    policy.stdin = request.stdin;
    policy.env = Some(request.env);
    // Under bubblewrap, what the command enters: the kept sandbox, and the network
    // namespace made for it (the server's copy is closed below: it is this command's).
    let entry = match (kept, crate::kept::get()) {
        (Some(kept), Some(ns)) => Some(crate::kept::Entry {
            ns,
            network: kept.take_network(),
        }),
        _ => None,
    };
    match crate::sys::fork_single_threaded().map_err(|e| format!("fork: {e}"))? {
        None => {
            // The supervisor. Nothing of the server's stays open here: its socket is
            // replaced by the lifeline, the other commands' pidfds are closed.
            drop(std::mem::take(live));
            let code = supervised(
                &policy,
                request.argv,
                [lifeline, stdout, stderr, status],
                entry,
            );
            crate::supervisor::leave(code)
        }
        Some(pid) => {
            // The pid stays this supervisor's until the server reaps it (below).
            let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
                .map_err(|e| format!("pidfd_open: {e}"))?;
            live.push((pid, pidfd));
            Ok(pid)
        }
    }
}

/// In the forked supervisor: the descriptors in place, then the supervisor proper.
/// `fds`: the lifeline, stdout, stderr and the status pipe.
fn supervised(
    policy: &HelperPolicy,
    argv: Vec<String>,
    fds: [OwnedFd; 4],
    kept: Option<crate::kept::Entry>,
) -> u8 {
    let [lifeline, stdout, stderr, status] = fds;
    let _ = crate::supervisor::STATUS.set(status);
    let placed = rustix::stdio::dup2_stdin(&lifeline)
        .and_then(|()| rustix::stdio::dup2_stdout(&stdout))
        .and_then(|()| rustix::stdio::dup2_stderr(&stderr));
    drop((lifeline, stdout, stderr));
    if placed.is_err() {
        return crate::policy::UNPROVEN;
    }
    match crate::supervisor::supervise(policy, argv.into_iter().map(OsString::from), true, kept) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("klaw-sandbox: {e}");
            125
        }
    }
}

/// Reaps the supervisors whose pidfd said they exited; when one was killed (so it may
/// have left processes, now the server's), ends every child of the server that is not
/// a live supervisor or `spared` (the kept sandbox's bubblewrap), with its tree.
fn reap(live: &mut Vec<(rustix::process::Pid, OwnedFd)>, exited: &[bool], spared: &[i32]) {
    use rustix::process::{WaitId, WaitIdOptions};
    let mut killed = false;
    let mut flags = exited.iter();
    live.retain(|(_, pidfd)| {
        let done = flags.next().copied().unwrap_or(false);
        if !done {
            return true;
        }
        match rustix::process::waitid(
            WaitId::PidFd(pidfd.as_fd()),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
        ) {
            Ok(Some(s)) => {
                killed |= !s.exited();
                false
            }
            Ok(None) => true,
            Err(_) => false,
        }
    });
    // Orphans of killed supervisors, reparented here, and zombies among them.
    while let Ok(Some((_, s))) = rustix::process::wait(rustix::process::WaitOptions::NOHANG) {
        killed |= !s.exited();
    }
    if killed {
        let me = rustix::process::getpid().as_raw_nonzero().get();
        let supervisors: Vec<i32> = live.iter().map(|(p, _)| p.as_raw_nonzero().get()).collect();
        for orphan in crate::tree::children(me) {
            if !supervisors.contains(&orphan) && !spared.contains(&orphan) {
                crate::tree::kill_tree(orphan);
            }
        }
        while let Ok(Some(_)) = rustix::process::wait(rustix::process::WaitOptions::NOHANG) {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A stand-in server (Python, on the real socket `s`): runs `first`, answers
    /// "ready", then runs `then`.
    fn fake_server(dir: &Path, name: &str, first: &str, then: &str) -> PathBuf {
        let path = dir.join(name);
        let script = format!(
            "#!/usr/bin/python3\nimport os, socket\ns = socket.socket(fileno=0)\n\
             {first}\ns.send(b'{{}}')\n{then}\n"
        );
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn spawn_through(helper: PathBuf, workspace: &Path) -> Result<Started, SpawnError> {
        let server =
            Server::start(&Backend::Supervised(helper), workspace, &[], &[], false).unwrap();
        let argv = ["true".to_owned()];
        server.spawn(&ServedCommand {
            argv: &argv,
            cwd: workspace,
            tmp: None,
            stdin: None,
            env: Vec::new(),
        })
    }

    /// A server that took the command and died before answering may have started it:
    /// the error says so, so the engine does not run it a second time; one that died
    /// before taking it did not, and the command may go elsewhere.
    #[test]
    fn a_command_the_server_took_is_not_reported_as_unstarted() {
        if !Path::new("/usr/bin/python3").exists() {
            eprintln!("skipped: no /usr/bin/python3 for the stand-in server");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let taken = dir.path().join("taken");
        let after = fake_server(
            dir.path(),
            "after",
            "pass",
            &format!(
                "s.recvmsg(200000, socket.CMSG_SPACE(16))\nopen({:?}, 'w').close()\nos._exit(0)",
                taken.display().to_string()
            ),
        );
        let e = spawn_through(after, dir.path()).unwrap_err();
        assert!(e.delivered, "{e}");
        assert!(taken.exists());

        // It stops receiving before it says it is ready: the command cannot reach it.
        let before = fake_server(
            dir.path(),
            "before",
            "s.shutdown(socket.SHUT_RD)",
            "os._exit(0)",
        );
        let e = spawn_through(before, dir.path()).unwrap_err();
        assert!(!e.delivered, "{e}");
    }
}
