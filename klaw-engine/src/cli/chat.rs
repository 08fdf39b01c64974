//! `klaw-engine chat`: the agent in the console. In a terminal, an interactive chat (the
//! answer streamed, tool calls shown as they happen); with stdin not a terminal, one
//! user message per line and each final answer on stdout, so it can be scripted.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use klaw_tools::Caller;
use tokio::io::AsyncBufReadExt;

use crate::Config;
use crate::agent::{Agent, TurnObserver};
use crate::llm::{Model, ToolCallRequest, ToolResult};
use crate::terminal::{escape_invisible, terminal_safe};

/// Shows a turn: the answer's text on stdout as it comes (interactive), the tool calls
/// and their outcomes on stderr. Everything the model or a tool wrote is made
/// [`terminal_safe`] first: no escape sequence of theirs reaches the terminal.
struct Console {
    interactive: bool,
}

impl TurnObserver for Console {
    fn text(&self, piece: &str) {
        if self.interactive {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(terminal_safe(piece).as_bytes());
            let _ = out.flush();
        }
    }

    /// What is about to run: hidden characters written out, as in the approval question.
    fn tool_call(&self, call: &ToolCallRequest) {
        eprintln!(
            "→ {} {}",
            escape_invisible(&call.name),
            escape_invisible(&crate::llm::preview(&call.arguments.to_wire_string()))
        );
    }

    fn tool_result(&self, call: &ToolCallRequest, result: &ToolResult) {
        let mark = if result.is_error { "✗" } else { "✓" };
        eprintln!(
            "{mark} {} {}",
            terminal_safe(&call.name),
            terminal_safe(&crate::llm::preview(&result.content))
        );
    }
}

/// Asks the person at the terminal (`/dev/tty`), or refuses when nobody is there.
/// Questions are asked one at a time (a round's read-only calls run together, and a
/// subagent may ask at the same time).
struct ConsoleApprover {
    interactive: bool,
    one_at_a_time: Arc<tokio::sync::Mutex<()>>,
}

impl crate::agent::Approver for ConsoleApprover {
    fn approve<'a>(
        &'a self,
        call: &'a crate::ToolCall,
        spec: &'a klaw_tools::ToolSpec,
    ) -> crate::HookFuture<'a> {
        let name = spec.name.clone();
        let question = crate::agent::approval_question(call, spec);
        let interactive = self.interactive;
        let turn = Arc::clone(&self.one_at_a_time);
        Box::pin(async move {
            if !interactive {
                return Err(format!(
                    "`{name}` needs a person's approval (agent.approval) and nobody is at \
                     this console to give it; tell the user what you wanted to do instead"
                )
                .into());
            }
            let _turn = turn.lock().await;
            let asked = tokio::task::spawn_blocking(move || ask_tty(&question)).await;
            match asked {
                Ok(Ok(true)) => Ok(()),
                Ok(Ok(false)) => Err("the user declined this call".into()),
                Ok(Err(e)) => Err(crate::Refusal::new(format!(
                    "the user could not be asked ({e}); the call was not run"
                ))
                .with_source(e)),
                Err(e) => Err(crate::Refusal::new(format!(
                    "the user could not be asked ({e}); the call was not run"
                ))
                .with_source(e)),
            }
        })
    }
}

/// The [`approval_question`](crate::agent::approval_question) (the whole arguments) and
/// `Allow it? [y/N]` on the terminal; true for y or yes.
fn ask_tty(question: &str) -> std::io::Result<bool> {
    use std::io::BufRead;
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")?;
    let mut w = &tty;
    write!(w, "\n{question}Allow it? [y/N] ")?;
    let mut answer = String::new();
    std::io::BufReader::new(&tty).read_line(&mut answer)?;
    Ok(matches!(answer.trim().to_lowercase().as_str(), "y" | "yes"))
}

/// Runs the chat `chat` with the configured model (or `model` of `llm.models`).
pub(crate) fn run(config: Config, chat: String, model: Option<String>) -> ExitCode {
    if crate::agent::is_own_history(&chat) {
        return super::fail(&format!(
            "`{chat}` is not a chat name: names starting with {} are the own histories of scheduled jobs and subagents",
            crate::agent::OWN_HISTORY_PREFIXES.join(" or ")
        ));
    }
    let model = match Model::from_config(&config, model.as_deref()) {
        Ok(m) => m,
        Err(e) => return super::fail(&e.to_string()),
    };
    super::run_front_on_worker(config, Some(model), |app| async move {
        let interactive = std::io::stdin().is_terminal();
        let (Some(agent), Some(subagents)) = (app.agent(), app.subagents()) else {
            return super::fail("the agent was not assembled");
        };
        let agent = agent.clone().streaming(interactive);
        let observer = Console { interactive };
        app.approve_on(
            "console",
            Arc::new(ConsoleApprover {
                interactive,
                one_at_a_time: Arc::default(),
            }),
        );
        let caller = Caller::new("console", Some(chat.clone()));
        if interactive {
            eprintln!(
                "klaw chat `{chat}` with {}: type a message, Ctrl-D to leave.",
                agent_model_line(&agent)
            );
        }
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        let mut code = ExitCode::SUCCESS;
        loop {
            if interactive {
                eprint!("> ");
            }
            let line = tokio::select! {
                l = lines.next_line() => l,
                s = crate::stop_signal() => {
                    if let Ok(name) = s {
                        eprintln!("klaw-engine: {name}: leaving the chat");
                    }
                    break;
                }
            };
            let text = match line {
                Ok(Some(l)) => l,
                Ok(None) => {
                    // The input ended: the subagents it started finish (each within its
                    // time limit) before the engine stops; a signal cuts the wait.
                    if interactive {
                        eprintln!("waiting for running subagents (Ctrl-C to stop them)…");
                    }
                    tokio::select! {
                        () = subagents.wait() => {}
                        _ = crate::stop_signal() => {}
                    }
                    break;
                }
                Err(e) => {
                    eprintln!("klaw-engine: cannot read stdin: {e}");
                    code = ExitCode::FAILURE;
                    break;
                }
            };
            if text.trim().is_empty() {
                continue;
            }
            let turn = agent.turn(&chat, caller.clone(), &text, &observer);
            let outcome = tokio::select! {
                r = turn => r,
                s = crate::stop_signal() => {
                    if let Ok(name) = s {
                        eprintln!("klaw-engine: {name}: the turn was stopped");
                    }
                    break;
                }
            };
            match outcome {
                Ok(answer) => {
                    let mut out = std::io::stdout().lock();
                    if interactive {
                        let _ = writeln!(out);
                    } else {
                        let _ = writeln!(out, "{}", terminal_safe(answer.trim_end()));
                    }
                    let _ = out.flush();
                }
                Err(e) => {
                    // The message is kept in the history; the next line goes on.
                    eprintln!("klaw-engine: {}", terminal_safe(&e.to_string()));
                    code = ExitCode::FAILURE;
                }
            }
        }
        code
    })
}

fn agent_model_line(agent: &Agent) -> String {
    let m = agent.model();
    format!(
        "{} ({}, {:?} protocol)",
        m.name,
        m.client.describe(),
        m.protocol
    )
    .to_lowercase()
}
