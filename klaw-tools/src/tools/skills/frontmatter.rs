//! A `SKILL.md`'s frontmatter: the YAML between the first two `---` lines, parsed with
//! `yaml_serde` and checked against the Agent Skills specification's rules.

use std::collections::BTreeMap;

use yaml_serde::{Mapping, Value};

/// Longest `name`, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// Longest `description`, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Longest `compatibility`, in characters.
pub const MAX_COMPATIBILITY_CHARS: usize = 500;

/// The keys the Agent Skills specification defines; any other is kept with a warning.
const KNOWN: [&str; 6] = [
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
];

/// A skill's frontmatter, read leniently: what the Agent Skills format's client guide
/// says to warn about (a name other than the folder's, a long description, mistyped
/// optional keys) is a warning in [`Parsed::warnings`], not a refusal.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Frontmatter {
    /// The skill's name: **its folder's name**, whatever `name` says (see
    /// [`declared_name`](Self::declared_name)); usable as an identifier
    /// ([`check_usable`]).
    pub name: String,
    /// `name` as the frontmatter gives it, when it gives a string.
    pub declared_name: Option<String>,
    /// `description`: what the skill does and when to use it.
    pub description: String,
    /// `license`, when given (a number or boolean is taken as its text).
    pub license: Option<String>,
    /// `compatibility`: what the skill needs, when given.
    pub compatibility: Option<String>,
    /// `metadata`: a map of strings (numbers and booleans taken as their text).
    pub metadata: BTreeMap<String, String>,
    /// `allowed-tools` in Klaw's tools (a space- or comma-separated list, or a YAML
    /// list; other clients' names mapped, [`map_allowed`](super::map_allowed)),
    /// when given and when one of its entries is a tool.
    pub allowed_tools: Option<Vec<String>>,
    /// Keys the specification does not define, kept as they were (as JSON).
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// Why a skill cannot be used: a sentence naming the problem; for YAML that does not
/// parse, the parser's error is the [`source`](std::error::Error::source).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct FrontmatterError {
    message: String,
    #[source]
    source: Option<yaml_serde::Error>,
}

impl From<String> for FrontmatterError {
    fn from(message: String) -> Self {
        Self {
            message,
            source: None,
        }
    }
}

impl From<&str> for FrontmatterError {
    fn from(message: &str) -> Self {
        message.to_owned().into()
    }
}

/// A frontmatter that could be used, with what is worth a warning.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The frontmatter.
    pub frontmatter: Frontmatter,
    /// Warnings (what breaks the format's rules but does not stop the skill), each a
    /// sentence.
    pub warnings: Vec<String>,
}

/// Splits `text` into its frontmatter (the YAML between a first line `---` and the next
/// line `---`) and the body after it. A leading byte order mark is skipped.
pub fn split(text: &str) -> Result<(&str, &str), FrontmatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let first_end = text.find('\n').unwrap_or(text.len());
    if text[..first_end].trim_end() != "---" {
        return Err("no frontmatter: the file must start with a line `---`, then YAML with name and description, then a line `---`".into());
    }
    let rest = &text[(first_end + 1).min(text.len())..];
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Ok((&rest[..at], &rest[at + line.len()..]));
        }
        at += line.len();
    }
    Err("the frontmatter is not closed: no line `---` after the YAML".into())
}

/// Parses the frontmatter of `text` (a whole `SKILL.md`) of the skill in the folder
/// `folder`, whose name is the skill's. Refused only what cannot be used: no
/// frontmatter, YAML that does not parse (its line counted from the file's first line),
/// no description, a folder name that is not a usable identifier. Everything else the
/// format's rules forbid is a warning.
pub fn parse(text: &str, folder: &str) -> Result<Parsed, FrontmatterError> {
    check_usable(folder)?;
    let (yaml, _body) = split(text)?;
    // One line for the opening `---`, so that the parser's lines are the file's.
    let value: Value =
        yaml_serde::from_str(&format!("\n{yaml}")).map_err(|e| FrontmatterError {
            message: format!("the frontmatter is not valid YAML: {e}"),
            source: Some(e),
        })?;
    let map = match value {
        Value::Mapping(m) => m,
        Value::Null => {
            return Err("the frontmatter is empty: a description is required".into());
        }
        _ => return Err("the frontmatter is not a YAML mapping of keys to values".into()),
    };
    let mut warnings = Vec::new();
    let description = description(&map)?;
    let declared_name = match map.get("name") {
        None | Some(Value::Null) => {
            warnings.push(format!(
                "`name` is missing; the skill is called by its folder's name `{folder}`"
            ));
            None
        }
        Some(v) => match scalar(v) {
            Some(declared) => {
                if declared != folder {
                    warnings.push(format!(
                        "name `{declared}` differs from its folder's name `{folder}`; the skill is called `{folder}` (the folder's name wins)"
                    ));
                }
                Some(declared)
            }
            None => {
                warnings.push(format!(
                    "`name` is {}; the skill is called by its folder's name `{folder}`",
                    kind(v)
                ));
                None
            }
        },
    };
    if let Err(e) = check_name(folder) {
        warnings.push(format!("{e} by the Agent Skills format (loaded anyway)"));
    }
    let n = description.chars().count();
    if n > MAX_DESCRIPTION_CHARS {
        warnings.push(format!(
            "description is {n} characters, more than the format's {MAX_DESCRIPTION_CHARS} (loaded whole; the system prompt may shorten it)"
        ));
    }
    let license = optional(&map, "license", &mut warnings);
    let compatibility = optional(&map, "compatibility", &mut warnings);
    if let Some(c) = &compatibility
        && c.chars().count() > MAX_COMPATIBILITY_CHARS
    {
        warnings.push(format!(
            "compatibility is {} characters, more than the format's {MAX_COMPATIBILITY_CHARS}",
            c.chars().count()
        ));
    }
    let metadata = metadata(&map, &mut warnings);
    let allowed_tools = allowed_tools(&map, &mut warnings).and_then(|written| {
        let (tools, unknown) = super::tool_names::map_allowed(&written);
        if !unknown.is_empty() {
            warnings.push(format!(
                "`allowed-tools` names what is no Klaw tool: {} (left out; doc/tools/skills.md has the table of names Klaw maps)",
                unknown.join(", ")
            ));
        }
        if tools.is_empty() && !written.is_empty() {
            warnings.push(
                "`allowed-tools` names no Klaw tool, so the skill restricts nothing".to_owned(),
            );
            return None;
        }
        Some(tools)
    });
    let mut extra = BTreeMap::new();
    for (k, v) in &map {
        let key = key_text(k);
        if KNOWN.contains(&key.as_str()) {
            continue;
        }
        warnings.push(format!(
            "unknown frontmatter key `{key}` (kept; the Agent Skills format defines {})",
            KNOWN.join(", ")
        ));
        extra.insert(key, serde_json::to_value(v).unwrap_or_default());
    }
    Ok(Parsed {
        frontmatter: Frontmatter {
            name: folder.to_owned(),
            declared_name,
            description,
            license,
            compatibility,
            metadata,
            allowed_tools,
            extra,
        },
        warnings,
    })
}

/// Checks a skill's name against the format's rules: 1–64 characters of lowercase
/// letters `a-z`, digits and hyphens, no hyphen at the start, the end, or twice in a
/// row. A name that breaks them but is [usable](check_usable) still loads, with a
/// warning.
pub fn check_name(name: &str) -> Result<(), FrontmatterError> {
    let n = name.chars().count();
    if n == 0 || n > MAX_NAME_CHARS {
        return Err(
            format!("name `{name}` is {n} characters; it must be 1 to {MAX_NAME_CHARS}").into(),
        );
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "name `{name}` has `{c}`; only lowercase letters a-z, digits and hyphens are allowed"
        )
        .into());
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err(
            format!("name `{name}` starts or ends with a hyphen, which is not allowed").into(),
        );
    }
    if name.contains("--") {
        return Err(format!("name `{name}` has two hyphens in a row, which is not allowed").into());
    }
    Ok(())
}

/// Longest usable name, in characters.
pub const MAX_USABLE_NAME_CHARS: usize = 128;

/// Whether `name` (a skill folder's) can name a skill everywhere Klaw uses the name:
/// `skill_load`'s argument, an MCP prompt's name, a segment of
/// `klaw://skills/{name}/{file}`, a line of the system prompt. 1–128 characters, each a
/// letter or digit of any script, `-`, `_` or `.`, the first a letter or digit. Wider
/// than the format's rule ([`check_name`]), which only warns.
pub fn check_usable(name: &str) -> Result<(), FrontmatterError> {
    let n = name.chars().count();
    if n == 0 || n > MAX_USABLE_NAME_CHARS {
        return Err(format!(
            "the folder's name `{name}` is {n} characters; a skill's name must be 1 to {MAX_USABLE_NAME_CHARS} (rename the folder)"
        )
        .into());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "the folder's name `{}` has {:?}, which cannot be in a skill's name (letters, digits, `-`, `_` and `.` can); rename the folder",
            name.escape_debug(),
            c
        )
        .into());
    }
    if !name.starts_with(char::is_alphanumeric) {
        return Err(format!(
            "the folder's name `{name}` does not start with a letter or digit; rename the folder"
        )
        .into());
    }
    Ok(())
}

/// A scalar's text: a string as it is, a number or boolean as YAML writes it.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn key_text(k: &Value) -> String {
    match k {
        Value::String(s) => s.clone(),
        other => yaml_serde::to_string(other)
            .map(|s| s.trim().to_owned())
            .unwrap_or_default(),
    }
}

/// What kind of YAML value `v` is, for messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "empty",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

/// `description`: a non-empty string (a number or boolean taken as its text), or why
/// the skill cannot be used.
fn description(map: &Mapping) -> Result<String, String> {
    const WHY: &str = "the model chooses a skill by it";
    match map.get("description") {
        None | Some(Value::Null) => {
            Err(format!("`description` is missing; it is required ({WHY})"))
        }
        Some(v) => match scalar(v) {
            Some(s) if s.trim().is_empty() => {
                Err(format!("`description` is empty; it is required ({WHY})"))
            }
            Some(s) => Ok(s),
            None => Err(format!(
                "`description` is {}; it must be text ({WHY})",
                kind(v)
            )),
        },
    }
}

/// An optional text key: a string, or a number or boolean taken as its text with a
/// warning; another kind is left out with a warning.
fn optional(map: &Mapping, key: &str, warnings: &mut Vec<String>) -> Option<String> {
    match map.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(v) => match scalar(v) {
            Some(s) => {
                warnings.push(format!(
                    "`{key}` is {}; taken as the text \"{s}\" (quote it)",
                    kind(v)
                ));
                Some(s)
            }
            None => {
                warnings.push(format!(
                    "`{key}` is {}; it must be text, so it is left out",
                    kind(v)
                ));
                None
            }
        },
    }
}

fn metadata(map: &Mapping, warnings: &mut Vec<String>) -> BTreeMap<String, String> {
    let m = match map.get("metadata") {
        None | Some(Value::Null) => return BTreeMap::new(),
        Some(Value::Mapping(m)) => m,
        Some(v) => {
            warnings.push(format!(
                "`metadata` is {}; it must be a mapping of strings, so it is left out",
                kind(v)
            ));
            return BTreeMap::new();
        }
    };
    let mut out = BTreeMap::new();
    for (k, v) in m {
        let key = key_text(k);
        match (v, scalar(v)) {
            (Value::String(s), _) => {
                out.insert(key, s.clone());
            }
            (_, Some(s)) => {
                warnings.push(format!(
                    "`metadata.{key}` is {}; taken as the text \"{s}\" (metadata values are strings: quote it)",
                    kind(v)
                ));
                out.insert(key, s);
            }
            (other, None) => warnings.push(format!(
                "`metadata.{key}` is {}; metadata values are strings, so it is left out",
                kind(other)
            )),
        }
    }
    out
}

/// `allowed-tools` as written: a string split at spaces and at commas outside
/// parentheses (`Bash(git add:*), Read` is two entries), or a YAML list of strings.
fn allowed_tools(map: &Mapping, warnings: &mut Vec<String>) -> Option<Vec<String>> {
    match map.get("allowed-tools") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(split_tool_list(s)),
        // A YAML list of names, as some agents write it, says the same.
        Some(Value::Sequence(items)) => {
            let mut out = Vec::new();
            for v in items {
                match v {
                    Value::String(s) => out.extend(split_tool_list(s)),
                    other => warnings.push(format!(
                        "`allowed-tools` has {}, which is not a tool; left out",
                        kind(other)
                    )),
                }
            }
            Some(out)
        }
        Some(v) => {
            warnings.push(format!(
                "`allowed-tools` is {}; it must be a list of tools, so it is left out (the skill restricts nothing)",
                kind(v)
            ));
            None
        }
    }
}

/// The entries of an `allowed-tools` string: separated by white space or commas, but
/// never inside parentheses (`Bash(git add:*)` is one entry, its space kept).
pub fn split_tool_list(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                cur.push(c);
            }
            c if depth == 0 && (c.is_whitespace() || c == ',') => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(yaml: &str) -> String {
        format!("---\n{yaml}---\n# Body\n")
    }

    #[test]
    fn a_full_frontmatter_is_read() {
        let p = parse(
            &md("name: pdf-tools\ndescription: Fills PDF forms.\nlicense: MIT\ncompatibility: needs python3\nmetadata:\n  author: me\n  version: \"1.0\"\nallowed-tools: file_read  exec\n"),
            "pdf-tools",
        )
        .unwrap();
        let f = p.frontmatter;
        assert_eq!(f.name, "pdf-tools");
        assert_eq!(f.description, "Fills PDF forms.");
        assert_eq!(f.license.as_deref(), Some("MIT"));
        assert_eq!(f.compatibility.as_deref(), Some("needs python3"));
        assert_eq!(f.metadata["version"], "1.0");
        assert_eq!(f.allowed_tools.unwrap(), ["file_read", "exec"]);
        assert!(p.warnings.is_empty());
    }

    #[test]
    fn unknown_keys_are_kept_with_a_warning() {
        let p = parse(&md("name: a\ndescription: d\nversion: 2\n"), "a").unwrap();
        assert_eq!(p.frontmatter.extra["version"], serde_json::json!(2));
        assert_eq!(p.warnings.len(), 1);
        assert!(p.warnings[0].contains("`version`"), "{:?}", p.warnings);
    }

    #[test]
    fn the_name_rules() {
        for good in ["a", "pdf", "a-b-c", "x1", &"a".repeat(64)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for (bad, why) in [
            ("", "1 to 64"),
            (&*"a".repeat(65), "1 to 64"),
            ("Pdf", "`P`"),
            ("pdf_tools", "`_`"),
            ("pdf tools", "` `"),
            ("-pdf", "hyphen"),
            ("pdf-", "hyphen"),
            ("pdf--tools", "two hyphens"),
            ("имя", "`и`"),
        ] {
            let e = check_name(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn usable_names_are_wider_than_the_format_s() {
        for good in [
            "a",
            "Pdf_Forms",
            "отчёт-pdf",
            "v1.2",
            "pdf--x",
            &"a".repeat(128),
        ] {
            assert!(check_usable(good).is_ok(), "{good}");
        }
        for (bad, why) in [
            ("", "1 to 128"),
            (&*"a".repeat(129), "1 to 128"),
            ("pdf tools", "' '"),
            ("a:b", "':'"),
            ("a\u{7}", "'\\u{7}'"),
            ("-pdf", "does not start"),
            ("_x", "does not start"),
        ] {
            let e = check_usable(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    /// What the Agent Skills client guide says to load with a warning: each case loads,
    /// and says what it broke.
    #[test]
    fn lenient_cases_load_with_their_warning() {
        for (text, folder, warning) in [
            (
                md("name: pdf\ndescription: d\n"),
                "pdf-forms",
                "differs from its folder's name `pdf-forms`; the skill is called `pdf-forms`",
            ),
            (md("description: d\n"), "a", "`name` is missing"),
            (
                md("name: 12\ndescription: d\n"),
                "a",
                "differs from its folder",
            ),
            (md("name: [x]\ndescription: d\n"), "a", "`name` is a list"),
            (md("name: Bad\ndescription: d\n"), "Bad", "has `B`"),
            (md("name: отчёт\ndescription: d\n"), "отчёт", "has `о`"),
            (
                md(&format!("name: a\ndescription: {}\n", "x".repeat(1025))),
                "a",
                "1025 characters, more than the format's 1024",
            ),
            (
                md(&format!(
                    "name: a\ndescription: d\ncompatibility: {}\n",
                    "x".repeat(501)
                )),
                "a",
                "more than the format's 500",
            ),
            (
                md("name: a\ndescription: d\nmetadata: [x]\n"),
                "a",
                "`metadata` is a list",
            ),
            (
                md("name: a\ndescription: d\nmetadata:\n  version: 1.0\n"),
                "a",
                "`metadata.version` is a number; taken as the text \"1.0\"",
            ),
            (
                md("name: a\ndescription: d\nmetadata:\n  v: [1]\n"),
                "a",
                "`metadata.v` is a list",
            ),
            (
                md("name: a\ndescription: d\nlicense: 2.0\n"),
                "a",
                "`license` is a number; taken as the text \"2.0\"",
            ),
            (
                md("name: a\ndescription: d\nlicense: [x]\n"),
                "a",
                "`license` is a list",
            ),
            (
                md("name: a\ndescription: d\nallowed-tools: 3\n"),
                "a",
                "`allowed-tools` is a number",
            ),
        ] {
            let p = parse(&text, folder).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(p.frontmatter.name, folder);
            assert!(
                p.warnings.iter().any(|w| w.contains(warning)),
                "{text:?}: {:?}",
                p.warnings
            );
        }
        let p = parse(
            &md("name: a\ndescription: d\nmetadata:\n  version: 1.0\nlicense: 2.0\n"),
            "a",
        )
        .unwrap();
        assert_eq!(p.frontmatter.metadata["version"], "1.0");
        assert_eq!(p.frontmatter.license.as_deref(), Some("2.0"));
        assert_eq!(
            parse(&md("name: a\ndescription: 42\n"), "a")
                .unwrap()
                .frontmatter
                .description,
            "42"
        );
        let p = parse(&md("name: pdf\ndescription: d\n"), "pdf-forms").unwrap();
        assert_eq!(p.frontmatter.declared_name.as_deref(), Some("pdf"));
    }

    #[test]
    fn every_unusable_skill_says_why() {
        for (text, folder, why) in [
            ("# no frontmatter\n".to_owned(), "a", "no frontmatter"),
            ("---\nname: a\n".to_owned(), "a", "not closed"),
            (md("name: [a\n"), "a", "not valid YAML"),
            (md(""), "a", "empty"),
            (md("- a\n- b\n"), "a", "not a YAML mapping"),
            (md("name: a\n"), "a", "`description` is missing"),
            (
                md("name: a\ndescription: \"  \"\n"),
                "a",
                "`description` is empty",
            ),
            (
                md("name: a\ndescription: [x]\n"),
                "a",
                "`description` is a list",
            ),
            (md("name: a\ndescription: d\n"), "a b", "rename the folder"),
        ] {
            let e = parse(&text, folder).unwrap_err().to_string();
            assert!(e.contains(why), "{text:?}: {e}");
        }
    }

    /// A YAML error's line is the file's: the opening `---` is line 1.
    #[test]
    fn yaml_errors_count_lines_from_the_file() {
        let e = parse("---\nname: a\ndescription: d\nlicense: [x\n---\n", "a")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 5"), "{e}");
        let e = parse("\u{feff}---\nname: a\n  bad: indent\n---\n", "a")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3"), "{e}");
    }

    #[test]
    fn tool_lists_split_at_spaces_and_commas_outside_parentheses() {
        assert_eq!(
            split_tool_list("Bash(git add:*), Read,Grep  exec"),
            ["Bash(git add:*)", "Read", "Grep", "exec"]
        );
        assert_eq!(split_tool_list(" "), Vec::<String>::new());
    }

    #[test]
    fn a_description_of_1024_characters_is_fine_and_the_body_is_not_parsed() {
        let text = format!(
            "\u{feff}---\nname: a\ndescription: {}\n---\n---\nnot: [yaml\n",
            "я".repeat(1024)
        );
        let p = parse(&text, "a").unwrap();
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        let (yaml, body) = split(&text).unwrap();
        assert!(yaml.starts_with("name: a"));
        assert_eq!(body, "---\nnot: [yaml\n");
    }
}
