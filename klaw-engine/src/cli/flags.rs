//! A tool's argument error in the words of the command line: the subcommands that call a
//! tool with their flags (`schedule add`, `memory search`) name the flag the user typed
//! (`--history-messages: 2000 is more than 1000`), not the JSON pointer the tool saw
//! (`/historyMessages: ...`). The flag is the one clap made for the argument: the
//! subcommand's argument whose name, in camelCase, is the pointer's first segment.

use clap::CommandFactory;
use klaw_tools::ToolError;

use super::Cli;

/// The subcommand whose flags gave a call's arguments: its path from the top
/// (`["schedule", "add"]`).
pub(super) type Subcommand = &'static [&'static str];

/// `error`'s message with its pointer prefix turned into the flag of `subcommand` that
/// gave the argument (`--top-k: expected a number ≥ 1, got 0`; a nested pointer keeps
/// the rest: `--tag/0: ...`). A pointer no flag gave (a whole-arguments error, a key the
/// subcommand does not have) leaves the message as it is.
pub(super) fn message(error: &ToolError, subcommand: Subcommand) -> String {
    let text = error.message();
    let Some(pointer) = error.pointer().filter(|p| !p.is_empty()) else {
        return text.to_owned();
    };
    let Some(said) = text
        .strip_prefix(pointer)
        .and_then(|rest| rest.strip_prefix(": "))
    else {
        return text.to_owned();
    };
    match flag(subcommand, pointer) {
        Some(flag) => format!("{flag}: {said}"),
        None => text.to_owned(),
    }
}

/// The flag (`--top-k`) or positional argument (`<CRON>`) of `subcommand` for the
/// pointer's first segment, followed by the rest of the pointer.
fn flag(subcommand: Subcommand, pointer: &str) -> Option<String> {
    let (first, rest) = match pointer.strip_prefix('/')?.split_once('/') {
        Some((first, rest)) => (first, Some(rest)),
        None => (pointer.strip_prefix('/')?, None),
    };
    let key = first.replace("~1", "/").replace("~0", "~");
    let mut command = Cli::command();
    for name in subcommand {
        command = command.find_subcommand(name)?.clone();
    }
    let arg = command
        .get_arguments()
        .find(|a| camel_case(a.get_id().as_str()) == key)?;
    let name = match arg.get_long() {
        Some(long) => format!("--{long}"),
        None => {
            let value = arg
                .get_value_names()
                .and_then(|names| names.first())
                .map_or_else(|| arg.get_id().as_str().to_uppercase(), ToString::to_string);
            format!("<{value}>")
        }
    };
    Some(match rest {
        Some(rest) => format!("{name}/{rest}"),
        None => name,
    })
}

/// `top_k` → `topK`: a clap argument's name as the tool's JSON key.
fn camel_case(id: &str) -> String {
    heck::ToLowerCamelCase::to_lower_camel_case(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADD: Subcommand = &["schedule", "add"];

    fn said(pointer: &str, text: &str, subcommand: Subcommand) -> String {
        message(&ToolError::invalid_arguments(pointer, text), subcommand)
    }

    #[test]
    fn a_pointer_becomes_the_flag_or_the_positional_argument() {
        assert_eq!(
            said("/historyMessages", "2000 is more than 1000", ADD),
            "--history-messages: 2000 is more than 1000"
        );
        assert_eq!(
            said("/injectInto", "no such chat", ADD),
            "--inject-into: no such chat"
        );
        assert_eq!(said("/cron", "4 fields", ADD), "<CRON>: 4 fields");
        assert_eq!(
            said("/historyMessages/0", "nested", ADD),
            "--history-messages/0: nested"
        );
    }

    #[test]
    fn what_no_flag_gave_is_left_as_it_is() {
        assert_eq!(said("/nope", "x", ADD), "/nope: x");
        assert_eq!(said("", "not JSON", ADD), "not JSON");
        assert_eq!(said("/cron", "x", &["schedule", "nope"]), "/cron: x");
        let other = ToolError::failed("/cron: x");
        assert_eq!(message(&other, ADD), "/cron: x");
    }

    /// The conversion as it was written by hand before heck: `_` and `-` dropped, the
    /// letter after them upper-cased, everything else kept.
    fn by_hand(id: &str) -> String {
        let mut out = String::with_capacity(id.len());
        let mut upper = false;
        for c in id.chars() {
            if c == '_' || c == '-' {
                upper = true;
            } else if upper {
                out.extend(c.to_uppercase());
                upper = false;
            } else {
                out.push(c);
            }
        }
        out
    }

    /// Every argument of every (sub)command the CLI has (56 with every feature)
    /// converts as it did by hand.
    #[test]
    fn every_flag_converts_as_before() {
        fn walk(command: &mut clap::Command, path: &str, seen: &mut Vec<String>) {
            command.build();
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                assert_eq!(camel_case(id), by_hand(id), "{path}: {id}");
                seen.push(format!("{path} {id}"));
            }
            for sub in command.get_subcommands_mut() {
                let path = format!("{path} {}", sub.get_name());
                walk(sub, &path, seen);
            }
        }
        let mut seen = Vec::new();
        walk(&mut Cli::command(), "klaw-engine", &mut seen);
        // The subcommands were reached, not only the top level.
        assert!(
            seen.iter()
                .any(|s| s == "klaw-engine schedule add history_messages"),
            "{seen:?}"
        );
    }

    #[cfg(feature = "memory")]
    #[test]
    fn memory_search_names_its_flags() {
        let search: Subcommand = &["memory", "search"];
        assert_eq!(said("/topK", "got 0", search), "--top-k: got 0");
        assert_eq!(said("/from", "bad date", search), "--from: bad date");
        assert_eq!(said("/query", "empty", search), "<QUERY>: empty");
    }
}
