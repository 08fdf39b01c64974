//! The dyn-safe [`Tool`] trait, its [`ToolSpec`], and what `#[tool]` registers.

use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::lang::Lang;
use crate::schema::{Description, ObjectSchema, Schema, ToolSchema};
use crate::{ToolContext, ToolError};

/// Hints about a tool's behaviour, as MCP defines them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Annotations {
    /// The tool does not change its environment.
    pub read_only: bool,
    /// The tool may destroy or overwrite data.
    pub destructive: bool,
    /// Calling it twice with the same arguments has no further effect.
    pub idempotent: bool,
    /// The tool reaches outside the engine (the web, other systems).
    pub open_world: bool,
}

impl Annotations {
    /// The four hints as `klaw-engine tools` shows them: `r` read-only, `d` destructive,
    /// `i` idempotent, `o` open-world, `-` where a hint is off (`r-i-`).
    pub fn flags(&self) -> String {
        [
            (self.read_only, 'r'),
            (self.destructive, 'd'),
            (self.idempotent, 'i'),
            (self.open_world, 'o'),
        ]
        .iter()
        .map(|&(on, c)| if on { c } else { '-' })
        .collect()
    }
}

/// A description owned at run time, in Russian and optionally English.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Text {
    /// Russian text.
    pub ru: String,
    /// English text, when there is one.
    pub en: Option<String>,
}

impl Text {
    /// The text in `lang`, falling back to Russian.
    pub fn get(&self, lang: Lang) -> &str {
        match (lang, &self.en) {
            (Lang::En, Some(en)) if !en.is_empty() => en,
            _ => &self.ru,
        }
    }
}

impl From<Description> for Text {
    fn from(d: Description) -> Self {
        Text {
            ru: d.ru.to_owned(),
            en: (!d.en.is_empty()).then(|| d.en.to_owned()),
        }
    }
}

/// Everything clients and the registry know about a tool, apart from its code.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ToolSpec {
    /// Unique name, `^[a-zA-Z0-9_-]{1,64}$`.
    pub name: String,
    /// What the tool does, for the model.
    pub description: Text,
    /// A short name for people (a client's tool list, the console's "running …").
    pub title: Option<Text>,
    /// Canonical JSON Schema of the arguments (object root, no `$ref`).
    pub input_schema: Value,
    /// Canonical JSON Schema of structured output, for tools that return a value.
    pub output_schema: Option<Value>,
    /// Behaviour hints.
    pub annotations: Annotations,
    /// Time limit; `None` uses the engine's default.
    pub timeout: Option<Duration>,
    /// Accepted extra names of top-level arguments: `(alias, name)`.
    pub aliases: Vec<(String, String)>,
    /// Where the tool comes from (`src/tools/x.rs:12`, `mcp:server`, ...), for messages.
    pub origin: String,
}

impl ToolSpec {
    /// A spec with a name, a Russian description and an argument schema; the rest default.
    pub fn new(
        name: impl Into<String>,
        description_ru: impl Into<String>,
        input_schema: Value,
    ) -> Self {
        Self {
            name: name.into(),
            description: Text {
                ru: description_ru.into(),
                en: None,
            },
            title: None,
            input_schema,
            output_schema: None,
            annotations: Annotations::default(),
            timeout: None,
            aliases: Vec::new(),
            origin: "runtime".into(),
        }
    }

    /// Sets the English description.
    #[must_use]
    pub fn with_description_en(mut self, en: impl Into<String>) -> Self {
        self.description.en = Some(en.into());
        self
    }

    /// Sets the title for people, in Russian (and English with `en`).
    #[must_use]
    pub fn with_title(mut self, ru: impl Into<String>, en: Option<String>) -> Self {
        self.title = Some(Text { ru: ru.into(), en });
        self
    }

    /// Sets the annotations.
    #[must_use]
    pub fn with_annotations(mut self, annotations: Annotations) -> Self {
        self.annotations = annotations;
        self
    }

    /// Sets the timeout.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets where the tool comes from.
    #[must_use]
    pub fn with_origin(mut self, origin: impl Into<String>) -> Self {
        self.origin = origin.into();
        self
    }

    /// Sets the output schema.
    #[must_use]
    pub fn with_output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }
}

/// What a successful tool call returns: text for the model and, for tools that
/// return a value, the same value as structured JSON; and, for tools that make them,
/// [`Attachment`]s (an image, a sound, a document) after the text.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    text: String,
    structured: Structured,
    attachments: Vec<Attachment>,
}

impl PartialEq for ToolOutput {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
            && self.structured() == other.structured()
            && self.attachments == other.attachments
    }
}

/// A [`ToolOutput`]'s structured content.
#[derive(Debug, Clone)]
enum Structured {
    None,
    Ready(Value),
    /// The same JSON as the text, read from it on first use (see
    /// [`ToolOutput::serialized`]): a caller that only reads the text never builds it.
    FromText(std::sync::OnceLock<Value>),
}

/// Content a tool returns besides its text: MCP clients receive it as `image`, `audio`
/// and `resource` content blocks; the command line describes it in a line.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Attachment {
    /// An image (`image/png`, `image/jpeg`, ...).
    Image {
        /// Its media type.
        mime_type: String,
        /// The encoded image.
        data: Vec<u8>,
    },
    /// A sound (`audio/wav`, `audio/mpeg`, ...).
    Audio {
        /// Its media type.
        mime_type: String,
        /// The encoded sound.
        data: Vec<u8>,
    },
    /// A document with its address (`file:///…`, `klaw://memory/…`).
    Resource {
        /// Where the document comes from.
        uri: String,
        /// Its media type.
        mime_type: String,
        /// Its content: text, or bytes for anything else.
        content: ResourceContent,
    },
}

/// The content of an [`Attachment::Resource`].
#[derive(Clone, PartialEq, Eq)]
pub enum ResourceContent {
    /// Text (UTF-8).
    Text(String),
    /// Anything else.
    Bytes(Vec<u8>),
}

impl Attachment {
    /// What the attachment is, in one line for a person or a model that cannot see it:
    /// `[image image/png, 68 bytes]`, `[resource file:///a.txt text/plain, 12 bytes]`.
    pub fn summary(&self) -> String {
        match self {
            Attachment::Image { mime_type, data } => {
                format!("[image {mime_type}, {} bytes]", data.len())
            }
            Attachment::Audio { mime_type, data } => {
                format!("[audio {mime_type}, {} bytes]", data.len())
            }
            Attachment::Resource {
                uri,
                mime_type,
                content,
            } => {
                let len = match content {
                    ResourceContent::Text(t) => t.len(),
                    ResourceContent::Bytes(b) => b.len(),
                };
                format!("[resource {uri} {mime_type}, {len} bytes]")
            }
        }
    }
}

impl std::fmt::Debug for Attachment {
    /// The summary: an attachment's bytes would flood a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.summary())
    }
}

impl std::fmt::Debug for ResourceContent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResourceContent::Text(t) => write!(f, "Text({} bytes)", t.len()),
            ResourceContent::Bytes(b) => write!(f, "Bytes({} bytes)", b.len()),
        }
    }
}

impl ToolOutput {
    /// A text result.
    pub fn plain(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            structured: Structured::None,
            attachments: Vec::new(),
        }
    }

    /// A structured result; the text is the JSON, pretty-printed.
    ///
    /// A value that is not an object is wrapped as `{"result": value}`, as MCP requires
    /// structured content to be an object.
    pub fn json(value: Value) -> Self {
        // Pretty-printing a `Value` cannot fail (its keys are strings, its numbers
        // finite); were it ever to, the model gets the compact form, never empty text.
        let text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
        let structured = if value.is_object() {
            value
        } else {
            serde_json::json!({ "result": value })
        };
        Self {
            text,
            structured: Structured::Ready(structured),
            attachments: Vec::new(),
        }
    }

    /// A structured result from a serializable value: the same text and structured
    /// content as [`ToolOutput::json`] of `serde_json::to_value(value)`, but the text is
    /// written straight from `value`, and the structured content is read back from it
    /// only when asked for. A value whose JSON holds a float, a 128-bit integer or a raw
    /// fragment (where the text written straight could differ by a digit from the
    /// `Value`'s) takes the `Value` path itself.
    pub fn serialized<T: serde::Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        let inexact = std::cell::Cell::new(false);
        let mut out = Vec::with_capacity(128);
        let exact = Exact {
            pretty: serde_json::ser::PrettyFormatter::new(),
            inexact: &inexact,
        };
        value.serialize(&mut serde_json::Serializer::with_formatter(&mut out, exact))?;
        if inexact.get() {
            return serde_json::to_value(value).map(Self::json);
        }
        // serde_json writes UTF-8 only.
        let text = String::from_utf8(out).map_err(serde::ser::Error::custom)?;
        Ok(Self {
            text,
            structured: Structured::FromText(std::sync::OnceLock::new()),
            attachments: Vec::new(),
        })
    }

    /// The same output with `text` as the text the model reads (the structured content
    /// and attachments kept): for a tool whose text is not its JSON, such as one imported
    /// from an MCP server that sends both.
    #[must_use]
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        // Structured content still to be read from the old text is read now.
        if let Some(v) = self.structured().cloned() {
            self.structured = Structured::Ready(v);
        }
        self.text = text.into();
        self
    }

    /// The same output with `attachment` after the text (and any before it).
    #[must_use]
    pub fn with_attachment(mut self, attachment: Attachment) -> Self {
        self.attachments.push(attachment);
        self
    }

    /// The attachments, in order.
    pub fn attachments(&self) -> &[Attachment] {
        &self.attachments
    }

    /// The text the model reads.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Structured content (always a JSON object), for tools with an output schema.
    pub fn structured(&self) -> Option<&Value> {
        match &self.structured {
            Structured::None => None,
            Structured::Ready(v) => Some(v),
            Structured::FromText(cell) => Some(cell.get_or_init(|| {
                // The text is JSON this crate wrote (`serialized`), so it parses; an
                // object stays as it is, anything else is wrapped as `json` does.
                let value: Value = serde_json::from_str(&self.text).unwrap_or_default();
                if value.is_object() {
                    value
                } else {
                    serde_json::json!({ "result": value })
                }
            })),
        }
    }

    /// The text and the structured content (the attachments are dropped).
    pub fn into_parts(self) -> (String, Option<Value>) {
        let structured = self.structured().cloned();
        (self.text, structured)
    }
}

/// serde_json's pretty formatter, noting whether it wrote anything whose text may not
/// read back as the very `Value` that `serde_json::to_value` makes (floats, which a
/// `Value` holds as `f64`, 128-bit integers, raw fragments).
struct Exact<'a> {
    pretty: serde_json::ser::PrettyFormatter<'static>,
    inexact: &'a std::cell::Cell<bool>,
}

impl serde_json::ser::Formatter for Exact<'_> {
    fn write_f32<W: ?Sized + std::io::Write>(&mut self, w: &mut W, v: f32) -> std::io::Result<()> {
        self.inexact.set(true);
        self.pretty.write_f32(w, v)
    }
    fn write_f64<W: ?Sized + std::io::Write>(&mut self, w: &mut W, v: f64) -> std::io::Result<()> {
        self.inexact.set(true);
        self.pretty.write_f64(w, v)
    }
    fn write_i128<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        v: i128,
    ) -> std::io::Result<()> {
        self.inexact.set(true);
        self.pretty.write_i128(w, v)
    }
    fn write_u128<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        v: u128,
    ) -> std::io::Result<()> {
        self.inexact.set(true);
        self.pretty.write_u128(w, v)
    }
    fn write_raw_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        self.inexact.set(true);
        self.pretty.write_raw_fragment(w, fragment)
    }
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.pretty.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.pretty.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.pretty.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.pretty.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.pretty.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.pretty.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.pretty.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.pretty.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.pretty.end_object_value(w)
    }
}

/// A tool the registry can call: a spec and a way to run it.
///
/// `#[tool]` functions become tools automatically; implement this trait for tools made
/// at run time (scripts, tools imported from MCP servers), or use [`FnTool`].
pub trait Tool: Send + Sync + 'static {
    /// What the tool is.
    fn spec(&self) -> &ToolSpec;

    /// Runs the tool. `args` has already been validated against the input schema and
    /// aliases have been replaced by the canonical names.
    fn call(
        &self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>>;
}

/// A tool made at run time from a spec and a closure.
///
/// ```
/// use klaw_core::{FnTool, ToolOutput, ToolSpec};
/// let echo = FnTool::new(
///     ToolSpec::new("echo", "Повторяет текст", serde_json::json!({
///         "type": "object",
///         "properties": {"text": {"type": "string"}},
///         "required": ["text"],
///     })),
///     |_ctx, args| async move { Ok(ToolOutput::plain(args["text"].as_str().unwrap_or_default())) },
/// );
/// # let _ = echo;
/// ```
pub struct FnTool<F> {
    spec: ToolSpec,
    f: F,
}

impl<F> FnTool<F> {
    /// A tool with `spec` that runs `f`.
    pub fn new<Fut>(spec: ToolSpec, f: F) -> Self
    where
        F: Fn(ToolContext, Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        Self { spec, f }
    }
}

/// The boxed future a typed [`FnTool`] runs.
type CallFuture = BoxFuture<'static, Result<ToolOutput, ToolError>>;

impl FnTool<()> {
    /// A tool whose arguments are the struct `A` (`#[derive(ToolSchema,
    /// serde::Deserialize)]`): `spec`'s argument schema and aliases are replaced by
    /// `A`'s, so they cannot drift from the type, and `f` gets the arguments already
    /// parsed (the registry validated them against that schema first; what still does
    /// not parse is an `invalid_arguments` error for the model).
    ///
    /// ```
    /// use klaw_core::{FnTool, ToolOutput, ToolSchema, ToolSpec};
    ///
    /// #[derive(ToolSchema, serde::Deserialize)]
    /// #[serde(rename_all = "camelCase")]
    /// struct Greet {
    ///     /// Кого приветствовать
    ///     #[serde(alias = "who")]
    ///     user_name: String,
    /// }
    ///
    /// let greet = FnTool::typed(
    ///     ToolSpec::new("greet", "Приветствует", serde_json::Value::Null),
    ///     |_ctx, args: Greet| async move { Ok(ToolOutput::plain(format!("hi {}", args.user_name))) },
    /// );
    /// # use klaw_core::Tool;
    /// assert_eq!(greet.spec().input_schema["required"][0], "userName");
    /// assert_eq!(greet.spec().aliases, [("who".to_owned(), "userName".to_owned())]);
    /// ```
    pub fn typed<A, F, Fut>(
        mut spec: ToolSpec,
        f: F,
    ) -> FnTool<impl Fn(ToolContext, Value) -> CallFuture + Send + Sync + 'static>
    where
        A: ToolSchema + serde::de::DeserializeOwned + 'static,
        F: Fn(ToolContext, A) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        spec.input_schema = A::SCHEMA.to_json();
        spec.aliases = match A::SCHEMA {
            Schema::Object(obj) => obj
                .properties
                .iter()
                .flat_map(|p| {
                    p.aliases
                        .iter()
                        .map(|a| ((*a).to_owned(), p.name.to_owned()))
                })
                .collect(),
            _ => Vec::new(),
        };
        FnTool {
            spec,
            f: move |ctx: ToolContext, args: Value| -> CallFuture {
                match serde_json::from_value::<A>(args) {
                    Ok(args) => Box::pin(f(ctx, args)),
                    Err(e) => Box::pin(std::future::ready(Err(ToolError::invalid_arguments(
                        "",
                        format!("the arguments do not fit the tool: {e}"),
                    )))),
                }
            },
        }
    }
}

impl<F, Fut> Tool for FnTool<F>
where
    F: Fn(ToolContext, Value) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
{
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(
        &self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        Box::pin((self.f)(ctx, args))
    }
}

/// What `#[tool]` registers with `inventory`: constant data and a function pointer.
#[derive(Debug)]
#[doc(hidden)]
pub struct ToolRegistration {
    pub name: &'static str,
    pub description: Description,
    pub title: Description,
    pub params: &'static ObjectSchema,
    pub output: Option<&'static Schema>,
    pub annotations: Annotations,
    pub timeout_ms: Option<u64>,
    pub file: &'static str,
    pub line: u32,
    pub call: fn(ToolContext, Value) -> BoxFuture<'static, Result<ToolOutput, ToolError>>,
}

inventory::collect!(ToolRegistration);

/// A `#[tool]` function seen as a [`Tool`].
pub(crate) struct StaticTool {
    reg: &'static ToolRegistration,
    spec: ToolSpec,
}

impl StaticTool {
    pub(crate) fn new(reg: &'static ToolRegistration) -> Self {
        let mut aliases = Vec::new();
        for p in reg.params.properties {
            for a in p.aliases {
                aliases.push(((*a).to_owned(), p.name.to_owned()));
            }
        }
        let output_schema = reg.output.map(|s| {
            let v = s.to_json();
            if v.get("type").and_then(Value::as_str) == Some("object") {
                v
            } else {
                serde_json::json!({
                    "type": "object",
                    "properties": {"result": v},
                    "required": ["result"],
                })
            }
        });
        let spec = ToolSpec {
            name: reg.name.to_owned(),
            description: reg.description.into(),
            title: (!reg.title.is_empty()).then(|| reg.title.into()),
            input_schema: reg.params.to_json(),
            output_schema,
            annotations: reg.annotations,
            timeout: reg.timeout_ms.map(Duration::from_millis),
            aliases,
            origin: format!("{}:{}", reg.file, reg.line),
        };
        Self { reg, spec }
    }
}

impl Tool for StaticTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(
        &self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        (self.reg.call)(ctx, args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn with_text_keeps_the_structured_content() {
        let out = ToolOutput::json(json!({"sum": 3})).with_text("3");
        assert_eq!(out.text(), "3");
        assert_eq!(out.structured(), Some(&json!({"sum": 3})));
    }

    /// `serialized` gives what `json` of `to_value` gives, text and structured content,
    /// whatever the value holds (floats and wide integers take the `Value` path).
    #[test]
    fn serialized_output_is_the_json_of_the_value() {
        #[derive(serde::Serialize)]
        struct Item {
            name: String,
            size: u64,
            delta: i64,
            ok: bool,
            none: Option<u8>,
            tags: Vec<&'static str>,
            map: std::collections::BTreeMap<u32, String>,
        }
        #[derive(serde::Serialize)]
        struct Scored {
            score: f32,
            weight: f64,
            big: u128,
        }
        let item = Item {
            name: "ä \"q\"\n\u{1F600}".into(),
            size: u64::MAX,
            delta: i64::MIN,
            ok: true,
            none: None,
            tags: vec![],
            map: [(1, "one".into()), (20, "twenty".into())].into(),
        };
        let same = |direct: ToolOutput, via: ToolOutput| {
            assert_eq!(direct.text(), via.text());
            assert_eq!(direct.structured(), via.structured());
            assert_eq!(direct, via);
        };
        let json = |v: &dyn erased::Ser| ToolOutput::json(v.to_value());
        same(ToolOutput::serialized(&item).unwrap(), json(&item));
        let scored = Scored {
            score: 0.1,
            weight: 1e-7,
            big: 7,
        };
        same(ToolOutput::serialized(&scored).unwrap(), json(&scored));
        same(
            ToolOutput::serialized(&vec![1, 2]).unwrap(),
            json(&vec![1, 2]),
        );
        same(ToolOutput::serialized(&"text").unwrap(), json(&"text"));
        // The text replaced: the structured content is still the value's.
        let out = ToolOutput::serialized(&item).unwrap().with_text("short");
        assert_eq!(out.structured(), json(&item).structured());
    }

    mod erased {
        pub(super) trait Ser {
            fn to_value(&self) -> serde_json::Value;
        }
        impl<T: serde::Serialize> Ser for T {
            fn to_value(&self) -> serde_json::Value {
                serde_json::to_value(self).unwrap()
            }
        }
    }

    #[test]
    fn into_parts_gives_the_text_and_the_structured_content() {
        assert_eq!(
            ToolOutput::plain("готово").into_parts(),
            ("готово".to_owned(), None)
        );
        let (text, structured) = ToolOutput::json(json!({"n": 1})).into_parts();
        assert_eq!(structured, Some(json!({"n": 1})));
        assert_eq!(
            serde_json::from_str::<Value>(&text).ok(),
            Some(json!({"n": 1}))
        );
        let (_, wrapped) = ToolOutput::json(json!(5)).into_parts();
        assert_eq!(wrapped, Some(json!({"result": 5})));
    }
}
