//! The command line: `tools`, `call`, `doctor`, `config`, `memory`, `docs index`,
//! `schedule`.

mod call;
mod chat;
#[cfg(feature = "memory")]
mod memory;
mod run;
mod schedule;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use klaw_tools::{Format, Lang};

use crate::llm::Model;
use crate::{Config, Engine};

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
            action: Some(ToolsAction::Reload),
            ..
        }) => with_config(|config| {
            init_logging(config);
            match crate::App::for_listing(config.clone()) {
                Ok(app) => print_reload(&app),
                Err(e) => fail(&e.to_string()),
            }
        }),
        Some(Command::Tools {
            action:
                Some(ToolsAction::Lock {
                    check,
                    update,
                    file,
                }),
            ..
        }) => with_config(|config| {
            init_logging(config);
            match crate::App::for_listing(config.clone()) {
                Ok(app) => tools_lock(&app.engine().registry(), &file, check, update),
                Err(e) => fail(&e.to_string()),
            }
        }),
        Some(Command::Tools {
            action: None,
            format,
            lang,
            failed,
        }) => with_config(|config| {
            init_logging(config);
            // The tools of an assembled engine: the engine's own (send_message,
            // subagent_spawn) too.
            let app = match crate::App::for_listing(config.clone()) {
                Ok(app) => app,
                Err(e) => return fail(&e.to_string()),
            };
            let engine = app.engine();
            let lang = lang.unwrap_or(config.raw.language);
            match (format, failed) {
                (Some(ToolsFormat::Json), true) => {
                    out(&pretty(&serde_json::json!(engine.failed())));
                }
                (Some(ToolsFormat::Client(_)), true) => {
                    return fail(
                        "--failed lists tools, not definitions: use it alone or with --format json",
                    );
                }
                (None, true) => print_failed(&engine.failed()),
                (Some(ToolsFormat::Client(format)), false) => {
                    out(&pretty(&engine.registry().definitions(format, lang).into()));
                }
                (Some(ToolsFormat::Json), false) => {
                    out(&pretty(&crate::mcp::http::tools_json(engine, lang)));
                }
                (None, false) => print_table(engine, lang),
            }
            ExitCode::SUCCESS
        }),
        Some(Command::Mcp { http: None }) => with_config(|config| call::mcp_stdio(config.clone())),
        Some(Command::Mcp { http: Some(addr) }) => {
            with_config(|config| call::mcp_http(config.clone(), &addr))
        }
        Some(Command::Call { jsonl: true, .. }) => {
            with_config(|config| call::jsonl(config.clone()))
        }
        Some(Command::Call { name, args, .. }) => with_config(|config| {
            call::one(config.clone(), name.as_deref().unwrap_or_default(), args)
        }),
        #[cfg(feature = "memory")]
        Some(Command::Memory { command }) => {
            with_config(|config| memory::run(config.clone(), command))
        }
        #[cfg(feature = "docs")]
        Some(Command::Docs {
            command: DocsCommand::Index { force },
        }) => with_config(|config| docs_index(config.clone(), force)),
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

#[cfg(feature = "docs")]
fn docs_index(config: Config, force: bool) -> ExitCode {
    init_logging(&config);
    let engine = match Engine::new(config) {
        Ok(e) => e,
        Err(e) => return fail(&e.to_string()),
    };
    let bar = call::Bar::new();
    let ctx = match bar.sink() {
        Some(sink) => engine.context().clone().with_listener(sink),
        None => engine.context().clone(),
    };
    let result = klaw_tools::tools::docs::sync_context(&ctx, force);
    bar.finish();
    match result {
        Ok(r) => {
            out(&format!(
                "docs index: {} indexed, {} unchanged, {} removed; {} in {:.1} s ({})",
                crate::doctor::plural(r.indexed, "file"),
                r.unchanged,
                r.removed,
                crate::doctor::plural(r.chunks, "chunk"),
                r.elapsed.as_secs_f64(),
                engine
                    .config()
                    .data_dir
                    .join(klaw_tools::tools::docs::DOCS_DB)
                    .display()
            ));
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("docs index: {e}")),
    }
}

fn print_table(engine: &Engine, lang: Lang) {
    let registry = engine.registry();
    let width = registry.names().map(str::len).max().unwrap_or(4).max(4);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{:width$}  {:5}  DESCRIPTION", "NAME", "FLAGS");
    for tool in registry.all() {
        let spec = tool.spec();
        let flags = spec.annotations.flags();
        let desc = spec.description.get(lang);
        // The first sentence: up to ". " or a line break (a dot inside `files.md` is not
        // the end of a sentence).
        let first = desc
            .split('\n')
            .next()
            .and_then(|line| line.split(". ").next())
            .unwrap_or(desc)
            .trim_end_matches('.');
        let short: String = if first.chars().count() > 90 {
            first.chars().take(89).chain(['…']).collect()
        } else {
            first.to_owned()
        };
        let _ = writeln!(out, "{:width$}  {flags:5}  {short}", spec.name);
    }
    let _ = writeln!(
        out,
        "\n{}; flags: r read-only, d destructive, i idempotent, o open-world",
        crate::doctor::plural(registry.len(), "tool")
    );
    let failed = engine.failed();
    if !failed.is_empty() {
        let _ = writeln!(
            out,
            "{} not working: `klaw-engine tools --failed` says why",
            crate::doctor::plural(failed.len(), "tool")
        );
    }
}

/// `tools lock`: compare the tools with the lock at `file`, print each change, then
/// write it (plain), write it unless a change is breaking (`update`), or only say
/// (`check`).
fn tools_lock(
    registry: &klaw_tools::ToolRegistry,
    file: &std::path::Path,
    check: bool,
    update: bool,
) -> ExitCode {
    use klaw_tools::lock::{SchemaLock, has_breaking};
    let now = SchemaLock::of(registry);
    let locked = match SchemaLock::read(file) {
        Ok(locked) => locked,
        Err(e) => return fail(&format!("{}: {e}", file.display())),
    };
    let mut out = std::io::stdout().lock();
    let changes = match &locked {
        Some(locked) => locked.compare(&now),
        None if check => {
            return fail(&format!(
                "{} does not exist: write it with `klaw-engine tools lock`",
                file.display()
            ));
        }
        None => Vec::new(),
    };
    for c in &changes {
        let _ = writeln!(out, "{}", crate::terminal::terminal_safe(&c.to_string()));
    }
    let breaking = has_breaking(&changes);
    let n = changes.iter().filter(|c| c.breaking).count();
    let summary = format!(
        "{}: {}, {n} breaking",
        file.display(),
        crate::doctor::plural(changes.len(), "change")
    );
    if check || (update && breaking) {
        let _ = writeln!(out, "{summary}");
        if breaking {
            let _ = writeln!(
                out,
                "a breaking change breaks prompts, MCP clients and saved conversations that use \
                 the tool; if it is meant, accept it with `klaw-engine tools lock`"
            );
            return ExitCode::FAILURE;
        }
        if !changes.is_empty() {
            let _ = writeln!(out, "accept them with `klaw-engine tools lock --update`");
        }
        return ExitCode::SUCCESS;
    }
    if let Err(e) = now.write(file) {
        return fail(&format!("cannot write {}: {e}", file.display()));
    }
    let _ = writeln!(
        out,
        "{summary}; written ({})",
        crate::doctor::plural(now.tools.len(), "tool")
    );
    ExitCode::SUCCESS
}

/// What `tools reload` found: each manifest tool loaded, then each failure.
fn print_reload(app: &crate::App) -> ExitCode {
    let report = app.manifests().sync(app.engine());
    let mut out = std::io::stdout().lock();
    for name in &report.loaded {
        let _ = writeln!(out, "loaded  {name}");
    }
    for f in &report.failed {
        let _ = writeln!(
            out,
            "FAILED  {}: {}\n        {}",
            f.name,
            crate::terminal::terminal_safe(&f.problem),
            crate::terminal::terminal_safe(&f.origin)
        );
    }
    let _ = writeln!(
        out,
        "{} loaded, {} failed",
        crate::doctor::plural(report.loaded.len(), "manifest tool"),
        report.failed.len()
    );
    if report.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The failed tools: name, origin and why (what could not be loaded, or the last error
/// of the failed calls in a row).
fn print_failed(failed: &[crate::FailedTool]) {
    let mut out = std::io::stdout().lock();
    if failed.is_empty() {
        let _ = writeln!(out, "no failed tools");
        return;
    }
    let width = failed
        .iter()
        .map(|f| f.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    for f in failed {
        let what = if f.is_failing_calls() {
            format!(
                "{} calls in a row failed, the last: {}",
                f.failures, f.problem
            )
        } else {
            format!("not loaded: {}", f.problem)
        };
        let _ = writeln!(
            out,
            "{:width$}  {}\n{:width$}  {}",
            f.name,
            crate::terminal::terminal_safe(&what),
            "",
            crate::terminal::terminal_safe(&format!("from {}", f.origin))
        );
    }
}

/// [`run_front`] with `f` run as a task on one of the runtime's workers, for the front
/// ends that run agent turns themselves (`chat`, `schedule run-now`). Awaited on
/// `block_on`'s thread, a turn hands each step over between threads (the HTTP client's
/// connection task and the I/O driver are on the workers), and every hand-over to a
/// sleeping core waits for it to wake up; on a worker the steps follow each other on one
/// thread (issue 32: about 8 voluntary context switches per round of the loop from
/// `block_on`, 2 to 3 on a worker). `run` needs no such thing: each chat's conversation
/// is a task already.
pub(crate) fn run_front_on_worker<F, Fut>(config: Config, model: Option<Model>, f: F) -> ExitCode
where
    F: FnOnce(std::sync::Arc<crate::App>) -> Fut,
    Fut: std::future::Future<Output = ExitCode> + Send + 'static,
{
    run_front(config, model, |app| async move {
        match tokio::spawn(f(app)).await {
            Ok(code) => code,
            // A panic of the front end goes on as it did on this thread.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => fail(&format!("the front end stopped: {e}")),
        }
    })
}

/// Runs a front end: a runtime, the app assembled with `model`, then `f`; the app is
/// shut down whatever `f` returned. A failure to assemble is printed and exits 1.
pub(crate) fn run_front<F, Fut>(config: Config, model: Option<Model>, f: F) -> ExitCode
where
    F: FnOnce(std::sync::Arc<crate::App>) -> Fut,
    Fut: std::future::Future<Output = ExitCode>,
{
    init_logging(&config);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}")),
    };
    let code = runtime.block_on(async {
        let app = match crate::App::assemble(config, model) {
            Ok(app) => std::sync::Arc::new(app),
            Err(e) => return fail(&e.to_string()),
        };
        app.start_imports().await;
        app.watch_manifests();
        let code = f(std::sync::Arc::clone(&app)).await;
        app.shutdown().await;
        code
    });
    // A read of stdin on a blocking thread cannot be cancelled: do not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}
