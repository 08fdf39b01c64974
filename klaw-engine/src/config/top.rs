//! The top-level keys of `engine.json` ([`EngineConfig`]): the directories, the
//! limits, the log filter, `mcpServers`, and the sections, each declared in its own file.

use std::path::PathBuf;

use klaw_tools::tools::files::FilesSettings;
use klaw_tools::tools::shell::{SandboxMode, ShellSettings};
use klaw_tools::{Lang, Limits};

use super::keys::{KeyDoc, Section, at_least, section};
use super::mcp_servers::check_servers;
use super::{
    AgentSection, GatewaySection, ImportedServer, LlmSection, McpSection, MemorySection,
    SchedulerSection, SkillsSection, StorageSection, TelemetrySection, WebSection,
};

section! {
    /// The engine's configuration, as read from `engine.json`. Every key is optional;
    /// each is declared once below (see [`keys`](super::keys)), which gives its default, variable,
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
