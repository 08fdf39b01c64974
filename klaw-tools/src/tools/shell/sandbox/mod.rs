//! The OS sandbox shell commands run in, chosen from [`SandboxMode`].
//!
//! | mode | what runs the command |
//! |---|---|
//! | `bwrap` | bubblewrap (started by our helper, which hands it the seccomp filter): private mount/PID/network namespaces + seccomp; fails if bwrap does not work |
//! | `landlock` | our helper (`__klaw-sandbox`): Landlock + seccomp + no capabilities |
//! | `auto` | bwrap if it works, else Landlock; **fails closed** if neither works |
//! | `off` | our helper without restrictions (it still ends the whole tree), or, if the helper is missing, the command alone in its own process group |
//!
//! Whether a backend works is probed once per process (and per helper path) by running
//! a real command under it, and the answer is cached.

pub(crate) mod bwrap;
pub(crate) mod landlock;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::{SandboxMode, ToolContext, ToolError};

use landlock::HelperPolicy;

/// The first argument that makes a Klaw binary act as the sandbox helper.
pub const HELPER_ARG: &str = "__klaw-sandbox";

/// System directories visible read-only inside every sandbox (those that exist).
pub(crate) const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];

/// The program that plays the sandbox helper (`<program> __klaw-sandbox ...`).
///
/// The default is the current executable: `klaw-engine` (and any binary that calls
/// `klaw_engine::main`) handles [`HELPER_ARG`] first thing. Register this service to
/// use another program, e.g. the `klaw-sandbox` binary of this crate in tests. (No
/// environment variable can name one: whatever it named would be trusted with every
/// command once it printed the probe's answer.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxHelper(PathBuf);

impl SandboxHelper {
    /// A helper at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self(path.into())
    }

    /// The helper's path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The helper a context uses: its service, else the current executable.
    pub fn for_context(ctx: &ToolContext) -> Option<PathBuf> {
        if let Some(h) = ctx.service::<SandboxHelper>() {
            return Some(h.0.clone());
        }
        std::env::current_exe().ok()
    }
}

/// What a command may touch.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    /// The workspace, canonical: read-write.
    pub(crate) workspace: PathBuf,
    /// The working directory, canonical, inside the workspace.
    pub(crate) cwd: PathBuf,
    /// Directories that must stay invisible even when inside the workspace (the data dir).
    pub(crate) hidden: Vec<PathBuf>,
    /// Whether the network is allowed.
    pub(crate) network: bool,
}

/// The backend a command actually runs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Backend {
    /// bubblewrap.
    Bwrap(Bwrap),
    /// Our helper with Landlock + seccomp.
    Landlock(PathBuf),
    /// Our helper without restrictions (mode `off`): it only supervises the tree.
    Supervised(PathBuf),
    /// The command alone in its own process group (mode `off`, helper missing).
    Direct,
}

impl Backend {
    /// The name reported in results and by `doctor`.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Backend::Bwrap(_) => "bwrap",
            Backend::Landlock(_) => "landlock",
            Backend::Supervised(_) | Backend::Direct => "off",
        }
    }
}

/// A bubblewrap that works here.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Bwrap {
    /// The helper that starts it with the seccomp filter.
    pub(crate) helper: PathBuf,
    /// Its absolute path, found once on the engine's `PATH` (never relative to a
    /// command's working directory).
    pub(crate) path: PathBuf,
    /// Whether it supports `--disable-userns` (bubblewrap 0.8 and later).
    pub(crate) disable_userns: bool,
    /// Whether it supports `--size` (a bounded `/tmp`).
    pub(crate) tmp_size: bool,
}

/// Picks the backend for `mode`, or says why none may run.
pub(crate) fn select(mode: SandboxMode, helper: Option<&Path>) -> Result<Backend, ToolError> {
    let no_helper = || "the sandbox helper (the current executable) cannot be found".to_owned();
    let landlock = || match helper {
        Some(h) => probe_helper(h, true).map(|()| Backend::Landlock(h.to_path_buf())),
        None => Err(no_helper()),
    };
    let bwrap = || match helper {
        Some(h) => probe_bwrap(h).map(Backend::Bwrap),
        None => Err(no_helper()),
    };
    match mode {
        SandboxMode::Bwrap => bwrap().map_err(|e| {
            ToolError::unavailable(format!(
                "the `bwrap` sandbox does not work here: {e}; install bubblewrap or set `sandbox` to `auto`"
            ))
        }),
        SandboxMode::Landlock => landlock().map_err(|e| {
            ToolError::unavailable(format!(
                "the `landlock` sandbox does not work here: {e}; set `sandbox` to `auto`"
            ))
        }),
        SandboxMode::Auto => match bwrap() {
            Ok(b) => Ok(b),
            Err(b) => landlock().map_err(|l| {
                ToolError::unavailable(format!(
                    "no OS sandbox works here, so commands are refused (bwrap: {b}; landlock: {l}); \
                     install bubblewrap, or set `sandbox` to `off` to run commands unsandboxed"
                ))
            }),
        },
        SandboxMode::Off => Ok(match helper {
            Some(h) if probe_helper(h, false).is_ok() => Backend::Supervised(h.to_path_buf()),
            _ => Backend::Direct,
        }),
    }
}

/// Which sandbox `mode` gives on this machine, for `doctor`: `Ok(description)` or
/// `Err(why commands are refused)`.
pub fn describe(mode: SandboxMode, helper: Option<&Path>) -> Result<String, String> {
    let backend = select(mode, helper).map_err(|e| e.message().to_owned())?;
    Ok(match (&backend, mode) {
        (Backend::Bwrap(_), _) => {
            "bwrap + seccomp (bubblewrap: namespaces, read-only system, private /tmp)".into()
        }
        (Backend::Landlock(h), SandboxMode::Auto) => format!(
            "landlock + seccomp (bwrap does not work here: {})",
            probe_bwrap(h).err().unwrap_or_default()
        ),
        (Backend::Landlock(_), _) => "landlock + seccomp".into(),
        (Backend::Supervised(_), _) => "off: commands run unsandboxed (process trees still end)".into(),
        (Backend::Direct, _) => {
            "off: commands run unsandboxed, without the helper (setsid'd descendants may survive a kill)".into()
        }
    })
}

/// Whether bubblewrap, started by `helper` with the seccomp filter, runs a command
/// here, and how (cached per helper).
pub(crate) fn probe_bwrap(helper: &Path) -> Result<Bwrap, String> {
    static PROBES: Probes<PathBuf, Result<Bwrap, String>> = OnceLock::new();
    cached(&PROBES, helper.to_path_buf(), || run_bwrap_probe(helper))
}

/// Probe results by key, computed once per process.
type Probes<K, V> = OnceLock<Mutex<HashMap<K, V>>>;

/// The result for `key` in `cache`, computed by `probe` the first time. The lock is not
/// held while probing (a probe runs processes), so two first callers may both probe.
fn cached<K: std::hash::Hash + Eq, V: Clone>(
    cache: &'static Probes<K, V>,
    key: K,
    probe: impl FnOnce() -> V,
) -> V {
    let lock = || {
        cache
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    };
    if let Some(r) = lock().get(&key) {
        return r.clone();
    }
    let r = probe();
    lock().insert(key, r.clone());
    r
}

fn run_bwrap_probe(helper: &Path) -> Result<Bwrap, String> {
    probe_helper(helper, false)?;
    let path = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
    let path = find_program("bwrap", &path)
        .ok_or_else(|| "`bwrap` is not installed (not found on PATH)".to_owned())?;
    let dir = tempfile::tempdir().map_err(|e| format!("temporary dir: {e}"))?;
    let ws = std::fs::canonicalize(dir.path()).map_err(|e| e.to_string())?;
    let policy = Policy {
        workspace: ws.clone(),
        cwd: ws,
        hidden: vec![],
        network: false,
    };
    // With `--disable-userns` and `--size` where this bubblewrap has them (0.8), else
    // without the newer one, else without both.
    let mut last = String::new();
    for (disable_userns, tmp_size) in [(true, true), (false, true), (false, false)] {
        let bwrap = Bwrap {
            helper: helper.to_path_buf(),
            path: path.clone(),
            disable_userns,
            tmp_size,
        };
        let (program, args) = wrap(
            &Backend::Bwrap(bwrap.clone()),
            &policy,
            &["true".into()],
            None,
        )
        .map_err(|e| e.message().to_owned())?;
        let out = std::process::Command::new(&program)
            .args(args)
            .env_clear()
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot start the helper {}: {e}", helper.display()))?;
        if out.status.success() {
            return Ok(bwrap);
        }
        last = first_line(&out.stderr, "bwrap failed");
    }
    Err(last)
}

/// The default `PATH` when the engine has none.
pub(crate) const DEFAULT_PATH: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The first executable file `name` in the absolute directories of `path` (relative
/// entries, such as an empty one or `.`, would depend on the working directory).
fn find_program(name: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Whether `helper` acts as the sandbox helper and (with `landlock`) can apply
/// Landlock + seccomp here (cached per helper).
pub(crate) fn probe_helper(helper: &Path, landlock: bool) -> Result<(), String> {
    static PROBES: Probes<(PathBuf, bool), Result<(), String>> = OnceLock::new();
    cached(&PROBES, (helper.to_path_buf(), landlock), || {
        run_probe(helper, landlock)
    })
}

const PROBE_OK: &str = "klaw-sandbox ok";

fn run_probe(helper: &Path, landlock: bool) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| format!("temporary dir: {e}"))?;
    let ws = std::fs::canonicalize(dir.path()).map_err(|e| e.to_string())?;
    let policy = HelperPolicy {
        landlock,
        write: vec![ws.clone()],
        cwd: ws,
        probe: true,
        ..HelperPolicy::default()
    };
    let json = serde_json::to_string(&policy).map_err(|e| e.to_string())?;
    let out = std::process::Command::new(helper)
        .arg(HELPER_ARG)
        .arg(json)
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start the helper {}: {e}", helper.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && stdout.trim() == PROBE_OK {
        Ok(())
    } else if out.status.success() {
        Err(format!(
            "{} does not act as the sandbox helper (does it call klaw_engine::main?)",
            helper.display()
        ))
    } else {
        Err(first_line(&out.stderr, "the helper failed"))
    }
}

fn first_line(bytes: &[u8], fallback: &str) -> String {
    let text = String::from_utf8_lossy(bytes);
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(fallback);
    line.trim().trim_start_matches("klaw-sandbox: ").to_owned()
}

/// The program and arguments that run `argv` under `backend` and `policy`, and the
/// private temporary directory (for backends without a private `/tmp`).
pub(crate) fn wrap(
    backend: &Backend,
    policy: &Policy,
    argv: &[String],
    tmp: Option<&Path>,
) -> Result<(OsString, Vec<OsString>), ToolError> {
    let helper_call = |helper: &Path, landlock: bool, bwrap: Option<&Bwrap>| {
        let mut write = vec![policy.workspace.clone()];
        write.extend(tmp.map(Path::to_path_buf));
        let p = HelperPolicy {
            landlock,
            network: policy.network,
            write,
            cwd: policy.cwd.clone(),
            probe: false,
            stage: false,
            hidden: policy.hidden.clone(),
            bwrap: bwrap.cloned(),
        };
        let json = serde_json::to_string(&p)
            .map_err(|e| ToolError::failed("cannot encode the sandbox policy").with_detail(e))?;
        let mut args: Vec<OsString> = vec![HELPER_ARG.into(), json.into()];
        args.extend(argv.iter().map(OsString::from));
        Ok::<_, ToolError>((helper.as_os_str().to_owned(), args))
    };
    match backend {
        Backend::Bwrap(b) => helper_call(&b.helper, false, Some(b)),
        Backend::Landlock(h) => helper_call(h, true, None),
        Backend::Supervised(h) => helper_call(h, false, None),
        Backend::Direct => {
            let (first, rest) = argv
                .split_first()
                .ok_or_else(|| ToolError::invalid_arguments("/command", "the command is empty"))?;
            Ok((first.into(), rest.iter().map(OsString::from).collect()))
        }
    }
}

/// The helper's entry point: `args` are what follows [`HELPER_ARG`] (the policy as
/// JSON, then the command). Applies the policy to this process, starts the command,
/// waits for it, ends whatever it left running, and exits with its status.
///
/// Call it before anything else in `main` (no threads may exist yet: Landlock and
/// seccomp restrict the calling thread). `klaw_engine::main` does.
pub fn helper_main(args: Vec<OsString>) -> ExitCode {
    match helper(args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("klaw-sandbox: {e}");
            ExitCode::from(125)
        }
    }
}

/// Runs [`helper_main`] when the process was started as the helper
/// (`<program> __klaw-sandbox ...`); `None` otherwise.
pub fn helper_if_requested() -> Option<ExitCode> {
    let mut args = std::env::args_os();
    let _program = args.next();
    if args.next().is_some_and(|a| a == HELPER_ARG) {
        Some(helper_main(args.collect()))
    } else {
        None
    }
}

fn helper(args: Vec<OsString>) -> Result<u8, String> {
    use std::os::unix::process::ExitStatusExt;

    // Nothing this process inherited reaches the command (a terminal, a file in the
    // data dir, a socket): only stdin, stdout, stderr and what is set up below.
    klaw_sandbox::close_inherited_fds_on_exec();
    let mut args = args.into_iter();
    let policy = args.next().ok_or("no policy given")?;
    let policy: HelperPolicy = serde_json::from_str(&policy.to_string_lossy())
        .map_err(|e| format!("invalid policy: {e}"))?;
    if let Some(bwrap) = &policy.bwrap {
        return Err(exec_bwrap(bwrap, &policy, args.collect()));
    }
    if policy.stage {
        // Started by the supervisor below, whose session it shares.
        return Err(restrict_and_exec(&policy, args));
    }
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
        // In this process's own mount namespace, which the stage inherits: done here,
        // not there, because the stage may live in a PID namespace (below) whose
        // process ids `/proc` does not show.
        map_workspace(&policy)?;
    }
    if policy.landlock {
        // The restrictions apply to a second copy of this program, which then becomes
        // the command: this supervisor stays outside the command's Landlock domain (a
        // scoped command cannot signal it) and, as root, outside its uid.
        let mut stage = policy.clone();
        stage.stage = true;
        let json = serde_json::to_string(&stage).map_err(|e| e.to_string())?;
        let mut restricted = vec![OsString::from(HELPER_ARG), json.into()];
        restricted.extend(args);
        args = restricted.into_iter();
    } else if policy.probe {
        println!("{PROBE_OK}");
        return Ok(0);
    }
    let program = if policy.landlock {
        OsString::from("/proc/self/exe")
    } else {
        args.next().ok_or("no command given")?
    };
    if policy.probe {
        // The stage prints the probe's answer, or why it failed.
        let status = std::process::Command::new(&program)
            .args(args)
            .stdin(Stdio::null())
            .status()
            .map_err(|e| format!("cannot start the sandbox stage: {e}"))?;
        return Ok(if status.success() { 0 } else { 125 });
    }
    // Our stdin is a pipe the engine holds open: end of file means the engine is gone
    // (or dropped the command, e.g. on timeout), so end the whole tree.
    std::thread::spawn(|| {
        use std::io::Read;
        let mut buf = [0_u8; 64];
        while let Ok(n) = std::io::stdin().read(&mut buf) {
            if n == 0 {
                break;
            }
        }
        std::process::exit(if end_the_tree() {
            137
        } else {
            i32::from(UNPROVEN)
        });
    });
    // As root, the command becomes PID 1 of a PID namespace of its own: when it ends,
    // the kernel ends every process left in it, however fast they move to new PIDs.
    // (Elsewhere the walk in `end_the_tree` does what it can, and says when it could
    // not.) After the thread above: no thread can be made once this is done.
    if policy.landlock && root {
        let _ = klaw_sandbox::children_in_new_pid_namespace();
    }
    let status = std::process::Command::new(&program)
        .args(args)
        .current_dir(&policy.cwd)
        .stdin(Stdio::null())
        .status();
    let code = match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(c), _) => u8::try_from(c).unwrap_or(1),
            (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(255),
            (None, None) => 1,
        },
        Err(e) => {
            eprintln!(
                "klaw-sandbox: cannot run `{}`: {e}",
                program.to_string_lossy()
            );
            match e.kind() {
                std::io::ErrorKind::NotFound => 127,
                _ => 126,
            }
        }
    };
    // End whatever the command left behind (daemons, `setsid` children): as subreaper
    // they are all our descendants.
    end_the_tree();
    Ok(code)
}

/// The supervisor's exit code when the engine ended the command (timeout, kill) but the
/// tree could not be proven dead.
pub(crate) const UNPROVEN: u8 = 125;

/// What the supervisor says on stderr when it could not prove the tree dead.
pub(crate) const UNPROVEN_NOTE: &str = "could not prove that every process of the command ended";

/// Kills every descendant of this supervisor and reaps them, so no zombie outlives it;
/// says on stderr when processes kept appearing. True when none was left.
fn end_the_tree() -> bool {
    let proven =
        klaw_sandbox::tree::kill_descendants(rustix::process::getpid().as_raw_nonzero().get());
    while let Ok(Some(_)) = rustix::process::wait(rustix::process::WaitOptions::NOHANG) {}
    if !proven {
        eprintln!("klaw-sandbox: {UNPROVEN_NOTE} (some kept moving to new process ids)");
    }
    proven
}

/// The command's side of a Landlock sandbox, started by the supervising helper: applies
/// the policy to this process (as root, first switching to the unprivileged uid), then
/// replaces it with the command. Returns only on failure.
fn restrict_and_exec(policy: &HelperPolicy, mut args: impl Iterator<Item = OsString>) -> String {
    use std::os::unix::process::CommandExt;
    let run = || -> Result<std::io::Error, String> {
        if rustix::process::geteuid().is_root() {
            leave_root(policy)?;
        }
        // Before seccomp, which makes `openat2` look absent.
        if !policy.probe {
            enter_working_dir(policy)?;
        }
        landlock::restrict(policy)?;
        if policy.probe {
            println!("{PROBE_OK}");
            std::process::exit(0);
        }
        let program = args.next().ok_or("no command given")?;
        Ok(std::process::Command::new(&program).args(args).exec())
    };
    match run() {
        Ok(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("klaw-sandbox: cannot run the command: {e}");
            std::process::exit(127)
        }
        Ok(e) => {
            eprintln!("klaw-sandbox: cannot run the command: {e}");
            std::process::exit(126)
        }
        Err(e) => e,
    }
}

/// Enters the working directory through descriptors, beneath the workspace and without
/// following any symbolic link, so a link swapped in after the engine checked the
/// directory cannot move the command's starting point outside.
fn enter_working_dir(policy: &HelperPolicy) -> Result<(), String> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let workspace = policy.write.first().ok_or("no workspace given")?;
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let moved = |e: rustix::io::Errno| {
        format!(
            "the working directory {} is no longer beneath the workspace as checked: {e}",
            policy.cwd.display()
        )
    };
    let root = rustix::fs::openat2(
        rustix::fs::CWD,
        workspace,
        flags,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS,
    )
    .map_err(moved)?;
    let relative = policy.cwd.strip_prefix(workspace).map_err(|_| {
        format!(
            "the working directory {} is outside the workspace",
            policy.cwd.display()
        )
    })?;
    let dir = if relative.as_os_str().is_empty() {
        root
    } else {
        rustix::fs::openat2(
            &root,
            relative,
            flags,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
        )
        .map_err(moved)?
    };
    rustix::process::fchdir(&dir).map_err(moved)
}

/// As root, before Landlock: this process (and so the command) becomes
/// [`UNPRIVILEGED_ID`](klaw_sandbox::unprivileged::UNPRIVILEGED_ID), which sees the
/// workspace (the first writable directory) through the idmapped mount the supervisor
/// made, and owns the private temporary directories (the others, made by the engine
/// for this command).
fn leave_root(policy: &HelperPolicy) -> Result<(), String> {
    use klaw_sandbox::unprivileged::{UNPRIVILEGED_ID, become_unprivileged};
    let (_workspace, temporary) = policy.write.split_first().ok_or("no workspace given")?;
    let id = Some(rustix::process::Uid::from_raw(UNPRIVILEGED_ID));
    let group = Some(rustix::process::Gid::from_raw(UNPRIVILEGED_ID));
    for dir in temporary {
        rustix::fs::chown(dir, id, group)
            .map_err(|e| format!("cannot hand {} to the sandbox user: {e}", dir.display()))?;
    }
    // While root may still do it: no capability can come back through `exec`.
    landlock::drop_bounding_set();
    become_unprivileged(UNPRIVILEGED_ID)
        .map_err(|e| format!("cannot switch to an unprivileged user: {e}"))
}

/// As root: mounts the workspace (the first writable directory) idmapped for the
/// unprivileged user in this process's own mount namespace (which its children inherit),
/// or says why it cannot and what to do instead.
fn map_workspace(policy: &HelperPolicy) -> Result<(), String> {
    let workspace = policy.write.first().ok_or("no workspace given")?;
    let id = klaw_sandbox::unprivileged::UNPRIVILEGED_ID;
    klaw_sandbox::unprivileged::idmapped_workspace(workspace, id).map_err(|e| {
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
/// seccomp filter to install right before it runs the command (`--add-seccomp-fd`, one
/// per filter, each in a memory file this process leaves open across `exec`). As root,
/// first switches to an unprivileged user that sees the workspace through an idmapped
/// mount (`klaw_sandbox::unprivileged`). Returns only on failure.
fn exec_bwrap(bwrap: &Bwrap, policy: &HelperPolicy, argv: Vec<OsString>) -> String {
    use std::os::fd::IntoRawFd;
    use std::os::unix::process::CommandExt;

    let Some(workspace) = policy.write.first() else {
        return "no workspace given".into();
    };
    let mut cmd = std::process::Command::new(&bwrap.path);
    // bubblewrap's own namespaces contain the network (its own loopback, unless
    // `network`) and the host's UNIX sockets.
    let filters = match klaw_sandbox::seccomp::filters(klaw_sandbox::seccomp::NETWORK_FAMILIES) {
        Ok(f) => f,
        Err(e) => return e,
    };
    for filter in &filters {
        let fd = match sealed_memfd(&klaw_sandbox::seccomp::to_bytes(filter)) {
            Ok(fd) => fd,
            Err(e) => return format!("cannot pass the seccomp filter to bwrap: {e}"),
        };
        // Left open (not close-on-exec) on purpose: bubblewrap reads and closes it.
        cmd.arg("--add-seccomp-fd")
            .arg(fd.into_raw_fd().to_string());
    }
    let root = rustix::process::geteuid().is_root();
    if root && let Err(e) = map_workspace(policy) {
        return e;
    }
    let sandbox = Policy {
        workspace: workspace.clone(),
        cwd: policy.cwd.clone(),
        hidden: policy.hidden.clone(),
        network: policy.network,
    };
    let argv: Vec<String> = argv
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // The arguments are worked out while still root (they look at the data dir, which
    // the unprivileged user may not reach).
    cmd.args(bwrap::args(bwrap, &sandbox, &argv, root));
    if root {
        let id = klaw_sandbox::unprivileged::UNPRIVILEGED_ID;
        if let Err(e) = klaw_sandbox::unprivileged::become_unprivileged(id) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_only_in_absolute_path_entries() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let fake = bin.join("bwrap");
        std::fs::write(&fake, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Relative entries (a workspace's `bin`, `.`, the empty entry) are skipped.
        assert_eq!(find_program("bwrap", "bin:.::".as_ref()), None);
        let path = format!("bin:{}", bin.display());
        assert_eq!(find_program("bwrap", path.as_ref()), Some(fake.clone()));
        // Not executable: skipped.
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(find_program("bwrap", path.as_ref()), None);
    }
}
