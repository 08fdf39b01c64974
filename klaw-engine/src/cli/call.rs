//! `klaw-engine call`: one call with a progress bar, or many (`--jsonl`) in one process.

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use klaw_tools::{CallListener, ProgressUpdate, ToolError, ToolOutput};
use serde_json::{Value, json};

use super::flags::Subcommand;
use crate::terminal::terminal_safe;
use crate::{Config, Engine, ToolCall};

/// Runs one call and prints its result (stdout) or error (stderr, exit 1), once (the
/// log's warning for it is left out: [`super::quiet_failed_calls`]). `flags`: the
/// subcommand whose flags gave the arguments, which an argument error names instead of
/// its JSON pointer (`None`: `call`, whose arguments the user wrote as JSON).
pub(crate) fn one(config: Config, name: &str, args: String, flags: Option<Subcommand>) -> ExitCode {
    let args = if args == "-" {
        let mut buf = String::new();
        if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut buf) {
            return super::fail(&format!("cannot read the arguments from stdin: {e}"));
        }
        buf
    } else {
        args
    };
    super::run_front(super::quiet_failed_calls(config), None, |app| async move {
        let engine = app.engine();
        let bar = Bar::new();
        let sink: Option<Arc<dyn CallListener>> = bar.sink();
        let result = engine.execute(ToolCall::new(name, args), sink).await;
        bar.finish();
        match result {
            // The tool's text, made terminal-safe: a result may hold what a file or a
            // command wrote, escape sequences included.
            Ok(out) => {
                let text = terminal_safe(out.text());
                let mut stdout = std::io::stdout().lock();
                let _ = stdout.write_all(text.as_bytes());
                if !text.ends_with('\n') {
                    let _ = stdout.write_all(b"\n");
                }
                // What the terminal cannot show is described, one line each.
                for a in out.attachments() {
                    let _ = writeln!(stdout, "{}", terminal_safe(&a.summary()));
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                let text = match flags {
                    Some(subcommand) => format!(
                        "Error [{}]: {}",
                        e.kind().code(),
                        super::flags::message(&e, subcommand)
                    ),
                    None => e.to_model_text(),
                };
                let _ = writeln!(std::io::stderr(), "{}", terminal_safe(&text));
                ExitCode::FAILURE
            }
        }
    })
}

/// Runs one call per line of stdin (`{"id", "name", "arguments"}`) and prints one result
/// per line (`{"id", "ok", "result"}` or `{"id", "ok": false, "error": {"kind",
/// "message"}}`), in order, in this one process. A bad line is an error line for its id
/// (or its line number); the rest go on. Exit 0 unless stdin cannot be read.
pub(crate) fn jsonl(config: Config) -> ExitCode {
    super::run_front(config, None, |app| async move {
        let engine = app.engine();
        let mut stdin = std::io::stdin().lock();
        let mut stdout = std::io::stdout().lock();
        let mut line = Vec::new();
        for n in 1.. {
            line.clear();
            match stdin.read_until(b'\n', &mut line) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => return super::fail(&format!("cannot read stdin: {e}")),
            }
            if line.trim_ascii().is_empty() {
                continue;
            }
            let answer = match std::str::from_utf8(&line) {
                Ok(text) => run_line(engine, n, text).await,
                Err(e) => error_line(
                    json!(n),
                    &ToolError::invalid_arguments("", format!("line {n} is not UTF-8: {e}")),
                ),
            };
            // A closed stdout (`| head`) ends the batch quietly.
            if writeln!(stdout, "{answer}")
                .and_then(|()| stdout.flush())
                .is_err()
            {
                break;
            }
        }
        ExitCode::SUCCESS
    })
}

/// The answer line for one request line.
async fn run_line(engine: &Engine, number: usize, line: &str) -> Value {
    let request: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            return error_line(
                json!(number),
                &ToolError::invalid_arguments("", format!("line {number} is not JSON: {e}")),
            );
        }
    };
    let id = request
        .get("id")
        .filter(|v| v.is_string() || v.is_number())
        .cloned()
        .unwrap_or(json!(number));
    let Some(name) = request.get("name").and_then(Value::as_str) else {
        return error_line(
            id,
            &ToolError::invalid_arguments(
                "",
                format!(
                    "line {number} has no \"name\": expected {{\"id\", \"name\", \"arguments\"}}"
                ),
            ),
        );
    };
    let args = request.get("arguments").cloned().unwrap_or(json!({}));
    let call_id = match &id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    // Two lines with the same id must not collide while running: lines run one at a
    // time, so the id is free again when the next line starts.
    match engine
        .execute(ToolCall::new(name, args).with_id(call_id), None)
        .await
    {
        Ok(out) => {
            let mut line = json!({"id": id, "ok": true, "result": result_value(&out)});
            if !out.attachments().is_empty() {
                let described: Vec<String> =
                    out.attachments().iter().map(|a| a.summary()).collect();
                line["attachments"] = json!(described);
            }
            line
        }
        Err(e) => error_line(id, &e),
    }
}

/// A result as JSON: its structured form when it has one, else its text.
fn result_value(out: &ToolOutput) -> Value {
    out.structured()
        .cloned()
        .unwrap_or_else(|| Value::String(out.text().to_owned()))
}

fn error_line(id: Value, e: &ToolError) -> Value {
    json!({"id": id, "ok": false, "error": {"kind": e.kind().code(), "message": e.message()}})
}

/// The progress bar of one call: drawn on stderr when it is a terminal, nothing
/// otherwise.
pub(super) struct Bar(Option<ProgressBar>);

impl Bar {
    pub(super) fn new() -> Self {
        if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            return Self(None);
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        Self(Some(bar))
    }

    /// The sink that moves the bar.
    pub(super) fn sink(&self) -> Option<Arc<dyn CallListener>> {
        let bar = self.0.clone()?;
        let sink = move |u: &ProgressUpdate| {
            if let Some(total) = u.total
                && bar.length() != Some(total)
            {
                bar.set_length(total);
                if let Ok(style) = ProgressStyle::with_template(
                    "{bar:30} {pos}/{len} {msg} ({elapsed}, {eta} left)",
                ) {
                    bar.set_style(style);
                }
            }
            bar.set_position(u.done);
            bar.set_message(u.message.clone());
        };
        Some(Arc::new(sink))
    }

    pub(super) fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}
