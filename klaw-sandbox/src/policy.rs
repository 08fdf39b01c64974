//! What the parts of the sandbox share: the policy a caller gives ([`Policy`]), the
//! policy the helper receives ([`HelperPolicy`]), a bubblewrap that works ([`Bwrap`]),
//! and the helper's protocol (its argument, its probe's answer, its exit codes). Every
//! other module imports from here, and this one from none of them.

#[cfg(target_os = "linux")]
use std::path::Path;
use std::path::PathBuf;

/// System directories visible read-only inside every sandbox (those that exist).
#[cfg(target_os = "linux")]
pub const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];

/// What a command may touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The workspace, canonical: read-write.
    pub workspace: PathBuf,
    /// The working directory, canonical, inside the workspace.
    pub cwd: PathBuf,
    /// Directories that must stay invisible even when inside the workspace (the data dir).
    pub hidden: Vec<PathBuf>,
    /// Directories outside the workspace that commands see read-only, at their own
    /// canonical paths (the folders of skills, so that their scripts run): bound
    /// read-only under bubblewrap, readable under Landlock, and, when the engine is
    /// root, mounted read-only (idmapped where the filesystem allows) in the command's
    /// mount namespace. One that holds the workspace, or does not exist, is left out, and
    /// so is one that [`read_only_refusal`] refuses (`/etc`, the data dir, ...);
    /// one inside the workspace is seen as the workspace is (under bubblewrap, even
    /// beneath a hidden directory).
    pub read_only: Vec<PathBuf>,
    /// A file the helper gives the command as its standard input (else it reads
    /// nothing). Only the helper's backends use it: the helper's own stdin is the
    /// engine's lifeline. A caller of bubblewrap or a direct command pipes the input.
    pub stdin: Option<PathBuf>,
    /// Whether the network is allowed.
    pub network: bool,
}

/// A bubblewrap that works here.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Bwrap {
    /// The helper that starts it with the seccomp filter.
    pub(crate) helper: PathBuf,
    /// Its absolute path, found once on the engine's `PATH` (never relative to a
    /// command's working directory).
    pub(crate) path: PathBuf,
    /// Whether it supports `--disable-userns` (bubblewrap 0.8 and later).
    pub(crate) disable_userns: bool,
}

/// The first argument that makes a Klaw binary act as the sandbox helper.
pub const HELPER_ARG: &str = "__klaw-sandbox";

/// The first argument that makes a Klaw binary act as the sandbox server of a serving
/// engine (`Server`; see [`serve_main`](crate::serve_main)).
pub const SERVE_ARG: &str = "__klaw-sandbox-serve";

/// What the helper's probe prints when the policy could be applied.
pub(crate) const PROBE_OK: &str = "klaw-sandbox ok";

/// The supervisor's exit code when the engine ended the command (timeout, kill) but the
/// tree could not be proven dead.
pub const UNPROVEN: u8 = 125;

/// What the supervisor says on stderr when it could not prove the tree dead.
pub const UNPROVEN_NOTE: &str = "could not prove that every process of the command ended";

/// Folders never shown read-only, nor any folder that holds one of them: the root,
/// the system's secrets and state, the homes and the kernel's interfaces (besides the
/// data dir and the engine's home, see [`read_only_refusal`]).
#[cfg(target_os = "linux")]
pub const NEVER_READ_ONLY: &[&str] = &[
    "/", "/etc", "/root", "/home", "/proc", "/sys", "/dev", "/run", "/boot", "/var",
];

/// Why `dir` may not be shown to commands read-only, if it may not: it is, or holds, a
/// folder of [`NEVER_READ_ONLY`], one of `hidden` (the data dir) or `home` (the
/// engine's home). Such a folder is left out of the policy (the caller says so).
#[cfg(target_os = "linux")]
pub fn read_only_refusal(dir: &Path, hidden: &[PathBuf], home: Option<&Path>) -> Option<String> {
    let holds = |inner: &Path| inner.starts_with(dir);
    if let Some(d) = NEVER_READ_ONLY.iter().map(Path::new).find(|d| holds(d)) {
        return Some(format!("it is or holds {}", d.display()));
    }
    if let Some(h) = hidden.iter().find(|h| holds(h)) {
        return Some(format!("it is or holds the data dir {}", h.display()));
    }
    match home {
        Some(h) if holds(h) => Some(format!("it is or holds the engine's home {}", h.display())),
        _ => None,
    }
}

/// The directories of `read_only` that a command is to be shown read-only beside
/// `workspace`: those that exist, neither hold the workspace nor lie inside it, and are
/// not refused ([`read_only_refusal`], with `hidden` and this process's `HOME`).
#[cfg(target_os = "linux")]
pub(crate) fn read_only_outside(
    workspace: &Path,
    hidden: &[PathBuf],
    read_only: &[PathBuf],
) -> Vec<PathBuf> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    read_only
        .iter()
        .filter(|d| d.is_absolute() && !workspace.starts_with(d) && !d.starts_with(workspace))
        .filter(|d| read_only_refusal(d, hidden, home.as_deref()).is_none())
        .filter(|d| d.is_dir())
        .cloned()
        .collect()
}

/// What the helper enforces, as it receives it.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
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
    /// Directories to hide inside the workspace (bubblewrap only: the data dir).
    #[serde(default)]
    pub(crate) hidden: Vec<PathBuf>,
    /// Directories the command sees read-only (see [`Policy::read_only`]).
    #[serde(default)]
    pub(crate) read_only: Vec<PathBuf>,
    /// The file the command reads as its stdin (see [`Policy::stdin`]).
    #[serde(default)]
    pub(crate) stdin: Option<PathBuf>,
    /// Run the command under this bubblewrap, with the seccomp filter, instead of
    /// under Landlock here.
    #[serde(default)]
    pub(crate) bwrap: Option<Bwrap>,
    /// The command's whole environment (a served command, whose supervisor is a fork
    /// of the sandbox server); `None`: the helper's own, which the engine set.
    #[serde(default)]
    pub(crate) env: Option<Vec<(std::ffi::OsString, std::ffi::OsString)>>,
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn system_folders_the_data_dir_and_the_home_are_never_shown_read_only() {
        let hidden = [PathBuf::from("/srv/klaw/data")];
        let home = Path::new("/opt/engine-home");
        for refused in [
            "/",
            "/etc",
            "/root",
            "/home",
            "/proc",
            "/sys",
            "/dev",
            "/run",
            "/boot",
            "/var",
            "/srv",
            "/srv/klaw",
            "/srv/klaw/data",
            "/opt",
            "/opt/engine-home",
        ] {
            assert!(
                read_only_refusal(Path::new(refused), &hidden, Some(home)).is_some(),
                "{refused}"
            );
        }
        for allowed in [
            "/srv/klaw/data/skills",
            "/srv/klaw/other",
            "/opt/engine-home/.claude/skills",
            "/home/me/.agents/skills",
            "/root/.claude/skills",
            "/usr/share/skills",
        ] {
            assert_eq!(
                read_only_refusal(Path::new(allowed), &hidden, Some(home)),
                None,
                "{allowed}"
            );
        }
        // read_only_outside leaves them out (here /etc, which exists).
        let ws = Path::new("/nonexistent-ws");
        let kept = read_only_outside(ws, &hidden, &["/etc", "/usr/share"].map(PathBuf::from));
        assert_eq!(kept, vec![PathBuf::from("/usr/share")]);
    }
}
