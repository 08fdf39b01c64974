//! `klaw-engine tools`: the tool list (a table, a client's definitions, or the tools that
//! are not working), `tools reload` (the manifest tools loaded now, as a starting engine
//! does) and `tools lock` (the schema lock). Each reads the registry of an assembled app
//! ([`crate::App::for_listing`]).

use std::io::Write;
use std::process::ExitCode;

use klaw_tools::Lang;

use super::{ToolsAction, ToolsFormat, fail, init_logging, out, pretty};
use crate::{Config, Engine};

/// Runs `tools` with its action (none: the list, in `format` and `lang`, or only the
/// `failed` tools).
pub(super) fn run(
    config: &Config,
    action: Option<ToolsAction>,
    format: Option<ToolsFormat>,
    lang: Option<Lang>,
    failed: bool,
) -> ExitCode {
    init_logging(config);
    // The tools of an assembled engine: the engine's own (send_message,
    // subagent_spawn) too.
    let app = match crate::App::for_listing(config.clone()) {
        Ok(app) => app,
        Err(e) => return fail(&e.to_string()),
    };
    match action {
        Some(ToolsAction::Reload) => print_reload(&app),
        Some(ToolsAction::Lock {
            check,
            update,
            file,
        }) => tools_lock(&app.engine().registry(), &file, check, update),
        None => list(
            app.engine(),
            format,
            lang.unwrap_or(config.raw.language),
            failed,
        ),
    }
}

/// The list: a table, a client's definitions, the tools as `GET /api/v1/tools` gives
/// them, or (`failed`) the tools that are not working.
fn list(engine: &Engine, format: Option<ToolsFormat>, lang: Lang, failed: bool) -> ExitCode {
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
}

/// The table: each tool's name, flags and the first sentence of its description.
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
