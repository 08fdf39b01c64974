//! `process`: background jobs with ids, bounded logs, a cap, and a table that ends
//! every job when the engine's context is dropped.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::output::{self, SharedTail};
use super::run::{self, CommandLine, Job};
use super::settings::ShellSettings;
use crate::{ToolContext, ToolError, ToolSchema, tool};

/// What `process` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToolSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProcessAction {
    /// Запустить команду в фоне
    #[schema(description_en = "Start a command in the background")]
    Start,
    /// Состояние процесса
    #[schema(description_en = "The process's state")]
    Status,
    /// Конец вывода процесса
    #[schema(description_en = "The end of the process's output")]
    Log,
    /// Завершить процесс и всё его дерево
    #[schema(description_en = "End the process and its whole tree")]
    Kill,
    /// Все процессы
    #[schema(description_en = "Every process")]
    List,
}

/// One background job, as `process` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProcessInfo {
    /// Идентификатор процесса, например proc-1
    #[schema(description_en = "Process id, e.g. proc-1")]
    pub process_id: String,
    /// Команда
    #[schema(description_en = "The command")]
    pub command: String,
    /// Рабочий каталог
    #[schema(description_en = "Working directory")]
    pub working_dir: String,
    /// Работает ли процесс
    #[schema(description_en = "Whether it is still running")]
    pub running: bool,
    /// Время запуска, RFC 3339
    #[schema(description_en = "Start time, RFC 3339")]
    pub started_at: String,
    /// Время завершения, RFC 3339
    #[schema(description_en = "End time, RFC 3339")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// Код выхода (128 + сигнал, если убит сигналом)
    #[schema(description_en = "Exit code (128 + the signal when killed by one)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Что пошло не так, если завершение было ненормальным
    #[schema(description_en = "What went wrong, when it ended abnormally")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Песочница: bwrap, landlock или off
    #[schema(description_en = "The sandbox: bwrap, landlock or off")]
    pub sandbox: String,
}

/// The answer of `process`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProcessReply {
    /// Успешно ли выполнено действие
    #[schema(description_en = "Whether the action succeeded")]
    pub success: bool,
    /// Процесс (для start, status, log, kill)
    #[schema(description_en = "The process (for start, status, log, kill)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessInfo>,
    /// Все процессы (для list)
    #[schema(description_en = "Every process (for list)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processes: Option<Vec<ProcessInfo>>,
    /// Конец стандартного вывода (для log)
    #[schema(description_en = "The end of standard output (for log)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    /// Конец потока ошибок (для log)
    #[schema(description_en = "The end of standard error (for log)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// Сколько последних байт каждого потока показано (для log)
    #[schema(description_en = "How many last bytes of each stream are shown (for log)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tail: Option<u64>,
    /// Был ли процесс завершён этим вызовом (для kill)
    #[schema(description_en = "Whether this call ended the process (for kill)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub killed: Option<bool>,
}

impl ProcessReply {
    /// A successful reply with nothing filled in yet.
    fn ok() -> Self {
        Self {
            success: true,
            process: None,
            processes: None,
            stdout: None,
            stderr: None,
            tail: None,
            killed: None,
        }
    }

    /// A successful reply about one process.
    fn of(process: ProcessInfo) -> Self {
        Self {
            process: Some(process),
            ..Self::ok()
        }
    }
}

/// How a job ended.
#[derive(Debug, Clone, Default)]
struct Ended {
    at: Option<Timestamp>,
    code: Option<i32>,
    error: Option<String>,
}

#[derive(Debug)]
struct Entry {
    id: String,
    command: String,
    working_dir: String,
    started_at: Timestamp,
    sandbox: &'static str,
    stdout: SharedTail,
    stderr: SharedTail,
    /// Root pid while running; `None` once reaped.
    pid: Arc<Mutex<Option<i32>>>,
    ended: Arc<Mutex<Ended>>,
    done: watch::Receiver<bool>,
    monitor: tokio::task::JoinHandle<()>,
}

impl Entry {
    fn running(&self) -> bool {
        !*self.done.borrow()
    }

    fn info(&self) -> ProcessInfo {
        let ended = self
            .ended
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        ProcessInfo {
            process_id: self.id.clone(),
            command: self.command.clone(),
            working_dir: self.working_dir.clone(),
            running: self.running(),
            started_at: self.started_at.to_string(),
            ended_at: ended.at.map(|t| t.to_string()),
            exit_code: ended.code,
            error: ended.error,
            sandbox: self.sandbox.to_owned(),
        }
    }

    fn kill(&self) {
        let pid = *self.pid.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(pid) = pid {
            klaw_sandbox::tree::kill_tree(pid);
        }
    }
}

/// Finished jobs kept for `status` and `log` beyond the running ones.
const KEEP_FINISHED: usize = 32;

/// Bytes of each stream `log` returns when `tail` is not given.
const DEFAULT_TAIL: u64 = 4096;

/// The background jobs of one engine (one [`ToolContext`]): created on first use,
/// and when dropped (the engine exits) it ends every job still running.
#[derive(Debug, Default)]
pub struct ProcessTable {
    inner: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    next: u64,
    jobs: BTreeMap<u64, Entry>,
}

impl ProcessTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends every running job (also done on drop).
    pub fn kill_all(&self) {
        for e in self.lock().jobs.values() {
            if e.running() {
                e.kill();
            }
        }
    }

    /// How many jobs are running.
    pub fn running(&self) -> usize {
        self.lock().running()
    }
}

impl Table {
    fn running(&self) -> usize {
        self.jobs.values().filter(|e| e.running()).count()
    }
}

impl Drop for ProcessTable {
    fn drop(&mut self) {
        self.kill_all();
        for e in self.lock().jobs.values() {
            e.monitor.abort();
        }
    }
}

fn too_many(max: usize) -> ToolError {
    ToolError::unavailable(format!(
        "too many background processes ({max} running, the limit); kill one with action `kill` first"
    ))
}

fn parse_id(id: &str) -> Option<u64> {
    let id = id.trim();
    id.strip_prefix("proc-").unwrap_or(id).parse().ok()
}

/// Starts, inspects and ends background processes.
#[tool(
    name = "process",
    title_ru = "Фоновые процессы",
    title_en = "Background processes",
    description_ru = "Управляет долгими фоновыми процессами, не блокируя диалог: start запускает команду (в той же песочнице, что и exec) и возвращает processId; status показывает состояние; log — конец вывода (tail байт); kill завершает процесс со всем деревом; list перечисляет процессы. Число одновременных процессов ограничено; при остановке движка все они завершаются.",
    description_en = "Manages long-running background processes without blocking the dialog: start runs a command (in the same sandbox as exec) and returns a processId; status shows its state; log shows the end of its output (tail bytes); kill ends it with its whole tree; list lists the processes. The number of concurrent processes is capped; all of them end when the engine stops.",
    destructive,
    // Any program, and the network when `network` allows it (as `exec`).
    open_world,
    rename_all = "camelCase"
)]
pub async fn process(
    ctx: ToolContext,
    /// Действие: start, status, log, kill или list
    #[arg(description_en = "The action: start, status, log, kill or list")]
    action: ProcessAction,
    /// Команда для start: строка для `sh -c` или массив аргументов
    #[arg(description_en = "The command for start: a string for `sh -c` or an argument array")]
    command: Option<CommandLine>,
    /// Рабочий каталог для start относительно рабочей области
    #[arg(description_en = "Working directory for start, relative to the workspace")]
    working_dir: Option<String>,
    /// Идентификатор процесса для status, log и kill (например proc-1)
    #[arg(
        alias = "pid",
        description_en = "Process id for status, log and kill (e.g. proc-1)"
    )]
    process_id: Option<String>,
    /// Для log: сколько последних байт каждого потока вернуть (по умолчанию 4096)
    #[arg(description_en = "For log: how many last bytes of each stream to return (default 4096)")]
    tail: Option<u64>,
) -> Result<ProcessReply, ToolError> {
    let table = ctx.shared_state::<ProcessTable>();
    match action {
        ProcessAction::Start => {
            let command = command.ok_or_else(|| {
                ToolError::invalid_arguments("/command", "missing: the action `start` needs one")
            })?;
            start(&ctx, &table, command, working_dir.as_deref()).await
        }
        ProcessAction::List => {
            let t = table.lock();
            Ok(ProcessReply {
                processes: Some(t.jobs.values().map(Entry::info).collect()),
                ..ProcessReply::ok()
            })
        }
        ProcessAction::Status | ProcessAction::Log | ProcessAction::Kill => {
            let id = process_id.ok_or_else(|| {
                ToolError::invalid_arguments(
                    "/processId",
                    "missing: this action needs one (see `process` with action `list`)",
                )
            })?;
            let key = parse_id(&id).ok_or_else(|| {
                ToolError::invalid_arguments(
                    "/processId",
                    format!("`{id}` is not a process id; ids look like proc-1"),
                )
            })?;
            let unknown =
                || ToolError::not_found(format!("no process `{id}`; `list` shows the known ones"));
            match action {
                ProcessAction::Kill => {
                    let (was_running, mut done) = {
                        let t = table.lock();
                        let e = t.jobs.get(&key).ok_or_else(unknown)?;
                        let r = e.running();
                        if r {
                            e.kill();
                        }
                        (r, e.done.clone())
                    };
                    if was_running {
                        // The monitor records the end as soon as the root is reaped.
                        let _ = tokio::time::timeout(Duration::from_secs(5), done.wait_for(|d| *d))
                            .await;
                    }
                    let t = table.lock();
                    let e = t.jobs.get(&key).ok_or_else(unknown)?;
                    let mut r = ProcessReply::of(e.info());
                    r.killed = Some(was_running);
                    Ok(r)
                }
                ProcessAction::Log => {
                    let t = table.lock();
                    let e = t.jobs.get(&key).ok_or_else(unknown)?;
                    let n = tail.unwrap_or(DEFAULT_TAIL);
                    let max = usize::try_from(n).unwrap_or(usize::MAX);
                    let mut r = ProcessReply::of(e.info());
                    r.stdout = Some(output::lock(&e.stdout).tail_text(max));
                    r.stderr = Some(output::lock(&e.stderr).tail_text(max));
                    r.tail = Some(n);
                    Ok(r)
                }
                _ => {
                    let t = table.lock();
                    let e = t.jobs.get(&key).ok_or_else(unknown)?;
                    Ok(ProcessReply::of(e.info()))
                }
            }
        }
    }
}

async fn start(
    ctx: &ToolContext,
    table: &Arc<ProcessTable>,
    command: CommandLine,
    working_dir: Option<&str>,
) -> Result<ProcessReply, ToolError> {
    command.check_deny()?;
    let argv = command.argv()?;
    let cwd = run::resolve_dir(ctx.workspace(), working_dir)?;
    let max = ShellSettings::of(ctx).max_processes;
    if table.running() >= max {
        return Err(too_many(max));
    }
    let backend = run::backend(ctx).await?;
    let mut t = table.lock();
    // Checked again under the lock: two starts may race.
    if t.running() >= max {
        return Err(too_many(max));
    }
    let mut running = run::spawn(
        ctx,
        &backend,
        &Job {
            argv,
            cwd: cwd.clone(),
            stdin: None,
        },
    )?;
    t.next += 1;
    let key = t.next;
    let (stdout, stderr) = (Arc::clone(&running.stdout), Arc::clone(&running.stderr));
    let sandbox = running.backend;
    let pid = Arc::new(Mutex::new(running.pid()));
    let ended = Arc::new(Mutex::new(Ended::default()));
    let (done_tx, done_rx) = watch::channel(false);
    let monitor = {
        let pid = Arc::clone(&pid);
        let ended = Arc::clone(&ended);
        tokio::spawn(async move {
            let exit = running.wait(None).await;
            *pid.lock().unwrap_or_else(PoisonError::into_inner) = None;
            {
                let mut e = ended.lock().unwrap_or_else(PoisonError::into_inner);
                e.at = Some(Timestamp::now());
                e.code = Some(exit.code);
                if exit.code > 128 {
                    e.error = Some(format!("ended by signal {}", exit.code - 128));
                }
            }
            let _ = done_tx.send(true);
        })
    };
    let entry = Entry {
        id: format!("proc-{key}"),
        command: command.display(),
        working_dir: cwd.display().to_string(),
        started_at: Timestamp::now(),
        sandbox,
        stdout,
        stderr,
        pid,
        ended,
        done: done_rx,
        monitor,
    };
    let info = entry.info();
    t.jobs.insert(key, entry);
    // Forget the oldest finished jobs beyond the ones kept.
    let finished: Vec<u64> = t
        .jobs
        .iter()
        .filter(|(_, e)| !e.running())
        .map(|(k, _)| *k)
        .collect();
    for k in finished
        .iter()
        .take(finished.len().saturating_sub(KEEP_FINISHED))
    {
        t.jobs.remove(k);
    }
    Ok(ProcessReply::of(info))
}
