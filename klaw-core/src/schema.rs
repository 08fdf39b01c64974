//! The compile-time schema model and its canonical JSON Schema rendering.
//!
//! `#[tool]` builds a [`ObjectSchema`] constant for each tool from the types of its
//! parameters (every argument type implements [`ToolSchema`]). The registry renders it
//! once, at start-up, into canonical JSON Schema (draft 2020-12, no `$ref`), from which
//! every client format is derived.

use serde_json::{Map, Value, json};

/// A description in Russian (the agent's main language) and, optionally, English.
///
/// An empty string means "absent".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Description {
    /// Russian text; the default language.
    pub ru: &'static str,
    /// English text, or `""` when there is none (Russian is used instead).
    pub en: &'static str,
}

impl Description {
    /// Both languages; `en` may be empty.
    pub const fn new(ru: &'static str, en: &'static str) -> Self {
        Self { ru, en }
    }

    /// True when neither language has text.
    pub const fn is_empty(&self) -> bool {
        self.ru.is_empty() && self.en.is_empty()
    }
}

/// One node of a compile-time schema.
///
/// Built in `const` context by `#[tool]` and `#[derive(ToolSchema)]`; references are
/// `'static` so a whole schema is one constant.
#[derive(Debug, Clone, Copy)]
pub enum Schema {
    /// `true` or `false`.
    Boolean,
    /// An integer, with the bounds of its Rust type.
    Integer {
        /// Smallest accepted value, if the type has one that fits in `i64`.
        min: Option<i64>,
        /// Largest accepted value, if the type has one that fits in `u64`.
        max: Option<u64>,
    },
    /// Any JSON number.
    Number,
    /// Any string.
    String,
    /// One of a fixed set of strings (a unit-only enum).
    Enum(&'static [EnumVariant]),
    /// A JSON array of one item type.
    Array(&'static Schema),
    /// A JSON object with known properties.
    Object(&'static ObjectSchema),
    /// The inner schema or `null` (`Option<T>`).
    Nullable(&'static Schema),
    /// Any JSON value (`serde_json::Value`).
    Any,
    /// A schema known only at run time (a `schemars` type), produced once at start-up
    /// with every `$ref` inlined.
    External(fn() -> Value),
}

/// One accepted value of a string enum.
#[derive(Debug, Clone, Copy)]
pub struct EnumVariant {
    /// The value as it appears in JSON.
    pub value: &'static str,
    /// What this value means.
    pub description: Description,
}

/// The properties of a JSON object (a tool's arguments, or a struct argument).
#[derive(Debug, Clone, Copy)]
pub struct ObjectSchema {
    /// The properties, in declaration order.
    pub properties: &'static [Property],
}

/// One property of an [`ObjectSchema`].
#[derive(Debug, Clone, Copy)]
pub struct Property {
    /// The name in JSON.
    pub name: &'static str,
    /// Other names accepted for this property on input (never shown to clients).
    pub aliases: &'static [&'static str],
    /// The value's schema.
    pub schema: &'static Schema,
    /// Whether a caller must send it.
    pub required: bool,
    /// What the property means.
    pub description: Description,
    /// The value used when the caller leaves it out, as JSON.
    pub default: Option<fn() -> Value>,
    /// The smallest value accepted (`#[arg(minimum = N)]`), narrowing the type's own.
    pub minimum: Option<i64>,
    /// The largest value accepted (`#[arg(maximum = N)]`), narrowing the type's own.
    pub maximum: Option<i64>,
}

/// A type that can be a tool argument: it has a schema known at compile time.
///
/// Implemented for strings, booleans, every integer and float type, `Option<T>`,
/// `Vec<T>`, `Box<T>` and `serde_json::Value`; derive it for your own enums and structs
/// with `#[derive(ToolSchema)]`. For a type that only implements
/// `schemars::JsonSchema`, mark the parameter `#[arg(schemars)]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool argument",
    label = "this type has no tool schema",
    note = "tool arguments are strings, booleans, integers, floats, Option<T>, Vec<T>, serde_json::Value, or types with #[derive(ToolSchema)]",
    note = "for a type that implements schemars::JsonSchema, mark the parameter #[arg(schemars)]; for a context extractor, mark it #[ctx]"
)]
pub trait ToolSchema {
    /// The schema of this type.
    const SCHEMA: Schema;
    /// True for `Option<T>`: a parameter of this type may be left out.
    const OPTIONAL: bool = false;
}

macro_rules! int_schema {
    ($($t:ty),*) => {$(
        impl ToolSchema for $t {
            #[allow(clippy::cast_possible_wrap, clippy::cast_lossless, clippy::unnecessary_cast)]
            const SCHEMA: Schema = Schema::Integer {
                min: if (<$t>::MIN as i128) >= (i64::MIN as i128) { Some(<$t>::MIN as i64) } else { None },
                max: if (<$t>::MAX as u128) <= (u64::MAX as u128) { Some(<$t>::MAX as u64) } else { None },
            };
        }
    )*};
}
int_schema!(
    i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize
);

impl ToolSchema for f32 {
    const SCHEMA: Schema = Schema::Number;
}
impl ToolSchema for f64 {
    const SCHEMA: Schema = Schema::Number;
}
impl ToolSchema for bool {
    const SCHEMA: Schema = Schema::Boolean;
}
impl ToolSchema for String {
    const SCHEMA: Schema = Schema::String;
}
impl ToolSchema for std::path::PathBuf {
    const SCHEMA: Schema = Schema::String;
}
impl ToolSchema for Value {
    const SCHEMA: Schema = Schema::Any;
}
impl<T: ToolSchema> ToolSchema for Option<T> {
    const SCHEMA: Schema = Schema::Nullable(&T::SCHEMA);
    const OPTIONAL: bool = true;
}
impl<T: ToolSchema> ToolSchema for Vec<T> {
    const SCHEMA: Schema = Schema::Array(&T::SCHEMA);
}
impl<T: ToolSchema> ToolSchema for Box<T> {
    const SCHEMA: Schema = T::SCHEMA;
}

/// Why `minimum`/`maximum` do not fit `schema`, or `None` when they do: the bounds need
/// a number (or an optional one) and must lie within an integer type's own range.
/// `#[tool]` evaluates this at compile time for every argument with bounds.
#[doc(hidden)]
pub const fn bounds_error(
    schema: &Schema,
    minimum: Option<i64>,
    maximum: Option<i64>,
) -> Option<&'static str> {
    match schema {
        Schema::Nullable(inner) => bounds_error(inner, minimum, maximum),
        Schema::Number => None,
        Schema::Integer { min, max } => {
            if !within(minimum, *min, *max) {
                Some("`minimum` is outside the range of the argument's type")
            } else if !within(maximum, *min, *max) {
                Some("`maximum` is outside the range of the argument's type")
            } else {
                None
            }
        }
        _ => Some("`minimum` and `maximum` apply only to integer and float arguments"),
    }
}

/// True when `bound` is absent or lies in an integer type's range (`None`: unbounded).
const fn within(bound: Option<i64>, min: Option<i64>, max: Option<u64>) -> bool {
    let Some(b) = bound else {
        return true;
    };
    if let Some(min) = min
        && b < min
    {
        return false;
    }
    match max {
        Some(max) => b < 0 || (b as u64) <= max,
        None => true,
    }
}

/// Key of the English description inside canonical schemas (stripped when rendering).
pub(crate) const EN_KEY: &str = "x-klaw-description-en";

impl Schema {
    /// The canonical JSON Schema of this node (descriptions in Russian, English under
    /// an extension key that rendering removes).
    pub fn to_json(&self) -> Value {
        // Built by moving values into maps: `json!` with a value inside copies it whole
        // (through `to_value`), and every tool's schema is built at each start-up.
        match self {
            Schema::Boolean => typed("boolean", []),
            Schema::Integer { min, max } => {
                let mut m = type_map("integer");
                // The 64-bit extremes say nothing to a model; narrower types' bounds do.
                if let Some(min) = min.filter(|m| *m != i64::MIN) {
                    m.insert("minimum".into(), min.into());
                }
                if let Some(max) = max.filter(|m| *m < i64::MAX as u64) {
                    m.insert("maximum".into(), max.into());
                }
                Value::Object(m)
            }
            Schema::Number => typed("number", []),
            Schema::String => typed("string", []),
            // Plain `enum` unless a value is described: then one `const` per value, so
            // each carries its description.
            Schema::Enum(variants) if variants.iter().all(|v| v.description.is_empty()) => {
                let values: Vec<Value> = variants.iter().map(|v| v.value.into()).collect();
                typed("string", [("enum", Value::Array(values))])
            }
            Schema::Enum(variants) => {
                let values: Vec<Value> = variants
                    .iter()
                    .map(|v| {
                        let mut m = Map::new();
                        m.insert("const".into(), v.value.into());
                        describe(&mut m, &v.description);
                        Value::Object(m)
                    })
                    .collect();
                typed("string", [("oneOf", Value::Array(values))])
            }
            Schema::Array(items) => typed("array", [("items", items.to_json())]),
            Schema::Object(obj) => obj.to_json(),
            Schema::Nullable(inner) => nullable(inner.to_json()),
            Schema::Any => Value::Object(Map::new()),
            Schema::External(f) => f(),
        }
    }
}

/// `{"type": name}` as a map, to add to (room for the keywords a property adds: its
/// bounds, descriptions and default; growing a map rehashes it).
fn type_map(name: &str) -> Map<String, Value> {
    let mut m = Map::with_capacity(6);
    m.insert("type".into(), name.into());
    m
}

/// `{"type": name, ...rest}`.
fn typed<const N: usize>(name: &str, rest: [(&str, Value); N]) -> Value {
    let mut m = type_map(name);
    extend(&mut m, rest);
    Value::Object(m)
}

/// A JSON object of `entries`, in order, the values moved in (`json!` with a value
/// inside copies it whole).
pub(crate) fn object<const N: usize>(entries: [(&str, Value); N]) -> Value {
    let mut m = Map::with_capacity(N);
    extend(&mut m, entries);
    Value::Object(m)
}

fn extend<const N: usize>(m: &mut Map<String, Value>, entries: [(&str, Value); N]) {
    for (k, v) in entries {
        m.insert(k.into(), v);
    }
}

impl ObjectSchema {
    /// The canonical JSON Schema of this object: `type`, `properties`, `required`,
    /// `additionalProperties: false`.
    pub fn to_json(&self) -> Value {
        let mut props = Map::with_capacity(self.properties.len());
        let mut required = Vec::new();
        for p in self.properties {
            let mut s = p.schema.to_json();
            if let Value::Object(m) = &mut s {
                if let Some(min) = p.minimum {
                    m.insert("minimum".into(), min.into());
                }
                if let Some(max) = p.maximum {
                    m.insert("maximum".into(), max.into());
                }
                describe(m, &p.description);
                if let Some(default) = p.default {
                    m.insert("default".into(), default());
                }
            }
            if p.required {
                required.push(Value::from(p.name));
            }
            props.insert(p.name.to_owned(), s);
        }
        typed(
            "object",
            [
                ("properties", Value::Object(props)),
                ("required", Value::Array(required)),
                ("additionalProperties", Value::Bool(false)),
            ],
        )
    }
}

/// Adds a description (Russian, English under [`EN_KEY`]) to a schema object.
pub(crate) fn describe(m: &mut Map<String, Value>, d: &Description) {
    if !d.ru.is_empty() {
        m.insert("description".into(), d.ru.into());
    } else if !d.en.is_empty() {
        m.insert("description".into(), d.en.into());
    }
    if !d.en.is_empty() {
        m.insert(EN_KEY.into(), d.en.into());
    }
}

/// The values of a described enum (`oneOf` of `const`s, and `{"type": "null"}` for
/// null), each with its alternative; `None` for any other schema.
pub(crate) fn enum_alternatives(
    m: &Map<String, Value>,
) -> Option<Vec<(Value, &Map<String, Value>)>> {
    let Some(Value::Array(alts)) = m.get("oneOf") else {
        return None;
    };
    alts.iter()
        .map(|a| {
            let a = a.as_object()?;
            match a.get("const") {
                Some(c) => Some((c.clone(), a)),
                None if a.len() == 1 && a.get("type") == Some(&json!("null")) => {
                    Some((Value::Null, a))
                }
                None => None,
            }
        })
        .collect()
}

/// Makes a schema also accept `null`.
pub(crate) fn nullable(mut s: Value) -> Value {
    let Value::Object(m) = &mut s else {
        return s;
    };
    match m.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            m.insert(
                "type".into(),
                Value::Array(vec![Value::String(t), "null".into()]),
            );
        }
        Some(Value::Array(ts)) => {
            if !ts.iter().any(|t| t == "null") {
                ts.push("null".into());
            }
        }
        _ => {
            if m.is_empty() {
                return s; // `{}` already accepts null
            }
            // A union gets one more alternative rather than a second level of `anyOf`.
            if let Some(Value::Array(alts)) = m.get_mut("anyOf") {
                if !alts.iter().any(|a| a.get("type") == Some(&json!("null"))) {
                    alts.push(json!({"type": "null"}));
                }
                return s;
            }
            return object([("anyOf", Value::Array(vec![s, typed("null", [])]))]);
        }
    }
    if let Some(Value::Array(e)) = m.get_mut("enum")
        && !e.iter().any(Value::is_null)
    {
        e.push(Value::Null);
    }
    // Described enum values (`oneOf` of `const`s) get `null` as one more alternative.
    if let Some(Value::Array(alts)) = m.get_mut("oneOf")
        && !alts.iter().any(|a| a.get("type") == Some(&json!("null")))
    {
        alts.push(json!({"type": "null"}));
    }
    s
}

/// Produces the schema of a `schemars` type with every `$ref` inlined.
///
/// Used by `#[arg(schemars)]`; a recursive type cannot be inlined and yields a schema
/// that start-up validation rejects with a clear message.
pub fn schemars_inline<T: schemars::JsonSchema>() -> Value {
    let root = schemars::SchemaGenerator::default().into_root_schema_for::<T>();
    let mut v = root.to_value();
    let defs = match &mut v {
        Value::Object(m) => {
            m.remove("$schema");
            m.remove("title");
            m.remove("definitions");
            m.remove("$defs")
        }
        _ => None,
    };
    let defs = match defs {
        Some(Value::Object(d)) => d,
        _ => Map::new(),
    };
    inline(&mut v, &defs, 0);
    v
}

fn inline(v: &mut Value, defs: &Map<String, Value>, depth: usize) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                let name = r.rsplit('/').next().unwrap_or_default();
                if depth > 32 {
                    // leave the $ref: validation reports it
                    return;
                }
                if let Some(Value::Object(target)) = defs.get(name) {
                    let mut replacement = target.clone();
                    for (k, val) in m.iter() {
                        if k != "$ref" {
                            replacement.insert(k.clone(), val.clone());
                        }
                    }
                    *m = replacement;
                    inline(v, defs, depth + 1);
                    return;
                }
            }
            for val in m.values_mut() {
                inline(val, defs, depth);
            }
        }
        Value::Array(a) => {
            for val in a {
                inline(val, defs, depth);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn description_is_empty_only_without_either_language() {
        const _: () = assert!(Description::new("", "").is_empty());
        assert!(Description::default().is_empty());
        assert!(!Description::new("Текст", "").is_empty());
        assert!(!Description::new("", "Text").is_empty());
    }

    #[test]
    fn integer_bounds_follow_the_rust_type() {
        assert_eq!(
            u8::SCHEMA.to_json(),
            json!({"type":"integer","minimum":0,"maximum":255})
        );
        assert_eq!(i64::SCHEMA.to_json(), json!({"type":"integer"}));
        assert_eq!(u64::SCHEMA.to_json(), json!({"type":"integer","minimum":0}));
        assert_eq!(
            i32::SCHEMA.to_json(),
            json!({"type":"integer","minimum":i32::MIN,"maximum":i32::MAX})
        );
        assert_eq!(i128::SCHEMA.to_json(), json!({"type":"integer"}));
    }

    #[test]
    fn nullable_union_gets_one_more_alternative() {
        let union = json!({"anyOf": [{"type": "string"}, {"type": "array"}], "description": "d"});
        let n = nullable(union);
        assert_eq!(
            n,
            json!({"anyOf": [{"type": "string"}, {"type": "array"}, {"type": "null"}], "description": "d"})
        );
        assert_eq!(nullable(n.clone()), n);
    }

    #[test]
    fn enum_values_carry_their_descriptions() {
        const PLAIN: Schema = Schema::Enum(&[
            EnumVariant {
                value: "a",
                description: Description::new("", ""),
            },
            EnumVariant {
                value: "b",
                description: Description::new("", ""),
            },
        ]);
        assert_eq!(
            PLAIN.to_json(),
            json!({"type": "string", "enum": ["a", "b"]})
        );
        const DESCRIBED: Schema = Schema::Enum(&[
            EnumVariant {
                value: "overwrite",
                description: Description::new("Заменить файл", "Replace the file"),
            },
            EnumVariant {
                value: "append",
                description: Description::new("", ""),
            },
        ]);
        let described = json!({
            "type": "string",
            "oneOf": [
                {"const": "overwrite", "description": "Заменить файл", EN_KEY: "Replace the file"},
                {"const": "append"},
            ],
        });
        assert_eq!(DESCRIBED.to_json(), described);
        assert_eq!(
            Schema::Nullable(&DESCRIBED).to_json(),
            json!({
                "type": ["string", "null"],
                "oneOf": [
                    {"const": "overwrite", "description": "Заменить файл", EN_KEY: "Replace the file"},
                    {"const": "append"},
                    {"type": "null"},
                ],
            })
        );
    }

    #[test]
    fn option_is_nullable_and_optional() {
        const _: () = assert!(<Option<String> as ToolSchema>::OPTIONAL);
        assert_eq!(
            <Option<Vec<bool>>>::SCHEMA.to_json(),
            json!({"type":["array","null"],"items":{"type":"boolean"}})
        );
        assert_eq!(<Option<Value>>::SCHEMA.to_json(), json!({}));
    }

    #[test]
    fn schemars_types_are_inlined_without_refs() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Outer {
            inner: Inner,
            list: Vec<Inner>,
        }
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Inner {
            x: u8,
        }
        let v = schemars_inline::<Outer>();
        let text = v.to_string();
        assert!(!text.contains("$ref"), "{text}");
        assert!(!text.contains("$defs"), "{text}");
        assert_eq!(
            v["properties"]["list"]["items"]["properties"]["x"]["type"],
            "integer"
        );
    }
}
