//! Loading: [`Config::load`] reads the file (`KLAW_CONFIG`, else the XDG default), then
//! the `KLAW_*` variables, then the checks, and resolves every directory into a
//! [`Config`]; [`parse`] reads engine.json text.

use std::path::{Path, PathBuf};
use std::time::Duration;

use klaw_tools::tools::files::FilesSettings;
use klaw_tools::tools::shell::ShellSettings;
use klaw_tools::{Limits, Settings};

use super::error::invalid;
use super::keys::Section;
use super::paths::{
    absolute, check_config_outside, check_data_dir_outside, check_loaded_outside, expand_home,
};
use super::timezone::system_timezone;
use super::{ConfigError, DEFAULT_RUNTIME_LIBRARY, EngineConfig, ProviderKeys};

/// Where the configuration came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// A file that exists.
    File(PathBuf),
    /// No file at the default path: built-in defaults.
    Defaults(PathBuf),
}

/// A loaded, checked configuration with every directory resolved.
#[derive(Debug, Clone)]
pub struct Config {
    /// The keys as read (after environment overrides).
    pub raw: EngineConfig,
    /// Where they were read from.
    pub source: ConfigSource,
    /// The workspace directory.
    pub workspace: PathBuf,
    /// The data directory.
    pub data_dir: PathBuf,
    /// The time zone.
    pub timezone: String,
    /// The embedding model's directory (`memory.model` resolved, its first model); `None`
    /// when it is a name and there is no cache directory (neither `KLAW_CACHE` nor
    /// `HOME`).
    pub memory_model_dir: Option<PathBuf>,
    /// The directories of `memory.model`'s other models, when it lists several (names
    /// without a cache directory left out, as above).
    pub memory_more_model_dirs: Vec<PathBuf>,
    /// The ONNX Runtime library (`memory.runtimeLibrary` resolved); `None` as above.
    pub memory_runtime_library: Option<PathBuf>,
    /// ONNX Runtime intra-op threads (`memory.threads`, else one per core).
    pub memory_threads: usize,
    /// The providers' usual key variables, read here with every other variable.
    pub provider_keys: ProviderKeys,
}

/// Process environment lookup, replaceable in tests.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Reads the real process environment.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl Config {
    /// Loads the configuration from `KLAW_CONFIG` or `$XDG_CONFIG_HOME/klaw/engine.json`
    /// and applies the `KLAW_*` overrides.
    pub fn load() -> Result<Self, ConfigError> {
        Self::load_with(&process_env)
    }

    /// [`Config::load`] with an explicit environment.
    pub fn load_with(env: Env<'_>) -> Result<Self, ConfigError> {
        let (path, explicit) = match env("KLAW_CONFIG") {
            // Absolute, so that paths in the file are relative to its real folder.
            Some(p) => (absolute(Path::new(&p)), true),
            None => (
                xdg(
                    env,
                    "XDG_CONFIG_HOME",
                    ".config",
                    "the config file",
                    "KLAW_CONFIG",
                )?
                .join("klaw/engine.json"),
                false,
            ),
        };
        let (raw, source) = match std::fs::read_to_string(&path) {
            Ok(text) => (parse(&path, &text)?, ConfigSource::File(path)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if explicit {
                    return Err(ConfigError::Missing(path));
                }
                (EngineConfig::default(), ConfigSource::Defaults(path))
            }
            Err(source) => return Err(ConfigError::Read { path, source }),
        };
        Self::resolve(raw, source, env)
    }

    /// Applies overrides, fills defaults and checks ranges.
    pub fn resolve(
        mut raw: EngineConfig,
        source: ConfigSource,
        env: Env<'_>,
    ) -> Result<Self, ConfigError> {
        raw.apply_env(env)?;
        raw.check("", env)?;
        let base = match &source {
            ConfigSource::File(f) => f.parent().map(Path::to_path_buf),
            ConfigSource::Defaults(_) => None,
        };
        let dir = |p: &Path, var: &str| -> PathBuf {
            // A path from the environment is relative to the current directory; one
            // from the file is relative to the file.
            let from_env = env(var).is_some();
            let p = expand_home(p, env);
            match (&base, from_env || p.is_absolute()) {
                (Some(b), false) => b.join(p),
                _ => absolute(&p),
            }
        };
        let data_dir = match &raw.data_dir {
            Some(d) => dir(d, "KLAW_DATA"),
            None => xdg(env, "XDG_DATA_HOME", ".local/share", "dataDir", "KLAW_DATA")?.join("klaw"),
        };
        let workspace = match &raw.workspace {
            Some(w) => dir(w, "KLAW_WORKSPACE"),
            None => data_dir.join("workspace"),
        };
        check_data_dir_outside(&data_dir, &workspace, env)?;
        check_config_outside(&source, &workspace)?;
        let timezone = match &raw.timezone {
            Some(tz) => match klaw_tools::tools::utilities::time_zone(tz) {
                Ok(zone) => zone.iana_name().unwrap_or(tz).to_owned(),
                Err(e) if env("KLAW_TIMEZONE").is_some() => {
                    return Err(ConfigError::Env {
                        var: "KLAW_TIMEZONE",
                        value: tz.clone(),
                        message: e.message().to_owned(),
                    });
                }
                Err(e) => return Err(invalid("timezone", e.message())),
            },
            None => system_timezone(env),
        };
        let cache = klaw_tools::cache_dir_from(env);
        let m = &raw.memory;
        let model_dir = |model: &str| {
            if is_path(model) {
                Some(dir(Path::new(model), "KLAW_MEMORY_MODEL"))
            } else {
                cache.as_ref().map(|c| c.join("models").join(model))
            }
        };
        let memory_model_dir = model_dir(m.model.first().trim());
        let memory_more_model_dirs: Vec<PathBuf> = m
            .model
            .names()
            .iter()
            .skip(1)
            .filter_map(|n| model_dir(n.trim()))
            .collect();
        let memory_runtime_library = match &m.runtime_library {
            Some(lib) => Some(dir(lib, "KLAW_MEMORY_RUNTIME_LIBRARY")),
            None => cache
                .as_ref()
                .map(|c| c.join("onnxruntime").join(DEFAULT_RUNTIME_LIBRARY)),
        };
        check_loaded_outside(
            [
                ("memory.runtimeLibrary", memory_runtime_library.as_deref()),
                ("memory.model", memory_model_dir.as_deref()),
            ],
            &workspace,
        )?;
        for d in &memory_more_model_dirs {
            check_loaded_outside(
                [("memory.model", Some(d)), ("memory.model", None)],
                &workspace,
            )?;
        }
        let memory_threads = m
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        Ok(Config {
            raw,
            source,
            workspace,
            data_dir,
            timezone,
            memory_model_dir,
            memory_more_model_dirs,
            memory_runtime_library,
            memory_threads,
            provider_keys: ProviderKeys::from_env(env),
        })
    }

    /// The limits tools run with.
    pub fn limits(&self) -> Limits {
        let r = &self.raw;
        let mut l = Limits::default();
        l.max_file_size_bytes = r.max_file_size_bytes;
        l.tool_timeout = Duration::from_secs(r.tool_timeout_seconds);
        l.max_read_bytes = r.max_read_bytes;
        l
    }

    /// The shell tools' settings; the engine registers them as a service.
    pub fn shell(&self) -> ShellSettings {
        let r = &self.raw;
        ShellSettings::default()
            .with_timeouts(
                Duration::from_secs(r.exec_timeout_seconds),
                Duration::from_secs(r.exec_max_timeout_seconds),
            )
            .with_max_output_bytes(r.exec_max_output_bytes)
            .with_max_processes(r.max_processes)
            .with_sandbox(r.sandbox)
            .with_network(r.network)
    }

    /// The file tools' settings; the engine registers them as a service.
    pub fn files(&self) -> FilesSettings {
        FilesSettings::default().with_max_list_entries(self.raw.max_list_entries)
    }

    /// The settings tools see.
    pub fn settings(&self) -> Settings {
        Settings::new(self.timezone.clone(), self.raw.language)
    }

    /// The effective configuration as JSON: every key, with directories resolved (and
    /// the memory runtime library and thread count).
    pub fn effective(&self) -> serde_json::Value {
        let mut raw = self.raw.clone();
        raw.workspace = Some(self.workspace.clone());
        raw.data_dir = Some(self.data_dir.clone());
        raw.timezone = Some(self.timezone.clone());
        raw.memory.runtime_library = self.memory_runtime_library.clone();
        raw.memory.threads = Some(self.memory_threads);
        // Secrets (tokens, keys) serialize as `"***"`: they never leave through
        // `klaw-engine config`.
        serde_json::to_value(raw).unwrap_or_default()
    }
}

/// Parses engine.json text; errors carry line and column.
pub fn parse(path: &Path, text: &str) -> Result<EngineConfig, ConfigError> {
    if !text.trim_start().starts_with('{') {
        return Err(ConfigError::Parse {
            path: path.to_path_buf(),
            message: "engine.json must be a JSON object: { \"key\": value, ... }".into(),
        });
    }
    serde_json::from_str(text).map_err(|e| ConfigError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// A `memory.model` that is a path rather than a name under `<cache>/models/`.
fn is_path(model: &str) -> bool {
    model.contains('/') || model.starts_with('~') || model.starts_with('.')
}

fn xdg(
    env: Env<'_>,
    var: &str,
    fallback: &str,
    what: &'static str,
    klaw_var: &'static str,
) -> Result<PathBuf, ConfigError> {
    if let Some(dir) = env(var).map(PathBuf::from).filter(|p| p.is_absolute()) {
        return Ok(dir);
    }
    match env("HOME") {
        Some(home) => Ok(PathBuf::from(home).join(fallback)),
        None => Err(ConfigError::NoHome(what, klaw_var)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{env, resolve_defaults};
    use klaw_tools::Lang;
    use klaw_tools::tools::shell::SandboxMode;

    #[test]
    fn defaults_follow_xdg() {
        let e = env(&[("HOME", "/home/u"), ("TZ", "Europe/Moscow")]);
        let c = resolve_defaults(&e).unwrap();
        assert_eq!(c.data_dir, PathBuf::from("/home/u/.local/share/klaw"));
        assert_eq!(
            c.workspace,
            PathBuf::from("/home/u/.local/share/klaw/workspace")
        );
        assert_eq!(c.timezone, "Europe/Moscow");
        assert_eq!(c.raw.max_file_size_bytes, 1_048_576);
        assert_eq!(c.raw.max_tool_call_rounds, 10);
    }

    #[test]
    fn env_overrides_the_file() {
        let e = env(&[
            ("HOME", "/h"),
            ("KLAW_WORKSPACE", "/ws"),
            ("KLAW_DATA", "/data"),
            ("KLAW_MAX_FILE_SIZE_BYTES", "10"),
            ("KLAW_LANGUAGE", "en"),
        ]);
        let raw = parse(
            Path::new("e.json"),
            r#"{"workspace": "/other", "maxFileSizeBytes": 5}"#,
        )
        .unwrap();
        let c = Config::resolve(raw, ConfigSource::File("e.json".into()), &e).unwrap();
        assert_eq!(c.workspace, PathBuf::from("/ws"));
        assert_eq!(c.data_dir, PathBuf::from("/data"));
        assert_eq!(c.raw.max_file_size_bytes, 10);
        assert_eq!(c.raw.language, Lang::En);
    }

    #[test]
    fn every_limit_has_a_variable() {
        let e = env(&[
            ("HOME", "/h"),
            ("KLAW_MAX_READ_BYTES", "7"),
            ("KLAW_MAX_LIST_ENTRIES", "8"),
            ("KLAW_EXEC_TIMEOUT_SECONDS", "9"),
            ("KLAW_EXEC_MAX_TIMEOUT_SECONDS", "10"),
            ("KLAW_EXEC_MAX_OUTPUT_BYTES", "11"),
            ("KLAW_MAX_PROCESSES", "12"),
            ("KLAW_SANDBOX", "off"),
            ("KLAW_NETWORK", "true"),
        ]);
        let c = resolve_defaults(&e).unwrap();
        assert_eq!(c.limits().max_read_bytes, 7);
        assert_eq!(c.files().max_list_entries, 8);
        let s = c.shell();
        assert_eq!(s.timeout, Duration::from_secs(9));
        assert_eq!(s.max_timeout, Duration::from_secs(10));
        assert_eq!((s.max_output_bytes, s.max_processes), (11, 12));
        assert_eq!(s.sandbox, SandboxMode::Off);
        assert!(s.network);
        let e = env(&[("HOME", "/h"), ("KLAW_SANDBOX", "docker")]);
        let err = resolve_defaults(&e).unwrap_err();
        assert!(
            err.to_string().contains("unknown sandbox `docker`"),
            "{err}"
        );
    }

    #[test]
    fn unknown_key_is_named() {
        let e = parse(Path::new("e.json"), "{\n  \"maxFileSize\": 1\n}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `maxFileSize`"), "{e}");
        assert!(e.contains("line 2"), "{e}");
    }

    #[test]
    fn broken_json_has_line_and_column() {
        let e = parse(Path::new("e.json"), "{\n  \"timezone\": \"UTC\",\n}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3 column 1"), "{e}");
    }

    #[test]
    fn bad_values_name_the_key_or_variable() {
        let e = env(&[("HOME", "/h"), ("KLAW_MAX_TOOL_CALL_ROUNDS", "many")]);
        let err = resolve_defaults(&e).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("environment variable KLAW_MAX_TOOL_CALL_ROUNDS=\"many\""),
            "{err}"
        );
        let raw = parse(Path::new("e.json"), r#"{"timezone": "Mars/Olympus"}"#).unwrap();
        let err = Config::resolve(
            raw,
            ConfigSource::Defaults("x".into()),
            &env(&[("HOME", "/h")]),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("timezone: unknown time zone `Mars/Olympus`"),
            "{err}"
        );
        let raw = parse(Path::new("e.json"), r#"{"maxToolCallRounds": 0}"#).unwrap();
        let err = Config::resolve(
            raw,
            ConfigSource::Defaults("x".into()),
            &env(&[("HOME", "/h")]),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "maxToolCallRounds: must be at least 1");
    }

    #[test]
    fn relative_paths_follow_the_file_and_tilde_is_home() {
        let e = env(&[("HOME", "/home/u"), ("KLAW_DATA", "rel-data")]);
        let raw = parse(
            Path::new("/etc/klaw/engine.json"),
            r#"{"workspace": "ws", "dataDir": "~/d"}"#,
        )
        .unwrap();
        let c = Config::resolve(
            raw.clone(),
            ConfigSource::File("/etc/klaw/engine.json".into()),
            &e,
        )
        .unwrap();
        assert_eq!(c.workspace, PathBuf::from("/etc/klaw/ws"));
        assert!(
            c.data_dir.is_absolute() && c.data_dir.ends_with("rel-data"),
            "{:?}",
            c.data_dir
        );
        let e = env(&[("HOME", "/home/u")]);
        let c =
            Config::resolve(raw, ConfigSource::File("/etc/klaw/engine.json".into()), &e).unwrap();
        assert_eq!(c.data_dir, PathBuf::from("/home/u/d"));
    }

    #[test]
    fn non_objects_and_bad_log_levels_are_refused() {
        let err = parse(Path::new("e.json"), "[]").unwrap_err().to_string();
        assert_eq!(
            err,
            "e.json: engine.json must be a JSON object: { \"key\": value, ... }"
        );
        for bad in ["verbose", "", "klaw=loud"] {
            let raw = EngineConfig {
                log_level: bad.into(),
                ..EngineConfig::default()
            };
            let err = Config::resolve(
                raw,
                ConfigSource::Defaults("x".into()),
                &env(&[("HOME", "/h")]),
            )
            .unwrap_err();
            assert!(err.to_string().starts_with("logLevel: "), "{err}");
        }
        for good in ["debug", "klaw::tools=debug,warn", "OFF"] {
            let raw = EngineConfig {
                log_level: good.into(),
                ..EngineConfig::default()
            };
            assert!(
                Config::resolve(
                    raw,
                    ConfigSource::Defaults("x".into()),
                    &env(&[("HOME", "/h")])
                )
                .is_ok(),
                "{good}"
            );
        }
    }

    #[test]
    fn missing_explicit_config_is_an_error() {
        let e = env(&[("HOME", "/h"), ("KLAW_CONFIG", "/nonexistent/engine.json")]);
        assert!(matches!(
            Config::load_with(&e),
            Err(ConfigError::Missing(_))
        ));
    }
}
