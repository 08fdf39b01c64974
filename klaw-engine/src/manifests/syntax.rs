//! A script's syntax, checked by its interpreter's own parser before the tool exists:
//! `sh -n`, `bash -n`, `python3`'s `py_compile` (its byte code written to a temporary
//! directory, never beside the script) and `node --check`. Only parsing: nothing of the
//! script runs. The check is bounded in time, its output in size, and its answer
//! remembered per interpreter and script text, so the loader's periodic scan does not
//! start an interpreter for a script it has seen.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// How long one check may take.
const CHECK_TIME_LIMIT: Duration = Duration::from_secs(10);

/// The largest script that is checked (bigger ones are left to fail when they run).
const MAX_SCRIPT_BYTES: u64 = 4 * 1024 * 1024;

/// Most characters of the interpreter's message kept.
const MAX_MESSAGE_CHARS: usize = 2000;

/// `python3 -c` program: compiles `argv[1]` into the file `argv[2]`; on a syntax error,
/// prints the compiler's message (which names the line) and exits 1.
const PY_CHECK: &str = "import py_compile, sys\n\
try:\n    py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)\n\
except py_compile.PyCompileError as e:\n    sys.stderr.write(e.msg)\n    sys.exit(1)\n";

/// How an interpreter checks a script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checker {
    /// `<shell> -n <file>`.
    Shell,
    /// `py_compile`.
    Python,
    /// `node --check <file>`.
    Node,
}

/// The checker for the interpreter `program` (a name or a path), if it has one.
fn checker(program: &str) -> Option<Checker> {
    let name = Path::new(program).file_name()?.to_str()?;
    match name {
        "sh" | "bash" | "dash" | "zsh" | "ksh" => Some(Checker::Shell),
        "python" | "python3" => Some(Checker::Python),
        n if n.starts_with("python3.") => Some(Checker::Python),
        "node" | "nodejs" => Some(Checker::Node),
        _ => None,
    }
}

/// Checks `text`, the script `name` (a file name, used in the message) for the
/// interpreter `program`. An interpreter without a check passes.
pub(crate) fn check_text(program: &str, name: &str, text: &[u8]) -> Result<(), String> {
    let Some(kind) = checker(program) else {
        return Ok(());
    };
    static SEEN: OnceLock<Mutex<HashMap<u64, Result<(), String>>>> = OnceLock::new();
    // One hasher state per process, so that equal inputs meet.
    static STATE: OnceLock<std::hash::RandomState> = OnceLock::new();
    let key = {
        let mut h = STATE
            .get_or_init(std::hash::RandomState::new)
            .build_hasher();
        h.write(program.as_bytes());
        h.write_u8(0);
        h.write(name.as_bytes());
        h.write_u8(0);
        h.write(text);
        h.finish()
    };
    let seen = SEEN.get_or_init(Mutex::default);
    if let Some(known) = seen
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return known.clone();
    }
    // A check that could not run (no interpreter, a time limit) is not remembered.
    let answer = run_check(kind, program, name, text)?;
    let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
    if seen.len() > 1024 {
        seen.clear();
    }
    seen.insert(key, answer.clone());
    answer
}

/// Runs the interpreter's check: `Err` when it could not run (said why), else the
/// check's answer (`Err` with the interpreter's message for a syntax error).
fn run_check(
    kind: Checker,
    program: &str,
    name: &str,
    text: &[u8],
) -> Result<Result<(), String>, String> {
    let cannot = |e: std::io::Error| format!("cannot check the script's syntax: {e}");
    let dir = tempfile::Builder::new()
        .prefix("klaw-syntax-")
        .tempdir()
        .map_err(cannot)?;
    let file_name = Path::new(name)
        .file_name()
        .map_or_else(|| "script".into(), |n| n.to_string_lossy().into_owned());
    let script = dir.path().join(&file_name);
    std::fs::write(&script, text).map_err(cannot)?;
    let errors = dir.path().join(".klaw-check-output");
    let out = std::fs::File::create(&errors).map_err(cannot)?;
    let err = out.try_clone().map_err(cannot)?;
    let mut cmd = Command::new(program);
    match kind {
        Checker::Shell => {
            cmd.arg("-n").arg(&script);
        }
        Checker::Python => {
            cmd.arg("-c")
                .arg(PY_CHECK)
                .arg(&script)
                .arg(dir.path().join(".klaw-check.pyc"));
        }
        Checker::Node => {
            cmd.arg("--check").arg(&script);
        }
    }
    cmd.current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let mut child = cmd.spawn().map_err(|e| {
        format!("cannot check the script's syntax: `{program}` does not start ({e})")
    })?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < CHECK_TIME_LIMIT => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "cannot check the script's syntax: `{program}` took more than {} s",
                    CHECK_TIME_LIMIT.as_secs()
                ));
            }
        }
    };
    if status.success() {
        return Ok(Ok(()));
    }
    let mut message = std::fs::read(&errors)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    // The temporary path means nothing to the reader: the script's name instead.
    message = message.replace(&script.display().to_string(), name);
    // Node's own stack and version say nothing about the script.
    let message: Vec<&str> = message
        .lines()
        .filter(|l| !l.trim_start().starts_with("at ") && !l.starts_with("Node.js v"))
        .collect();
    let message = message.join("\n");
    let message = message.trim();
    let message: String = if message.chars().count() > MAX_MESSAGE_CHARS {
        let skip = message.chars().count() - MAX_MESSAGE_CHARS;
        message.chars().skip(skip).collect()
    } else {
        message.to_owned()
    };
    Ok(Err(format!(
        "the script {name} has a syntax error ({program} says): {message}"
    )))
}

/// Checks the script a manifest's command runs, when there is one to check: the first
/// argument of a known interpreter (`[python3, script.py]`), or the program itself when
/// it is a file in the folder whose `#!` line names one (`[./run.sh]`). The script is
/// read beneath `folder`; anything else (a missing file, an option) is left alone.
pub(crate) fn check_command(argv: &[String], folder: &Path) -> Result<(), String> {
    let Some(program) = argv.first() else {
        return Ok(());
    };
    let read = |rel: &str| -> Option<Vec<u8>> {
        let dir = cap_std::fs::Dir::open_ambient_dir(folder, cap_std::ambient_authority()).ok()?;
        let meta = dir.metadata(rel).ok()?;
        if !meta.is_file() || meta.len() > MAX_SCRIPT_BYTES {
            return None;
        }
        dir.read(rel).ok()
    };
    if checker(program).is_some() && !program.contains('/') {
        let Some(script) = argv
            .get(1)
            .filter(|a| !a.starts_with('-') && !Path::new(a.as_str()).is_absolute())
        else {
            return Ok(());
        };
        return match read(script) {
            Some(text) => check_text(program, script, &text),
            None => Ok(()),
        };
    }
    if program.contains('/') && !Path::new(program).is_absolute() {
        let Some(text) = read(program) else {
            return Ok(());
        };
        let Some(interpreter) = shebang(&text) else {
            return Ok(());
        };
        return check_text(&interpreter, program.trim_start_matches("./"), &text);
    }
    Ok(())
}

/// The interpreter a `#!` line names: `#!/bin/sh` → `/bin/sh`, `#!/usr/bin/env python3`
/// → `python3`.
fn shebang(text: &[u8]) -> Option<String> {
    let line = text.strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|b| *b == b'\n').unwrap_or(line.len())];
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let first = words.next()?;
    if Path::new(first).file_name()?.to_str()? == "env" {
        words.find(|w| !w.starts_with('-')).map(str::to_owned)
    } else {
        Some(first.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebangs_name_their_interpreter() {
        assert_eq!(shebang(b"#!/bin/sh\necho").as_deref(), Some("/bin/sh"));
        assert_eq!(
            shebang(b"#!/usr/bin/env -S python3 -u\n").as_deref(),
            Some("python3")
        );
        assert_eq!(shebang(b"echo"), None);
    }

    #[test]
    fn broken_scripts_name_their_line() {
        let e = check_text("sh", "script.sh", b"echo ok\nif true; then\necho x\n").unwrap_err();
        assert!(e.contains("script.sh") && e.contains('4'), "{e}");
        assert!(check_text("sh", "script.sh", b"echo ok\n").is_ok());
        let e = check_text("bash", "run.sh", b"echo ok\nx=(\n").unwrap_err();
        assert!(e.contains("line 3") || e.contains("line 2"), "{e}");
        if manifest_on_path("python3") {
            let e = check_text("python3", "script.py", b"x = 1\ndef f(:\n    pass\n").unwrap_err();
            assert!(e.contains("line 2"), "{e}");
            assert!(!e.contains("klaw-syntax-"), "{e}");
            assert!(check_text("python3", "script.py", b"print(1)\n").is_ok());
        }
        if manifest_on_path("node") {
            let e = check_text("node", "script.js", b"let a = 1;\nlet = = 2;\n").unwrap_err();
            assert!(e.contains("script.js:2"), "{e}");
            assert!(check_text("node", "script.js", b"console.log(1)\n").is_ok());
        }
        // No check for other interpreters.
        assert!(check_text("perl", "x.pl", b"{{{").is_ok());
    }

    fn manifest_on_path(name: &str) -> bool {
        super::super::manifest::on_path(name)
    }
}
