//! `klaw-engine memory import` and `klaw-engine memory search`.

use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Subcommand;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use klaw_tools::ToolError;
use klaw_tools::tools::memory::conversation::{self, Turn};
use klaw_tools::tools::memory::{Document, Index, Memory, SaveReport, SearchMode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{fail, init_logging, out, pretty};
use crate::{Config, Engine};

/// Documents saved per transaction while importing.
const BATCH_DOCUMENTS: usize = 64;
/// Bytes of text saved per transaction while importing, at most (about).
const BATCH_BYTES: usize = 256 * 1024;
/// Larger files are not imported (split them first).
const MAX_IMPORT_FILE: u64 = 64 * 1024 * 1024;

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
            let _ = writeln!(std::io::stderr(), "error: {}", e.message());
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

/// One line of a `.jsonl` import file.
#[derive(Debug, Deserialize)]
struct Line {
    content: String,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    created_at: Option<Value>,
}

/// What the import did so far.
#[derive(Debug, Default)]
struct Tally {
    files: usize,
    documents: usize,
    saved: SaveReport,
    skipped_lines: usize,
    errors: usize,
    bytes_done: u64,
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

    fn show(&self, t: &Tally) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(t.bytes_done);
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

/// What a path to import is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Jsonl,
    /// A chat export (ChatGPT or Telegram), named on the command line.
    Export,
    /// A file a walk found with an export's name: left out with a note if it is not one.
    FoundExport,
}

/// The exports' own file names: a walk imports these `.json` files and no others.
const EXPORT_NAMES: [&str; 2] = ["conversations.json", "result.json"];

fn kind(path: &Path) -> Option<Kind> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "md" | "markdown" | "txt" => Some(Kind::Text),
        "jsonl" => Some(Kind::Jsonl),
        "json" => Some(Kind::Export),
        _ => None,
    }
}

/// The files under `dir` worth importing, sorted; symbolic links are not followed.
fn walk(dir: &Path, out: &mut Vec<(PathBuf, Kind, u64)>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let path = e.path();
        let ty = e.file_type()?;
        if ty.is_dir() {
            walk(&path, out)?;
        } else if ty.is_file()
            && let Some(k) = kind(&path)
            && (k != Kind::Export || EXPORT_NAMES.iter().any(|n| e.file_name() == *n))
        {
            let k = if k == Kind::Export {
                Kind::FoundExport
            } else {
                k
            };
            out.push((path, k, e.metadata()?.len()));
        }
    }
    Ok(())
}

/// The files the arguments name; errors are messages.
fn inputs(paths: &[PathBuf]) -> Result<Vec<(PathBuf, Kind, u64)>, String> {
    let mut files = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
        if meta.is_dir() {
            walk(p, &mut files).map_err(|e| format!("{}: {e}", p.display()))?;
        } else {
            let k = kind(p).ok_or_else(|| {
                format!(
                    "{}: not a .md, .markdown, .txt, .jsonl or .json (chat export) file",
                    p.display()
                )
            })?;
            files.push((p.clone(), k, meta.len()));
        }
    }
    Ok(files)
}

/// Saves documents in batches, counting and showing progress.
struct Importer<'a> {
    index: Arc<Index>,
    pending: Vec<Document>,
    pending_bytes: usize,
    tally: Tally,
    progress: &'a Progress,
}

impl Importer<'_> {
    fn add(&mut self, doc: Document) -> Result<(), ToolError> {
        self.pending_bytes += doc.content.len();
        self.pending.push(doc);
        self.tally.documents += 1;
        if self.pending.len() >= BATCH_DOCUMENTS || self.pending_bytes >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ToolError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let r = self.index.save_all(&self.pending)?;
        self.tally.saved.chunks += r.chunks;
        self.tally.saved.inserted += r.inserted;
        self.tally.saved.duplicates += r.duplicates;
        self.pending.clear();
        self.pending_bytes = 0;
        self.progress.show(&self.tally);
        Ok(())
    }

    fn text_file(&mut self, path: &Path) -> Result<(), ToolError> {
        let text = match std::fs::read(path).map(String::from_utf8) {
            Ok(Ok(t)) => t,
            Ok(Err(_)) => {
                self.skip(path, "not UTF-8 text");
                return Ok(());
            }
            Err(e) => {
                self.skip(path, &e.to_string());
                return Ok(());
            }
        };
        let created_at = std::fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| jiff::Timestamp::try_from(t).ok())
            .map(|t| t.as_second());
        self.add(Document {
            content: text,
            source: path.display().to_string(),
            created_at,
            context: None,
        })
    }

    fn jsonl_file(&mut self, path: &Path) -> Result<(), ToolError> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) => {
                self.skip(path, &e.to_string());
                return Ok(());
            }
        };
        // Conversation turns are kept until the file is read: each is saved with the one
        // before it as context.
        let mut turns = Vec::new();
        for (i, line) in BufReader::new(file).lines().enumerate() {
            let n = i + 1;
            let line = match line {
                Ok(l) => l,
                Err(e) => {
                    self.bad_line(path, n, &e.to_string());
                    continue;
                }
            };
            // Within a large file too, the bar moves as lines are read (`\n` included).
            self.tally.bytes_done += line.len() as u64 + 1;
            if line.trim().is_empty() {
                continue;
            }
            let value: Value = match serde_json::from_str(&line) {
                Ok(v) => v,
                Err(e) => {
                    self.bad_line(path, n, &e.to_string());
                    continue;
                }
            };
            if Turn::is_turn(&value) {
                match Turn::from_line(&value, n) {
                    Ok(t) => turns.push(t),
                    Err(why) => self.bad_line(path, n, &why),
                }
                continue;
            }
            let parsed: Line = match serde_json::from_value(value) {
                Ok(l) => l,
                Err(e) => {
                    self.bad_line(path, n, &e.to_string());
                    continue;
                }
            };
            let created_at = match conversation::created_at(parsed.created_at.as_ref()) {
                Ok(t) => t,
                Err(why) => {
                    self.bad_line(path, n, &why);
                    continue;
                }
            };
            if parsed.content.trim().is_empty() {
                self.bad_line(path, n, "content is empty");
                continue;
            }
            let source = parsed
                .source
                .filter(|s| !s.trim().is_empty())
                .unwrap_or_else(|| path.display().to_string());
            self.add(Document {
                content: parsed.content,
                source,
                created_at,
                context: None,
            })?;
        }
        self.turns(path, &turns)
    }

    /// A ChatGPT or Telegram export: its turns, each with the one before it. A file a
    /// walk found (`named` false) that is not an export is left out with a note only.
    fn export_file(&mut self, path: &Path, named: bool) -> Result<(), ToolError> {
        let parsed = std::fs::read(path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Value>(&b).map_err(|e| e.to_string()));
        let json = match parsed {
            Ok(j) => j,
            Err(why) if named => {
                self.skip(path, &why);
                return Ok(());
            }
            Err(why) => {
                self.note(path, &format!("not read as a chat export ({why})"));
                return Ok(());
            }
        };
        let shape = conversation::export_shape(&json);
        let turns = shape.map(|s| conversation::parse_export(&json, s));
        match turns {
            Some(Ok(turns)) if turns.is_empty() => {
                self.note(path, "a chat export with no text messages");
                Ok(())
            }
            Some(Ok(turns)) => self.turns(path, &turns),
            Some(Err(why)) => {
                self.skip(path, &why);
                Ok(())
            }
            None if named => {
                self.skip(
                    path,
                    "not a chat export (ChatGPT's conversations.json or Telegram's result.json)",
                );
                Ok(())
            }
            None => {
                self.note(path, "not a chat export");
                Ok(())
            }
        }
    }

    /// Tells about a file left out that is no failure (a walk's stray `result.json`).
    fn note(&mut self, path: &Path, why: &str) {
        self.progress
            .say(&format!("note: {}: {why}; left out", path.display()));
    }

    /// Saves a file's conversation turns (sources `<path>#<turn id>`).
    fn turns(&mut self, path: &Path, turns: &[Turn]) -> Result<(), ToolError> {
        for doc in conversation::documents(turns, &path.display().to_string()) {
            self.add(doc)?;
        }
        Ok(())
    }

    fn bad_line(&mut self, path: &Path, line: usize, why: &str) {
        self.tally.skipped_lines += 1;
        self.progress
            .say(&format!("skipped {}:{line}: {why}", path.display()));
    }

    /// Reports a file that cannot be read; the import goes on without it.
    fn skip(&mut self, path: &Path, why: &str) {
        self.tally.errors += 1;
        self.progress
            .say(&format!("error: {}: {why}; skipped", path.display()));
    }
}

fn import(engine: &Engine, paths: &[PathBuf]) -> ExitCode {
    let files = match inputs(paths) {
        Ok(f) => f,
        Err(e) => return fail(&e),
    };
    let ctx = engine.context();
    let index = match ctx.shared_state::<Memory>().memory(ctx) {
        Ok(i) => i,
        Err(e) => return fail(ToolError::from(e).message()),
    };
    let progress = Progress::new(files.len(), files.iter().map(|f| f.2).sum());
    let mut imp = Importer {
        index,
        pending: Vec::new(),
        pending_bytes: 0,
        tally: Tally::default(),
        progress: &progress,
    };
    // A file that cannot be read is reported and left out; a failure to save (the
    // database, the model) ends the import.
    for (path, kind, size) in &files {
        let bytes_before = imp.tally.bytes_done;
        let saved = if *size > MAX_IMPORT_FILE {
            imp.skip(path, &format!("larger than {MAX_IMPORT_FILE} bytes"));
            Ok(())
        } else {
            match kind {
                Kind::Text => imp.text_file(path),
                Kind::Jsonl => imp.jsonl_file(path),
                Kind::Export => imp.export_file(path, true),
                Kind::FoundExport => imp.export_file(path, false),
            }
        };
        if let Err(e) = saved {
            progress.finish();
            return fail(e.message());
        }
        imp.tally.files += 1;
        imp.tally.bytes_done = bytes_before + size;
    }
    if let Err(e) = imp.flush() {
        progress.finish();
        return fail(e.message());
    }
    progress.finish();
    let t = &imp.tally;
    let secs = progress.started.elapsed().as_secs_f64();
    out(&format!(
        "imported {} files: {} documents, {} chunks ({} inserted, {} duplicates), {} skipped lines, {} unreadable files; {secs:.1} s, {:.1} chunks/s",
        t.files,
        t.documents,
        t.saved.chunks,
        t.saved.inserted,
        t.saved.duplicates,
        t.skipped_lines,
        t.errors,
        t.saved.chunks as f64 / secs.max(1e-3),
    ));
    if t.errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
