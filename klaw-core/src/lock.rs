//! The schema lock: every tool's contract (its schemas, annotations and a hash of each
//! description) written down in a stable, diff-friendly form, and the comparison of a
//! registry with it that tells breaking changes (a prompt, an MCP client or a saved
//! conversation that worked stops working) from compatible ones.
//!
//! ```
//! use klaw_core::lock::SchemaLock;
//! # let registry = klaw_core::ToolRegistry::new();
//! let locked = SchemaLock::of(&registry);
//! let text = locked.to_json();
//! let changes = SchemaLock::from_json(&text).unwrap().compare(&SchemaLock::of(&registry));
//! assert!(changes.is_empty());
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Annotations, Lang, ToolRegistry, ToolSpec};

/// The lock format's version, written in the file.
pub const LOCK_VERSION: u32 = 1;

/// Every tool's contract, by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchemaLock {
    /// [`LOCK_VERSION`].
    pub version: u32,
    /// The tools, sorted by name.
    pub tools: BTreeMap<String, LockedTool>,
}

/// One tool's contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockedTool {
    /// A hash of each description, by language (`ru`, `en`): a changed description is
    /// noticed without the lock holding the text.
    pub description: BTreeMap<String, String>,
    /// The argument schema, keys sorted.
    pub input_schema: Value,
    /// The structured output's schema, keys sorted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// The behaviour hints.
    pub annotations: LockedAnnotations,
}

/// The annotations as locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(clippy::struct_excessive_bools)] // the four MCP hints
pub struct LockedAnnotations {
    /// `readOnlyHint`.
    pub read_only: bool,
    /// `destructiveHint`.
    pub destructive: bool,
    /// `idempotentHint`.
    pub idempotent: bool,
    /// `openWorldHint`.
    pub open_world: bool,
}

impl From<Annotations> for LockedAnnotations {
    fn from(a: Annotations) -> Self {
        Self {
            read_only: a.read_only,
            destructive: a.destructive,
            idempotent: a.idempotent,
            open_world: a.open_world,
        }
    }
}

/// One difference between a lock and the tools now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The tool.
    pub tool: String,
    /// Whether a caller that worked with the locked contract may break.
    pub breaking: bool,
    /// What changed, in plain words.
    pub what: String,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.breaking {
            "BREAKING"
        } else {
            "compatible"
        };
        write!(f, "{kind}  {}: {}", self.tool, self.what)
    }
}

/// Why a lock file could not be read.
#[derive(Debug, thiserror::Error)]
#[error("not a tools lock: {0}")]
pub struct LockError(String);

impl SchemaLock {
    /// The contract of every tool in `registry`.
    pub fn of(registry: &ToolRegistry) -> Self {
        Self::of_specs(registry.all().map(|t| t.spec()))
    }

    /// The contract of `specs`.
    pub fn of_specs<'a>(specs: impl IntoIterator<Item = &'a ToolSpec>) -> Self {
        let tools = specs
            .into_iter()
            .map(|spec| {
                let mut description = BTreeMap::new();
                description.insert("ru".to_owned(), hash(spec.description.get(Lang::Ru)));
                if let Some(en) = &spec.description.en {
                    description.insert("en".to_owned(), hash(en));
                }
                let tool = LockedTool {
                    description,
                    input_schema: sorted(&spec.input_schema),
                    output_schema: spec.output_schema.as_ref().map(sorted),
                    annotations: spec.annotations.into(),
                };
                (spec.name.clone(), tool)
            })
            .collect();
        Self {
            version: LOCK_VERSION,
            tools,
        }
    }

    /// The lock as its file holds it: pretty JSON, keys sorted, a final newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Reads a lock file's text.
    pub fn from_json(text: &str) -> Result<Self, LockError> {
        let lock: Self = serde_json::from_str(text).map_err(|e| LockError(e.to_string()))?;
        if lock.version != LOCK_VERSION {
            return Err(LockError(format!(
                "version {} (this Klaw writes version {LOCK_VERSION})",
                lock.version
            )));
        }
        Ok(lock)
    }

    /// What changed from this (locked) contract to `now`, tool by tool, breaking and
    /// compatible changes alike (empty when nothing did).
    pub fn compare(&self, now: &SchemaLock) -> Vec<Change> {
        let mut out = Vec::new();
        for (name, old) in &self.tools {
            let mut c = Changes {
                tool: name,
                out: &mut out,
            };
            match now.tools.get(name) {
                None => c.breaking("the tool was removed or renamed"),
                Some(new) => compare_tool(&mut c, old, new),
            }
        }
        for name in now.tools.keys().filter(|n| !self.tools.contains_key(*n)) {
            out.push(Change {
                tool: name.clone(),
                breaking: false,
                what: "a new tool".into(),
            });
        }
        out
    }
}

impl SchemaLock {
    /// Reads the lock file at `path`; `None` when there is none.
    pub fn read(path: &std::path::Path) -> Result<Option<Self>, LockError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::from_json(&text).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(LockError(format!("{}: {e}", path.display()))),
        }
    }

    /// Writes the lock to `path` atomically (a temporary file beside it, then renamed:
    /// never half a lock).
    pub fn write(&self, path: &std::path::Path) -> std::io::Result<()> {
        let mut name = path.file_name().unwrap_or_default().to_owned();
        name.push(format!(".{}.tmp", std::process::id()));
        let tmp = path.with_file_name(name);
        let written = (|| {
            let mut file = std::fs::File::create(&tmp)?;
            std::io::Write::write_all(&mut file, self.to_json().as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

/// Whether any of `changes` is breaking.
pub fn has_breaking(changes: &[Change]) -> bool {
    changes.iter().any(|c| c.breaking)
}

struct Changes<'a> {
    tool: &'a str,
    out: &'a mut Vec<Change>,
}

impl Changes<'_> {
    fn push(&mut self, breaking: bool, what: impl Into<String>) {
        self.out.push(Change {
            tool: self.tool.to_owned(),
            breaking,
            what: what.into(),
        });
    }

    fn breaking(&mut self, what: impl Into<String>) {
        self.push(true, what);
    }

    fn compatible(&mut self, what: impl Into<String>) {
        self.push(false, what);
    }
}

fn compare_tool(c: &mut Changes<'_>, old: &LockedTool, new: &LockedTool) {
    compare_value(
        c,
        "parameter",
        "",
        &old.input_schema,
        &new.input_schema,
        Side::Input,
    );
    match (&old.output_schema, &new.output_schema) {
        (Some(_), None) => c.breaking("the structured output was removed"),
        (None, Some(_)) => c.compatible("a structured output was added"),
        (Some(o), Some(n)) => compare_value(c, "output field", "", o, n, Side::Output),
        (None, None) => {}
    }
    let (o, n) = (old.annotations, new.annotations);
    if o.read_only && !n.read_only {
        c.breaking(
            "it was read-only and is no longer (clients and approval policies relied on it)",
        );
    }
    if !o.destructive && n.destructive {
        c.breaking("it is now destructive (an approval policy asks where it did not)");
    }
    if !o.read_only && n.read_only || o.destructive && !n.destructive {
        c.compatible("its annotations are less restrictive");
    }
    if o.idempotent != n.idempotent || o.open_world != n.open_world {
        c.compatible(format!(
            "annotations: idempotent {} → {}, open-world {} → {}",
            o.idempotent, n.idempotent, o.open_world, n.open_world
        ));
    }
    for (lang, hash) in &old.description {
        match new.description.get(lang) {
            Some(h) if h == hash => {}
            Some(_) => c.compatible(format!("the {lang} description changed")),
            None => c.compatible(format!("the {lang} description was removed")),
        }
    }
}

/// Which way a schema is read: arguments are sent to the tool (a narrower schema refuses
/// what callers send), output is read from it (a changed field breaks readers).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Input,
    Output,
}

/// Compares the schemas of one value at `path` (`""` for the root).
fn compare_value(
    c: &mut Changes<'_>,
    noun: &str,
    path: &str,
    old: &Value,
    new: &Value,
    side: Side,
) {
    let here = if path.is_empty() {
        "the root".to_owned()
    } else {
        format!("{noun} `{path}`")
    };
    let (ot, nt) = (types(old), types(new));
    if ot != nt {
        let shown = |t: &BTreeSet<String>| {
            if t.is_empty() {
                "any".to_owned()
            } else {
                t.iter().cloned().collect::<Vec<_>>().join(" | ")
            }
        };
        let narrowed = !accepts_all(&nt, &ot);
        let what = format!("{here}: type {} → {}", shown(&ot), shown(&nt));
        if side == Side::Output || narrowed {
            c.breaking(if side == Side::Input {
                format!("{what} (narrowed)")
            } else {
                what
            });
        } else {
            c.compatible(format!("{what} (widened)"));
        }
    }
    if side == Side::Input {
        compare_enum(c, &here, old, new);
        compare_bounds(c, &here, old, new);
    } else if old.get("enum") != new.get("enum") {
        c.breaking(format!("{here}: its values changed"));
    }
    compare_object(c, noun, path, old, new, side);
    if let (Some(o), Some(n)) = (old.get("items"), new.get("items")) {
        compare_value(c, noun, &format!("{path}[]"), o, n, side);
    }
}

fn compare_object(
    c: &mut Changes<'_>,
    noun: &str,
    path: &str,
    old: &Value,
    new: &Value,
    side: Side,
) {
    let props = |v: &Value| {
        v.get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let required = |v: &Value| -> BTreeSet<String> {
        v.get("required")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (op, np): (Map<String, Value>, Map<String, Value>) = (props(old), props(new));
    let (or, nr) = (required(old), required(new));
    let at = |name: &str| {
        if path.is_empty() {
            name.to_owned()
        } else {
            format!("{path}.{name}")
        }
    };
    for (name, o) in &op {
        let p = at(name);
        match np.get(name) {
            None if side == Side::Input => {
                c.breaking(format!(
                    "parameter `{p}` was removed or renamed (callers still send it)"
                ));
            }
            None => c.breaking(format!("output field `{p}` was removed or renamed")),
            Some(n) => {
                if side == Side::Input && !or.contains(name) && nr.contains(name) {
                    c.breaking(format!("parameter `{p}` is now required"));
                }
                if side == Side::Input && or.contains(name) && !nr.contains(name) {
                    c.compatible(format!("parameter `{p}` is now optional"));
                }
                if side == Side::Output && or.contains(name) && !nr.contains(name) {
                    c.breaking(format!("output field `{p}` may now be missing"));
                }
                compare_value(c, noun, &p, o, n, side);
            }
        }
    }
    for name in np.keys().filter(|n| !op.contains_key(*n)) {
        let p = at(name);
        match side {
            Side::Input if nr.contains(name) => {
                c.breaking(format!(
                    "new required parameter `{p}` (callers do not send it)"
                ));
            }
            Side::Input => c.compatible(format!("new optional parameter `{p}`")),
            Side::Output => c.compatible(format!("new output field `{p}`")),
        }
    }
    let closed = |v: &Value| v.get("additionalProperties") == Some(&Value::Bool(false));
    if side == Side::Input && !closed(old) && closed(new) {
        let here = if path.is_empty() {
            "the arguments".to_owned()
        } else {
            format!("`{path}`")
        };
        c.breaking(format!(
            "{here} no longer accept properties they do not name"
        ));
    }
}

fn compare_enum(c: &mut Changes<'_>, here: &str, old: &Value, new: &Value) {
    let values =
        |v: &Value| -> Option<Vec<Value>> { v.get("enum").and_then(Value::as_array).cloned() };
    match (values(old), values(new)) {
        (Some(o), Some(n)) => {
            let gone: Vec<String> = o
                .iter()
                .filter(|v| !n.contains(v))
                .map(Value::to_string)
                .collect();
            let added: Vec<String> = n
                .iter()
                .filter(|v| !o.contains(v))
                .map(Value::to_string)
                .collect();
            if !gone.is_empty() {
                c.breaking(format!("{here}: enum value {} removed", gone.join(", ")));
            }
            if !added.is_empty() {
                c.compatible(format!("{here}: enum value {} added", added.join(", ")));
            }
        }
        (None, Some(_)) => c.breaking(format!("{here}: now limited to an enum")),
        (Some(_), None) => c.compatible(format!("{here}: no longer limited to an enum")),
        (None, None) => {}
    }
}

/// Upper bounds (a smaller one is tighter) and lower bounds (a larger one is tighter).
const UPPER: &[&str] = &[
    "maximum",
    "exclusiveMaximum",
    "maxLength",
    "maxItems",
    "maxProperties",
];
const LOWER: &[&str] = &[
    "minimum",
    "exclusiveMinimum",
    "minLength",
    "minItems",
    "minProperties",
];

fn compare_bounds(c: &mut Changes<'_>, here: &str, old: &Value, new: &Value) {
    for (keys, upper) in [(UPPER, true), (LOWER, false)] {
        for key in keys {
            let (o, n) = (
                old.get(*key).and_then(Value::as_f64),
                new.get(*key).and_then(Value::as_f64),
            );
            let tighter = match (o, n) {
                (None, Some(_)) => Some(true),
                (Some(_), None) => Some(false),
                (Some(o), Some(n)) if o != n => Some(if upper { n < o } else { n > o }),
                _ => None,
            };
            let show = |v: Option<f64>| v.map_or("none".to_owned(), |v| v.to_string());
            match tighter {
                Some(true) => {
                    c.breaking(format!("{here}: tighter {key} ({} → {})", show(o), show(n)))
                }
                Some(false) => {
                    c.compatible(format!("{here}: looser {key} ({} → {})", show(o), show(n)))
                }
                None => {}
            }
        }
    }
    if old.get("pattern") != new.get("pattern") && new.get("pattern").is_some() {
        c.breaking(format!(
            "{here}: its pattern changed (values it matched may not match now)"
        ));
    } else if old.get("pattern").is_some() && new.get("pattern").is_none() {
        c.compatible(format!("{here}: no pattern any more"));
    }
}

/// The JSON types a schema accepts (`type` as a string or a list, or `anyOf`/`oneOf`
/// alternatives); empty for any.
fn types(schema: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    match schema.get("type") {
        Some(Value::String(t)) => {
            out.insert(t.clone());
        }
        Some(Value::Array(ts)) => {
            out.extend(ts.iter().filter_map(|t| t.as_str().map(str::to_owned)))
        }
        _ => {
            for key in ["anyOf", "oneOf"] {
                if let Some(alts) = schema.get(key).and_then(Value::as_array) {
                    for alt in alts {
                        let t = types(alt);
                        if t.is_empty() {
                            return BTreeSet::new();
                        }
                        out.extend(t);
                    }
                }
            }
        }
    }
    out
}

/// Whether a schema of types `new` accepts every value one of types `old` did.
fn accepts_all(new: &BTreeSet<String>, old: &BTreeSet<String>) -> bool {
    if new.is_empty() {
        return true;
    }
    if old.is_empty() {
        return false;
    }
    old.iter()
        .all(|t| new.contains(t) || (t == "integer" && new.contains("number")))
}

/// `value` with the keys of every object sorted (stable files whatever order a schema
/// was built in).
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// FNV-1a, 64 bits, as hex: the same on every machine, enough to notice a change.
fn hash(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lock(input: Value, output: Option<Value>, annotations: Annotations) -> SchemaLock {
        let mut spec = ToolSpec::new("t", "Описание", input).with_annotations(annotations);
        if let Some(o) = output {
            spec = spec.with_output_schema(o);
        }
        SchemaLock::of_specs([&spec])
    }

    fn args(props: Value, required: &[&str]) -> Value {
        json!({"type": "object", "properties": props, "required": required})
    }

    /// `old → new` gives exactly one change, of this kind, that mentions `words`.
    fn one(old: &SchemaLock, new: &SchemaLock, breaking: bool, words: &str) {
        let changes = old.compare(new);
        assert_eq!(changes.len(), 1, "{changes:#?}");
        assert_eq!(changes[0].breaking, breaking, "{changes:#?}");
        assert!(changes[0].what.contains(words), "{changes:#?}");
    }

    fn input(props: Value, required: &[&str]) -> SchemaLock {
        lock(args(props, required), None, Annotations::default())
    }

    #[test]
    fn parameters_removed_added_required_and_optional() {
        let a = input(json!({"x": {"type": "string"}}), &["x"]);
        let none = input(json!({}), &[]);
        one(&a, &none, true, "parameter `x` was removed or renamed");
        let renamed = input(json!({"y": {"type": "string"}}), &["y"]);
        let c = a.compare(&renamed);
        assert!(
            c.iter()
                .any(|c| c.breaking && c.what.contains("`x` was removed")),
            "{c:#?}"
        );
        assert!(
            c.iter()
                .any(|c| c.breaking && c.what.contains("new required parameter `y`")),
            "{c:#?}"
        );
        let more = input(
            json!({"x": {"type": "string"}, "z": {"type": "integer"}}),
            &["x"],
        );
        one(&a, &more, false, "new optional parameter `z`");
        one(
            &none,
            &input(json!({"z": {"type": "integer"}}), &["z"]),
            true,
            "new required parameter `z`",
        );
        let optional = input(json!({"x": {"type": "string"}}), &[]);
        one(&optional, &a, true, "`x` is now required");
        one(&a, &optional, false, "`x` is now optional");
    }

    #[test]
    fn types_narrowed_and_widened() {
        let both = input(json!({"n": {"type": ["integer", "string"]}}), &[]);
        let int = input(json!({"n": {"type": "integer"}}), &[]);
        one(&both, &int, true, "integer | string → integer (narrowed)");
        one(&int, &both, false, "(widened)");
        let number = input(json!({"n": {"type": "number"}}), &[]);
        one(&int, &number, false, "(widened)");
        one(&number, &int, true, "(narrowed)");
        let any_of = input(
            json!({"n": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}),
            &[],
        );
        one(&any_of, &int, true, "integer | null → integer");
        // Nested: a field of an object argument, an array's items.
        let nested = |t: &str| {
            input(
                json!({"o": {"type": "object", "properties": {"k": {"type": t}}}, "a": {"type": "array", "items": {"type": t}}}),
                &[],
            )
        };
        let c = nested("string").compare(&nested("boolean"));
        assert!(
            c.iter().any(|c| c.breaking && c.what.contains("`o.k`")),
            "{c:#?}"
        );
        assert!(
            c.iter().any(|c| c.breaking && c.what.contains("`a[]`")),
            "{c:#?}"
        );
    }

    #[test]
    fn enums_and_bounds() {
        let e = |v: Value| input(json!({"m": {"type": "string", "enum": v}}), &[]);
        one(
            &e(json!(["a", "b"])),
            &e(json!(["a"])),
            true,
            "enum value \"b\" removed",
        );
        one(
            &e(json!(["a"])),
            &e(json!(["a", "b"])),
            false,
            "enum value \"b\" added",
        );
        let max = |v: u64| input(json!({"k": {"type": "integer", "maximum": v}}), &[]);
        one(&max(100), &max(50), true, "tighter maximum (100 → 50)");
        one(&max(50), &max(100), false, "looser maximum");
        let min = |v: u64| input(json!({"k": {"type": "integer", "minimum": v}}), &[]);
        one(&min(1), &min(5), true, "tighter minimum");
        one(&min(5), &min(1), false, "looser minimum");
        let len = |v: Option<u64>| {
            input(
                match v {
                    Some(v) => json!({"s": {"type": "string", "maxLength": v}}),
                    None => json!({"s": {"type": "string"}}),
                },
                &[],
            )
        };
        one(
            &len(None),
            &len(Some(10)),
            true,
            "tighter maxLength (none → 10)",
        );
        one(&len(Some(10)), &len(None), false, "looser maxLength");
        let closed = lock(
            json!({"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": false}),
            None,
            Annotations::default(),
        );
        let open = input(json!({"x": {"type": "string"}}), &[]);
        one(&open, &closed, true, "no longer accept properties");
    }

    #[test]
    fn output_fields_and_annotations() {
        let out = |v: Value| lock(args(json!({}), &[]), Some(v), Annotations::default());
        let two = out(
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
        );
        let one_field = out(
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}),
        );
        one(&two, &one_field, true, "output field `b` was removed");
        one(&one_field, &two, false, "new output field `b`");
        let retyped = out(
            json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
        );
        one(
            &two,
            &retyped,
            true,
            "output field `a`: type string → integer",
        );
        let plain = lock(args(json!({}), &[]), None, Annotations::default());
        one(&two, &plain, true, "structured output was removed");
        one(&plain, &two, false, "structured output was added");

        let ro = lock(
            args(json!({}), &[]),
            None,
            Annotations {
                read_only: true,
                ..Default::default()
            },
        );
        let d = lock(
            args(json!({}), &[]),
            None,
            Annotations {
                destructive: true,
                ..Default::default()
            },
        );
        let c = ro.compare(&d);
        assert!(
            c.iter().any(|c| c.breaking && c.what.contains("no longer")),
            "{c:#?}"
        );
        assert!(
            c.iter()
                .any(|c| c.breaking && c.what.contains("now destructive")),
            "{c:#?}"
        );
        let c = d.compare(&ro);
        assert!(!has_breaking(&c) && !c.is_empty(), "{c:#?}");
    }

    #[test]
    fn tools_added_removed_and_descriptions_and_the_file_round_trips() {
        let a = input(json!({}), &[]);
        let empty = SchemaLock::of_specs([]);
        let c = a.compare(&empty);
        assert!(
            c[0].breaking && c[0].what.contains("removed or renamed"),
            "{c:#?}"
        );
        let c = empty.compare(&a);
        assert!(!c[0].breaking && c[0].what.contains("a new tool"), "{c:#?}");
        let spec = ToolSpec::new("t", "Другое описание", args(json!({}), &[]));
        one(
            &a,
            &SchemaLock::of_specs([&spec]),
            false,
            "the ru description changed",
        );
        // Stable: keys sorted whatever order the schema was built in.
        let x = input(
            json!({"b": {"type": "string"}, "a": {"type": "string"}}),
            &[],
        );
        let text = x.to_json();
        assert!(text.find("\"a\"").unwrap() < text.find("\"b\"").unwrap());
        assert_eq!(SchemaLock::from_json(&text).unwrap(), x);
        assert!(SchemaLock::from_json("{\"version\": 9, \"tools\": {}}").is_err());
        assert!(SchemaLock::from_json("not json").is_err());
        assert!(a.compare(&a).is_empty());
    }
}
