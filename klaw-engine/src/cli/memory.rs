//! `klaw-engine memory import` and `klaw-engine memory search`: the arguments and the
//! printing; the importing itself is `klaw_memory::import`.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Subcommand;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use klaw_tools::ToolError;
use klaw_tools::tools::memory::import::{
    Import, ImportError, ImportProgress, ImportReport, Notice,
};
use klaw_tools::tools::memory::{Memory, SearchMode};
use serde_json::{Value, json};

use super::{fail, init_logging, out, pretty};
use crate::{Config, Engine};

/// A `memory` subcommand.
#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Import text into memory: .md, .markdown and .txt files (one document each);
    /// .jsonl files with one {"content", "source"?, "created_at"?} document or one
    /// conversation turn {"speaker", "text", "created_at"?, "session"?, "id"?} per line;
    /// chat exports (ChatGPT's conversations.json, Telegram Desktop's result.json);
    /// directories, walked recursively for all of these. Each conversation turn is
    /// embedded with its date and the turn before it.
    Import {
        /// Files and directories to import.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Search memory and print the ranked results.
    Search {
        /// What to look for.
        query: String,
        /// How many results, 1 to 50.
        #[arg(long, default_value_t = 10)]
        top_k: u32,
        /// hybrid (meaning and words), text (words only) or vector (meaning only).
        #[arg(long, value_parser = parse_mode, default_value = "hybrid")]
        mode: SearchMode,
        /// Only memories of this date or later (YYYY-MM-DD, or an RFC 3339 time).
        #[arg(long)]
        from: Option<String>,
        /// Only memories of this date or earlier (YYYY-MM-DD, or an RFC 3339 time).
        #[arg(long)]
        to: Option<String>,
        /// Print the tool's JSON answer instead of a list.
        #[arg(long)]
        json: bool,
    },
}

fn parse_mode(s: &str) -> Result<SearchMode, String> {
    serde_json::from_value(Value::String(s.to_owned()))
        .map_err(|_| format!("unknown mode `{s}`: expected hybrid, text or vector"))
}

/// Runs a `memory` subcommand.
pub(super) fn run(config: Config, command: MemoryCommand) -> ExitCode {
    // A search prints its error itself: once.
    let config = match command {
        MemoryCommand::Search { .. } => super::quiet_failed_calls(config),
        MemoryCommand::Import { .. } => config,
    };
    init_logging(&config);
    let engine = match Engine::new(config) {
        Ok(e) => e,
        Err(e) => return fail(&e.to_string()),
    };
    match command {
        MemoryCommand::Import { paths } => import(&engine, &paths),
        MemoryCommand::Search {
            query,
            top_k,
            mode,
            from,
            to,
            json,
        } => {
            let mut args = json!({"query": query, "topK": top_k, "mode": mode});
            for (key, value) in [("from", from), ("to", to)] {
                if let Some(v) = value {
                    args[key] = Value::String(v);
                }
            }
            search(&engine, args, json)
        }
    }
}

/// Calls `memory_search` with `args` and prints its answer.
fn search(engine: &Engine, args: Value, as_json: bool) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}")),
    };
    let answer = match runtime.block_on(engine.call("memory_search", args)) {
        Ok(a) => a,
        Err(e) if e.is_invalid_arguments() => {
            let message = super::flags::message(&e, &["memory", "search"]);
            let _ = writeln!(std::io::stderr(), "error: {message}");
            return ExitCode::from(2);
        }
        Err(e) => return fail(e.message()),
    };
    let Some(found) = answer.structured() else {
        return fail("memory_search gave no structured answer");
    };
    if as_json {
        out(&pretty(found));
        return ExitCode::SUCCESS;
    }
    let results = found["results"].as_array().map_or(&[][..], Vec::as_slice);
    if results.is_empty() {
        out("nothing found");
        return ExitCode::SUCCESS;
    }
    let mut lines = Vec::new();
    for (i, r) in results.iter().enumerate() {
        let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
        lines.push(format!(
            "{:>2}. {:.4}  {:6}  {}  {}\n    {}",
            i + 1,
            r["score"].as_f64().unwrap_or_default(),
            s("foundBy"),
            s("date"),
            s("source"),
            shorten(&s("content"), 200)
        ));
    }
    // Saved text is the model's or an imported file's: terminal-safe.
    out(&crate::terminal::terminal_safe(&lines.join("\n")));
    ExitCode::SUCCESS
}

/// The text on one line, cut to `max` characters.
fn shorten(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        flat.chars().take(max - 1).chain(['…']).collect()
    }
}

/// The progress display: an `indicatif` bar on a terminal (bytes saved of the total, with
/// their rate and the time left, then files and chunks), plain lines otherwise.
struct Progress {
    bar: Option<ProgressBar>,
    total_files: usize,
    started: Instant,
}

impl Progress {
    /// A bar when stderr is a terminal, else plain lines.
    fn new(total_files: usize, total_bytes: u64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let style = ProgressStyle::with_template(
                "[{bar:20}] {binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec}, ETA {eta}) {wide_msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("#>-");
            let bar = ProgressBar::with_draw_target(Some(total_bytes), ProgressDrawTarget::stderr())
                .with_style(style);
            // Redrawn while a batch is being embedded, so the time keeps moving.
            bar.enable_steady_tick(Duration::from_millis(500));
            bar
        });
        Self {
            bar,
            total_files,
            started: Instant::now(),
        }
    }

    /// A message on its own line, not mixed into the bar.
    fn say(&self, message: &str) {
        let print = || {
            let _ = writeln!(std::io::stderr().lock(), "{message}");
        };
        match &self.bar {
            Some(bar) => bar.suspend(print),
            None => print(),
        }
    }

    /// Stops redrawing; the bar stays on screen as it last was, on a line of its own.
    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.abandon();
            let _ = writeln!(std::io::stderr());
        }
    }
}

impl ImportProgress for Progress {
    fn saved(&mut self, t: &ImportReport) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(t.bytes);
                bar.set_message(format!(
                    "{}/{} files, {} chunks",
                    t.files, self.total_files, t.saved.chunks
                ));
            }
            None => {
                let secs = self.started.elapsed().as_secs_f64().max(1e-3);
                let rate = t.saved.chunks as f64 / secs;
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "progress: {}/{} files, {} documents, {} chunks, {rate:.1} chunks/s",
                    t.files,
                    self.total_files,
                    t.documents,
                    t.saved.chunks
                );
            }
        }
    }

    fn notice(&mut self, notice: &Notice) {
        self.say(&notice.to_string());
    }
}

/// Imports `paths` into the engine's memory (`klaw_memory::import`), showing progress
/// and then one line of counts.
fn import(engine: &Engine, paths: &[PathBuf]) -> ExitCode {
    let import = match Import::new(paths) {
        Ok(i) => i,
        Err(e) => return fail(&e.to_string()),
    };
    let ctx = engine.context();
    let index = match ctx.shared_state::<Memory>().memory(ctx) {
        Ok(i) => i,
        Err(e) => return fail(ToolError::from(e).message()),
    };
    let mut progress = Progress::new(import.files(), import.bytes());
    let done = import.run(&index, &mut progress);
    progress.finish();
    let t = match done {
        Ok(t) => t,
        Err(ImportError::Save(e)) => return fail(ToolError::from(e).message()),
        Err(e) => return fail(&e.to_string()),
    };
    let secs = progress.started.elapsed().as_secs_f64();
    out(&format!(
        "imported {} files: {} documents, {} chunks ({} inserted, {} duplicates), {} skipped lines, {} unreadable files; {secs:.1} s, {:.1} chunks/s",
        t.files,
        t.documents,
        t.saved.chunks,
        t.saved.inserted,
        t.saved.duplicates,
        t.skipped_lines,
        t.unreadable,
        t.saved.chunks as f64 / secs.max(1e-3),
    ));
    if t.unreadable > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
