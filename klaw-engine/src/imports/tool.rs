//! An imported tool: an ordinary [`Tool`] whose spec comes from the server's
//! `tools/list` and whose call is forwarded to the server (arguments already validated
//! by the registry; cancellation, time limit and progress carried over).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use futures_util::future::BoxFuture;
use klaw_tools::{
    Annotations, Attachment, ResourceContent, Tool, ToolContext, ToolError, ToolOutput, ToolSpec,
};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest,
    ContentBlock, RequestParamsMeta, ResourceContents, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use serde_json::{Map, Value};

use super::client::{Link, cut};
use super::naming::imported_name;

/// Longest description kept (a longer one is cut): a hostile server cannot fill the
/// model's context with one tool.
const MAX_DESCRIPTION: usize = 8_000;
/// Largest schema (its JSON, after `$ref`s are inlined) a tool may have.
const MAX_SCHEMA_BYTES: usize = 256 * 1024;
/// How deep `$ref`s are followed, and how many are inlined in one schema.
const MAX_REF_DEPTH: usize = 16;
const MAX_REFS: usize = 1_000;
/// How deep a schema may nest (objects and arrays, after `$ref`s are inlined): far
/// deeper than any real tool's, and shallower than what the stdio transport lets
/// through ([`super::stdio::MAX_MESSAGE_DEPTH`]), so a schema cut there is refused here.
const MAX_SCHEMA_DEPTH: usize = 64;

/// A tool of an imported server.
pub(crate) struct ImportedTool {
    spec: ToolSpec,
    /// Its name on the server.
    remote: String,
    link: Arc<Link>,
}

impl ImportedTool {
    /// The tool `tool` of the server behind `link`, with `timeout` as its time limit;
    /// an error is why its definition cannot be used (the registry checks the rest).
    pub(crate) fn new(
        link: &Arc<Link>,
        tool: &rmcp::model::Tool,
        timeout: Duration,
    ) -> Result<Self, (String, String)> {
        let server = link.server.as_str();
        let name = imported_name(server, &tool.name);
        let fail = |problem: String| (name.clone(), problem);
        let description = match tool.description.as_deref().map(str::trim) {
            Some(d) if !d.is_empty() => cut(d, MAX_DESCRIPTION),
            _ => format!("`{}` of the MCP server `{server}`", cut(&tool.name, 200)),
        };
        let input = schema(&tool.input_schema).map_err(|e| fail(format!("input schema: {e}")))?;
        let mut spec = ToolSpec::new(&name, description.clone(), input)
            .with_description_en(description)
            .with_timeout(timeout)
            .with_origin(format!("mcp:{server}"));
        if let Some(out) = &tool.output_schema {
            spec = spec
                .with_output_schema(schema(out).map_err(|e| fail(format!("output schema: {e}")))?);
        }
        let title = tool
            .title
            .clone()
            .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone()))
            .filter(|t| !t.trim().is_empty());
        if let Some(title) = title {
            let title = cut(&title, 200);
            spec = spec.with_title(title.clone(), Some(title));
        }
        spec = spec.with_annotations(annotations(tool.annotations.as_ref()));
        Ok(Self {
            spec,
            remote: tool.name.to_string(),
            link: Arc::clone(link),
        })
    }
}

/// The hints of a server's tool, MCP's defaults where the server is silent: with no
/// `annotations` object, or a hint missing from it, a tool is not read-only,
/// destructive, not idempotent and open-world, so approval asks before it runs and an
/// unattended run refuses it. `destructiveHint` means something only when
/// `readOnlyHint` is false: a tool the server calls read-only is not destructive unless
/// the server also says `destructiveHint: true`, and then it is destructive and not
/// read-only (the safer of the two).
fn annotations(hints: Option<&rmcp::model::ToolAnnotations>) -> Annotations {
    let hint = |get: fn(&rmcp::model::ToolAnnotations) -> Option<bool>| hints.and_then(get);
    let read_only = hint(|a| a.read_only_hint);
    let destructive = match (read_only, hint(|a| a.destructive_hint)) {
        (_, Some(said)) => said,
        (Some(true), None) => false,
        (_, None) => true,
    };
    Annotations {
        read_only: read_only.unwrap_or(false) && !destructive,
        destructive,
        idempotent: hint(|a| a.idempotent_hint).unwrap_or(false),
        open_world: hint(|a| a.open_world_hint).unwrap_or(true),
    }
}

impl Tool for ImportedTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(
        &self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let link = Arc::clone(&self.link);
        let remote = self.remote.clone();
        let name = self.spec.name.clone();
        Box::pin(async move {
            let peer = link.peer().map_err(|why| {
                ToolError::unavailable(format!(
                    "the MCP server `{}` is not running ({why}); it is being restarted, \
                     try again later",
                    link.server
                ))
                .with_tool(&name)
            })?;
            let arguments = match args {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            let mut params = CallToolRequestParams::new(remote).with_arguments(arguments);
            // The call's trace goes on at the server (SEP-414), when telemetry is on.
            for (key, value) in crate::telemetry::passed_on() {
                match key {
                    "traceparent" => params.set_traceparent(&value),
                    _ => params.set_tracestate(&value),
                }
            }
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
            let handle = peer
                .send_cancellable_request(request, PeerRequestOptions::no_options())
                .await
                .map_err(|e| lost(&link.server, &e.to_string()).with_tool(&name))?;
            let _progress = link.watch_progress(handle.progress_token.clone(), ctx.progress());
            // The registry drops this future on cancellation and at the time limit: the
            // guard then tells the server (`notifications/cancelled`).
            let mut cancel = CancelOnDrop {
                peer: Some(peer),
                id: Some(handle.id.clone()),
            };
            let answer = handle.rx.await;
            cancel.id = None;
            match answer {
                Ok(Ok(ServerResult::CallToolResult(result))) => {
                    output(result).map_err(|e| e.with_tool(&name))
                }
                Ok(Ok(_)) => Err(ToolError::failed(format!(
                    "the MCP server `{}` answered the call with something other than a tool result",
                    link.server
                ))
                .with_tool(&name)),
                Ok(Err(e)) => Err(remote_error(&link.server, e).with_tool(&name)),
                Err(_) => Err(lost(&link.server, "the connection closed").with_tool(&name)),
            }
        })
    }
}

/// Sends `notifications/cancelled` for a request whose caller stopped waiting.
struct CancelOnDrop {
    peer: Option<rmcp::service::Peer<rmcp::service::RoleClient>>,
    id: Option<rmcp::model::RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let (Some(peer), Some(id)) = (self.peer.take(), self.id.take())
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(async move {
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(id),
                        Some("the caller cancelled the call or its time ran out".into()),
                    ))
                    .await;
            });
        }
    }
}

fn lost(server: &str, why: &str) -> ToolError {
    ToolError::unavailable(format!(
        "the MCP server `{server}` stopped answering ({}); it is being restarted, try again later",
        cut(why, 300)
    ))
}

fn remote_error(server: &str, e: rmcp::ServiceError) -> ToolError {
    match e {
        rmcp::ServiceError::McpError(e) => ToolError::failed(format!(
            "the MCP server `{server}` refused the call: {}",
            cut(&e.message, 2000)
        )),
        rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_) => {
            lost(server, &e.to_string())
        }
        other => ToolError::failed(format!(
            "the MCP server `{server}` failed the call: {}",
            cut(&other.to_string(), 2000)
        )),
    }
}

/// A tool result as Klaw's: `isError` becomes an error the model reads; text blocks
/// become the text, images, sounds and embedded resources attachments, structured
/// content the structured result.
fn output(result: rmcp::model::CallToolResult) -> Result<ToolOutput, ToolError> {
    let mut texts = Vec::new();
    let mut attachments = Vec::new();
    let bytes = |data: &str| base64::engine::general_purpose::STANDARD.decode(data.trim());
    for block in result.content {
        match block {
            ContentBlock::Text(t) => texts.push(t.text),
            ContentBlock::Image(i) => match bytes(&i.data) {
                Ok(data) => attachments.push(Attachment::Image {
                    mime_type: i.mime_type,
                    data,
                }),
                Err(_) => texts.push(format!(
                    "[an image {} that is not valid base64]",
                    i.mime_type
                )),
            },
            ContentBlock::Audio(a) => match bytes(&a.data) {
                Ok(data) => attachments.push(Attachment::Audio {
                    mime_type: a.mime_type,
                    data,
                }),
                Err(_) => texts.push(format!(
                    "[a sound {} that is not valid base64]",
                    a.mime_type
                )),
            },
            ContentBlock::Resource(r) => match r.resource {
                ResourceContents::TextResourceContents {
                    uri,
                    mime_type,
                    text,
                    ..
                } => attachments.push(Attachment::Resource {
                    uri,
                    mime_type: mime_type.unwrap_or_else(|| "text/plain".into()),
                    content: ResourceContent::Text(text),
                }),
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => match bytes(&blob) {
                    Ok(data) => attachments.push(Attachment::Resource {
                        uri,
                        mime_type: mime_type.unwrap_or_else(|| "application/octet-stream".into()),
                        content: ResourceContent::Bytes(data),
                    }),
                    Err(_) => texts.push(format!("[a resource {uri} that is not valid base64]")),
                },
                _ => texts.push("[a resource of a kind Klaw does not know]".into()),
            },
            ContentBlock::ResourceLink(l) => texts.push(format!("[resource {}]", l.uri)),
            _ => texts.push("[content of a kind Klaw does not know]".into()),
        }
    }
    let text = texts.join("\n");
    if result.is_error == Some(true) {
        let message = if text.is_empty() {
            "the tool reported an error without a message".to_owned()
        } else {
            text
        };
        return Err(ToolError::failed(message));
    }
    let mut out = match result.structured_content {
        Some(value) if !value.is_null() => {
            let out = ToolOutput::json(value);
            if text.is_empty() {
                out
            } else {
                out.with_text(text)
            }
        }
        _ => ToolOutput::plain(text),
    };
    for a in attachments {
        out = out.with_attachment(a);
    }
    Ok(out)
}

/// A server's schema as the registry takes it: `$schema` dropped, `$ref`s into
/// `$defs`/`definitions` inlined (bounded), not larger than [`MAX_SCHEMA_BYTES`] nor
/// deeper than [`MAX_SCHEMA_DEPTH`], and passing the registry's schema checks. Its
/// cost is bounded whatever the server sends: the depth is checked before anything
/// recurses into it, and inlining stops once it would pass the size.
fn schema(raw: &Map<String, Value>) -> Result<Value, String> {
    // Checked without recursion first: the walks below recurse.
    let deepest = depth(raw);
    if deepest > MAX_SCHEMA_DEPTH {
        return Err(format!(
            "it nests deeper than the {MAX_SCHEMA_DEPTH} levels an imported schema may have"
        ));
    }
    let mut root = raw.clone();
    root.remove("$schema");
    let defs = match (root.remove("$defs"), root.remove("definitions")) {
        (Some(Value::Object(mut a)), Some(Value::Object(b))) => {
            a.extend(b);
            a
        }
        (Some(Value::Object(a)), _) | (_, Some(Value::Object(a))) => a,
        _ => Map::new(),
    };
    let sizes: std::collections::HashMap<&str, usize> = defs
        .iter()
        .map(|(k, v)| {
            (
                k.as_str(),
                serde_json::to_vec(v).map_or(usize::MAX, |b| b.len()),
            )
        })
        .collect();
    let mut value = Value::Object(root);
    let mut budget = Budget {
        refs: MAX_REFS,
        bytes: MAX_SCHEMA_BYTES,
    };
    inline(&mut value, &defs, &sizes, 0, 1, &mut budget)?;
    let size = serde_json::to_vec(&value)
        .map(|v| v.len())
        .unwrap_or(usize::MAX);
    if size > MAX_SCHEMA_BYTES {
        return Err(format!(
            "{size} bytes of JSON, more than the {MAX_SCHEMA_BYTES} an imported schema may have"
        ));
    }
    // The registry's own rules, checked here so a refusal is reported once (the
    // registry would report it again when the tool is registered).
    let problems = klaw_tools::check_schema(&value);
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    Ok(value)
}

/// How deep `schema` nests, counted without recursion.
fn depth(schema: &Map<String, Value>) -> usize {
    let mut deepest = 1;
    let mut stack: Vec<(&Value, usize)> = schema.values().map(|v| (v, 2)).collect();
    while let Some((v, level)) = stack.pop() {
        match v {
            Value::Object(m) => {
                deepest = deepest.max(level);
                stack.extend(m.values().map(|v| (v, level + 1)));
            }
            Value::Array(a) => {
                deepest = deepest.max(level);
                stack.extend(a.iter().map(|v| (v, level + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// What inlining may still do: references to inline, bytes to copy.
struct Budget {
    refs: usize,
    bytes: usize,
}

/// Inlines the `$ref`s in `v` (at `level` of the schema, `depth` references deep).
fn inline(
    v: &mut Value,
    defs: &Map<String, Value>,
    sizes: &std::collections::HashMap<&str, usize>,
    depth: usize,
    level: usize,
    budget: &mut Budget,
) -> Result<(), String> {
    if level > MAX_SCHEMA_DEPTH {
        return Err(format!(
            "it nests deeper than the {MAX_SCHEMA_DEPTH} levels an imported schema may have, \
             once its references are inlined"
        ));
    }
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                let Some(name) = r
                    .strip_prefix("#/$defs/")
                    .or_else(|| r.strip_prefix("#/definitions/"))
                else {
                    return Err(format!("the reference {:?} cannot be inlined", cut(r, 100)));
                };
                let Some(target) = defs.get(name) else {
                    return Err(format!(
                        "the reference {:?} names no definition",
                        cut(r, 100)
                    ));
                };
                if depth >= MAX_REF_DEPTH || budget.refs == 0 {
                    return Err("its references are recursive or too many to inline".into());
                }
                let size = sizes.get(name).copied().unwrap_or(usize::MAX);
                if size > budget.bytes {
                    return Err(format!(
                        "more than the {MAX_SCHEMA_BYTES} bytes of JSON an imported schema \
                         may have, once its references are inlined"
                    ));
                }
                budget.refs -= 1;
                budget.bytes -= size;
                let mut replacement = target.clone();
                if let Value::Object(t) = &mut replacement {
                    for (k, val) in m.iter() {
                        if k != "$ref" {
                            t.insert(k.clone(), val.clone());
                        }
                    }
                }
                *v = replacement;
                return inline(v, defs, sizes, depth + 1, level, budget);
            }
            for val in m.values_mut() {
                inline(val, defs, sizes, depth, level + 1, budget)?;
            }
        }
        Value::Array(a) => {
            for val in a {
                inline(val, defs, sizes, depth, level + 1, budget)?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn references_are_inlined() {
        let s = schema(&obj(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"p": {"$ref": "#/$defs/Point", "description": "где"}},
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
        })))
        .unwrap();
        assert_eq!(
            s,
            json!({"type": "object", "properties": {"p": {"type": "object", "properties": {"x": {"type": "number"}}, "description": "где"}}})
        );
    }

    #[test]
    fn recursive_or_dangling_references_are_refused() {
        let e = schema(&obj(json!({
            "type": "object",
            "properties": {"n": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        })))
        .unwrap_err();
        assert!(e.contains("recursive"), "{e}");
        let e = schema(&obj(
            json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/X"}}}),
        ))
        .unwrap_err();
        assert!(e.contains("names no definition"), "{e}");
        let e = schema(&obj(
            json!({"type": "object", "properties": {"a": {"$ref": "http://x"}}}),
        ))
        .unwrap_err();
        assert!(e.contains("cannot be inlined"), "{e}");
    }

    #[test]
    fn a_deep_schema_or_a_reference_bomb_is_refused_cheaply() {
        let mut deep = json!({"type": "string"});
        for _ in 0..200 {
            deep = json!({"type": "object", "properties": {"a": deep}});
        }
        let e = schema(&obj(deep)).unwrap_err();
        assert!(e.contains("nests deeper than the 64 levels"), "{e}");
        // Shallow each, deep once inlined: a chain of 15 definitions of 6 levels.
        let mut defs = Map::new();
        for i in 0..15 {
            let next = if i == 14 {
                json!({"type": "string"})
            } else {
                json!({"$ref": format!("#/$defs/D{}", i + 1)})
            };
            defs.insert(
                format!("D{i}"),
                json!({"type": "object", "properties": {"a": {"type": "object", "properties": {
                    "b": {"type": "object", "properties": {"c": next}}}}}}),
            );
        }
        let e = schema(&obj(
            json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/D0"}}, "$defs": defs}),
        ))
        .unwrap_err();
        assert!(e.contains("once its references are inlined"), "{e}");
        // One big definition referenced many times: stopped at the size, not after
        // copying it a thousand times.
        let big: Map<String, Value> = (0..2_000)
            .map(|i| {
                (
                    format!("p{i}"),
                    json!({"type": "string", "description": "x".repeat(50)}),
                )
            })
            .collect();
        let props: Map<String, Value> = (0..1_000)
            .map(|i| (format!("q{i}"), json!({"$ref": "#/$defs/Big"})))
            .collect();
        let e = schema(&obj(json!({
            "type": "object",
            "properties": props,
            "$defs": {"Big": {"type": "object", "properties": big}},
        })))
        .unwrap_err();
        assert!(e.contains("once its references are inlined"), "{e}");
    }

    #[test]
    fn a_huge_schema_is_refused() {
        let props: Map<String, Value> = (0..20_000)
            .map(|i| {
                (
                    format!("p{i}"),
                    json!({"type": "string", "description": "x".repeat(20)}),
                )
            })
            .collect();
        let e = schema(&obj(json!({"type": "object", "properties": props}))).unwrap_err();
        assert!(e.contains("more than"), "{e}");
    }

    #[test]
    fn a_silent_server_gets_the_defaults_of_mcp() {
        use rmcp::model::ToolAnnotations;
        let flags = |a: Option<ToolAnnotations>| annotations(a.as_ref()).flags();
        // No object, an empty one, or only a title: destructive and open-world.
        assert_eq!(flags(None), "-d-o");
        assert_eq!(flags(Some(ToolAnnotations::new())), "-d-o");
        assert_eq!(flags(Some(ToolAnnotations::with_title("t"))), "-d-o");
        // A hint missing beside others: its default.
        let a = ToolAnnotations::new().open_world(false);
        assert_eq!(flags(Some(a)), "-d--");
        let a = ToolAnnotations::new().idempotent(true);
        assert_eq!(flags(Some(a)), "-dio");
        let a = ToolAnnotations::new().destructive(false);
        assert_eq!(flags(Some(a)), "---o");
        // Read-only as the server says, unless it also says destructive.
        let a = ToolAnnotations::new().read_only(true);
        assert_eq!(flags(Some(a)), "r--o");
        let a = ToolAnnotations::new().read_only(true).destructive(true);
        assert_eq!(flags(Some(a)), "-d-o");
    }

    #[test]
    fn results_map_to_text_attachments_structured_and_errors() {
        use rmcp::model::CallToolResult;
        let ok = CallToolResult::success(vec![
            ContentBlock::text("a"),
            ContentBlock::image("aGk=", "image/png"),
            ContentBlock::text("b"),
        ]);
        let out = output(ok).unwrap();
        assert_eq!(out.text(), "a\nb");
        assert_eq!(out.attachments().len(), 1);
        let bad = CallToolResult::success(vec![ContentBlock::image("%%%", "image/png")]);
        assert!(output(bad).unwrap().text().contains("not valid base64"));
        let err = CallToolResult::error(vec![ContentBlock::text("no such file")]);
        let e = output(err).unwrap_err();
        assert_eq!(e.message(), "no such file");
        let structured = CallToolResult::structured(json!({"sum": 3}));
        let out = output(structured).unwrap();
        assert_eq!(out.structured(), Some(&json!({"sum": 3})));
    }
}
