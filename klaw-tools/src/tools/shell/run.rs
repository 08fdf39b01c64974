//! Starting a command in its sandbox and supervising it: the command line, the working
//! directory, the environment, bounded output, and killing the whole tree.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::deny;
use super::output::{self, SharedTail};
use klaw_sandbox::{Backend, DEFAULT_PATH, Policy};

use super::sandbox::{self, SandboxHelper};
use super::scratch::CommandTmp;
use super::served::Servers;
use super::settings::ShellSettings;
use crate::Schema;
use crate::{ToolContext, ToolError, ToolSchema};

/// A command: a shell line (run with `sh -c`) or an argument vector (run directly).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum CommandLine {
    /// `"cargo test && echo done"`: run through `sh -c`.
    Shell(String),
    /// `["cargo", "test"]`: run directly, no shell.
    Argv(Vec<String>),
}

fn command_schema() -> Value {
    json!({
        "anyOf": [
            {"type": "string"},
            {"type": "array", "items": {"type": "string"}, "minItems": 1},
        ]
    })
}

impl ToolSchema for CommandLine {
    const SCHEMA: Schema = Schema::External(command_schema);
}

impl CommandLine {
    /// The argument vector to run.
    pub(crate) fn argv(&self) -> Result<Vec<String>, ToolError> {
        let argv = match self {
            CommandLine::Shell(line) => {
                if line.trim().is_empty() {
                    return Err(ToolError::invalid_arguments("/command", "empty"));
                }
                vec!["sh".into(), "-c".into(), line.clone()]
            }
            CommandLine::Argv(v) => {
                if v.first().is_none_or(|p| p.is_empty()) {
                    return Err(ToolError::invalid_arguments(
                        "/command",
                        "an empty array, or its program is empty",
                    ));
                }
                v.clone()
            }
        };
        if argv.iter().any(|a| a.contains('\0')) {
            return Err(ToolError::invalid_arguments(
                "/command",
                "contains a NUL byte",
            ));
        }
        Ok(argv)
    }

    /// The command as one line, for results and the deny-list.
    pub(crate) fn display(&self) -> String {
        match self {
            CommandLine::Shell(line) => line.clone(),
            CommandLine::Argv(v) => v.join(" "),
        }
    }

    /// Refuses commands on the deny-list.
    pub(crate) fn check_deny(&self) -> Result<(), ToolError> {
        match deny::refuse(&self.display()) {
            Some(why) => Err(ToolError::access_denied(format!(
                "refused: this command looks like {why}, which is never allowed; \
                 if you meant something else, rewrite the command"
            ))),
            None => Ok(()),
        }
    }
}

/// Resolves `working_dir` beneath the workspace by the kernel (cap-std: `openat2` with
/// `RESOLVE_BENEATH` where available), then names the opened directory. `..`, absolute
/// paths elsewhere and symlinks that lead out are refused.
pub(crate) fn resolve_dir(
    workspace: &Path,
    working_dir: Option<&str>,
) -> Result<PathBuf, ToolError> {
    let root = std::fs::canonicalize(workspace).map_err(|e| {
        ToolError::unavailable(format!(
            "the workspace {} is not usable",
            workspace.display()
        ))
        .with_source(e)
    })?;
    let rel = match working_dir.map(str::trim) {
        None | Some("" | ".") => return Ok(root),
        Some(w) => Path::new(w),
    };
    let rel = if rel.is_absolute() {
        rel.strip_prefix(&root)
            .or_else(|_| rel.strip_prefix(workspace))
            .map_err(|_| outside(rel))?
    } else {
        rel
    };
    if rel.as_os_str().is_empty() {
        return Ok(root);
    }
    let dir = cap_std::fs::Dir::open_ambient_dir(&root, cap_std::ambient_authority())
        .map_err(|e| ToolError::unavailable("the workspace cannot be opened").with_source(e))?;
    let sub = dir.open_dir(rel).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ToolError::not_found(format!(
            "workingDir `{}` does not exist in the workspace",
            rel.display()
        )),
        std::io::ErrorKind::NotADirectory => ToolError::invalid_arguments(
            "/workingDir",
            format!("`{}` is not a directory", rel.display()),
        ),
        _ => outside(rel).with_source(e),
    })?;
    let real = std::fs::read_link(format!("/proc/self/fd/{}", sub.as_fd().as_raw_fd()))
        .map_err(|e| ToolError::failed("cannot name the working directory").with_source(e))?;
    if !real.starts_with(&root) {
        return Err(outside(rel));
    }
    Ok(real)
}

fn outside(rel: &Path) -> ToolError {
    ToolError::access_denied(format!(
        "workingDir `{}` is outside the workspace; use a path relative to the workspace",
        rel.display()
    ))
}

/// Environment variables passed through to commands; everything else (API keys,
/// tokens) is dropped.
const ENV_ALLOW: &[&str] = &[
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "LC_NUMERIC",
    "LC_TIME",
    "LC_COLLATE",
    "TZ",
    "TERM",
];

/// What to run and where.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    pub(crate) argv: Vec<String>,
    pub(crate) cwd: PathBuf,
    /// What the command reads on stdin (nothing when `None`).
    pub(crate) stdin: Option<Vec<u8>>,
}

/// A started command: its root process, its output buffers and its private temp dir.
#[derive(Debug)]
pub(crate) struct Running {
    // Declared (so dropped) before `child`: the tree is walked while its root still
    // lives; `child`'s kill-on-drop would kill the root first and orphan the rest.
    guard: KillGuard,
    root: Root,
    /// The helper's lifeline (see `spawn`); closed when this is dropped.
    lifeline: Option<OwnedFd>,
    pub(crate) stdout: SharedTail,
    pub(crate) stderr: SharedTail,
    readers: Vec<JoinHandle<()>>,
    pub(crate) backend: &'static str,
    /// No sandbox root: the command alone in its own process group.
    direct: bool,
    /// Removed when this is dropped, after the tree (see [`CommandTmp`]).
    _tmp: Option<CommandTmp>,
}

/// The process whose end is the command's end: the helper, bubblewrap or the command
/// as the engine's child, or a served command's supervisor (a child of the sandbox
/// server), whose exit code comes on its status pipe.
#[derive(Debug)]
enum Root {
    Child(tokio::process::Child),
    Served {
        status: tokio::net::unix::pipe::Receiver,
        /// The exit status once known (waiting is cancel-safe and may be repeated).
        ended: Option<std::process::ExitStatus>,
    },
}

impl Root {
    async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self {
            Root::Child(child) => child.wait().await,
            Root::Served { status, ended } => {
                if let Some(s) = ended {
                    return Ok(*s);
                }
                let mut byte = [0_u8; 1];
                let s = match tokio::io::AsyncReadExt::read(status, &mut byte).await? {
                    // The supervisor's exit code, as a wait status.
                    1 => std::process::ExitStatus::from_raw(i32::from(byte[0]) << 8),
                    // End of file without a code: the supervisor was killed (SIGKILL).
                    _ => std::process::ExitStatus::from_raw(9),
                };
                *ended = Some(s);
                Ok(s)
            }
        }
    }
}

/// Kills the whole tree when dropped while the command may still run (a cancelled or
/// timed-out call, an engine shutting down).
#[derive(Debug)]
pub(crate) struct KillGuard {
    pid: Option<i32>,
}

impl KillGuard {
    /// Kills the whole tree, unless the guard was disarmed.
    pub(crate) fn kill(&mut self) {
        if let Some(pid) = self.pid {
            klaw_sandbox::tree::kill_tree(pid);
        }
    }

    fn disarm(&mut self) {
        self.pid = None;
    }
}

impl Drop for KillGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exit {
    /// The exit code (`128 + signal` for a signal).
    pub(crate) code: i32,
    /// True when the time limit ended it.
    pub(crate) timed_out: bool,
    /// True when, after a timeout, the supervisor could not prove every process ended.
    pub(crate) unproven: bool,
}

/// Chooses the sandbox for this context: here when the answer is known (this process
/// chose before, or the probe's success is remembered), else off the async threads (the
/// first call probes).
pub(crate) async fn backend(ctx: &ToolContext) -> Result<Backend, ToolError> {
    let mode = ShellSettings::of(ctx).sandbox;
    let helper = SandboxHelper::for_context(ctx);
    // Once per process, off the async threads and beside the command: what killed
    // engines left in /tmp.
    super::scratch::sweep_in_background();
    if let Some(known) = klaw_sandbox::select_known(mode, helper.as_deref()) {
        return Ok(known);
    }
    tokio::task::spawn_blocking(move || klaw_sandbox::select(mode, helper.as_deref()))
        .await
        .map_err(|e| ToolError::failed("choosing the sandbox failed").with_source(e))?
        .map_err(sandbox::tool_error)
}

/// The folders of skills outside the workspace, which commands see read-only so that
/// a skill's scripts run (none without the skills group).
fn skill_folders(ctx: &ToolContext) -> Vec<PathBuf> {
    #[cfg(feature = "skills")]
    {
        ctx.shared_state::<crate::tools::skills::SkillsSettings>()
            .folders_for_commands(ctx.workspace(), ctx.data_dir())
    }
    #[cfg(not(feature = "skills"))]
    {
        let _ = ctx;
        Vec::new()
    }
}

/// The folders of `folders` that commands may be shown read-only: not one that is or
/// holds the data dir (`hidden`), the engine's home or a system folder such as `/etc`
/// ([`klaw_sandbox::read_only_refusal`]); each one left out is logged.
fn shown_read_only(folders: Vec<PathBuf>, hidden: &[PathBuf]) -> Vec<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        folders
            .into_iter()
            .filter(
                |dir| match klaw_sandbox::read_only_refusal(dir, hidden, home.as_deref()) {
                    Some(why) => {
                        tracing::warn!(
                            folder = %dir.display(),
                            "a skills folder is not shown to commands: {why}"
                        );
                        false
                    }
                    None => true,
                },
            )
            .collect()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = hidden;
        folders
    }
}

/// Starts `job` under `backend` with the context's policy.
pub(crate) fn spawn(ctx: &ToolContext, backend: &Backend, job: &Job) -> Result<Running, ToolError> {
    let workspace = std::fs::canonicalize(ctx.workspace())
        .map_err(|e| ToolError::unavailable("the workspace is not usable").with_source(e))?;
    // A serving engine's helper-run commands go through a long-lived sandbox server.
    let lifeline = backend.has_lifeline();
    let servers = ctx.shared_state::<Servers>();
    // (Under bubblewrap, whose one-shot path has no helper watching a lifeline, a
    // command's input is a pipe, which the server does not pass: such a command runs
    // the one-shot way.)
    let servable = lifeline || (matches!(backend, Backend::Bwrap(_)) && job.stdin.is_none());
    let serve = servable && servers.wanted(ShellSettings::of(ctx).sandbox_server);
    // bubblewrap gives the command a private /tmp; the others get a directory of its own
    // (a served one, the one made ready after the previous command, if any).
    let tmp = match backend {
        Backend::Bwrap(_) => None,
        _ => Some(
            servers
                .ready_tmp(serve)
                .map_or_else(CommandTmp::new, Ok)
                .map_err(|e| {
                    ToolError::failed("cannot create a temporary directory").with_source(e)
                })?,
        ),
    };
    let tmp_path = tmp.as_ref().map(|t| t.path().to_path_buf());
    // The command's input. The helper's own stdin is the engine's lifeline, so it gets
    // the input as a file in the command's private temporary directory, which it opens
    // for the command; bubblewrap and a direct command get a pipe.
    let stdin_file = match (&job.stdin, &tmp_path, lifeline) {
        (Some(data), Some(dir), true) => {
            let path = dir.join(".klaw-stdin");
            std::fs::write(&path, data).map_err(|e| {
                ToolError::failed("cannot write the command's input").with_source(e)
            })?;
            Some(path)
        }
        _ => None,
    };
    let hidden: Vec<PathBuf> = std::fs::canonicalize(ctx.data_dir()).into_iter().collect();
    let policy = Policy {
        workspace,
        cwd: job.cwd.clone(),
        read_only: shown_read_only(skill_folders(ctx), &hidden),
        hidden,
        network: ShellSettings::of(ctx).network,
        stdin: stdin_file,
    };
    let home = tmp_path.clone().unwrap_or_else(|| PathBuf::from("/tmp"));
    let env = command_env(&home);
    // When no server can take the command, the helper runs it as below.
    if serve {
        let command = klaw_sandbox::ServedCommand {
            argv: &job.argv,
            cwd: &job.cwd,
            tmp: tmp_path.as_deref(),
            stdin: policy.stdin.as_deref(),
            env: env.clone(),
        };
        match servers.spawn(backend, &policy, &command) {
            Some(Ok(started)) => {
                // The next command's temporary directory, made while this one runs.
                let servers = std::sync::Arc::clone(&servers);
                drop(tokio::task::spawn_blocking(move || {
                    servers.make_tmp_ready()
                }));
                return served(ctx, backend, started, tmp);
            }
            // The server took the command and then failed: it may have run (and is being
            // ended), so it is not run a second time.
            Some(Err(e)) if e.delivered => {
                return Err(ToolError::failed(
                    "the sandbox ended while starting the command, which may have started \
                     and was stopped; it was not run again (run it again if it is safe to)",
                )
                .with_source(e));
            }
            Some(Err(e)) => tracing::warn!(
                target: "klaw::shell",
                error = %e,
                "the sandbox server could not start a command; the helper runs it"
            ),
            None => {}
        }
    }
    let (program, args) = klaw_sandbox::wrap(backend, &policy, &job.argv, tmp_path.as_deref())
        .map_err(sandbox::tool_error)?;
    let mut cmd = tokio::process::Command::new(&program);
    // The helper watches its stdin: the engine keeps it open for the command's life, so
    // the helper ends the tree if the engine dies. Anyone else gets the input through a
    // pipe, or an empty stdin.
    cmd.args(&args)
        .env_clear()
        .current_dir(&job.cwd)
        .stdin(if lifeline || job.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Its own process group, away from the engine's terminal signals. The helper goes
    // further and starts a new session (no controlling terminal), which a group leader
    // could not do, so it is left in ours until then.
    if !lifeline {
        cmd.process_group(0);
    }
    cmd.envs(env);
    // Only stdin, stdout and stderr reach the command: descriptors the engine inherited
    // (a terminal, a file in the data dir, a socket) are closed when it starts. The
    // helper does that itself, first thing, so it is started without a `pre_exec` hook
    // (which would make every start a full `fork` of the engine instead of a
    // `posix_spawn`).
    if matches!(backend, Backend::Direct) {
        klaw_sandbox::close_inherited_fds(cmd.as_std_mut());
    }
    let mut child = cmd.spawn().map_err(|e| match (backend, e.kind()) {
        (Backend::Direct, std::io::ErrorKind::NotFound) => ToolError::not_found(format!(
            "program `{}` not found",
            job.argv.first().map(String::as_str).unwrap_or_default()
        )),
        _ => ToolError::failed(format!(
            "cannot start the command under the `{}` sandbox",
            backend.name()
        ))
        .with_source(e),
    })?;
    let pipe = child.stdin.take();
    let lifeline = if lifeline {
        // Dropped on failure, which ends the tree at once.
        match pipe
            .map(tokio::process::ChildStdin::into_owned_fd)
            .transpose()
        {
            Ok(fd) => fd,
            Err(e) => {
                return Err(
                    ToolError::failed("cannot keep the sandbox helper's lifeline").with_source(e),
                );
            }
        }
    } else {
        // Written beside the output readers, so a command that writes before it has
        // read all of it cannot stall either side.
        if let (Some(mut pipe), Some(data)) = (pipe, job.stdin.clone()) {
            tokio::spawn(async move {
                let _ = tokio::io::AsyncWriteExt::write_all(&mut pipe, &data).await;
            });
        }
        None
    };
    let pid = child.id().and_then(|p| i32::try_from(p).ok());
    let cap = ShellSettings::of(ctx).max_output_bytes;
    let stdout = output::shared(cap);
    let stderr = output::shared(cap);
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        readers.push(tokio::spawn(output::drain(out, stdout.clone())));
    }
    if let Some(err) = child.stderr.take() {
        readers.push(tokio::spawn(output::drain(err, stderr.clone())));
    }
    Ok(Running {
        guard: KillGuard { pid },
        root: Root::Child(child),
        lifeline,
        stdout,
        stderr,
        readers,
        backend: backend.name(),
        direct: matches!(backend, Backend::Direct),
        _tmp: tmp,
    })
}

/// The command's environment: what passes through from the engine's ([`ENV_ALLOW`],
/// a default `PATH`), and `HOME` and `TMPDIR` set to `home`.
fn command_env(home: &Path) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = ENV_ALLOW
        .iter()
        .filter_map(|key| std::env::var_os(key).map(|v| (OsString::from(key), v)))
        .collect();
    if std::env::var_os("PATH").is_none() {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    env.push(("HOME".into(), home.into()));
    env.push(("TMPDIR".into(), home.into()));
    env
}

/// The [`Running`] of a command the sandbox server started: its output read from the
/// pipes the server's supervisor writes, its end from the status pipe.
fn served(
    ctx: &ToolContext,
    backend: &Backend,
    started: klaw_sandbox::Started,
    tmp: Option<CommandTmp>,
) -> Result<Running, ToolError> {
    // A failure below drops the lifeline, which ends the command's tree.
    let pipe = |fd| {
        tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
            .map_err(|e| ToolError::failed("cannot read the served command's pipes").with_source(e))
    };
    let status = pipe(started.status)?;
    let out = pipe(started.stdout)?;
    let err = pipe(started.stderr)?;
    let cap = ShellSettings::of(ctx).max_output_bytes;
    let stdout = output::shared(cap);
    let stderr = output::shared(cap);
    let readers = vec![
        tokio::spawn(output::drain(out, stdout.clone())),
        tokio::spawn(output::drain(err, stderr.clone())),
    ];
    Ok(Running {
        guard: KillGuard {
            pid: Some(started.pid),
        },
        root: Root::Served {
            status,
            ended: None,
        },
        lifeline: Some(started.lifeline),
        stdout,
        stderr,
        readers,
        backend: backend.name(),
        direct: false,
        _tmp: tmp,
    })
}

impl Running {
    /// The root process id (the sandbox or the command).
    pub(crate) fn pid(&self) -> Option<i32> {
        self.guard.pid
    }

    /// Waits for the command, killing the whole tree after `limit`; then collects the
    /// rest of its output.
    pub(crate) async fn wait(&mut self, limit: Option<Duration>) -> Exit {
        let waited = match limit {
            Some(limit) => tokio::time::timeout(limit, self.root.wait()).await.ok(),
            None => Some(self.root.wait().await),
        };
        let mut unproven = false;
        let (status, timed_out) = match waited {
            Some(s) => (s.ok(), false),
            None => {
                // A supervising helper ends the tree best (every orphan is its child):
                // closing its lifeline asks it to, and its exit code says whether it
                // could prove the tree dead. The walk from here is the fallback.
                let mut ended = None;
                if self.lifeline.take().is_some() {
                    let wait = tokio::time::timeout(Duration::from_secs(5), self.root.wait());
                    if let Ok(Ok(s)) = wait.await {
                        unproven = s.code() == Some(i32::from(klaw_sandbox::UNPROVEN));
                        ended = Some(s);
                    }
                }
                match ended {
                    // Reaped: its PID may be someone else's now, so nothing more is
                    // sent to it.
                    Some(s) => {
                        self.guard.disarm();
                        (Some(s), true)
                    }
                    None => {
                        self.guard.kill();
                        (self.root.wait().await.ok(), true)
                    }
                }
            }
        };
        // The sandbox root ended its tree; without one (mode `off` without the helper),
        // end the process group, which outlives its reaped leader while members remain.
        if self.direct
            && let Some(pid) = self.guard.pid.and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        self.guard.disarm();
        // Output still in the pipes; a descendant that escaped the group (mode `off`
        // without the helper) could hold them open, so do not wait on it for long.
        for r in self.readers.drain(..) {
            let abort = r.abort_handle();
            if tokio::time::timeout(Duration::from_secs(2), r)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        let code = match status {
            Some(s) => s
                .code()
                .or_else(|| s.signal().map(|sig| 128 + sig))
                .unwrap_or(-1),
            None => -1,
        };
        Exit {
            code,
            timed_out,
            unproven,
        }
    }
}

/// A command for [`run_sandboxed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxedCommand {
    /// The program and its arguments (run directly: no shell).
    pub argv: Vec<String>,
    /// The working directory, relative to the workspace (its root when `None`).
    pub working_dir: Option<String>,
    /// What the command reads on stdin (nothing when `None`).
    pub stdin: Option<Vec<u8>>,
    /// The time limit; past it the whole process tree is killed.
    pub timeout: Duration,
}

/// How a command run by [`run_sandboxed`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// The exit code (`128 + signal` for a signal).
    pub exit_code: i32,
    /// Its standard output (the tail kept within `execMaxOutputBytes`).
    pub stdout: String,
    /// Its standard error, likewise.
    pub stderr: String,
    /// Whether either stream was cut to its tail.
    pub truncated: bool,
    /// The working directory it ran in (canonical).
    pub working_dir: PathBuf,
    /// How long it ran.
    pub duration: Duration,
    /// The sandbox it ran under: `bwrap`, `landlock` or `off`.
    pub sandbox: &'static str,
}

/// Runs `command` as `exec` runs its commands: in the context's sandbox (the working
/// directory resolved beneath the workspace by the kernel, a clean environment, bounded
/// output), its whole process tree killed past the time limit or when the call is
/// cancelled. The one runner of the shell group, for every tool that starts a command
/// (`exec`, and tools whose implementation is a program). A time limit reached is a
/// `timeout` error with the end of the output.
pub async fn run_sandboxed(
    ctx: &ToolContext,
    command: SandboxedCommand,
) -> Result<CommandOutput, ToolError> {
    let argv = CommandLine::Argv(command.argv).argv()?;
    let cwd = resolve_dir(ctx.workspace(), command.working_dir.as_deref())?;
    let backend = backend(ctx).await?;
    let started = std::time::Instant::now();
    let job = Job {
        argv,
        cwd: cwd.clone(),
        stdin: command.stdin,
    };
    let mut running = spawn(ctx, &backend, &job)?;
    let exit = running.wait(Some(command.timeout)).await;
    let duration = started.elapsed();
    let (stdout, stderr, truncated) = {
        let out = output::lock(&running.stdout);
        let err = output::lock(&running.stderr);
        (out.text(), err.text(), out.truncated() || err.truncated())
    };
    if exit.timed_out {
        let ended = if exit.unproven {
            "the command was killed, but the sandbox could not prove that every process it \
             started ended (some kept moving to new process ids)"
        } else {
            "the command and every process it started were killed"
        };
        return Err(ToolError::timeout(format!(
            "command timeout after {} s; {ended}{}",
            command.timeout.as_secs(),
            last_words(&stdout, &stderr)
        )));
    }
    Ok(CommandOutput {
        exit_code: exit.code,
        stdout,
        stderr,
        truncated,
        working_dir: cwd,
        duration,
        sandbox: running.backend,
    })
}

/// The end of the output of a command that timed out, for the error message.
fn last_words(stdout: &str, stderr: &str) -> String {
    const KEEP: usize = 2000;
    let tail = |s: &str| {
        let start = s
            .char_indices()
            .map(|(i, _)| i)
            .find(|&i| s.len() - i <= KEEP)
            .unwrap_or(s.len());
        s[start..].to_owned()
    };
    let mut out = String::new();
    if !stdout.is_empty() {
        out.push_str(&format!("\nlast stdout:\n{}", tail(stdout)));
    }
    if !stderr.is_empty() {
        out.push_str(&format!("\nlast stderr:\n{}", tail(stderr)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_words_keep_the_end() {
        let long = "x".repeat(5000) + "END";
        let s = last_words(&long, "");
        assert!(s.ends_with("END"));
        assert!(s.len() < 2100);
    }

    #[test]
    fn command_lines_become_argument_vectors() {
        assert_eq!(
            CommandLine::Shell("echo hi".into()).argv().unwrap(),
            vec!["sh", "-c", "echo hi"]
        );
        assert_eq!(
            CommandLine::Argv(vec!["ls".into(), "-l".into()])
                .argv()
                .unwrap(),
            vec!["ls", "-l"]
        );
        assert!(CommandLine::Shell("  ".into()).argv().is_err());
        assert!(CommandLine::Argv(vec![]).argv().is_err());
        assert!(CommandLine::Argv(vec!["a\0b".into()]).argv().is_err());
    }

    #[test]
    fn working_dirs_stay_in_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside"), ws.join("link")).unwrap();
        let root = std::fs::canonicalize(&ws).unwrap();
        assert_eq!(resolve_dir(&ws, None).unwrap(), root);
        assert_eq!(resolve_dir(&ws, Some("sub")).unwrap(), root.join("sub"));
        assert_eq!(
            resolve_dir(&ws, Some(root.join("sub").to_str().unwrap())).unwrap(),
            root.join("sub")
        );
        for bad in ["..", "../outside", "link", "/etc", "sub/../../outside"] {
            let e = resolve_dir(&ws, Some(bad)).unwrap_err();
            assert!(e.is_access_denied(), "{bad}: {e:?}");
        }
        assert!(
            resolve_dir(&ws, Some("missing"))
                .unwrap_err()
                .is_not_found()
        );
    }
}
