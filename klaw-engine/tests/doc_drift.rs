//! The documentation names only what exists (issue 47): every tool, `engine.json` key and
//! command that `doc/**/*.md` and the README name in code (a `` `span` `` or a fenced
//! block) is asked of the real binary — `klaw-engine tools --format json`,
//! `klaw-engine config --keys`, `klaw-engine <command> --help` — so a renamed key, a
//! removed flag or a tool that was never built fails here, naming the file and line.
//!
//! What counts as a claim:
//! - a key: `section.key` (`mcp.bind`, `memory.weights.text`) whose first part is a
//!   section of `engine.json` (file names such as `memory.sqlite` are not keys);
//! - a tool: a snake_case name that starts like a tool of a built-in group
//!   (`memory_...`, `file_...`, `schedule_...`), and the tool of `klaw-engine call NAME`;
//! - a command: `klaw-engine WORD [WORD]` and each `--flag` after it, checked against the
//!   command's own `--help`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Flags of cargo whose value names a target or a package, not a tool or a command.
const CARGO_TARGET_FLAGS: &[&str] = &["-p", "--package", "--bin", "--bench", "--test", "--example"];

/// Names that look like keys but are something else, each with where it comes from.
const ALLOWED: &[&str] = &[
    // OpenTelemetry's span and attribute names for MCP (doc/telemetry.md).
    "mcp.sampling",
    "mcp.method.name",
    "mcp.session.id",
    // Field names of the model APIs' wire formats (doc/agent.md, doc/telemetry.md).
    "tool_use",
    "tool_result",
    "tool_choice",
    "tool_calls",
    // A field of `Limits`, the Rust type (doc/writing-tools.md).
    "tool_timeout",
];

/// The engine binary, run in an empty temp dir with an empty config (its own defaults).
fn engine(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_klaw-engine"))
        .args(args)
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env("KLAW_DATA_DIR", dir.path().join("data"))
        .env_remove("KLAW_CONFIG")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "klaw-engine {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A command's subcommands and long flags, from its `--help`.
#[derive(Default)]
struct Help {
    commands: BTreeSet<String>,
    flags: BTreeSet<String>,
}

fn help(path: &[&str]) -> Help {
    let mut args = path.to_vec();
    args.push("--help");
    let text = engine(&args);
    let mut help = Help::default();
    let mut in_commands = false;
    for line in text.lines() {
        if line.starts_with("Commands:") {
            in_commands = true;
            continue;
        }
        if !line.starts_with(' ') {
            in_commands = false;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if in_commands && let Some(word) = words.first() {
            help.commands.insert((*word).to_owned());
        }
        for word in words.iter().take(2) {
            if let Some(flag) = word.strip_prefix("--") {
                let flag = flag.split(['=', '<', ' ']).next().unwrap_or(flag);
                help.flags.insert(flag.trim_end_matches(',').to_owned());
            }
        }
    }
    help.flags.insert("help".to_owned());
    help
}

/// The code of a Markdown file: each inline span and each fenced block's lines, with the
/// line number they start on.
fn code_of(text: &str) -> Vec<(usize, String)> {
    let mut code = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            code.push((n, line.to_owned()));
            continue;
        }
        let mut rest = line;
        while let Some(start) = rest.find('`') {
            let ticks = rest[start..].chars().take_while(|c| *c == '`').count();
            let after = &rest[start + ticks..];
            let Some(end) = after.find(&"`".repeat(ticks)) else {
                break;
            };
            code.push((n, after[..end].trim().to_owned()));
            rest = &after[end + ticks..];
        }
    }
    code
}

fn doc_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, into: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, into);
            } else if path.extension().is_some_and(|e| e == "md") {
                into.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = vec![root.join("README.md")];
    walk(&root.join("doc"), &mut files);
    files.sort();
    files
}

/// What exists: tools, keys (with their sections), and the commands' help, on demand.
struct Truth {
    tools: BTreeSet<String>,
    tool_prefixes: BTreeSet<String>,
    longest: usize,
    keys: BTreeSet<String>,
    sections: BTreeSet<String>,
    helps: BTreeMap<Vec<String>, Help>,
}

impl Truth {
    fn load() -> Self {
        let list: serde_json::Value =
            serde_json::from_str(&engine(&["tools", "--format", "json"])).unwrap();
        let tools: BTreeSet<String> = list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        // The prefixes of groups (two tools or more share it: `memory_`, `file_`, ...).
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for tool in &tools {
            if let Some((prefix, _)) = tool.split_once('_') {
                *counts.entry(prefix.to_owned()).or_default() += 1;
            }
        }
        let tool_prefixes = counts
            .into_iter()
            .filter(|(_, n)| *n >= 2)
            .map(|(prefix, _)| prefix)
            .collect();
        // The test fixtures the engine serves for MCP's conformance suite
        // (`test_tool_with_logging`) do not set the length of a tool's name.
        let longest = tools
            .iter()
            .filter(|t| !t.starts_with("test_"))
            .map(|t| t.split('_').count())
            .max()
            .unwrap_or(1);
        let keys: Vec<serde_json::Value> =
            serde_json::from_str(&engine(&["config", "--keys"])).unwrap();
        let keys: BTreeSet<String> = keys
            .iter()
            .map(|k| k["key"].as_str().unwrap().to_owned())
            .collect();
        let mut sections = BTreeSet::new();
        for key in &keys {
            let parts: Vec<&str> = key.split('.').collect();
            for i in 1..parts.len() {
                sections.insert(parts[..i].join("."));
            }
        }
        Truth {
            tools,
            tool_prefixes,
            longest,
            keys,
            sections,
            helps: BTreeMap::new(),
        }
    }

    fn help(&mut self, path: &[String]) -> &Help {
        self.helps.entry(path.to_vec()).or_insert_with(|| {
            let path: Vec<&str> = path.iter().map(String::as_str).collect();
            help(&path)
        })
    }

    /// A problem with one code span or line, if it names something that does not exist.
    fn check(&mut self, code: &str, problems: &mut Vec<String>) {
        let tokens: Vec<&str> = code.split_whitespace().collect();
        for (i, token) in tokens.iter().enumerate() {
            let previous = i.checked_sub(1).map(|p| tokens[p]);
            // A cargo target or package of that name (`--bench memory_latency`,
            // `-p klaw-engine`), not a tool or a command.
            if previous.is_some_and(|p| CARGO_TARGET_FLAGS.contains(&p)) {
                continue;
            }
            for word in token.split(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c))) {
                let word = word.trim_matches('.');
                if ALLOWED.contains(&word) {
                    continue;
                }
                self.check_key(word, problems);
                self.check_tool(word, problems);
            }
            if *token == "klaw-engine" {
                self.check_command(&tokens[i + 1..].join(" "), problems);
            }
        }
    }

    fn check_key(&self, word: &str, problems: &mut Vec<String>) {
        let Some((section, _)) = word.split_once('.') else {
            return;
        };
        let is_file = [
            "sqlite", "json", "md", "rs", "yaml", "yml", "toml", "log", "db", "txt", "js", "py",
            "sh", "onnx", "so", "com", "org", "net", "io", "dev", "lan", "local",
        ]
        .iter()
        .any(|ext| word.ends_with(&format!(".{ext}")));
        let camel = word
            .split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric()));
        if is_file || !camel || !self.sections.contains(section) {
            return;
        }
        if !self.keys.contains(word) && !self.sections.contains(word) {
            problems.push(format!("`{word}` is not a key of engine.json"));
        }
    }

    fn check_tool(&self, word: &str, problems: &mut Vec<String>) {
        let snake = word
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        let parts: Vec<&str> = word.split('_').collect();
        // `memory_` (a prefix), `files__read` (an imported tool), and names longer than
        // any tool's (test and bench names) are not claims about a built-in tool.
        if !snake || parts.len() < 2 || parts.len() > self.longest || parts.contains(&"") {
            return;
        }
        if self.tool_prefixes.contains(parts[0]) && !self.tools.contains(word) {
            problems.push(format!("`{word}` is not a tool"));
        }
    }

    fn check_command(&mut self, rest: &str, problems: &mut Vec<String>) {
        let words: Vec<&str> = rest.split_whitespace().collect();
        let mut path: Vec<String> = Vec::new();
        for (i, word) in words.iter().enumerate() {
            if let Some(flag) = word.strip_prefix("--") {
                let flag = flag.split(['=', '`', ',', ')']).next().unwrap_or("");
                if flag.is_empty() || !flag.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
                    continue;
                }
                if !self.help(&path).flags.contains(flag) {
                    problems.push(format!(
                        "`klaw-engine {} --{flag}`: no such flag",
                        path.join(" ")
                    ));
                }
                continue;
            }
            if ["|", "&&", ";", ">", "2>", "#"].contains(word) {
                break;
            }
            let plain = word.chars().all(|c| c.is_ascii_lowercase() || c == '-');
            if i == path.len() && plain && !word.is_empty() {
                let known = self.help(&path).commands.clone();
                if known.contains(*word) {
                    path.push((*word).to_owned());
                    continue;
                }
                if path.is_empty() {
                    problems.push(format!("`klaw-engine {word}`: no such command"));
                    return;
                }
            }
            if path == ["call"] && i == 1 {
                let tool = word.trim_matches(|c| c == '\'' || c == '"');
                let name = tool
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
                // `server__tool`: a tool imported from an MCP server the doc configures.
                let imported = tool.contains("__");
                if name && !imported && !tool.is_empty() && !self.tools.contains(tool) {
                    problems.push(format!("`klaw-engine call {tool}`: no such tool"));
                }
            }
        }
    }
}

#[test]
fn the_docs_name_only_tools_keys_and_commands_that_exist() {
    let mut truth = Truth::load();
    assert!(truth.tools.contains("file_read") && truth.keys.contains("mcp.bind"));
    let mut problems = Vec::new();
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, code) in code_of(&text) {
            let mut found = Vec::new();
            truth.check(&code, &mut found);
            for problem in found {
                problems.push(format!("{}:{line}: {problem}", file.display()));
            }
        }
    }
    problems.dedup();
    assert!(
        problems.is_empty(),
        "the docs name things that do not exist:\n{}",
        problems.join("\n")
    );
}

/// The checker itself finds each kind of drift (so an empty result above means something).
#[test]
fn the_checker_finds_a_missing_tool_key_command_and_flag() {
    let mut truth = Truth::load();
    let mut problems = Vec::new();
    for code in [
        "memory_forget",
        "mcp.bindAddress",
        "klaw-engine serve",
        "klaw-engine tools --fromat mcp",
        "klaw-engine call code_executer '{}'",
        // What exists is not reported.
        "memory_search",
        "mcp.bind",
        "memory.sqlite",
        "klaw-engine tools --format mcp --lang en",
        "klaw-engine call current_time '{}'",
        "klaw-engine schedule list",
    ] {
        truth.check(code, &mut problems);
    }
    assert_eq!(
        problems,
        [
            "`memory_forget` is not a tool",
            "`mcp.bindAddress` is not a key of engine.json",
            "`klaw-engine serve`: no such command",
            "`klaw-engine tools --fromat`: no such flag",
            "`klaw-engine call code_executer`: no such tool",
        ]
    );
}
