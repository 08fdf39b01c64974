//! `code_execute`: run a piece of Python, bash, sh or Node.js code in `exec`'s sandbox.
//!
//! The code is written to the command's private temporary directory (`$TMPDIR`: a
//! directory of its own under Landlock and mode `off`, bubblewrap's private `/tmp`) by a
//! short `sh` prologue inside the sandbox, then run by the interpreter found on the
//! engine's `PATH`. Everything else is `exec`'s: [`run_sandboxed`](super::run_sandboxed)
//! runs it (time limit over the whole tree, bounded output, clean environment).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Serialize;

use super::exec::clamp_timeout;
use super::run::{self, CommandLine, SandboxedCommand};
use super::settings::{SandboxMode, ShellSettings};
use crate::{ToolContext, ToolError, ToolSchema, tool};

/// The largest piece of code: it reaches the sandbox as one argument, which Linux
/// bounds at 128 KiB (`MAX_ARG_STRLEN`, the final NUL included).
const MAX_CODE_BYTES: usize = 128 * 1024 - 1;

/// A language `code_execute` runs: its name, the programs that run it (first found
/// wins) and the file extension its code is written with.
struct Language {
    name: &'static str,
    programs: &'static [&'static str],
    extension: &'static str,
}

const LANGUAGES: &[Language] = &[
    Language {
        name: "python",
        programs: &["python3", "python"],
        extension: "py",
    },
    Language {
        name: "bash",
        programs: &["bash"],
        extension: "sh",
    },
    Language {
        name: "sh",
        programs: &["sh"],
        extension: "sh",
    },
    Language {
        name: "node",
        programs: &["node", "nodejs"],
        extension: "js",
    },
];

/// An interpreter found on `PATH`.
#[derive(Debug, Clone)]
struct Found {
    language: &'static str,
    extension: &'static str,
    path: PathBuf,
    /// Whether it lives in the system directories every sandbox shows (an interpreter
    /// under the home directory, such as a pyenv shim, only runs with the sandbox off).
    in_sandbox: bool,
}

/// The interpreters on the engine's `PATH`, looked up once.
fn interpreters() -> &'static [Found] {
    static FOUND: OnceLock<Vec<Found>> = OnceLock::new();
    FOUND.get_or_init(|| {
        let path = std::env::var_os("PATH").unwrap_or_else(|| klaw_sandbox::DEFAULT_PATH.into());
        let mut found = Vec::new();
        for lang in LANGUAGES {
            let mut first_any = None;
            let mut first_visible = None;
            for program in lang.programs {
                // Every match along PATH, not just the first: a shim under the home
                // directory may shadow the system's interpreter.
                for dir in std::env::split_paths(&path).filter(|d| d.is_absolute()) {
                    let Some(p) = klaw_sandbox::find_program(program, dir.as_os_str()) else {
                        continue;
                    };
                    if first_any.is_none() {
                        first_any = Some(p.clone());
                    }
                    if first_visible.is_none() && visible_in_sandbox(&p) {
                        first_visible = Some(p);
                    }
                }
            }
            let chosen = first_visible
                .map(|p| (p, true))
                .or(first_any.map(|p| (p, false)));
            if let Some((path, in_sandbox)) = chosen {
                found.push(Found {
                    language: lang.name,
                    extension: lang.extension,
                    path,
                    in_sandbox,
                });
            }
        }
        found
    })
}

/// Whether `program` (and what its links lead to) is in a directory every sandbox shows.
fn visible_in_sandbox(program: &Path) -> bool {
    let inside = |p: &Path| {
        klaw_sandbox::SYSTEM_DIRS
            .iter()
            .any(|dir| p.starts_with(dir))
    };
    inside(program) && std::fs::canonicalize(program).is_ok_and(|real| inside(&real))
}

/// The interpreters usable under `mode`, by language.
fn usable(mode: SandboxMode) -> impl Iterator<Item = &'static Found> {
    interpreters()
        .iter()
        .filter(move |f| f.in_sandbox || mode == SandboxMode::Off)
}

fn installed_list(mode: SandboxMode) -> String {
    let names: Vec<&str> = usable(mode).map(|f| f.language).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// The answer of `code_execute`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct CodeResult {
    /// true, только если код выхода 0
    #[schema(description_en = "true only when the exit code is 0")]
    pub success: bool,
    /// Язык, на котором выполнен код
    #[schema(description_en = "The language the code ran as")]
    pub language: String,
    /// Интерпретатор, который выполнил код
    #[schema(description_en = "The interpreter that ran the code")]
    pub interpreter: String,
    /// Код выхода (128 + номер сигнала, если процесс убит сигналом)
    #[schema(description_en = "Exit code (128 + the signal number when killed by a signal)")]
    pub exit_code: i32,
    /// Стандартный вывод (последние байты, если вывод обрезан)
    #[schema(description_en = "Standard output (its last bytes when truncated)")]
    pub stdout: String,
    /// Стандартный поток ошибок (последние байты, если обрезан)
    #[schema(description_en = "Standard error (its last bytes when truncated)")]
    pub stderr: String,
    /// Время выполнения, мс
    #[schema(description_en = "Run time in milliseconds")]
    pub duration_ms: u64,
    /// true, если stdout или stderr обрезан до лимита (сохранён конец)
    #[schema(description_en = "true when stdout or stderr was cut to the limit (the end is kept)")]
    pub truncated: bool,
    /// Песочница, в которой выполнялся код: bwrap, landlock или off
    #[schema(description_en = "The sandbox the code ran in: bwrap, landlock or off")]
    pub sandbox: String,
}

/// Runs a piece of code in the workspace, in `exec`'s sandbox, and waits for it.
#[tool(
    name = "code_execute",
    title_ru = "Выполнить код",
    title_en = "Run code",
    description_ru = "Выполняет фрагмент кода (python, bash, sh или node — из установленных) в песочнице `exec`: код записывается во временный каталог команды и запускается интерпретатором в корне рабочей области. Запись только в рабочую область и временный каталог, без сети (если не разрешена), очищенное окружение. stdin — необязательный ввод. Ненулевой код выхода — обычный результат (success=false). По истечении таймаута всё дерево процессов завершается.",
    description_en = "Runs a piece of code (python, bash, sh or node, those installed) in `exec`'s sandbox: the code is written to the command's temporary directory and run by its interpreter in the workspace root. Writes only in the workspace and a temporary directory, no network (unless allowed), a cleared environment. stdin is optional input. A non-zero exit code is a normal result (success=false). When the timeout passes the whole process tree is killed.",
    destructive,
    // Any program, and the network when `network` allows it.
    open_world,
    rename_all = "camelCase",
    timeout = "24h"
)]
pub async fn code_execute(
    ctx: ToolContext,
    /// Язык: python, bash, sh или node (только установленные)
    #[arg(description_en = "The language: python, bash, sh or node (only those installed)")]
    language: String,
    /// Код, который нужно выполнить
    #[arg(description_en = "The code to run")]
    code: String,
    /// Таймаут в секундах; по умолчанию из настроек (60), не больше максимума (300)
    #[arg(
        description_en = "Timeout in seconds; defaults to the configured one (60), at most the configured maximum (300)"
    )]
    timeout: Option<u64>,
    /// Что код прочитает со стандартного ввода (по умолчанию ничего)
    #[arg(description_en = "What the code reads on standard input (nothing by default)")]
    stdin: Option<String>,
) -> Result<CodeResult, ToolError> {
    let shell = ShellSettings::of(&ctx);
    let wanted = language.trim().to_ascii_lowercase();
    if !LANGUAGES.iter().any(|l| l.name == wanted) {
        return Err(ToolError::invalid_arguments(
            "/language",
            format!(
                "unknown language `{language}`; installed here: {}",
                installed_list(shell.sandbox)
            ),
        ));
    }
    let Some(found) = usable(shell.sandbox).find(|f| f.language == wanted) else {
        return Err(ToolError::unavailable(format!(
            "no {wanted} interpreter is installed where the sandbox can run it; installed \
             here: {}",
            installed_list(shell.sandbox)
        )));
    };
    if code.trim().is_empty() {
        return Err(ToolError::invalid_arguments("/code", "empty"));
    }
    if code.len() > MAX_CODE_BYTES {
        return Err(ToolError::invalid_arguments(
            "/code",
            format!(
                "{} bytes, more than the {MAX_CODE_BYTES} bytes allowed; write \
                 it to a file and run it with exec",
                code.len()
            ),
        ));
    }
    // Shell code meets the deny-list as exec's command lines do.
    if matches!(found.language, "bash" | "sh") {
        CommandLine::Shell(code.clone()).check_deny()?;
    }
    let interpreter = found.path.display().to_string();
    // Inside the sandbox: the code into a file of the private temporary directory
    // (owner-only), then the interpreter on it, the prologue's shell replaced.
    let prologue = format!(
        "umask 077 && f=\"${{TMPDIR:-/tmp}}/klaw-code.{ext}\" && printf '%s' \"$1\" > \"$f\" \
         && exec \"$2\" \"$f\"",
        ext = found.extension
    );
    let argv = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        prologue,
        "klaw-code".to_owned(),
        code,
        interpreter.clone(),
    ];
    let limit = clamp_timeout(timeout, shell.timeout, shell.max_timeout);
    let out = run::run_sandboxed(
        &ctx,
        SandboxedCommand {
            argv,
            working_dir: None,
            stdin: stdin.map(String::into_bytes),
            timeout: limit,
        },
    )
    .await?;
    Ok(CodeResult {
        success: out.exit_code == 0,
        language: found.language.to_owned(),
        interpreter,
        exit_code: out.exit_code,
        stdout: out.stdout,
        stderr: out.stderr,
        duration_ms: u64::try_from(out.duration.as_millis()).unwrap_or(u64::MAX),
        truncated: out.truncated,
        sandbox: out.sandbox.to_owned(),
    })
}
