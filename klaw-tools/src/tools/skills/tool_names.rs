//! `allowed-tools` as people write it: other clients' tool names (Claude Code's
//! `Bash(git add:*)`, `Read`) in Klaw's tools. Imports nothing of the group, so the
//! frontmatter's reading and the allowed-tools check can both use it.

/// Other clients' tool names in `allowed-tools` (Claude Code's) and the Klaw tools they
/// mean. A name not here and not written like a Klaw tool's (`file_read`) is reported,
/// never guessed. `Grep` and `Glob` read files without running anything: the read-only
/// file tools, not `exec`.
pub const CLIENT_TOOLS: &[(&str, &[&str])] = &[
    ("Bash", &["exec", "process"]),
    ("Read", &["file_read"]),
    ("Write", &["file_write"]),
    ("Edit", &["file_edit"]),
    ("MultiEdit", &["file_edit"]),
    ("LS", &["file_list"]),
    ("Glob", &["file_list"]),
    ("Grep", &["file_list", "file_read"]),
    ("WebFetch", &["web_fetch"]),
    ("WebSearch", &["web_search"]),
    ("Task", &["subagent_spawn"]),
    ("Agent", &["subagent_spawn"]),
    ("Skill", &["skill_list", "skill_load"]),
];

/// An `allowed-tools` list as written, in Klaw's tools: each entry a Klaw tool's name
/// (`file_read`, `exec(git:*)`) as it is, another client's name mapped through
/// [`CLIENT_TOOLS`] with what its parenthesis says kept (`Bash(git add:*)` →
/// `exec(git add:*)`, `process(git add:*)`), an MCP tool `mcp__<server>__<tool>` as the
/// imported `<server>__<tool>`; the second list names the entries that mean no Klaw
/// tool, for a warning.
pub fn map_allowed(written: &[String]) -> (Vec<String>, Vec<String>) {
    let mut tools: Vec<String> = Vec::new();
    let mut unknown = Vec::new();
    for entry in written {
        let (name, narrow) = match entry.split_once('(') {
            Some((n, rest)) if rest.ends_with(')') => (n.trim(), Some(&entry[n.len()..])),
            Some(_) => {
                unknown.push(entry.clone());
                continue;
            }
            None => (entry.as_str(), None),
        };
        let with = |t: &str| format!("{t}{}", narrow.unwrap_or(""));
        let mapped: Vec<String> =
            if let Some((_, klaw)) = CLIENT_TOOLS.iter().find(|(client, _)| *client == name) {
                klaw.iter().map(|t| with(t)).collect()
            } else if let Some(imported) = name.strip_prefix("mcp__").filter(|n| n.contains("__")) {
                vec![with(imported)]
            } else if !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
            {
                vec![entry.clone()]
            } else {
                unknown.push(entry.clone());
                continue;
            };
        for t in mapped {
            if !tools.contains(&t) {
                tools.push(t);
            }
        }
    }
    (tools, unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn claude_code_s_names_map_to_klaw_s_tools() {
        let (tools, unknown) = map_allowed(&strings(&[
            "Bash(git add:*)",
            "Read",
            "Grep",
            "file_write",
            "exec(python3:*)",
            "mcp__github__create_issue",
            "TodoWrite",
            "Bash(git",
            "WebFetch(domain:example.com)",
        ]));
        assert_eq!(
            tools,
            strings(&[
                "exec(git add:*)",
                "process(git add:*)",
                "file_read",
                "file_list",
                "file_write",
                "exec(python3:*)",
                "github__create_issue",
                "web_fetch(domain:example.com)",
            ])
        );
        assert_eq!(unknown, strings(&["TodoWrite", "Bash(git"]));
    }
}
