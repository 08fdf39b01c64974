//! `exec`: run a short command and wait for it.

use std::time::Duration;

use serde::Serialize;

use super::run::{self, CommandLine, SandboxedCommand};
use super::settings::ShellSettings;
use crate::{ToolContext, ToolError, ToolSchema, tool};

/// The answer of `exec`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecResult {
    /// true, только если код выхода 0
    #[schema(description_en = "true only when the exit code is 0")]
    pub success: bool,
    /// Команда, как она была запущена
    #[schema(description_en = "The command as it was run")]
    pub command: String,
    /// Код выхода (128 + номер сигнала, если процесс убит сигналом)
    #[schema(description_en = "Exit code (128 + the signal number when killed by a signal)")]
    pub exit_code: i32,
    /// Стандартный вывод (последние байты, если вывод обрезан)
    #[schema(description_en = "Standard output (its last bytes when truncated)")]
    pub stdout: String,
    /// Стандартный поток ошибок (последние байты, если обрезан)
    #[schema(description_en = "Standard error (its last bytes when truncated)")]
    pub stderr: String,
    /// Рабочий каталог команды
    #[schema(description_en = "The command's working directory")]
    pub working_dir: String,
    /// Время выполнения, мс
    #[schema(description_en = "Run time in milliseconds")]
    pub duration_ms: u64,
    /// true, если stdout или stderr обрезан до лимита (сохранён конец)
    #[schema(description_en = "true when stdout or stderr was cut to the limit (the end is kept)")]
    pub truncated: bool,
    /// Песочница, в которой выполнялась команда: bwrap, landlock или off
    #[schema(description_en = "The sandbox the command ran in: bwrap, landlock or off")]
    pub sandbox: String,
}

/// Runs a command in the workspace, in the OS sandbox, and waits for it.
#[tool(
    name = "exec",
    title_ru = "Выполнить команду",
    title_en = "Run a command",
    description_ru = "Выполняет короткую команду в рабочей области и ждёт её завершения. Строка выполняется через `sh -c`, массив — напрямую, без оболочки. Команда работает в песочнице: запись только в рабочую область и временный каталог, без сети (если не разрешена), с очищенным окружением и пустым stdin. Ненулевой код выхода — обычный результат (success=false), а не ошибка. По истечении таймаута всё дерево процессов завершается. Для долгих задач используй `process`.",
    description_en = "Runs a short command in the workspace and waits for it. A string runs through `sh -c`, an array runs directly, without a shell. The command runs in a sandbox: writes only in the workspace and a temporary directory, no network (unless allowed), a cleared environment and empty stdin. A non-zero exit code is a normal result (success=false), not an error. When the timeout passes the whole process tree is killed. Use `process` for long-running jobs.",
    destructive,
    // Any program, and the network when `network` allows it.
    open_world,
    rename_all = "camelCase",
    timeout = "24h"
)]
pub async fn exec(
    ctx: ToolContext,
    /// Команда: строка для `sh -c` (например "cargo test 2>&1 | tail -5") или массив аргументов (например ["ls", "-la"])
    #[arg(
        description_en = "The command: a string for `sh -c` (e.g. \"cargo test 2>&1 | tail -5\") or an argument array (e.g. [\"ls\", \"-la\"])"
    )]
    command: CommandLine,
    /// Рабочий каталог относительно рабочей области; по умолчанию — её корень
    #[arg(description_en = "Working directory relative to the workspace; defaults to its root")]
    working_dir: Option<String>,
    /// Таймаут в секундах; по умолчанию из настроек (60), не больше максимума (300)
    #[arg(
        description_en = "Timeout in seconds; defaults to the configured one (60), at most the configured maximum (300)"
    )]
    timeout: Option<u64>,
) -> Result<ExecResult, ToolError> {
    command.check_deny()?;
    let argv = command.argv()?;
    let shell = ShellSettings::of(&ctx);
    let limit = clamp_timeout(timeout, shell.timeout, shell.max_timeout);
    let out = run::run_sandboxed(
        &ctx,
        SandboxedCommand {
            argv,
            working_dir,
            stdin: None,
            timeout: limit,
        },
    )
    .await?;
    Ok(ExecResult {
        success: out.exit_code == 0,
        command: command.display(),
        exit_code: out.exit_code,
        stdout: out.stdout,
        stderr: out.stderr,
        working_dir: out.working_dir.display().to_string(),
        duration_ms: u64::try_from(out.duration.as_millis()).unwrap_or(u64::MAX),
        truncated: out.truncated,
        sandbox: out.sandbox.to_owned(),
    })
}

/// The requested timeout, or the default, within 1 s and the maximum.
pub(crate) fn clamp_timeout(requested: Option<u64>, default: Duration, max: Duration) -> Duration {
    let want = requested.map_or(default, Duration::from_secs);
    want.clamp(Duration::from_secs(1), max.max(Duration::from_secs(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_clamped() {
        let d = Duration::from_secs(60);
        let m = Duration::from_secs(300);
        assert_eq!(clamp_timeout(None, d, m), d);
        assert_eq!(clamp_timeout(Some(5), d, m), Duration::from_secs(5));
        assert_eq!(clamp_timeout(Some(100_000), d, m), m);
        assert_eq!(clamp_timeout(Some(0), d, m), Duration::from_secs(1));
        assert_eq!(clamp_timeout(Some(u64::MAX), d, m), m);
    }
}
