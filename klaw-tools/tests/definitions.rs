//! Every built-in tool, rendered in every format and language: snapshots pin the exact
//! definitions clients receive, and invariants hold for each (valid JSON Schema,
//! strict-mode shape for OpenAI, the Gemini subset, non-empty descriptions).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::sync::Arc;

use klaw_tools::{Format, Lang, ToolRegistry, definition};
use serde_json::Value;

/// The built-in tools: those collected but the ones a test file of this binary defines
/// (`execute.rs`'s, linked into the same test binary).
fn registry() -> ToolRegistry {
    let all = ToolRegistry::collect().expect("built-in tools are valid");
    let mut built_in = ToolRegistry::new();
    for tool in all.all() {
        if !tool.spec().origin.starts_with("klaw-tools/tests/") {
            built_in.register(Arc::clone(tool)).unwrap();
        }
    }
    built_in
}

#[test]
fn snapshots_of_every_tool_in_every_format() {
    let registry = registry();
    assert!(!registry.is_empty());
    for tool in registry.all() {
        for format in Format::ALL {
            for (lang, code) in [(Lang::Ru, "ru"), (Lang::En, "en")] {
                let def = definition(tool.spec(), format, lang);
                insta::assert_json_snapshot!(
                    format!("{}__{}__{code}", tool.spec().name, format.name()),
                    def
                );
            }
        }
    }
}

fn walk<'a>(v: &'a Value, at: String, out: &mut Vec<(String, &'a serde_json::Map<String, Value>)>) {
    if let Value::Object(m) = v {
        out.push((at.clone(), m));
        if let Some(Value::Object(props)) = m.get("properties") {
            for (k, p) in props {
                walk(p, format!("{at}/properties/{k}"), out);
            }
        }
        if let Some(items) = m.get("items") {
            walk(items, format!("{at}/items"), out);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = m.get(key) {
                for (i, o) in options.iter().enumerate() {
                    walk(o, format!("{at}/{key}/{i}"), out);
                }
            }
        }
    }
}

#[test]
fn every_schema_is_valid_json_schema() {
    for tool in registry().all() {
        let spec = tool.spec();
        for schema in std::iter::once(&spec.input_schema).chain(spec.output_schema.as_ref()) {
            if let Err(e) = jsonschema::meta::validate(schema) {
                panic!("{}: {e}", spec.name);
            }
        }
        for format in Format::ALL {
            let def = definition(spec, format, Lang::Ru);
            let params = match format {
                Format::OpenAi | Format::OpenAiLoose => &def["function"]["parameters"],
                Format::Anthropic => &def["input_schema"],
                Format::Gemini => continue, // OpenAPI subset, checked below
                Format::Mcp => &def["inputSchema"],
            };
            if let Err(e) = jsonschema::meta::validate(params) {
                panic!("{} in {}: {e}", spec.name, format.name());
            }
        }
    }
}

#[test]
fn openai_definitions_are_strict_mode_compatible() {
    for tool in registry().all() {
        let def = definition(tool.spec(), Format::OpenAi, Lang::Ru);
        let mut nodes = Vec::new();
        walk(&def["function"]["parameters"], String::new(), &mut nodes);
        let strict = def["function"]["strict"] == Value::Bool(true);
        for (at, node) in nodes {
            if node.get("type").and_then(Value::as_str) == Some("object")
                || node
                    .get("type")
                    .and_then(Value::as_array)
                    .is_some_and(|t| t.contains(&"object".into()))
            {
                assert_eq!(
                    node.get("additionalProperties"),
                    Some(&Value::Bool(false)),
                    "{at}"
                );
                let keys: Vec<&String> = node["properties"].as_object().unwrap().keys().collect();
                let required: Vec<&str> = node["required"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap())
                    .collect();
                assert_eq!(
                    keys.len(),
                    required.len(),
                    "{at}: every property is required in strict mode"
                );
            }
            for banned in ["default", "minimum", "maximum", "$ref"] {
                assert!(
                    !node.contains_key(banned),
                    "{}{at}: `{banned}` in strict mode",
                    tool.spec().name
                );
            }
            if strict {
                assert!(
                    node.contains_key("type") || node.contains_key("anyOf"),
                    "{at}: untyped node in a strict tool"
                );
            }
        }
    }
}

#[test]
fn gemini_definitions_use_the_openapi_subset() {
    for tool in registry().all() {
        let def = definition(tool.spec(), Format::Gemini, Lang::Ru);
        let mut nodes = Vec::new();
        walk(&def["parameters"], String::new(), &mut nodes);
        for (at, node) in nodes {
            for banned in [
                "additionalProperties",
                "$ref",
                "$defs",
                "default",
                "$schema",
            ] {
                assert!(
                    !node.contains_key(banned),
                    "{}{at}: `{banned}`",
                    tool.spec().name
                );
            }
            if let Some(t) = node.get("type") {
                assert!(
                    t.is_string(),
                    "{}{at}: type arrays are not allowed",
                    tool.spec().name
                );
            }
        }
    }
}

#[test]
fn built_in_tools_are_described_in_both_languages() {
    for tool in registry().all() {
        let spec = tool.spec();
        assert!(!spec.description.ru.trim().is_empty(), "{}", spec.name);
        assert!(
            spec.description
                .en
                .as_deref()
                .is_some_and(|e| !e.trim().is_empty()),
            "{}: no English description",
            spec.name
        );
        let mut nodes = Vec::new();
        walk(&spec.input_schema, String::new(), &mut nodes);
        for (at, node) in nodes.into_iter().skip(1) {
            if at.matches("/properties/").count() == 1
                && at.rsplit('/').nth(1) == Some("properties")
            {
                assert!(
                    node.get("description")
                        .and_then(Value::as_str)
                        .is_some_and(|d| !d.is_empty()),
                    "{}{at}: no description",
                    spec.name
                );
                assert!(
                    node.contains_key("x-klaw-description-en"),
                    "{}{at}: no English description",
                    spec.name
                );
            }
        }
    }
}

#[test]
fn names_are_unique_and_well_formed() {
    let registry = registry();
    let names: Vec<&str> = registry.names().collect();
    let mut sorted = names.clone();
    sorted.dedup();
    assert_eq!(names, sorted);
    for n in names {
        assert!(
            !n.is_empty()
                && n.len() <= 64
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "{n}"
        );
    }
}

/// The `topK` bounds the schema shows are the ones the tools check (the attribute takes
/// literals, the checks take the constants).
#[cfg(feature = "docs")]
#[test]
fn top_k_bounds_in_the_schema_match_the_tools_checks() {
    let registry = registry();
    for (tool, max) in [
        ("memory_search", klaw_tools::tools::memory::MAX_TOP_K),
        ("docs_search", klaw_tools::tools::docs::search::MAX_TOP_K),
    ] {
        let top_k = &registry.by_name(tool).unwrap().spec().input_schema["properties"]["topK"];
        assert_eq!(top_k["minimum"], 1, "{tool}: {top_k}");
        assert_eq!(top_k["maximum"], max, "{tool}: {top_k}");
    }
}
