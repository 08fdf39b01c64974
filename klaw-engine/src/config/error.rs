//! [`ConfigError`]: why the configuration cannot be used, each variant naming the key,
//! the variable or the file at fault.

use std::path::PathBuf;

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The config file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid JSON, or has an unknown key or a value of the wrong type.
    #[error("{path}: {message}")]
    Parse {
        /// The config file.
        path: PathBuf,
        /// serde's message, with line and column.
        message: String,
    },
    /// `KLAW_CONFIG` names a file that does not exist.
    #[error("KLAW_CONFIG points to {0}, which does not exist")]
    Missing(PathBuf),
    /// A `KLAW_*` variable has a value of the wrong type.
    #[error("environment variable {var}={value:?}: {message}")]
    Env {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What was expected.
        message: String,
    },
    /// A key has a value outside its range.
    #[error("{key}{}: {message}", var.map(|v| format!(" (set by {v})")).unwrap_or_default())]
    Invalid {
        /// The key, as in engine.json (`memory.threads`).
        key: String,
        /// The environment variable that set the value, if one did.
        var: Option<&'static str>,
        /// What is wrong.
        message: String,
    },
    /// Neither `HOME` nor the XDG variables are set, so no default directory exists.
    #[error("cannot find a default for {0}: HOME is not set; set {1}")]
    NoHome(&'static str, &'static str),
    /// The config file (or, when there is none, the place it is looked for) is inside the
    /// workspace, where commands could read its secrets and rewrite it.
    #[error(
        "{} {} is inside the workspace {}: commands run in the workspace could read its \
         secrets (llm.apiKey, mcp.token, gateway.telegramToken) and {} it, e.g. to turn the \
         sandbox off for the next start. Move the config file out of the workspace (name it \
         with KLAW_CONFIG; the default is $XDG_CONFIG_HOME/klaw/engine.json), or point the \
         workspace elsewhere (`workspace` in engine.json, or KLAW_WORKSPACE)",
        if *.exists { "the config file" } else { "the config file's default path (no file there yet)" },
        .config.display(),
        .workspace.display(),
        if *.exists { "rewrite" } else { "create" }
    )]
    ConfigInWorkspace {
        /// The config file, as named.
        config: PathBuf,
        /// The workspace, as configured.
        workspace: PathBuf,
        /// Whether the file exists (else built-in defaults are in use).
        exists: bool,
    },
    /// What the engine loads and runs outside the sandbox (the ONNX Runtime library, the
    /// embedding model) is inside the workspace, where a command could replace it.
    #[error(
        "{key} {} is inside the workspace {}: the engine loads it itself, outside the \
         sandbox, so a command run in the workspace could replace it and have its code \
         run as the engine at the next start. Keep it outside the workspace (the default \
         is under ~/.cache/klaw), or point the workspace elsewhere",
        .path.display(),
        .workspace.display()
    )]
    LoadedFromWorkspace {
        /// The key that names it.
        key: &'static str,
        /// The file or directory, resolved.
        path: PathBuf,
        /// The workspace, as configured.
        workspace: PathBuf,
    },
}

/// An [`ConfigError::Invalid`] of `key` (no variable set it).
pub(super) fn invalid(key: &str, message: &str) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        var: None,
        message: message.to_owned(),
    }
}
