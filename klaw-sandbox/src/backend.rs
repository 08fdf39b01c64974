//! Choosing the backend a command runs under, and the program line that runs it there.
//!
//! Whether a backend works is probed once per process (and per helper path) by running
//! a real command under it, and the answer is cached; a success is also remembered on
//! disk until the machine restarts (`remembered`), so that short-lived processes do not
//! probe on every start.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::policy::{Bwrap, HELPER_ARG, HelperPolicy, PROBE_OK, Policy};
use crate::{Error, Mode};

/// The backend a command actually runs under, from [`select`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// bubblewrap (started by the helper, which hands it the seccomp filter).
    Bwrap(Bwrap),
    /// Our helper with Landlock + seccomp.
    Landlock(PathBuf),
    /// Our helper without restrictions (mode `off`): it only supervises the tree.
    Supervised(PathBuf),
    /// The command alone in its own process group (mode `off`, helper missing).
    Direct,
}

impl Backend {
    /// Whether the program [`wrap`] gives is the helper watching its stdin: the caller
    /// keeps that pipe open for the command's life (closing it ends the whole tree) and
    /// must not put the helper in a process group of its own (it starts a session).
    pub fn has_lifeline(&self) -> bool {
        matches!(self, Backend::Landlock(_) | Backend::Supervised(_))
    }

    /// The name reported in results and by `doctor`: `bwrap`, `landlock` or `off`.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Bwrap(_) => "bwrap",
            Backend::Landlock(_) => "landlock",
            Backend::Supervised(_) | Backend::Direct => "off",
        }
    }
}

/// Picks the backend for `mode`, or says why none may run ([`Error::Unavailable`]).
/// `helper` is the program that plays the sandbox helper (see
/// [`run_helper_if_requested`](crate::run_helper_if_requested)); the first call per
/// mode and helper probes by running a command, so call it off async threads.
pub fn select(mode: Mode, helper: Option<&Path>) -> Result<Backend, Error> {
    if !cfg!(target_os = "linux") && mode != Mode::Off {
        return Err(Error::Unavailable(crate::UNSUPPORTED.into()));
    }
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
        Mode::Bwrap => bwrap().map_err(|e| {
            Error::Unavailable(format!(
                "the `bwrap` sandbox does not work here: {e}; install bubblewrap or set `sandbox` to `auto`"
            ))
        }),
        Mode::Landlock => landlock().map_err(|e| {
            Error::Unavailable(format!(
                "the `landlock` sandbox does not work here: {e}; set `sandbox` to `auto`"
            ))
        }),
        Mode::Auto => match bwrap() {
            Ok(b) => Ok(b),
            Err(b) => landlock().map_err(|l| {
                Error::Unavailable(format!(
                    "no OS sandbox works here, so commands are refused (bwrap: {b}; landlock: {l}); \
                     install bubblewrap, or set `sandbox` to `off` to run commands unsandboxed"
                ))
            }),
        },
        Mode::Off => Ok(match helper {
            Some(h) if probe_helper(h, false).is_ok() => Backend::Supervised(h.to_path_buf()),
            _ => Backend::Direct,
        }),
    }
}

/// The backend [`select`] would pick for `mode`, when that is known without running a
/// probe: answered earlier in this process, or remembered on disk (a few small file
/// reads). `None` when choosing would run one; then call [`select`] (off the async
/// threads). Lets a short-lived process start its first command without handing the
/// choice to another thread.
pub fn select_known(mode: Mode, helper: Option<&Path>) -> Option<Backend> {
    let helper = helper?;
    match mode {
        Mode::Off => known_helper(helper, false).then(|| Backend::Supervised(helper.into())),
        Mode::Landlock => known_helper(helper, true).then(|| Backend::Landlock(helper.into())),
        // `auto` takes bubblewrap whenever it works.
        Mode::Bwrap | Mode::Auto => known_bwrap(helper).map(Backend::Bwrap),
    }
}

/// Which sandbox `mode` gives on this machine, for `doctor`: `Ok(description)` or
/// `Err(why commands are refused)`.
pub fn describe(mode: Mode, helper: Option<&Path>) -> Result<String, Error> {
    let backend = select(mode, helper)?;
    Ok(match (&backend, mode) {
        (Backend::Bwrap(_), _) => {
            "bwrap + seccomp (bubblewrap: namespaces, read-only system, private /tmp)".into()
        }
        (Backend::Landlock(h), Mode::Auto) => format!(
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
    cached(&BWRAP_PROBES, helper.to_path_buf(), || {
        #[cfg(target_os = "linux")]
        let key = bwrap_key(helper);
        #[cfg(target_os = "linux")]
        if let Some(bwrap) = key.as_deref().and_then(|k| recall_bwrap(k, helper)) {
            return Ok(bwrap);
        }
        let result = run_bwrap_probe(helper);
        #[cfg(target_os = "linux")]
        if let (Some(key), Ok(bwrap)) = (&key, &result)
            && let Ok(text) = serde_json::to_string(bwrap)
        {
            crate::remembered::remember(key, &text);
        }
        result
    })
}

/// Probe results by key, computed once per process.
type Probes<K, V> = OnceLock<Mutex<HashMap<K, V>>>;

/// [`probe_bwrap`]'s answers, per helper.
static BWRAP_PROBES: Probes<PathBuf, Result<Bwrap, String>> = OnceLock::new();

/// [`probe_helper`]'s answers, per helper and question (with Landlock or not).
static HELPER_PROBES: Probes<(PathBuf, bool), Result<(), String>> = OnceLock::new();

/// The key under which bubblewrap's answer for `helper` is remembered across processes
/// (see `remembered`): both programs' files are part of it.
#[cfg(target_os = "linux")]
fn bwrap_key(helper: &Path) -> Option<String> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
    find_program("bwrap", &path)
        .and_then(|bwrap| crate::remembered::key("bwrap", &[helper, &bwrap]))
}

/// bubblewrap's remembered answer under `key`, if it is for `helper`.
#[cfg(target_os = "linux")]
fn recall_bwrap(key: &str, helper: &Path) -> Option<Bwrap> {
    crate::remembered::recall(key)
        .and_then(|text| serde_json::from_str::<Bwrap>(&text).ok())
        .filter(|b| b.helper == helper)
}

/// The key under which [`probe_helper`]'s answer is remembered across processes.
#[cfg(target_os = "linux")]
fn helper_key(helper: &Path, landlock: bool) -> Option<String> {
    let what = if landlock {
        "helper landlock"
    } else {
        "helper"
    };
    crate::remembered::key(what, &[helper])
}

/// The answer in this process's cache under `key`, if there is one.
fn cached_answer<K: std::hash::Hash + Eq, V: Clone>(
    cache: &'static Probes<K, V>,
    key: &K,
) -> Option<V> {
    cache
        .get()?
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(key)
        .cloned()
}

/// Whether bubblewrap is known to work through `helper` without a probe (see
/// [`select_known`]); a remembered answer is kept for this process too.
fn known_bwrap(helper: &Path) -> Option<Bwrap> {
    if let Some(answer) = cached_answer(&BWRAP_PROBES, &helper.to_path_buf()) {
        return answer.ok();
    }
    #[cfg(target_os = "linux")]
    {
        let bwrap = bwrap_key(helper).and_then(|k| recall_bwrap(&k, helper))?;
        cached(&BWRAP_PROBES, helper.to_path_buf(), || Ok(bwrap.clone())).ok()
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// Whether `helper` is known to act as the helper (with `landlock`, to apply Landlock)
/// without a probe (see [`select_known`]); a remembered answer is kept for this process.
fn known_helper(helper: &Path, landlock: bool) -> bool {
    let key = (helper.to_path_buf(), landlock);
    if let Some(answer) = cached_answer(&HELPER_PROBES, &key) {
        return answer.is_ok();
    }
    #[cfg(target_os = "linux")]
    {
        let remembered = helper_key(helper, landlock)
            .and_then(|k| crate::remembered::recall(&k))
            .is_some_and(|text| text == PROBE_OK);
        remembered && cached(&HELPER_PROBES, key, || Ok(())).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    false
}

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
        read_only: vec![],
        network: false,
        stdin: None,
    };
    // With `--disable-userns` where this bubblewrap has it (0.8), else without. One
    // without `--size` (an older release), which could not bound the memory filesystems
    // of `/tmp` and `/dev/shm`, fails both.
    let mut last = String::new();
    for disable_userns in [true, false] {
        let bwrap = Bwrap {
            helper: helper.to_path_buf(),
            path: path.clone(),
            disable_userns,
        };
        let (program, args) = wrap(
            &Backend::Bwrap(bwrap.clone()),
            &policy,
            &["true".into()],
            None,
        )
        .map_err(|e| e.to_string())?;
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
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The first executable file `name` in the absolute directories of `path` (relative
/// entries, such as an empty one or `.`, would depend on the working directory).
pub fn find_program(name: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
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
    cached(&HELPER_PROBES, (helper.to_path_buf(), landlock), || {
        // Remembered across processes (see `remembered`).
        #[cfg(target_os = "linux")]
        let key = helper_key(helper, landlock);
        #[cfg(target_os = "linux")]
        if key
            .as_deref()
            .and_then(crate::remembered::recall)
            .as_deref()
            == Some(PROBE_OK)
        {
            return Ok(());
        }
        let result = run_probe(helper, landlock);
        #[cfg(target_os = "linux")]
        if let (Some(key), Ok(())) = (&key, &result) {
            crate::remembered::remember(key, PROBE_OK);
        }
        result
    })
}

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

/// The program and arguments that run `argv` under `backend` and `policy`; `tmp` is
/// the command's private temporary directory (read-write) for the backends without a
/// private `/tmp` of their own (all but bubblewrap). The caller starts that program with
/// a cleared environment (plus what it allows), stdout and stderr piped, and, when
/// [`Backend::has_lifeline`], stdin a pipe it holds open.
pub fn wrap(
    backend: &Backend,
    policy: &Policy,
    argv: &[String],
    tmp: Option<&Path>,
) -> Result<(OsString, Vec<OsString>), Error> {
    let helper_call = |helper: &Path, landlock: bool, bwrap: Option<&Bwrap>| {
        let mut write = vec![policy.workspace.clone()];
        write.extend(tmp.map(Path::to_path_buf));
        let p = HelperPolicy {
            landlock,
            network: policy.network,
            write,
            cwd: policy.cwd.clone(),
            probe: false,
            hidden: policy.hidden.clone(),
            read_only: policy.read_only.clone(),
            stdin: policy.stdin.clone(),
            bwrap: bwrap.cloned(),
            env: None,
        };
        let json = serde_json::to_string(&p).map_err(|e| Error::Policy(e.to_string()))?;
        let mut args: Vec<OsString> = vec![HELPER_ARG.into(), json.into()];
        args.extend(argv.iter().map(OsString::from));
        Ok::<_, Error>((helper.as_os_str().to_owned(), args))
    };
    match backend {
        Backend::Bwrap(b) => helper_call(&b.helper, false, Some(b)),
        Backend::Landlock(h) => helper_call(h, true, None),
        Backend::Supervised(h) => helper_call(h, false, None),
        Backend::Direct => {
            let (first, rest) = argv.split_first().ok_or(Error::EmptyCommand)?;
            Ok((first.into(), rest.iter().map(OsString::from).collect()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_known_before_a_probe_has_answered() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-helper");
        for mode in [Mode::Off, Mode::Landlock, Mode::Bwrap, Mode::Auto] {
            assert_eq!(select_known(mode, None), None, "{mode}");
            // No file, so no key to remember an answer under, and no probe ran here.
            assert_eq!(select_known(mode, Some(&missing)), None, "{mode}");
        }
    }

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
