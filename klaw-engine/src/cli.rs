//! The command line: the command tree ([`Cli`], [`Command`]) and its dispatch. Each
//! subcommand's file parses what it reads and prints what it gets: `cli/tools.rs`
//! (`tools`, `tools reload`, `tools lock`), `cli/call.rs` (`call`), `cli/mcp.rs` (`mcp`),
//! `cli/chat.rs`, `cli/run.rs`, `cli/schedule.rs`, `cli/memory.rs`, `cli/docs.rs`
//! (`docs index`), `cli/storage.rs` (`storage import`); `doctor` and `config` are printed here;
//! `cli/flags.rs` turns a tool's argument error into the flag the user typed. A front end runs on an
//! assembled app (`app/front.rs`: its runtime, the start, the one shutdown).

mod call;
mod chat;
#[cfg(feature = "docs")]
mod docs;
mod flags;
mod mcp;
#[cfg(feature = "memory")]
mod memory;
mod run;
mod schedule;
mod storage;
mod tools;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use klaw_tools::{Format, Lang};

use crate::Config;
use crate::llm::Model;

/// Klaw: tools for LLM agents, served from one engine.
#[derive(Debug, Parser)]
#[command(name = "klaw-engine", version, about, long_about = None)]
pub struct Cli {
    /// What to do; without a command, `doctor` then `tools`.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// A subcommand.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List every tool: a table, or with --format a JSON array of definitions.
    #[command(args_conflicts_with_subcommands = true)]
    Tools {
        /// `reload`: load the manifest tools now and say what loads.
        #[command(subcommand)]
        action: Option<ToolsAction>,
        /// Client format of the definitions (openai, openai-loose, anthropic, gemini,
        /// mcp), or json: the list `GET /api/v1/tools` gives (MCP definitions with
        /// origin and loaded).
        #[arg(long, value_parser = parse_format)]
        format: Option<ToolsFormat>,
        /// Language of descriptions (default: `language` from engine.json).
        #[arg(long, value_parser = parse_lang)]
        lang: Option<Lang>,
        /// List only the tools that are not working: manifests and imported tools that
        /// could not be loaded, and tools whose last calls failed (with --format json,
        /// the `failed` list of `GET /api/v1/tools`).
        #[arg(long)]
        failed: bool,
    },
    /// Call a tool with JSON arguments and print its result (exit 1 on error); with
    /// --jsonl, many calls, one JSON object a line on stdin, one result a line on stdout.
    Call {
        /// The tool's name.
        #[arg(required_unless_present = "jsonl")]
        name: Option<String>,
        /// The arguments as a JSON object; `-` reads them from stdin. Default: `{}`.
        #[arg(default_value = "{}")]
        args: String,
        /// Read `{"id", "name", "arguments"}` lines from stdin and write `{"id", "ok",
        /// "result" | "error"}` lines, in one process (the model loads once).
        #[arg(long, conflicts_with = "name")]
        jsonl: bool,
    },
    /// Serve every tool to MCP clients: over stdin and stdout (JSON-RPC, one message a
    /// line) until the client closes stdin, or with --http over Streamable HTTP at
    /// `/mcp`; until SIGINT/SIGTERM.
    Mcp {
        /// Serve over HTTP on this address (default: `mcp.bind`, 127.0.0.1:8765).
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "")]
        http: Option<String>,
    },
    /// Chat with the agent (the model in `llm` calling the tools): interactive in a
    /// terminal; otherwise one message per line on stdin, each answer a line on stdout.
    /// The history is kept per chat in the data dir.
    Chat {
        /// The conversation to continue (each has its own history).
        #[arg(long, default_value = "console")]
        chat: String,
        /// A model of `llm.models` instead of the section's own.
        #[arg(long)]
        model: Option<String>,
    },
    /// Run the engine: the gateway's channels (Telegram with gateway.telegramToken) feed
    /// the agent, scheduled jobs fire (with a model), and the MCP server runs over HTTP
    /// with mcp.enabled; until SIGINT/SIGTERM.
    Run,
    /// Check the configuration, directories and every subsystem; say how to fix what is wrong.
    Doctor,
    /// The scheduled jobs `run` fires: list, add, remove, run one now.
    Schedule {
        /// What to do with them.
        #[command(subcommand)]
        command: schedule::ScheduleCommand,
    },
    /// The database engines share (`storage.url`): copy a data dir's SQLite stores into it.
    Storage {
        /// What to do with it.
        #[command(subcommand)]
        command: storage::StorageCommand,
    },
    /// Print the effective configuration (every key, with defaults and overrides applied).
    Config {
        /// Print every key instead (as JSON): its variable, type, default and meaning.
        #[arg(long)]
        keys: bool,
    },
    /// Import text into memory, or search it.
    #[cfg(feature = "memory")]
    Memory {
        /// What to do with memory.
        #[command(subcommand)]
        command: memory::MemoryCommand,
    },
    /// The embedded documentation the `docs_*` tools serve.
    #[cfg(feature = "docs")]
    Docs {
        /// What to do with it.
        #[command(subcommand)]
        command: DocsCommand,
    },
}

/// A `tools` subcommand.
#[derive(Debug, Subcommand)]
pub enum ToolsAction {
    /// Load the manifest tools (`<workspace>/tools/*/tool.yaml`, `<dataDir>/tools/...`)
    /// as a starting engine does and print each one loaded and each one that fails, with
    /// why (exit 1 when one fails). A running `run`, `mcp` or `chat` reloads them by
    /// itself within 2 s of a change, or at once on SIGHUP.
    Reload,
    /// Write the schema lock (`tools.lock.json`: every tool's schemas, annotations and
    /// description hashes, compiled, manifest and imported tools alike), or compare the
    /// tools with it: each change in plain words, breaking or compatible.
    Lock {
        /// Compare only; exit 1 on a breaking change (a tool or parameter removed or
        /// renamed, a new required parameter, a narrowed type, an output field removed or
        /// retyped, a tool turned destructive).
        #[arg(long, conflicts_with = "update")]
        check: bool,
        /// Write the lock when every change is compatible; refuse (exit 1) a breaking
        /// one (plain `tools lock` writes whatever changed).
        #[arg(long)]
        update: bool,
        /// The lock file.
        #[arg(long, default_value = "tools.lock.json")]
        file: std::path::PathBuf,
    },
}

/// A `docs` subcommand.
#[cfg(feature = "docs")]
#[derive(Debug, Subcommand)]
pub enum DocsCommand {
    /// Bring the docs search index in step with the embedded docs now (new and changed
    /// files are re-indexed, removed ones dropped); print what was done.
    Index {
        /// Re-index every file from scratch.
        #[arg(long)]
        force: bool,
    },
}

/// What `tools --format` prints: one client's definitions, or `json`, the tool list as
/// `GET /api/v1/tools` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolsFormat {
    /// The definitions in a client's format.
    Client(Format),
    /// Each tool's MCP definition with its origin and `loaded`.
    Json,
}

fn parse_format(s: &str) -> Result<ToolsFormat, String> {
    if s == "json" {
        return Ok(ToolsFormat::Json);
    }
    s.parse()
        .map(ToolsFormat::Client)
        .map_err(|e: String| format!("{e}, or json"))
}

fn parse_lang(s: &str) -> Result<Lang, String> {
    s.parse()
}

/// Runs the command line of the current process.
pub fn main() -> ExitCode {
    let code = run(std::env::args_os());
    // The spans still buffered (telemetry on) go out before the process ends.
    crate::telemetry::shutdown();
    code
}

/// Runs the command line with explicit arguments (the first is the program name).
///
/// A hidden first argument, [`klaw_sandbox::HELPER_ARG`], makes the process the shell
/// tools' sandbox helper instead ([`klaw_sandbox::helper_main`]: it supervises one
/// command in the sandbox); shell commands re-execute the engine that way. Likewise
/// [`klaw_sandbox::SERVE_ARG`] makes it a serving engine's sandbox server
/// ([`klaw_sandbox::serve_main`]). Nothing else runs before them.
pub fn run(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> ExitCode {
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    if args.get(1).is_some_and(|a| a == klaw_sandbox::HELPER_ARG) {
        return klaw_sandbox::helper_main(args.into_iter().skip(2).collect());
    }
    // The sandbox server of a serving engine, when no small helper is beside this one.
    if args.get(1).is_some_and(|a| a == klaw_sandbox::SERVE_ARG) {
        return klaw_sandbox::serve_main(args.into_iter().skip(2).collect());
    }
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match cli.command {
        Some(Command::Doctor) => doctor(),
        Some(Command::Run) => with_config(|config| run::run(config.clone())),
        Some(Command::Schedule { command }) => {
            with_config(|config| schedule::run(config.clone(), command))
        }
        Some(Command::Storage { command }) => with_config(|config| storage::run(config, command)),
        Some(Command::Chat { chat, model }) => {
            with_config(|config| chat::run(config.clone(), chat, model))
        }
        Some(Command::Config { keys: true }) => {
            out(&pretty(&serde_json::json!(crate::EngineConfig::keys())));
            ExitCode::SUCCESS
        }
        Some(Command::Config { keys: false }) => with_config(|config| {
            out(&pretty(&config.effective()));
            ExitCode::SUCCESS
        }),
        Some(Command::Tools {
            action,
            format,
            lang,
            failed,
        }) => with_config(|config| tools::run(config, action, format, lang, failed)),
        Some(Command::Mcp { http: None }) => with_config(|config| mcp::stdio(config.clone())),
        Some(Command::Mcp { http: Some(addr) }) => {
            with_config(|config| mcp::http(config.clone(), &addr))
        }
        Some(Command::Call { jsonl: true, .. }) => {
            with_config(|config| call::jsonl(config.clone()))
        }
        Some(Command::Call { name, args, .. }) => with_config(|config| {
            call::one(
                config.clone(),
                name.as_deref().unwrap_or_default(),
                args,
                None,
            )
        }),
        #[cfg(feature = "memory")]
        Some(Command::Memory { command }) => {
            with_config(|config| memory::run(config.clone(), command))
        }
        #[cfg(feature = "docs")]
        Some(Command::Docs {
            command: DocsCommand::Index { force },
        }) => with_config(|config| docs::index(config.clone(), force)),
        None => {
            let code = doctor();
            if code != ExitCode::SUCCESS {
                return code;
            }
            out("");
            run(["klaw-engine", "tools"])
        }
    }
}

fn doctor() -> ExitCode {
    let checks = crate::doctor();
    let mut out = std::io::stdout().lock();
    let mut failed = false;
    for c in &checks {
        failed |= c.status == crate::Status::Fail;
        let _ = writeln!(out, "{c}");
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn with_config(f: impl FnOnce(&Config) -> ExitCode) -> ExitCode {
    match Config::load() {
        Ok(c) => f(&c),
        Err(e) => fail(&format!("configuration: {e}")),
    }
}

pub(crate) fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "error: {message}");
    ExitCode::FAILURE
}

/// Prints a line; a closed pipe (`klaw-engine config | head`) is not a crash.
fn out(text: &str) {
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// The log on stderr and, when configured, telemetry ([`crate::telemetry::init`]).
pub(crate) fn init_logging(config: &Config) {
    crate::telemetry::init(config);
}

/// `config` for a front end that prints its one call's error itself (`call`, the tool
/// calls of `schedule`, `memory search`): at a log level of `warn` or quieter, the log's
/// warning for the failed call (target `klaw::tools`, `tool failed: ...`) would print the
/// same error a second time, so that target logs only errors. A level that asks for more
/// (`info`, `debug`, a directive naming `klaw::tools`) keeps it.
pub(crate) fn quiet_failed_calls(mut config: Config) -> Config {
    use tracing_subscriber::filter::{EnvFilter, LevelFilter};
    let level = &config.raw.log_level;
    let at_most_warn = EnvFilter::try_new(level)
        .ok()
        .and_then(|f| f.max_level_hint())
        .is_some_and(|hint| hint <= LevelFilter::WARN);
    if at_most_warn && !level.contains("klaw::tools") {
        config.raw.log_level = format!("{level},klaw::tools=error");
    }
    config
}

/// Runs a front end on an assembled app ([`crate::app::run_front`]); what kept it from
/// running is printed and exits 1.
pub(crate) fn run_front<F, Fut>(config: Config, model: Option<Model>, f: F) -> ExitCode
where
    F: FnOnce(std::sync::Arc<crate::App>) -> Fut,
    Fut: std::future::Future<Output = ExitCode>,
{
    crate::app::run_front(config, model, f).unwrap_or_else(|e| fail(&e.to_string()))
}

/// [`run_front`] on a worker thread per core ([`crate::app::run_front_serving`]:
/// `mcp --http`, `run`).
pub(crate) fn run_front_serving<F, Fut>(config: Config, model: Option<Model>, f: F) -> ExitCode
where
    F: FnOnce(std::sync::Arc<crate::App>) -> Fut,
    Fut: std::future::Future<Output = ExitCode>,
{
    crate::app::run_front_serving(config, model, f).unwrap_or_else(|e| fail(&e.to_string()))
}

/// [`run_front`] with the front end on a runtime worker
/// ([`crate::app::run_front_on_worker`]: `chat`, `schedule run-now`).
pub(crate) fn run_front_on_worker<F, Fut>(config: Config, model: Option<Model>, f: F) -> ExitCode
where
    F: FnOnce(std::sync::Arc<crate::App>) -> Fut,
    Fut: std::future::Future<Output = ExitCode> + Send + 'static,
{
    crate::app::run_front_on_worker(config, model, f).unwrap_or_else(|e| fail(&e.to_string()))
}
