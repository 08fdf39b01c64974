//! Argument validation against a canonical JSON Schema, and the start-up check that a
//! schema is one Klaw can serve.
//!
//! The validator covers the JSON Schema vocabulary tools use (`type`, `enum`, `const`,
//! `properties`, `required`, `additionalProperties`, `items`, `anyOf`, `oneOf`,
//! `minimum`, `maximum`, `minLength`, `maxLength`, `minItems`, `maxItems`); other
//! keywords are accepted and ignored. Each violation names its JSON pointer and what was
//! expected.

use serde_json::{Map, Value};

/// One way a value breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// JSON pointer of the offending value (`""` is the root).
    pub pointer: String,
    /// What is wrong, naming what was expected.
    pub message: String,
}

/// Stop collecting after this many violations.
const MAX_VIOLATIONS: usize = 8;

/// Validates `value` against `schema`; returns every violation found (up to a few).
///
/// Compiles the schema first; to validate many values against one schema, build a
/// [`Validator`] once.
pub fn validate(schema: &Value, value: &Value) -> Vec<Violation> {
    Validator::new(schema).validate(value)
}

/// A schema compiled for fast, repeated validation (the registry keeps one per tool).
#[derive(Debug, Clone)]
pub struct Validator {
    root: Node,
}

impl Validator {
    /// Compiles `schema`. Keywords outside the supported vocabulary are ignored.
    pub fn new(schema: &Value) -> Self {
        Self {
            root: Node::compile(schema),
        }
    }

    /// Every violation of `value` (up to a few), each with its JSON pointer.
    pub fn validate(&self, value: &Value) -> Vec<Violation> {
        let mut out = Vec::new();
        let mut ptr = String::new();
        self.root.check(value, &mut ptr, &mut out);
        out
    }
}

const T_NULL: u8 = 1;
const T_BOOL: u8 = 2;
const T_INT: u8 = 4;
const T_NUM: u8 = 8;
const T_STR: u8 = 16;
const T_ARR: u8 = 32;
const T_OBJ: u8 = 64;

#[derive(Debug, Clone, Default)]
enum Extra {
    #[default]
    Allowed,
    Denied,
    Schema(Box<Node>),
}

#[derive(Debug, Clone, Default)]
struct Node {
    /// `false` schema: nothing is valid.
    never: bool,
    /// Bit set of accepted types; 0 means any.
    types: u8,
    /// The `type` keyword as written, for messages.
    type_text: String,
    enumeration: Option<Vec<Value>>,
    constant: Option<Value>,
    any_of: Vec<Node>,
    minimum: Option<Value>,
    maximum: Option<Value>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    items: Option<Box<Node>>,
    properties: Vec<(String, Node)>,
    required: Vec<String>,
    extra: Extra,
}

fn type_bit(t: &str) -> u8 {
    match t {
        "null" => T_NULL,
        "boolean" => T_BOOL,
        "integer" => T_INT,
        "number" => T_NUM | T_INT,
        "string" => T_STR,
        "array" => T_ARR,
        "object" => T_OBJ,
        _ => 0,
    }
}

fn value_bit(v: &Value) -> u8 {
    match type_name(v) {
        "null" => T_NULL,
        "boolean" => T_BOOL,
        "integer" => T_INT,
        "number" => T_NUM,
        "string" => T_STR,
        "array" => T_ARR,
        _ => T_OBJ,
    }
}

impl Node {
    fn compile(schema: &Value) -> Node {
        let Value::Object(s) = schema else {
            return Node {
                never: schema == &Value::Bool(false),
                ..Node::default()
            };
        };
        let mut n = Node::default();
        // One pass over the entries (every tool's schema is compiled at each start-up).
        let (mut any_of, mut one_of) = (None, None);
        for (key, v) in s {
            match (key.as_str(), v) {
                ("type", Value::String(t)) => {
                    n.types = type_bit(t);
                    n.type_text.clone_from(t);
                }
                ("type", Value::Array(ts)) => {
                    let names: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
                    n.types = names.iter().fold(0, |acc, t| acc | type_bit(t));
                    n.type_text = names.join(" or ");
                }
                ("enum", Value::Array(values)) => n.enumeration = Some(values.clone()),
                ("const", v) => n.constant = Some(v.clone()),
                ("anyOf", Value::Array(options)) => any_of = Some(options),
                ("oneOf", Value::Array(options)) => one_of = Some(options),
                ("minimum", v) if v.is_number() => n.minimum = Some(v.clone()),
                ("maximum", v) if v.is_number() => n.maximum = Some(v.clone()),
                ("minLength", v) => n.min_length = v.as_u64(),
                ("maxLength", v) => n.max_length = v.as_u64(),
                ("minItems", v) => n.min_items = v.as_u64(),
                ("maxItems", v) => n.max_items = v.as_u64(),
                ("items", v) => n.items = Some(Box::new(Node::compile(v))),
                ("properties", Value::Object(props)) => {
                    n.properties = props
                        .iter()
                        .map(|(k, v)| (k.clone(), Node::compile(v)))
                        .collect();
                }
                ("required", Value::Array(r)) => {
                    n.required = r
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect();
                }
                ("additionalProperties", Value::Bool(false)) => n.extra = Extra::Denied,
                ("additionalProperties", v @ Value::Object(_)) => {
                    n.extra = Extra::Schema(Box::new(Node::compile(v)));
                }
                _ => {}
            }
        }
        // `oneOf` is checked as `anyOf` (`oneOf` wins when a schema has both).
        if let Some(options) = one_of.or(any_of) {
            n.any_of = options.iter().map(Node::compile).collect();
        }
        // A described enum is an enum: say which values are allowed, not "none of the forms".
        if n.enumeration.is_none()
            && one_of.is_some()
            && let Some(alts) = crate::schema::enum_alternatives(s)
        {
            n.enumeration = Some(alts.into_iter().map(|(v, _)| v).collect());
            n.any_of.clear();
        }
        n
    }

    fn check(&self, value: &Value, ptr: &mut String, out: &mut Vec<Violation>) {
        if out.len() >= MAX_VIOLATIONS {
            return;
        }
        if self.never {
            push(out, ptr, "no value is allowed here".into());
            return;
        }
        if self.types != 0 && self.types & value_bit(value) == 0 {
            push(
                out,
                ptr,
                format!(
                    "expected {}, got {} {}",
                    self.type_text,
                    type_name(value),
                    short(value)
                ),
            );
            return;
        }
        if let Some(allowed) = &self.enumeration
            && !allowed.contains(value)
        {
            let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
            push(
                out,
                ptr,
                format!("expected one of {}, got {}", list.join(", "), short(value)),
            );
            return;
        }
        if let Some(c) = &self.constant
            && c != value
        {
            push(out, ptr, format!("expected {c}, got {}", short(value)));
            return;
        }
        if !self.any_of.is_empty() {
            let ok = self.any_of.iter().any(|o| {
                let mut scratch = Vec::new();
                o.check(value, &mut ptr.clone(), &mut scratch);
                scratch.is_empty()
            });
            if !ok {
                push(
                    out,
                    ptr,
                    format!("{} matches none of the allowed forms", short(value)),
                );
                return;
            }
        }
        match value {
            Value::Number(n) => self.check_number(n, ptr, out),
            Value::String(text) if self.min_length.is_some() || self.max_length.is_some() => {
                let len = text.chars().count() as u64;
                if let Some(min) = self.min_length.filter(|m| len < *m) {
                    push(
                        out,
                        ptr,
                        format!("expected at least {min} characters, got {len}"),
                    );
                }
                if let Some(max) = self.max_length.filter(|m| len > *m) {
                    push(
                        out,
                        ptr,
                        format!("expected at most {max} characters, got {len}"),
                    );
                }
            }
            Value::Array(items) => {
                let n = items.len() as u64;
                if let Some(min) = self.min_items.filter(|m| n < *m) {
                    push(out, ptr, format!("expected at least {min} items, got {n}"));
                }
                if let Some(max) = self.max_items.filter(|m| n > *m) {
                    push(out, ptr, format!("expected at most {max} items, got {n}"));
                }
                if let Some(item) = &self.items {
                    for (i, v) in items.iter().enumerate() {
                        let len = ptr.len();
                        ptr.push('/');
                        ptr.push_str(&i.to_string());
                        item.check(v, ptr, out);
                        ptr.truncate(len);
                    }
                }
            }
            Value::Object(obj) => self.check_object(obj, ptr, out),
            _ => {}
        }
    }

    fn check_number(&self, n: &serde_json::Number, ptr: &str, out: &mut Vec<Violation>) {
        // Compare exactly where both sides are integers, so u64 bounds stay exact.
        let below = |bound: &Value| match (bound.as_i64(), bound.as_u64(), n.as_i64(), n.as_u64()) {
            (Some(b), _, Some(x), _) => x < b,
            (_, Some(b), _, Some(x)) => x < b,
            (_, Some(_), Some(x), None) => x < 0,
            _ => n.as_f64().unwrap_or(0.0) < bound.as_f64().unwrap_or(f64::MIN),
        };
        let above = |bound: &Value| match (bound.as_i64(), bound.as_u64(), n.as_i64(), n.as_u64()) {
            (_, Some(b), _, Some(x)) => x > b,
            (Some(b), _, Some(x), _) => x > b,
            (Some(_), None, None, Some(_)) => true,
            _ => n.as_f64().unwrap_or(0.0) > bound.as_f64().unwrap_or(f64::MAX),
        };
        if let Some(min) = self.minimum.as_ref().filter(|m| below(m)) {
            push(out, ptr, format!("expected a number ≥ {min}, got {n}"));
        }
        if let Some(max) = self.maximum.as_ref().filter(|m| above(m)) {
            push(out, ptr, format!("expected a number ≤ {max}, got {n}"));
        }
    }

    fn check_object(&self, obj: &Map<String, Value>, ptr: &mut String, out: &mut Vec<Violation>) {
        for name in &self.required {
            if !obj.contains_key(name) {
                let expected = self
                    .properties
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, p)| p.type_text.as_str())
                    .filter(|t| !t.is_empty())
                    .map(|t| format!(" ({t})"))
                    .unwrap_or_default();
                let len = ptr.len();
                ptr.push('/');
                escape_into(ptr, name);
                push(
                    out,
                    ptr,
                    format!("missing required argument `{name}`{expected}"),
                );
                ptr.truncate(len);
            }
        }
        for (key, val) in obj {
            let len = ptr.len();
            ptr.push('/');
            escape_into(ptr, key);
            match self.properties.iter().find(|(k, _)| k == key) {
                Some((_, prop)) => {
                    // `null` for an optional property means "not given" (OpenAI strict
                    // mode sends it for every optional argument).
                    if !val.is_null() || self.required.iter().any(|r| r == key) {
                        prop.check(val, ptr, out);
                    }
                }
                None => match &self.extra {
                    Extra::Denied => {
                        let known: Vec<&str> =
                            self.properties.iter().map(|(k, _)| k.as_str()).collect();
                        let hint = crate::similar::closest(key, known.iter().copied())
                            .map(|c| format!("; did you mean `{c}`?"))
                            .unwrap_or_default();
                        let list = if known.is_empty() {
                            "this takes no arguments".to_owned()
                        } else {
                            format!("expected one of: {}", known.join(", "))
                        };
                        push(out, ptr, format!("unknown argument `{key}`{hint} ({list})"));
                    }
                    Extra::Schema(extra) => extra.check(val, ptr, out),
                    Extra::Allowed => {}
                },
            }
            ptr.truncate(len);
        }
    }
}

fn push(out: &mut Vec<Violation>, ptr: &str, message: String) {
    if out.len() < MAX_VIOLATIONS {
        out.push(Violation {
            pointer: ptr.to_owned(),
            message,
        });
    }
}

/// JSON type name of a value, as JSON Schema spells it.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        // `1.0` is a number, not an integer: a Rust integer cannot be read from it.
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 40 {
        let cut: String = s.chars().take(37).collect();
        format!("{cut}...")
    } else {
        s
    }
}

/// Appends `key` to `out` as a JSON pointer segment (`~` as `~0`, `/` as `~1`).
fn escape_into(out: &mut String, key: &str) {
    for c in key.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

/// Checks that `schema` is a JSON Schema Klaw can serve as a tool's arguments: an object
/// root, known types, consistent `required`, no `$ref`, well-formed property names.
/// Returns every problem, each with its JSON pointer.
pub fn check_schema(schema: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => problems.push(format!("the root must have type \"object\", not {other}")),
        None => problems.push("the root must have type \"object\"".into()),
    }
    meta(schema, &mut String::new(), &mut problems);
    problems
}

const TYPES: [&str; 7] = [
    "string", "number", "integer", "boolean", "array", "object", "null",
];

/// The keywords [`meta`] looks at, picked out of a schema object in one pass over its
/// entries (each tool's schema is checked at every start-up: no hashing per keyword).
#[derive(Default)]
struct Keywords<'a> {
    forbidden: [bool; 4],
    type_: Option<&'a Value>,
    description: Option<&'a Value>,
    enumeration: Option<&'a Value>,
    properties: Option<&'a Value>,
    required: Option<&'a Value>,
    items: Option<&'a Value>,
    additional: Option<&'a Value>,
    unions: [Option<&'a Value>; 3],
}

/// Keywords that make a schema depend on another document.
const FORBIDDEN: [&str; 4] = ["$ref", "$defs", "definitions", "$dynamicRef"];
/// Keywords holding alternatives.
const UNIONS: [&str; 3] = ["anyOf", "oneOf", "allOf"];

impl<'a> Keywords<'a> {
    fn of(m: &'a Map<String, Value>) -> Self {
        let mut k = Keywords::default();
        for (key, v) in m {
            match key.as_str() {
                "type" => k.type_ = Some(v),
                "description" => k.description = Some(v),
                "enum" => k.enumeration = Some(v),
                "properties" => k.properties = Some(v),
                "required" => k.required = Some(v),
                "items" => k.items = Some(v),
                "additionalProperties" => k.additional = Some(v),
                other => {
                    if let Some(i) = FORBIDDEN.iter().position(|f| *f == other) {
                        k.forbidden[i] = true;
                    } else if let Some(i) = UNIONS.iter().position(|u| *u == other) {
                        k.unions[i] = Some(v);
                    }
                }
            }
        }
        k
    }
}

/// Checks the schema `s` found at the JSON pointer `at` (extended for its parts, then
/// restored).
fn meta(s: &Value, at: &mut String, problems: &mut Vec<String>) {
    let Value::Object(m) = s else {
        if !s.is_boolean() {
            problems.push(format!(
                "{at}: a schema must be an object or a boolean, not {}",
                type_name(s)
            ));
        }
        return;
    };
    let k = Keywords::of(m);
    for (key, _) in FORBIDDEN.iter().zip(k.forbidden).filter(|(_, f)| *f) {
        problems.push(format!(
            "{at}: `{key}` is not allowed (schemas are served inlined)"
        ));
    }
    match k.type_ {
        None => {}
        Some(Value::String(t)) if TYPES.contains(&t.as_str()) => {}
        Some(Value::Array(ts))
            if !ts.is_empty()
                && ts
                    .iter()
                    .all(|t| t.as_str().is_some_and(|t| TYPES.contains(&t))) => {}
        Some(other) => problems.push(format!("{at}/type: unknown type {other}")),
    }
    if let Some(d) = k.description
        && !d.is_string()
    {
        problems.push(format!("{at}/description: must be a string"));
    }
    if let Some(e) = k.enumeration {
        match e {
            Value::Array(a) if !a.is_empty() => {}
            _ => problems.push(format!("{at}/enum: must be a non-empty array")),
        }
    }
    let within = at.len();
    if let Some(p) = k.properties {
        match p {
            Value::Object(p) => {
                for (name, sub) in p {
                    if !valid_property_name(name) {
                        problems.push(format!(
                            "{at}/properties: property name `{name}` must match ^[a-zA-Z0-9_.-]{{1,64}}$"
                        ));
                    }
                    at.push_str("/properties/");
                    escape_into(at, name);
                    meta(sub, at, problems);
                    at.truncate(within);
                }
            }
            _ => problems.push(format!("{at}/properties: must be an object")),
        }
    }
    if let Some(r) = k.required {
        match r.as_array() {
            Some(names) => {
                for n in names {
                    match n.as_str() {
                        Some(n) if k.properties.and_then(|p| p.get(n)).is_some() => {}
                        Some(n) => problems.push(format!("{at}/required: `{n}` is not a property")),
                        None => problems.push(format!("{at}/required: entries must be strings")),
                    }
                }
            }
            None => problems.push(format!("{at}/required: must be an array")),
        }
    }
    if let Some(items) = k.items {
        at.push_str("/items");
        meta(items, at, problems);
        at.truncate(within);
    }
    if let Some(extra) = k.additional {
        at.push_str("/additionalProperties");
        meta(extra, at, problems);
        at.truncate(within);
    }
    for (key, v) in UNIONS.iter().zip(k.unions) {
        let Some(v) = v else { continue };
        match v.as_array() {
            Some(options) if !options.is_empty() => {
                for (i, o) in options.iter().enumerate() {
                    use std::fmt::Write;
                    let _ = write!(at, "/{key}/{i}");
                    meta(o, at, problems);
                    at.truncate(within);
                }
            }
            _ => problems.push(format!("{at}/{key}: must be a non-empty array")),
        }
    }
}

/// Property names clients accept: `^[a-zA-Z0-9_.-]{1,64}$`.
pub(crate) fn valid_property_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "topK": {"type": "integer", "minimum": 0, "maximum": 255},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["path"],
            "additionalProperties": false,
        })
    }

    #[test]
    fn a_described_enum_names_its_values() {
        let described = json!({
            "type": ["string", "null"],
            "oneOf": [{"const": "a", "description": "А"}, {"const": "b"}, {"type": "null"}],
        });
        assert!(validate(&described, &json!("b")).is_empty());
        assert!(validate(&described, &json!(null)).is_empty());
        let v = validate(&described, &json!("c"));
        assert_eq!(
            v[0].message,
            "expected one of \"a\", \"b\", null, got \"c\""
        );
    }

    #[test]
    fn a_valid_call_has_no_violations() {
        assert!(validate(&schema(), &json!({"path": "x", "topK": 3, "tags": ["a"]})).is_empty());
    }

    #[test]
    fn optional_null_means_absent() {
        assert!(validate(&schema(), &json!({"path": "x", "topK": null})).is_empty());
        assert!(!validate(&schema(), &json!({"path": null})).is_empty());
    }

    /// Each violation of `value` as the registry shows it: `pointer: message`.
    fn named(schema: &Value, value: &Value) -> Vec<String> {
        validate(schema, value)
            .iter()
            .map(|v| format!("{}: {}", v.pointer, v.message))
            .collect()
    }

    #[test]
    fn every_violation_names_its_pointer_and_expectation() {
        let text = named(
            &schema(),
            &json!({"topK": "3", "mode": "c", "tags": ["a", 1], "pth": 1}),
        );
        assert_eq!(
            text,
            [
                "/path: missing required argument `path` (string)",
                "/topK: expected integer, got string \"3\"",
                "/mode: expected one of \"a\", \"b\", got \"c\"",
                "/tags/1: expected string, got integer 1",
                "/pth: unknown argument `pth`; did you mean `path`? (expected one of: path, topK, mode, tags)",
            ]
        );
    }

    /// Every kind of check names the value it fails at by its JSON pointer, however
    /// deep (`/items/2/name` is `items[2].name`), so the message names the argument.
    #[test]
    fn every_kind_of_check_names_the_nested_value_it_fails_at() {
        let item = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 3},
                "kind": {"enum": ["a", "b"]},
                "n": {"type": "integer", "minimum": 1, "maximum": 9},
                "tags": {"type": "array", "minItems": 1, "maxItems": 1},
                "v": {"const": 1},
                "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            },
            "required": ["name"],
            "additionalProperties": false,
        });
        let s = json!({
            "type": "object",
            "properties": {"items": {"type": "array", "items": item}},
            "additionalProperties": false,
        });
        let text = named(
            &s,
            &json!({"items": [
                {"name": "ok"},
                {},
                {"name": "", "kind": "c", "n": 0, "tags": [], "v": 2, "either": true, "x": 1},
            ]}),
        );
        assert_eq!(
            text,
            [
                "/items/1/name: missing required argument `name` (string)",
                "/items/2/name: expected at least 1 characters, got 0",
                "/items/2/kind: expected one of \"a\", \"b\", got \"c\"",
                "/items/2/n: expected a number ≥ 1, got 0",
                "/items/2/tags: expected at least 1 items, got 0",
                "/items/2/v: expected 1, got 2",
                "/items/2/either: true matches none of the allowed forms",
                "/items/2/x: unknown argument `x` (expected one of: name, kind, n, tags, v, either)",
            ]
        );
        let text = named(
            &s,
            &json!({"items": [{"name": "long", "n": 10, "tags": [1, 2]}, {"name": 5}]}),
        );
        assert_eq!(
            text,
            [
                "/items/0/name: expected at most 3 characters, got 4",
                "/items/0/n: expected a number ≤ 9, got 10",
                "/items/0/tags: expected at most 1 items, got 2",
                "/items/1/name: expected string, got integer 5",
            ]
        );
    }

    #[test]
    fn integer_bounds_are_exact() {
        let s = json!({"type": "integer", "minimum": 0, "maximum": u64::MAX});
        assert!(validate(&s, &json!(u64::MAX)).is_empty());
        assert!(!validate(&s, &json!(-1)).is_empty());
        assert!(!validate(&s, &json!(1.5)).is_empty());
        let s = json!({"type": "integer", "minimum": -128, "maximum": 127});
        assert!(!validate(&s, &json!(u64::MAX)).is_empty());
        assert!(!validate(&s, &json!(-129)).is_empty());
    }

    #[test]
    fn schema_check_reports_refs_and_bad_required() {
        let problems = check_schema(&json!({
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A"}, "bad name": {"type": "strin"}},
            "required": ["b"],
        }));
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(check_schema(&schema()).is_empty());
        assert!(!check_schema(&json!({"type": "array"})).is_empty());
    }

    /// Each problem names its own pointer, however deep, with `~` and `/` escaped; the
    /// pointer of one part does not leak into the next.
    #[test]
    fn schema_check_names_every_problem_by_its_pointer() {
        let problems = check_schema(&json!({
            "type": "object",
            "properties": {
                "a/b~c": {"type": "array", "items": {"type": "strin"}},
                "u": {"anyOf": [{"type": "string"}, {"$defs": {}}]},
                "o": {"type": "object", "additionalProperties": {"enum": []}},
                "d": {"description": 1},
            },
        }));
        assert_eq!(
            problems,
            [
                "/properties: property name `a/b~c` must match ^[a-zA-Z0-9_.-]{1,64}$",
                r#"/properties/a~1b~0c/items/type: unknown type "strin""#,
                "/properties/u/anyOf/1: `$defs` is not allowed (schemas are served inlined)",
                "/properties/o/additionalProperties/enum: must be a non-empty array",
                "/properties/d/description: must be a string",
            ]
        );
    }
}
