//! Where the configuration's paths may lie: the data dir, the config file and what the
//! engine loads outside the sandbox are refused inside the workspace (a command run
//! there could read or replace them); and the path helpers resolving uses (`~`, `..`,
//! symlinks).

use std::path::{Path, PathBuf};

use super::{ConfigError, ConfigSource, Env};

/// Refuses a data dir inside (or equal to) the workspace: commands may rename, replace
/// or read anything in the workspace, so no mount or rule could keep the data dir (the
/// memory database, core memory, secrets) out of their reach. The default layout, the
/// workspace inside the data dir, is fine. Checked on the paths as given and, where
/// both exist, on the real ones (symlinks resolved).
pub(super) fn check_data_dir_outside(
    data_dir: &Path,
    workspace: &Path,
    env: Env<'_>,
) -> Result<(), ConfigError> {
    // `..` taken lexically first: `/w/../d` is not inside `/w`.
    let nested = |d: &Path, w: &Path| lexical(d).starts_with(lexical(w));
    let real = std::fs::canonicalize(data_dir)
        .ok()
        .zip(std::fs::canonicalize(workspace).ok());
    if nested(data_dir, workspace) || real.is_some_and(|(d, w)| nested(&d, &w)) {
        return Err(ConfigError::Invalid {
            key: "dataDir".into(),
            // The variable that placed one inside the other, if any.
            var: ["KLAW_DATA", "KLAW_WORKSPACE"]
                .into_iter()
                .find(|v| env(v).is_some()),
            message: format!(
                "the data dir {} is inside the workspace {}: shell commands can reach \
                 everything in the workspace, so keep the data dir outside it (the default \
                 puts the workspace inside the data dir)",
                data_dir.display(),
                workspace.display()
            ),
        });
    }
    Ok(())
}

/// Refuses a config file inside (or equal to a file in) the workspace: a command run
/// there could read its secrets and rewrite it, the sandbox switch included, for the next
/// start. The default path is refused too when it lies in the workspace, though no file
/// is there yet: a command could create one. Checked on the paths as given and on the
/// real ones (symlinks resolved, through the longest part that exists), so neither `..`
/// nor a link in either path dodges it.
pub(super) fn check_config_outside(
    source: &ConfigSource,
    workspace: &Path,
) -> Result<(), ConfigError> {
    let (config, exists) = match source {
        ConfigSource::File(p) => (p, true),
        ConfigSource::Defaults(p) => (p, false),
    };
    if is_inside(config, workspace) {
        return Err(ConfigError::ConfigInWorkspace {
            config: config.clone(),
            workspace: workspace.to_path_buf(),
            exists,
        });
    }
    Ok(())
}

/// Whether `path` is `dir` or beneath it, on the paths as given and on the real ones
/// (symlinks resolved through the longest part that exists), so that neither `..` nor a
/// link in either path dodges the answer.
fn is_inside(path: &Path, dir: &Path) -> bool {
    let inside = |p: &Path, d: &Path| lexical(p).starts_with(lexical(d));
    let (p, d) = (absolute(path), absolute(dir));
    inside(&p, &d) || inside(&real(&p), &real(&d))
}

/// Refuses an ONNX Runtime library or an embedding model inside the workspace: the
/// engine loads them outside the sandbox.
pub(super) fn check_loaded_outside(
    loaded: [(&'static str, Option<&Path>); 2],
    workspace: &Path,
) -> Result<(), ConfigError> {
    for (key, path) in loaded {
        if let Some(path) = path.filter(|p| is_inside(p, workspace)) {
            return Err(ConfigError::LoadedFromWorkspace {
                key,
                path: path.to_path_buf(),
                workspace: workspace.to_path_buf(),
            });
        }
    }
    Ok(())
}

/// `path` with every symlink resolved: the longest leading part that exists made
/// canonical, the rest appended as written.
fn real(path: &Path) -> PathBuf {
    let mut base = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(mut out) = std::fs::canonicalize(&base) {
            out.extend(rest.iter().rev());
            return lexical(&out);
        }
        match (
            base.file_name().map(std::ffi::OsStr::to_owned),
            base.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                base = parent.to_path_buf();
            }
            _ => return lexical(path),
        }
    }
}

/// `path` with `.` dropped and each `..` removing the component before it.
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `~` and `~/x` become the home directory.
pub(super) fn expand_home(p: &Path, env: Env<'_>) -> PathBuf {
    let Some(home) = env("HOME") else {
        return p.to_path_buf();
    };
    match p.strip_prefix("~") {
        Ok(rest) => PathBuf::from(home).join(rest),
        Err(_) => p.to_path_buf(),
    }
}

pub(super) fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use crate::config::tests::env;
    use crate::config::{Config, ConfigError, ConfigSource, EngineConfig, parse};
    use std::path::Path;

    /// A data dir inside the workspace is a configuration error (issue 13: a command
    /// renamed a parent directory and read the data dir), by name or through a symlink;
    /// the default layout (the workspace inside the data dir) is fine.
    #[test]
    fn a_data_dir_inside_the_workspace_is_refused() {
        let resolve = |json: &str| {
            let raw = parse(Path::new("/etc/klaw/engine.json"), json).unwrap();
            Config::resolve(
                raw,
                ConfigSource::File("/etc/klaw/engine.json".into()),
                &env(&[("HOME", "/home/u")]),
            )
        };
        for json in [
            r#"{"workspace": "/w", "dataDir": "/w/sub/data"}"#,
            r#"{"workspace": "/w", "dataDir": "/w"}"#,
        ] {
            let err = resolve(json).unwrap_err();
            assert!(
                err.to_string().starts_with("dataDir: the data dir /w"),
                "{json}: {err}"
            );
        }
        resolve(r#"{"dataDir": "/d"}"#).unwrap();
        resolve(r#"{"workspace": "/w", "dataDir": "/w/../d"}"#).unwrap();
        resolve(r#"{"workspace": "/x/../w", "dataDir": "/w/./data"}"#).unwrap_err();
        resolve(r#"{"workspace": "/w", "dataDir": "/w-data"}"#).unwrap();
        // Through a symlink: the workspace is a link to a directory holding the data dir.
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir_all(real.join("data")).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("ws")).unwrap();
        let json = serde_json::json!({
            "workspace": dir.path().join("ws"),
            "dataDir": real.join("data"),
        })
        .to_string();
        let err = resolve(&json).unwrap_err();
        assert!(err.to_string().starts_with("dataDir:"), "{err}");
    }

    /// What the engine loads outside the sandbox (the ONNX Runtime library, the
    /// embedding model) may not come from the workspace, where a command could swap it
    /// for code that runs as the engine at the next start; by name, through `..`, or
    /// through a cache directory inside the workspace.
    #[test]
    fn code_the_engine_loads_is_refused_inside_the_workspace() {
        let home = env(&[("HOME", "/home/u")]);
        let etc = Path::new("/etc/klaw/engine.json");
        let resolve = |json: &str| {
            let raw = parse(etc, json).unwrap();
            Config::resolve(raw, ConfigSource::File(etc.to_path_buf()), &home)
        };
        for (json, key) in [
            (
                r#"{"workspace": "/w", "memory": {"runtimeLibrary": "/w/libonnxruntime.so"}}"#,
                "memory.runtimeLibrary",
            ),
            (
                r#"{"workspace": "/w", "memory": {"runtimeLibrary": "/x/../w/lib/ort.so"}}"#,
                "memory.runtimeLibrary",
            ),
            (
                r#"{"workspace": "/w", "memory": {"model": "/w/models/e5"}}"#,
                "memory.model",
            ),
            // The default cache (~/.cache/klaw) inside the workspace.
            (
                r#"{"workspace": "/home/u/.cache", "dataDir": "/d"}"#,
                "memory.runtimeLibrary",
            ),
        ] {
            let err = resolve(json).unwrap_err();
            assert!(
                matches!(&err, ConfigError::LoadedFromWorkspace { key: k, .. } if *k == key),
                "{json}: {err}"
            );
            assert!(err.to_string().contains("outside the sandbox"), "{err}");
        }
        resolve(
            r#"{"workspace": "/w", "memory": {"runtimeLibrary": "/opt/ort/libonnxruntime.so"}}"#,
        )
        .unwrap();
    }

    /// Issue 25: a config file inside the workspace (a project-local engine.json whose
    /// workspace is its own folder) let a command read the keys and turn the sandbox off
    /// for the next start. Refused by name, through `..`, through a symlinked file or
    /// workspace, and where the default path (no file yet) lies in the workspace.
    #[test]
    fn a_config_file_inside_the_workspace_is_refused() {
        let home = env(&[("HOME", "/home/u")]);
        let resolve = |config: &Path, json: &str| {
            let raw = parse(config, json).unwrap();
            Config::resolve(raw, ConfigSource::File(config.to_path_buf()), &home)
        };
        let etc = Path::new("/etc/klaw/engine.json");
        for json in [
            r#"{"workspace": "."}"#,
            r#"{"workspace": "/etc"}"#,
            r#"{"workspace": "/etc/klaw"}"#,
            r#"{"workspace": "/x/../etc/klaw"}"#,
        ] {
            let err = resolve(etc, json).unwrap_err().to_string();
            assert!(
                err.starts_with("the config file /etc/klaw/engine.json is inside the workspace")
                    && err.contains("llm.apiKey")
                    && err.contains("Move the config file out of the workspace"),
                "{json}: {err}"
            );
        }
        resolve(etc, r#"{"workspace": "ws"}"#).unwrap();
        resolve(etc, r#"{"workspace": "/etc/klaw-ws"}"#).unwrap();
        resolve(etc, r#"{"workspace": "/etc/klaw/../ws"}"#).unwrap();

        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        // The config file is a link to a file in the workspace.
        std::fs::write(ws.join("engine.json"), "{}").unwrap();
        let link = dir.path().join("engine.json");
        std::os::unix::fs::symlink(ws.join("engine.json"), &link).unwrap();
        let json = serde_json::json!({"workspace": ws, "dataDir": dir.path().join("d")});
        let err = resolve(&link, &json.to_string()).unwrap_err();
        assert!(
            matches!(err, ConfigError::ConfigInWorkspace { exists: true, .. }),
            "{err}"
        );
        // The workspace is a link to the config file's folder.
        let conf_dir = dir.path().join("conf");
        std::fs::create_dir_all(&conf_dir).unwrap();
        std::fs::write(conf_dir.join("engine.json"), "{}").unwrap();
        std::os::unix::fs::symlink(&conf_dir, dir.path().join("ws-link")).unwrap();
        let json = serde_json::json!({
            "workspace": dir.path().join("ws-link"),
            "dataDir": dir.path().join("d"),
        });
        let err = resolve(&conf_dir.join("engine.json"), &json.to_string()).unwrap_err();
        assert!(
            matches!(err, ConfigError::ConfigInWorkspace { .. }),
            "{err}"
        );
        // No file, but the default path is in the workspace: a command could create it.
        let e = env(&[
            ("HOME", "/home/u"),
            ("KLAW_WORKSPACE", "/home/u"),
            ("KLAW_DATA", "/d"),
        ]);
        let err = Config::resolve(
            EngineConfig::default(),
            ConfigSource::Defaults("/home/u/.config/klaw/engine.json".into()),
            &e,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("the config file's default path (no file there yet)")
                && err.contains("create it"),
            "{err}"
        );
    }
}
