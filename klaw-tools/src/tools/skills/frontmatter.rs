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

/// A skill's frontmatter, checked.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Frontmatter {
    /// `name`: 1–64 of `a-z`, `0-9`, `-`, no hyphen at either end or twice in a row.
    pub name: String,
    /// `description`: what the skill does and when to use it, 1–1024 characters.
    pub description: String,
    /// `license`, when given.
    pub license: Option<String>,
    /// `compatibility`: what the skill needs (at most 500 characters), when given.
    pub compatibility: Option<String>,
    /// `metadata`: a map of strings.
    pub metadata: BTreeMap<String, String>,
    /// `allowed-tools`: the tools the skill may use (a space-separated list), when given.
    pub allowed_tools: Option<Vec<String>>,
    /// Keys the specification does not define, kept as they were (as JSON).
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// Why a frontmatter (or a skill's name) is refused: a sentence naming the problem;
/// for YAML that does not parse, the parser's error is the
/// [`source`](std::error::Error::source).
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

/// A frontmatter that could be parsed, with what is worth a warning.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The checked frontmatter.
    pub frontmatter: Frontmatter,
    /// Warnings (unknown keys), each a sentence.
    pub warnings: Vec<String>,
}

/// Splits `text` into its frontmatter (the YAML between a first line `---` and the next
/// line `---`) and the body after it.
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

/// Parses and checks the frontmatter of `text` (a whole `SKILL.md`); `folder` is the name
/// of the skill's folder, which `name` must equal. The error is a sentence naming the
/// problem.
pub fn parse(text: &str, folder: &str) -> Result<Parsed, FrontmatterError> {
    let (yaml, _body) = split(text)?;
    let value: Value = yaml_serde::from_str(yaml).map_err(|e| FrontmatterError {
        message: format!("the frontmatter is not valid YAML: {e}"),
        source: Some(e),
    })?;
    let map = match value {
        Value::Mapping(m) => m,
        Value::Null => {
            return Err("the frontmatter is empty: name and description are required".into());
        }
        _ => return Err("the frontmatter is not a YAML mapping of keys to values".into()),
    };
    let name = required(&map, "name")?;
    check_name(&name)?;
    if name != folder {
        return Err(format!(
            "name `{name}` differs from its folder's name `{folder}`; they must be equal"
        )
        .into());
    }
    let description = required(&map, "description")?;
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "description is {} characters, more than {MAX_DESCRIPTION_CHARS}",
            description.chars().count()
        )
        .into());
    }
    let license = optional(&map, "license")?;
    let compatibility = optional(&map, "compatibility")?;
    if let Some(c) = &compatibility
        && c.chars().count() > MAX_COMPATIBILITY_CHARS
    {
        return Err(format!(
            "compatibility is {} characters, more than {MAX_COMPATIBILITY_CHARS}",
            c.chars().count()
        )
        .into());
    }
    let metadata = metadata(&map)?;
    let allowed_tools = allowed_tools(&map)?;
    let mut extra = BTreeMap::new();
    let mut warnings = Vec::new();
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
            name,
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
/// letters `a-z`, digits and hyphens, no hyphen at the start, the end, or twice in a row.
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

fn required(map: &Mapping, key: &str) -> Result<String, String> {
    match map.get(key) {
        None | Some(Value::Null) => Err(format!("`{key}` is missing; it is required")),
        Some(Value::String(s)) if s.trim().is_empty() => {
            Err(format!("`{key}` is empty; it is required"))
        }
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v) => Err(format!("`{key}` is {}; it must be a string", kind(v))),
    }
}

fn optional(map: &Mapping, key: &str) -> Result<Option<String>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(format!("`{key}` is {}; it must be a string", kind(v))),
    }
}

fn metadata(map: &Mapping) -> Result<BTreeMap<String, String>, String> {
    let m = match map.get("metadata") {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Mapping(m)) => m,
        Some(v) => {
            return Err(format!(
                "`metadata` is {}; it must be a mapping of strings",
                kind(v)
            ));
        }
    };
    let mut out = BTreeMap::new();
    for (k, v) in m {
        let key = key_text(k);
        match v {
            Value::String(s) => {
                out.insert(key, s.clone());
            }
            other => {
                return Err(format!(
                    "`metadata.{key}` is {}; metadata values must be strings (quote it)",
                    kind(other)
                ));
            }
        }
    }
    Ok(out)
}

fn allowed_tools(map: &Mapping) -> Result<Option<Vec<String>>, String> {
    match map.get("allowed-tools") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.split_whitespace().map(str::to_owned).collect())),
        // A YAML list of names, as some agents write it, says the same.
        Some(Value::Sequence(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.trim().to_owned()),
                other => Err(format!(
                    "`allowed-tools` has {}; it must be a space-separated list of tool names",
                    kind(other)
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(v) => Err(format!(
            "`allowed-tools` is {}; it must be a space-separated list of tool names",
            kind(v)
        )),
    }
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
    fn every_broken_frontmatter_says_what_is_wrong() {
        for (text, folder, why) in [
            ("# no frontmatter\n".to_owned(), "a", "no frontmatter"),
            ("---\nname: a\n".to_owned(), "a", "not closed"),
            (md("name: [a\n"), "a", "not valid YAML"),
            (md(""), "a", "empty"),
            (md("- a\n- b\n"), "a", "not a YAML mapping"),
            (md("description: d\n"), "a", "`name` is missing"),
            (md("name: a\n"), "a", "`description` is missing"),
            (
                md("name: a\ndescription: \"  \"\n"),
                "a",
                "`description` is empty",
            ),
            (md("name: 12\ndescription: d\n"), "a", "must be a string"),
            (md("name: Bad\ndescription: d\n"), "Bad", "`B`"),
            (
                md("name: a\ndescription: d\n"),
                "b",
                "differs from its folder",
            ),
            (
                md(&format!("name: a\ndescription: {}\n", "x".repeat(1025))),
                "a",
                "more than 1024",
            ),
            (
                md(&format!(
                    "name: a\ndescription: d\ncompatibility: {}\n",
                    "x".repeat(501)
                )),
                "a",
                "more than 500",
            ),
            (
                md("name: a\ndescription: d\nmetadata: [x]\n"),
                "a",
                "mapping of strings",
            ),
            (
                md("name: a\ndescription: d\nmetadata:\n  v: 1\n"),
                "a",
                "`metadata.v`",
            ),
            (
                md("name: a\ndescription: d\nallowed-tools: 3\n"),
                "a",
                "space-separated",
            ),
            (
                md("name: a\ndescription: d\nlicense: [x]\n"),
                "a",
                "`license` is a list",
            ),
        ] {
            let e = parse(&text, folder).unwrap_err().to_string();
            assert!(e.contains(why), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_description_of_1024_characters_is_fine_and_the_body_is_not_parsed() {
        let text = format!(
            "\u{feff}---\nname: a\ndescription: {}\n---\n---\nnot: [yaml\n",
            "я".repeat(1024)
        );
        assert!(parse(&text, "a").is_ok());
        let (yaml, body) = split(&text).unwrap();
        assert!(yaml.starts_with("name: a"));
        assert_eq!(body, "---\nnot: [yaml\n");
    }
}
