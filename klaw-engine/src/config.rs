//! `engine.json`: every key with its default, environment overrides, and errors that
//! name the key (or the line and column of broken JSON).
//!
//! This file holds the top-level keys ([`EngineConfig`]), loading ([`Config::load`]:
//! the file, then the `KLAW_*` variables, then the checks) and the resolved
//! [`Config`]. Each section of `engine.json` is a file of its own beside it, with its
//! keys, their checks, the settings it gives its group, and its tests: `memory.rs`,
//! `mcp.rs`, `skills.rs`, `llm.rs`, `agent.rs`, `gateway.rs`, `web.rs`, `scheduler.rs`,
//! `telemetry.rs`, `storage.rs`; `mcp_servers.rs` is `mcpServers`. `keys.rs` is the macro that
//! declares keys, `secret.rs` the type of tokens and keys, `paths.rs` the checks of where
//! paths may lie, `types.rs` the choices shared with the parts above config,
//! `error.rs` [`ConfigError`], `provider_keys.rs` [`ProviderKeys`] (the providers' own
//! key variables), `timezone.rs` the zone used when none is configured.

use std::path::{Path, PathBuf};
use std::time::Duration;

use klaw_tools::tools::files::FilesSettings;
use klaw_tools::tools::shell::{SandboxMode, ShellSettings};
use klaw_tools::{Lang, Limits, Settings};

mod agent;
mod error;
mod gateway;
pub mod keys;
mod llm;
mod mcp;
mod mcp_servers;
mod memory;
mod paths;
mod provider_keys;
mod scheduler;
mod secret;
mod skills;
mod storage;
mod telemetry;
mod timezone;
mod types;
mod web;

pub use agent::AgentSection;
pub use error::ConfigError;
use error::invalid;
pub use gateway::GatewaySection;
pub use keys::KeyDoc;
use keys::{Section, at_least, section};
pub use llm::{LlmSection, NamedModel};
pub use mcp::{BindAddr, McpSection};
use mcp_servers::check_servers;
pub use mcp_servers::{ImportedServer, MAX_SERVER_NAME, ServerType, valid_server_name};
pub use memory::{
    DEFAULT_MEMORY_MODEL, DEFAULT_RUNTIME_LIBRARY, MemoryModels, MemorySection, MemoryWeights,
};
use paths::{
    absolute, check_config_outside, check_data_dir_outside, check_loaded_outside, expand_home,
};
pub use provider_keys::ProviderKeys;
pub use scheduler::SchedulerSection;
pub use secret::Secret;
pub use skills::SkillsSection;
pub use storage::{DatabaseUrl, SslMode, StorageSection, Tls};
pub use telemetry::TelemetrySection;
use timezone::system_timezone;
pub use types::{Approval, Protocol, Provider};
pub use web::WebSection;

section! {
    /// The engine's configuration, as read from `engine.json`. Every key is optional;
    /// each is declared once below (see [`keys`]), which gives its default, variable,
    /// checks and the documentation's row.
    pub struct EngineConfig {
        keys {
            /// The agent's workspace directory (its files, workspace skills).
            workspace: Option<PathBuf> = None;
                key "workspace", env "KLAW_WORKSPACE", type "string (path) or `null`",
                shown "`<dataDir>/workspace`";
            /// The data directory (databases, core memory, models, system skills).
            data_dir: Option<PathBuf> = None;
                key "dataDir", env "KLAW_DATA", type "string (path) or `null`",
                shown "`$XDG_DATA_HOME/klaw`, else `~/.local/share/klaw`";
            /// The user's time zone; `current_time` uses it when no zone is given.
            timezone: Option<String> = None;
                key "timezone", env "KLAW_TIMEZONE", type "string (IANA name) or `null`",
                shown "`TZ`, else the system's zone, else `UTC`";
            /// Language of tool descriptions sent to models.
            language: Lang = Lang::Ru;
                key "language", env "KLAW_LANGUAGE", type "`\"ru\"` or `\"en\"`";
            /// Largest file a tool may write, in bytes.
            max_file_size_bytes: u64 = Limits::default().max_file_size_bytes;
                key "maxFileSizeBytes", env "KLAW_MAX_FILE_SIZE_BYTES",
                type "integer, 1 to 2^64−1", shown "`1048576` (1 MiB)", check at_least(1);
            /// Most consecutive rounds of tool calls in one agent turn.
            max_tool_call_rounds: u32 = 10;
                key "maxToolCallRounds", env "KLAW_MAX_TOOL_CALL_ROUNDS",
                type "integer, 1 to 4294967295", check at_least(1);
            /// Time limit, in seconds, of a tool that declares no timeout of its own.
            tool_timeout_seconds: u64 = Limits::default().tool_timeout.as_secs();
                key "toolTimeoutSeconds", env "KLAW_TOOL_TIMEOUT_SECONDS",
                type "integer, 1 to 2^64−1", check at_least(1);
            /// Most bytes returned by one read. Used by the file tools.
            max_read_bytes: u64 = Limits::default().max_read_bytes;
                key "maxReadBytes", env "KLAW_MAX_READ_BYTES", type "integer, 1 to 2^64−1",
                shown "`262144` (256 KiB)", check at_least(1);
            /// Most entries returned by one directory listing. Used by the file tools.
            max_list_entries: usize = FilesSettings::default().max_list_entries;
                key "maxListEntries", env "KLAW_MAX_LIST_ENTRIES", type "integer ≥ 1",
                check at_least(1);
            /// Time limit, in seconds, of a shell command that asks for none. Used by the
            /// shell tools.
            exec_timeout_seconds: u64 = ShellSettings::default().timeout.as_secs();
                key "execTimeoutSeconds", env "KLAW_EXEC_TIMEOUT_SECONDS",
                type "integer, 1 to `execMaxTimeoutSeconds`", check within_max_timeout;
            /// Largest time limit, in seconds, a shell command may ask for. Used by the
            /// shell tools.
            exec_max_timeout_seconds: u64 = ShellSettings::default().max_timeout.as_secs();
                key "execMaxTimeoutSeconds", env "KLAW_EXEC_MAX_TIMEOUT_SECONDS",
                type "integer, 1 to 2^64−1", check at_least(1);
            /// Most bytes kept of each output stream of a command. Used by the shell tools.
            exec_max_output_bytes: usize = ShellSettings::default().max_output_bytes;
                key "execMaxOutputBytes", env "KLAW_EXEC_MAX_OUTPUT_BYTES",
                type "integer ≥ 1", shown "`65536` (64 KiB)", check at_least(1);
            /// Most background processes at once. Used by the shell tools.
            max_processes: usize = ShellSettings::default().max_processes;
                key "maxProcesses", env "KLAW_MAX_PROCESSES", type "integer ≥ 1",
                check at_least(1);
            /// Which OS sandbox shell commands run in. Used by the shell tools.
            sandbox: SandboxMode = ShellSettings::default().sandbox;
                key "sandbox", env "KLAW_SANDBOX",
                type "`\"auto\"`, `\"bwrap\"`, `\"landlock\"` or `\"off\"`";
            /// Whether shell commands may use the network. Used by the shell tools.
            network: bool = ShellSettings::default().network;
                key "network", env "KLAW_NETWORK", type "`true` or `false`";
            /// Log filter: a level (`off`, `error`, `warn`, `info`, `debug`, `trace`), or
            /// `target=level` directives such as `info,klaw::tools=debug`.
            log_level: String = "warn".into();
                key "logLevel", env "KLAW_LOG_LEVEL", type "string (log filter)",
                check valid_log_filter;
            /// MCP servers whose tools are imported as `<server>__<tool>`: `{"name":
            /// {"command", "args", "env", "cwd"}}` for stdio, `{"name": {"type": "http",
            /// "url", "headers"}}` for Streamable HTTP, each with `enabled`,
            /// `startupTimeoutSeconds` (10) and `callTimeoutSeconds` (60); `${VAR}` is
            /// expanded (see [mcp-import.md](../mcp-import.md)).
            mcp_servers: std::collections::BTreeMap<String, ImportedServer> = Default::default();
                key "mcpServers", type "object: name → server", check check_servers;
        }
        sections {
            /// Memory: the embedding model, its runtime, search weights, chunking (see
            /// [The `memory` section](#the-memory-section)).
            memory: MemorySection; key "memory";
            /// The MCP server (`klaw-engine mcp`; see [The `mcp` section](#the-mcp-section)).
            mcp: McpSection; key "mcp";
            /// Skills: the system prompt's budget for them, `allowed-tools` (see
            /// [The `skills` section](#the-skills-section)).
            skills: SkillsSection; key "skills";
            /// The model the agent talks to (`klaw-engine chat`, `run`; see
            /// [The `llm` section](#the-llm-section)).
            llm: LlmSection; key "llm";
            /// The agent loop: approval of tool calls, history (see
            /// [The `agent` section](#the-agent-section)).
            agent: AgentSection; key "agent";
            /// The channels of `klaw-engine run` and the chat whitelist (see
            /// [The `gateway` section](#the-gateway-section)).
            gateway: GatewaySection; key "gateway";
            /// The web tools: caps, private services they may reach, search providers
            /// (see [The `web` section](#the-web-section)).
            web: WebSection; key "web";
            /// Scheduled jobs (`schedule_add`, fired by `klaw-engine run`; see
            /// [The `scheduler` section](#the-scheduler-section)).
            scheduler: SchedulerSection; key "scheduler";
            /// OpenTelemetry: where the engine's spans are exported (see
            /// [The `telemetry` section](#the-telemetry-section)).
            telemetry: TelemetrySection; key "telemetry";
            /// The database engines share (see [The `storage` section](#the-storage-section)).
            storage: StorageSection; key "storage";
        }
    }
}

/// `execTimeoutSeconds`: at least 1 and at most `execMaxTimeoutSeconds` (when that is
/// valid: a maximum of 0 is reported under its own key).
fn within_max_timeout(v: &u64, c: &EngineConfig) -> Result<(), String> {
    at_least(1)(v, c)?;
    if c.exec_max_timeout_seconds >= 1 && *v > c.exec_max_timeout_seconds {
        return Err(format!(
            "{v} is above execMaxTimeoutSeconds ({})",
            c.exec_max_timeout_seconds
        ));
    }
    Ok(())
}

/// `logLevel`: a level name, or `tracing` directives (`target=level`, comma-separated).
fn valid_log_filter(filter: &str, _: &EngineConfig) -> Result<(), String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    let valid = !filter.trim().is_empty()
        && filter.split(',').all(|d| {
            let level = d.rsplit('=').next().unwrap_or(d).trim();
            LEVELS.contains(&level.to_ascii_lowercase().as_str())
        })
        && tracing_subscriber::EnvFilter::try_new(filter).is_ok();
    if valid {
        Ok(())
    } else {
        Err(format!(
            "{filter:?} is not a log filter; use error, warn, info, debug or trace"
        ))
    }
}

impl EngineConfig {
    /// Every key of `engine.json` (and its sections), documented: the tables of
    /// `doc/config/engine-json.md` and `klaw-engine config --keys`.
    pub fn keys() -> Vec<KeyDoc> {
        let mut out = Vec::new();
        <Self as Section>::keys("", &mut out);
        out
    }
}

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
            Some(tz) => match klaw_tools::tools::utilities::zone_named(tz) {
                Ok(zone) => zone.iana_name().unwrap_or(tz).to_owned(),
                Err(problem) if env("KLAW_TIMEZONE").is_some() => {
                    return Err(ConfigError::Env {
                        var: "KLAW_TIMEZONE",
                        value: tz.clone(),
                        message: problem,
                    });
                }
                Err(problem) => return Err(invalid("timezone", &problem)),
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
    use std::collections::HashMap;

    /// [`Config::resolve`] of the defaults under `env` (the section files' tests use it).
    pub(super) fn resolve_defaults(env: Env<'_>) -> Result<Config, ConfigError> {
        Config::resolve(
            EngineConfig::default(),
            ConfigSource::Defaults("x".into()),
            env,
        )
    }

    /// An environment of exactly `pairs`.
    pub(super) fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

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

    /// The tables of `doc/config/engine-json.md` are the declarations; regenerate them
    /// with `KLAW_UPDATE_DOCS=1 cargo test -p klaw-engine --lib config` and read the diff.
    #[test]
    fn the_doc_tables_are_the_declarations() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../doc/config/engine-json.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let tables = keys::doc_tables(&EngineConfig::keys());
        for (name, _) in &tables {
            let marker = format!("<!-- generated: keys {name} -->");
            assert!(doc.contains(&marker), "{} lacks {marker}", path.display());
        }
        let want = keys::with_tables(&doc, &tables);
        if std::env::var_os("KLAW_UPDATE_DOCS").is_some() {
            std::fs::write(&path, &want).unwrap();
            return;
        }
        assert!(
            doc == want,
            "{} differs from the keys declared in config.rs and config/*.rs; run \
             KLAW_UPDATE_DOCS=1 cargo test -p klaw-engine --lib config, then read the diff",
            path.display()
        );
    }

    /// The doc's full example sets every key, and `klaw-engine config` prints it back
    /// exactly (same keys, same order).
    #[test]
    fn the_full_example_is_printed_back() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../doc/config/engine-json.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let example = doc.split("## A full example").nth(1).unwrap();
        let json = example.split("```json\n").nth(1).unwrap();
        let json = json.split("```").next().unwrap();
        let raw = parse(&path, json).unwrap();
        let c = Config::resolve(raw, ConfigSource::File(path), &env(&[("HOME", "/h")])).unwrap();
        let printed = serde_json::to_string_pretty(&c.effective()).unwrap();
        assert_eq!(printed.trim(), json.trim());
        let declared = EngineConfig::keys().len();
        let leaves = json.matches("\": ").count();
        assert_eq!(leaves, declared, "the example sets every key and section");
    }

    /// Every declared key is in `klaw-engine config`'s output, every variable belongs to
    /// one key, and every variable is read.
    #[test]
    fn every_key_is_in_the_effective_config_with_its_own_variable() {
        let keys = EngineConfig::keys();
        let c = resolve_defaults(&env(&[("HOME", "/h")])).unwrap();
        let effective = c.effective();
        let mut vars = std::collections::HashSet::new();
        for k in &keys {
            let mut v = &effective;
            for part in k.key.split('.') {
                v = v
                    .get(part)
                    .unwrap_or_else(|| panic!("{} is not in {effective}", k.key));
            }
            if let Some(var) = k.env {
                assert!(vars.insert(var), "{var} is declared twice");
                assert!(var.starts_with("KLAW_"), "{var}");
            }
        }
        // Every variable is read: set to a value unlike any default, it is either refused
        // by name or changes its key in the output.
        for k in &keys {
            let Some(var) = k.env else { continue };
            let pairs = [("HOME", "/h"), (var, "\u{1}not a value\u{1}")];
            let e = env(&pairs);
            match resolve_defaults(&e) {
                Err(err) => assert!(err.to_string().contains(var), "{var}: {err}"),
                Ok(set) => {
                    let at = |v: &serde_json::Value| {
                        k.key.split('.').fold(v.clone(), |v, part| v[part].clone())
                    };
                    assert_ne!(at(&set.effective()), at(&effective), "{var} was not read");
                }
            }
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
