//! How a model without native function calling is given the tools and how its calls
//! are read: `text` (the tools in the system prompt, calls written as `TOOL: name` and
//! `TOOL_PARAMS: {...}`) and `json` (the reply constrained by a JSON Schema to
//! `{"tool": name, "arguments": {...}}` or `{"answer": "..."}`). The history stays the
//! same for every protocol; [`render`] turns it into what such a model reads.

use klaw_tools::{Format, Lang, ToolSpec};
use serde_json::{Value, json};

use crate::llm::{Arguments, AssistantMessage, Message, ToolCallRequest};

/// The system prompt's part that describes the tools and how to call them: each tool's
/// name and the first line of its description (small models have small contexts), and
/// for `text` its arguments as `name: type` (`?` when optional; the `json` protocol's
/// schema carries them instead).
pub fn tools_prompt(tools: &[ToolSpec], lang: Lang, json_protocol: bool) -> String {
    let mut s = String::from("You can use these tools:\n");
    for t in tools {
        let description = t.description.get(lang);
        let first = description.lines().next().unwrap_or_default();
        s.push_str(&format!("- {}: {first}", t.name));
        if !json_protocol {
            s.push_str(&format!(" Arguments: {}", argument_list(&t.input_schema)));
        }
        s.push('\n');
    }
    if json_protocol {
        s.push_str(
            "\nReply with one JSON object only. To use a tool: \
             {\"tool\": \"<name>\", \"arguments\": {...}}. To answer the user: \
             {\"answer\": \"<your answer>\"}. After a tool's result arrives, answer with it.\n",
        );
    } else {
        s.push_str(
            "\nTo use a tool, write exactly these two lines and nothing after them:\n\
             TOOL: <name>\nTOOL_PARAMS: {\"argument\": \"value\"}\n\
             The result comes back in the next message. To answer the user, write the \
             answer without a TOOL line.\n",
        );
    }
    s
}

/// `{path: string, startLine?: integer}`: a schema's top-level arguments.
fn argument_list(schema: &Value) -> String {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema["properties"].as_object() else {
        return "{}".into();
    };
    let items: Vec<String> = props
        .iter()
        .map(|(name, p)| {
            let ty = match &p["type"] {
                Value::String(t) => t.clone(),
                Value::Array(ts) => ts
                    .iter()
                    .filter_map(Value::as_str)
                    .filter(|t| *t != "null")
                    .collect::<Vec<_>>()
                    .join("|"),
                _ => "any".into(),
            };
            let opt = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            format!("{name}{opt}: {ty}")
        })
        .collect();
    format!("{{{}}}", items.join(", "))
}

/// The schema of a `json` protocol reply: one branch per tool, and the answer.
pub fn reply_schema(tools: &[ToolSpec], lang: Lang) -> Value {
    let mut branches: Vec<Value> = tools
        .iter()
        .map(|t| {
            let d = klaw_tools::definition(t, Format::OpenAiLoose, lang);
            json!({
                "type": "object",
                "properties": {
                    "tool": {"const": t.name},
                    "arguments": d["function"]["parameters"],
                },
                "required": ["tool", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    branches.push(json!({
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": false,
    }));
    json!({"anyOf": branches})
}

/// What a reply of a `text` or `json` model says: its calls, or its answer.
pub fn parse_reply(text: &str, json_protocol: bool, round: u32) -> AssistantMessage {
    let calls = if json_protocol {
        parse_json(text)
    } else {
        parse_text(text)
    };
    match calls {
        Some(calls) if !calls.is_empty() => AssistantMessage {
            text: text.to_owned(),
            tool_calls: calls
                .into_iter()
                .enumerate()
                .map(|(i, (name, arguments))| ToolCallRequest {
                    id: format!("call_{round}_{i}"),
                    name,
                    arguments,
                })
                .collect(),
        },
        _ => AssistantMessage {
            text: if json_protocol {
                json_answer(text).unwrap_or_else(|| text.trim().to_owned())
            } else {
                text.trim().to_owned()
            },
            tool_calls: Vec::new(),
        },
    }
}

/// `{"tool": ..., "arguments": ...}` as a call.
fn parse_json(text: &str) -> Option<Vec<(String, Arguments)>> {
    let v: Value = serde_json::from_str(text.trim()).ok()?;
    let name = v.get("tool")?.as_str()?.to_owned();
    let args = match v.get("arguments") {
        Some(a @ Value::Object(_)) => Arguments::Json(a.clone()),
        other => Arguments::from_wire(other),
    };
    Some(vec![(name, args)])
}

/// `{"answer": ...}`'s text; from a reply cut off by the token limit, the part of the
/// string that arrived.
fn json_answer(text: &str) -> Option<String> {
    if let Ok(v) = serde_json::from_str::<Value>(text.trim()) {
        return v.get("answer")?.as_str().map(str::to_owned);
    }
    let rest = text.trim_start().strip_prefix('{')?.trim_start();
    let rest = rest.strip_prefix("\"answer\"")?.trim_start();
    let rest = rest.strip_prefix(':')?.trim_start().strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => break,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => out.push(other),
                None => break,
            },
            c => out.push(c),
        }
    }
    Some(out)
}

/// `TOOL: name` lines, each with the `TOOL_PARAMS:` that follows it (the rest of that
/// line, and of the lines after it until the JSON is whole).
fn parse_text(text: &str) -> Option<Vec<(String, Arguments)>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut calls = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(name) = lines[i].trim().strip_prefix("TOOL:") else {
            i += 1;
            continue;
        };
        let name = name.trim().trim_matches('`').to_owned();
        i += 1;
        let mut args = Arguments::Json(json!({}));
        if let Some(first) = lines
            .get(i)
            .and_then(|l| l.trim().strip_prefix("TOOL_PARAMS:"))
        {
            let mut raw = first.trim().to_owned();
            i += 1;
            // A JSON object written over several lines.
            while serde_json::from_str::<Value>(&raw).is_err()
                && i < lines.len()
                && !lines[i].trim().starts_with("TOOL:")
            {
                raw.push('\n');
                raw.push_str(lines[i]);
                i += 1;
            }
            args = Arguments::parse(raw.trim().trim_matches('`'));
        }
        if !name.is_empty() && name != "none" {
            calls.push((name, args));
        }
    }
    Some(calls)
}

/// The history as a `text` or `json` model reads it: its own calls as it wrote them,
/// and tool results as user messages.
pub fn render(messages: &[Message], json_protocol: bool) -> Vec<Message> {
    messages
        .iter()
        .map(|m| match m {
            Message::Assistant(a) if !a.tool_calls.is_empty() => {
                let text = a
                    .tool_calls
                    .iter()
                    .map(|c| {
                        if json_protocol {
                            json!({"tool": c.name, "arguments": c.arguments.to_value()}).to_string()
                        } else {
                            format!(
                                "TOOL: {}\nTOOL_PARAMS: {}",
                                c.name,
                                c.arguments.to_wire_string()
                            )
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                Message::Assistant(AssistantMessage {
                    text,
                    tool_calls: Vec::new(),
                })
            }
            Message::Tool(r) => Message::User(format!(
                "{} of the tool {}:\n{}\n\n{}",
                if r.is_error { "Error" } else { "Result" },
                r.name,
                r.content,
                if r.is_error {
                    "Fix the call, or answer the user."
                } else {
                    "Now answer the user with it, or use another tool if you need more."
                }
            )),
            other => other.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolResult;

    fn spec() -> ToolSpec {
        ToolSpec::new(
            "current_time",
            "Текущее время",
            json!({"type": "object", "properties": {"timezone": {"type": "string"}}}),
        )
    }

    #[test]
    fn text_calls_are_read_from_the_reply() {
        let r = parse_reply(
            "I will check.\nTOOL: current_time\nTOOL_PARAMS: {\"timezone\":\n \"UTC\"}\nTOOL: echo\nTOOL_PARAMS: {bad",
            false,
            2,
        );
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(r.tool_calls[0].id, "call_2_0");
        assert_eq!(
            r.tool_calls[0].arguments,
            Arguments::Json(json!({"timezone": "UTC"}))
        );
        assert!(matches!(
            r.tool_calls[1].arguments,
            Arguments::Malformed { .. }
        ));
        let answer = parse_reply("It is noon.\nTOOL: none", false, 0);
        assert!(answer.tool_calls.is_empty());
        assert_eq!(parse_reply("Just text", false, 0).text, "Just text");
    }

    #[test]
    fn json_replies_are_a_call_or_an_answer() {
        let r = parse_reply("{\"tool\": \"current_time\", \"arguments\": {}}", true, 0);
        assert_eq!(r.tool_calls[0].name, "current_time");
        let a = parse_reply("{\"answer\": \"noon\"}", true, 0);
        assert!(a.tool_calls.is_empty());
        assert_eq!(a.text, "noon");
        assert_eq!(parse_reply("{\"answer\": ", true, 0).text, "{\"answer\":");
        let cut = parse_reply("{\"answer\": \"It is \\\"noon\\\" and", true, 0);
        assert_eq!(cut.text, "It is \"noon\" and");
    }

    #[test]
    fn the_schema_has_a_branch_per_tool_and_the_answer() {
        let s = reply_schema(&[spec()], Lang::En);
        let b = s["anyOf"].as_array().unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b[0]["properties"]["tool"]["const"], "current_time");
        assert_eq!(b[0]["properties"]["arguments"]["type"], "object");
        assert_eq!(b[1]["required"], json!(["answer"]));
        assert!(
            tools_prompt(&[spec()], Lang::Ru, true).contains("- current_time: Текущее время\n")
        );
        assert!(
            tools_prompt(&[spec()], Lang::Ru, false)
                .contains("- current_time: Текущее время Arguments: {timezone?: string}\n")
        );
    }

    #[test]
    fn the_history_is_rendered_for_the_protocol() {
        let history = vec![
            Message::User("time?".into()),
            Message::Assistant(AssistantMessage {
                text: String::new(),
                tool_calls: vec![ToolCallRequest {
                    id: "c".into(),
                    name: "current_time".into(),
                    arguments: Arguments::Json(json!({})),
                }],
            }),
            Message::Tool(ToolResult {
                call_id: "c".into(),
                name: "current_time".into(),
                content: "12:00".into(),
                is_error: false,
            }),
        ];
        let text = render(&history, false);
        assert!(
            matches!(&text[1], Message::Assistant(a) if a.text == "TOOL: current_time\nTOOL_PARAMS: {}")
        );
        assert!(
            matches!(&text[2], Message::User(u) if u.starts_with("Result of the tool current_time:\n12:00\n"))
        );
        let json = render(&history, true);
        let Message::Assistant(a) = &json[1] else {
            panic!("{json:?}")
        };
        let v: Value = serde_json::from_str(&a.text).unwrap();
        assert_eq!(v, json!({"tool": "current_time", "arguments": {}}));
    }
}
