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
    /// mount namespace. One that holds the workspace, or does not exist, is left out;
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

/// The directories of `read_only` that a command is to be shown read-only beside
/// `workspace`: those that exist and neither hold the workspace nor lie inside it.
#[cfg(target_os = "linux")]
pub(crate) fn read_only_outside(workspace: &Path, read_only: &[PathBuf]) -> Vec<PathBuf> {
    read_only
        .iter()
        .filter(|d| d.is_absolute() && !workspace.starts_with(d) && !d.starts_with(workspace))
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
