//! Tool definitions for each client format: OpenAI (strict-mode compatible or loose),
//! Anthropic, Gemini and MCP, in Russian or English.

use serde_json::{Map, Value, json};

use crate::schema::{EN_KEY, enum_alternatives, object};
use crate::{Lang, ToolSpec};

/// The client format a tool definition is rendered for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// OpenAI chat-completions `tools` entries, strict-mode compatible: every object
    /// closed, every property required, optional ones nullable; `strict: true` whenever
    /// the schema allows it.
    OpenAi,
    /// OpenAI `tools` entries with the schema as written (optional properties left out
    /// of `required`, bounds and defaults kept), no `strict` flag.
    OpenAiLoose,
    /// Anthropic Messages API `tools` entries (`input_schema`).
    Anthropic,
    /// Gemini `functionDeclarations` entries: OpenAPI subset, `nullable` instead of type
    /// arrays, no `additionalProperties`, `$ref` or `default`.
    Gemini,
    /// MCP `tools/list` entries (`inputSchema`, `outputSchema`, `annotations`).
    Mcp,
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 5] = [
        Format::OpenAi,
        Format::OpenAiLoose,
        Format::Anthropic,
        Format::Gemini,
        Format::Mcp,
    ];

    /// The name used on the command line and in snapshots.
    pub fn name(self) -> &'static str {
        match self {
            Format::OpenAi => "openai",
            Format::OpenAiLoose => "openai-loose",
            Format::Anthropic => "anthropic",
            Format::Gemini => "gemini",
            Format::Mcp => "mcp",
        }
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown format `{s}`: expected openai, openai-loose, anthropic, gemini or mcp"
                )
            })
    }
}

/// Renders one tool's definition for `format` in `lang`.
///
/// Built by moving the rendered schemas into maps: `json!` with a value inside copies
/// it whole, and the agent renders its tools for every model request.
pub fn definition(spec: &ToolSpec, format: Format, lang: Lang) -> Value {
    let name = || Value::from(spec.name.as_str());
    let description = || Value::from(spec.description.get(lang));
    match format {
        Format::OpenAi => {
            let mut strict = true;
            let params = openai_strict(&spec.input_schema, lang, &mut strict);
            let mut function = object([
                ("name", name()),
                ("description", description()),
                ("parameters", params),
            ]);
            if strict {
                function["strict"] = Value::Bool(true);
            }
            object([("type", "function".into()), ("function", function)])
        }
        Format::OpenAiLoose => object([
            ("type", "function".into()),
            (
                "function",
                object([
                    ("name", name()),
                    ("description", description()),
                    ("parameters", plain(&spec.input_schema, lang)),
                ]),
            ),
        ]),
        Format::Anthropic => object([
            ("name", name()),
            ("description", description()),
            ("input_schema", plain(&spec.input_schema, lang)),
        ]),
        Format::Gemini => object([
            ("name", name()),
            ("description", description()),
            ("parameters", gemini(&spec.input_schema, lang)),
        ]),
        Format::Mcp => {
            let a = &spec.annotations;
            let mut v = object([
                ("name", name()),
                ("description", description()),
                ("inputSchema", plain(&spec.input_schema, lang)),
                (
                    "annotations",
                    json!({
                        "readOnlyHint": a.read_only,
                        "destructiveHint": a.destructive,
                        "idempotentHint": a.idempotent,
                        "openWorldHint": a.open_world,
                    }),
                ),
            ]);
            if let Some(out) = &spec.output_schema {
                v["outputSchema"] = plain(out, lang);
            }
            if let Some(title) = &spec.title {
                v["title"] = title.get(lang).into();
            }
            v
        }
    }
}

/// Picks the description in `lang` and drops Klaw's extension keys.
fn localize(m: &mut Map<String, Value>, lang: Lang) {
    let en = m.remove(EN_KEY);
    if lang == Lang::En
        && let Some(en) = en
    {
        m.insert("description".into(), en);
    }
    m.retain(|k, _| !k.starts_with("x-klaw-"));
}

/// Applies `f` to every sub-schema of an object schema (properties, items, anyOf...),
/// in place: one pass over the node's keys (a lookup of each keyword hashed it, six a
/// node, most of them for keywords the node has not).
fn each_child(m: &mut Map<String, Value>, f: &mut dyn FnMut(&mut Value)) {
    for (key, v) in m.iter_mut() {
        match (key.as_str(), v) {
            ("properties", Value::Object(props)) => props.values_mut().for_each(&mut *f),
            ("items" | "additionalProperties", v @ Value::Object(_)) => f(v),
            ("anyOf" | "oneOf" | "allOf", Value::Array(options)) => {
                options.iter_mut().for_each(&mut *f);
            }
            _ => {}
        }
    }
}

/// The canonical schema, localized.
///
/// Each transform below copies the schema once and then rewrites the copy in place: a
/// transform that copied each node and then rendered its children from that copy
/// copied a node once for every level above it (8,000 allocations to render the
/// engine's 32 tools for MCP, on the way to the first `tools/list`).
fn plain(schema: &Value, lang: Lang) -> Value {
    let mut v = schema.clone();
    plain_in_place(&mut v, lang);
    v
}

fn plain_in_place(v: &mut Value, lang: Lang) {
    if let Value::Object(m) = v {
        localize(m, lang);
        each_child(m, &mut |c| plain_in_place(c, lang));
    }
}

/// Moves `default` (and bounds, which strict mode and Gemini may not accept) into the
/// description so the model still learns them.
fn fold_into_description(m: &mut Map<String, Value>, keys: &[&str]) {
    let mut notes = Vec::new();
    for key in keys {
        if let Some(v) = m.remove(*key) {
            notes.push(format!("{key}: {v}"));
        }
    }
    append_note(m, &notes, ", ");
}

/// Appends `(a, b)` to the description, if there are notes.
fn append_note(m: &mut Map<String, Value>, notes: &[String], sep: &str) {
    if notes.is_empty() {
        return;
    }
    let note = format!("({})", notes.join(sep));
    let text = match m.get("description").and_then(Value::as_str) {
        Some(d) if !d.is_empty() => format!("{d} {note}"),
        _ => note,
    };
    m.insert("description".into(), text.into());
}

/// A described enum (`oneOf` of `const`s) as a plain `enum`, the values' descriptions
/// folded into the node's own, for formats without `const` and `oneOf` (OpenAI strict
/// mode, Gemini).
fn described_enum_to_enum(m: &mut Map<String, Value>, lang: Lang) {
    let Some(alts) = enum_alternatives(m) else {
        return;
    };
    let mut values = Vec::new();
    let mut notes = Vec::new();
    for (value, alt) in alts {
        let en = (lang == Lang::En).then(|| alt.get(EN_KEY)).flatten();
        if let (Value::String(v), Some(Value::String(d))) =
            (&value, en.or_else(|| alt.get("description")))
        {
            notes.push(format!("{v}: {d}"));
        }
        values.push(value);
    }
    m.remove("oneOf");
    m.insert("enum".into(), Value::Array(values));
    append_note(m, &notes, "; ");
}

fn openai_strict(schema: &Value, lang: Lang, strict: &mut bool) -> Value {
    let mut v = schema.clone();
    openai_strict_in_place(&mut v, lang, strict);
    v
}

fn openai_strict_in_place(v: &mut Value, lang: Lang, strict: &mut bool) {
    let Value::Object(m) = v else {
        *strict = false;
        return;
    };
    localize(m, lang);
    described_enum_to_enum(m, lang);
    fold_into_description(
        m,
        &[
            "default",
            "minimum",
            "maximum",
            "minLength",
            "maxLength",
            "minItems",
            "maxItems",
        ],
    );
    if !m.contains_key("type") && !m.contains_key("anyOf") && !m.contains_key("enum") {
        // `{}` (any value) has no strict-mode spelling.
        *strict = false;
    }
    if m.get("type").and_then(Value::as_str) == Some("object") {
        let required: Vec<String> = m
            .get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if let Some(Value::Object(props)) = m.get_mut("properties") {
            for (name, v) in props.iter_mut() {
                openai_strict_in_place(v, lang, strict);
                if !required.contains(name) {
                    *v = crate::schema::nullable(std::mem::take(v));
                }
            }
            let all: Vec<Value> = props.keys().map(|k| Value::String(k.clone())).collect();
            m.insert("required".into(), Value::Array(all));
        } else {
            m.insert("properties".into(), json!({}));
            m.insert("required".into(), json!([]));
        }
        match m.get("additionalProperties") {
            Some(Value::Bool(false)) => {}
            _ => {
                *strict = false;
                m.insert("additionalProperties".into(), Value::Bool(false));
            }
        }
    }
    for key in ["items"] {
        if let Some(v @ Value::Object(_)) = m.get_mut(key) {
            openai_strict_in_place(v, lang, strict);
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = m.get_mut(key) {
            for v in options.iter_mut() {
                openai_strict_in_place(v, lang, strict);
            }
        }
    }
}

fn gemini(schema: &Value, lang: Lang) -> Value {
    let mut v = schema.clone();
    gemini_in_place(&mut v, lang);
    v
}

fn gemini_in_place(v: &mut Value, lang: Lang) {
    let Value::Object(m) = v else {
        return;
    };
    localize(m, lang);
    described_enum_to_enum(m, lang);
    fold_into_description(m, &["default"]);
    for key in [
        "additionalProperties",
        "$schema",
        "$id",
        "title",
        "examples",
    ] {
        m.remove(key);
    }
    if let Some(Value::Array(types)) = m.get("type") {
        let non_null: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if non_null.len() < types.len() {
            m.insert("nullable".into(), Value::Bool(true));
        }
        match <[Value; 1]>::try_from(non_null) {
            Ok([one]) => {
                m.insert("type".into(), one);
            }
            Err(_) => {
                m.remove("type");
            }
        }
    }
    if let Some(Value::Array(e)) = m.get_mut("enum") {
        e.retain(|v| !v.is_null());
    }
    let is_null = |o: &Value| o.get("type").and_then(Value::as_str) == Some("null");
    if let Some(Value::Array(options)) = m.get_mut("anyOf") {
        let nulls = options.iter().filter(|o| is_null(o)).count();
        // `anyOf: [X, {type: null}]` becomes X with `nullable`.
        if nulls == 1 && options.len() == 2 {
            let mut inner = std::mem::take(options)
                .into_iter()
                .find(|o| !is_null(o))
                .unwrap_or_default();
            m.remove("anyOf");
            gemini_in_place(&mut inner, lang);
            if let Value::Object(inner) = inner {
                for (k, v) in inner {
                    m.entry(k).or_insert(v);
                }
            }
            m.insert("nullable".into(), Value::Bool(true));
            return;
        }
        // `anyOf: [X, Y, {type: null}]` becomes `anyOf: [X, Y]` with `nullable`.
        if nulls > 0 {
            options.retain(|o| !is_null(o));
            m.insert("nullable".into(), Value::Bool(true));
        }
    }
    each_child(m, &mut |c| gemini_in_place(c, lang));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ToolSpec {
        ToolSpec::new(
            "t",
            "Тест",
            json!({
                "type": "object",
                "properties": {
                    "q": {"type": "string", "description": "Запрос", EN_KEY: "Query"},
                    "k": {"type": "integer", "minimum": 0, "default": 10},
                    "v": {},
                },
                "required": ["q"],
                "additionalProperties": false,
            }),
        )
        .with_description_en("Test")
    }

    #[test]
    fn openai_strict_makes_optional_nullable_and_drops_strict_for_any() {
        let d = definition(&spec(), Format::OpenAi, Lang::En);
        let f = &d["function"];
        assert_eq!(f["description"], "Test");
        assert_eq!(f["parameters"]["required"], json!(["q", "k", "v"]));
        assert_eq!(
            f["parameters"]["properties"]["k"]["type"],
            json!(["integer", "null"])
        );
        assert_eq!(
            f["parameters"]["properties"]["k"]["description"],
            "(default: 10, minimum: 0)"
        );
        assert_eq!(f["parameters"]["properties"]["q"]["description"], "Query");
        assert!(f.get("strict").is_none(), "`v` is any-typed: {d}");
    }

    #[test]
    fn mcp_has_the_title_in_the_language_and_no_other_format_has_one() {
        let untitled = definition(&spec(), Format::Mcp, Lang::Ru);
        assert!(untitled.get("title").is_none(), "{untitled}");
        let s = spec().with_title("Чтение", Some("Reading".into()));
        assert_eq!(definition(&s, Format::Mcp, Lang::Ru)["title"], "Чтение");
        assert_eq!(definition(&s, Format::Mcp, Lang::En)["title"], "Reading");
        for format in [
            Format::OpenAi,
            Format::OpenAiLoose,
            Format::Anthropic,
            Format::Gemini,
        ] {
            let d = definition(&s, format, Lang::En).to_string();
            assert!(!d.contains("Reading"), "{format:?}: {d}");
        }
    }

    #[test]
    fn described_enums_keep_their_descriptions_in_every_format() {
        let mut s = spec();
        s.input_schema["properties"]["mode"] = json!({
            "type": ["string", "null"],
            "description": "Как писать",
            "oneOf": [
                {"const": "overwrite", "description": "Заменить файл", EN_KEY: "Replace the file"},
                {"const": "append"},
                {"type": "null"},
            ],
        });
        let mcp = definition(&s, Format::Mcp, Lang::En);
        assert_eq!(
            mcp["inputSchema"]["properties"]["mode"]["oneOf"][0],
            json!({"const": "overwrite", "description": "Replace the file"})
        );
        let strict = definition(&s, Format::OpenAi, Lang::Ru);
        assert_eq!(
            strict["function"]["parameters"]["properties"]["mode"],
            json!({
                "type": ["string", "null"],
                "description": "Как писать (overwrite: Заменить файл)",
                "enum": ["overwrite", "append", null],
            })
        );
        let gemini = definition(&s, Format::Gemini, Lang::En);
        assert_eq!(
            gemini["parameters"]["properties"]["mode"],
            json!({
                "type": "string",
                "description": "Как писать (overwrite: Replace the file)",
                "enum": ["overwrite", "append"],
                "nullable": true,
            })
        );
    }

    #[test]
    fn gemini_folds_a_nullable_any_of_into_its_one_alternative() {
        let mut s = spec();
        s.input_schema["properties"]["o"] = json!({
            "description": "Необязательный",
            "anyOf": [
                {
                    "type": "object",
                    "description": "Внутренний",
                    "properties": {"a": {"type": "string", "description": "А", EN_KEY: "A"}},
                    "additionalProperties": false,
                },
                {"type": "null"},
            ],
        });
        s.input_schema["properties"]["u"] = json!({
            "anyOf": [
                {"type": "string", "default": "x"},
                {"type": "integer"},
                {"type": "null"},
            ],
        });
        let d = definition(&s, Format::Gemini, Lang::En);
        assert_eq!(
            d["parameters"]["properties"]["o"],
            json!({
                "description": "Необязательный",
                "nullable": true,
                "type": "object",
                "properties": {"a": {"type": "string", "description": "A"}},
            })
        );
        assert_eq!(
            d["parameters"]["properties"]["u"],
            json!({
                "anyOf": [
                    {"type": "string", "description": "(default: \"x\")"},
                    {"type": "integer"},
                ],
                "nullable": true,
            })
        );
        // The spec itself is left as it was.
        assert_eq!(
            s.input_schema["properties"]["o"]["anyOf"][1],
            json!({"type": "null"})
        );
    }

    #[test]
    fn gemini_has_no_type_arrays_or_additional_properties() {
        let mut s = spec();
        s.input_schema["properties"]["n"] =
            json!({"type": ["string", "null"], "enum": ["a", null]});
        let d = definition(&s, Format::Gemini, Lang::Ru);
        let text = d.to_string();
        assert!(!text.contains("additionalProperties"), "{text}");
        assert!(!text.contains(EN_KEY), "{text}");
        assert_eq!(
            d["parameters"]["properties"]["n"],
            json!({"type": "string", "enum": ["a"], "nullable": true})
        );
    }
}
