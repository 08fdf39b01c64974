//! # klaw-test-fixtures
//!
//! Test-only (klaw-engine's feature `fixtures` links it into the engine's binary and
//! tests, never into a release build): the tools, resources and prompts the MCP
//! conformance suite calls (each documents the scenario it serves), and `echo`, the
//! trivial tool the MCP benchmark compares with an equivalent FastMCP server. The tools
//! are `#[tool]`s; the resources and prompts one [`McpExtension`], registered the same
//! way. Nothing here depends on the engine.

use std::time::Duration;

use klaw_core::{
    Attachment, Log, Progress, ResourceContent, ToolContext, ToolError, ToolOutput, tool,
};
use klaw_mcp_ext::{McpExtension, SessionClients, offers_elicitation, offers_sampling};

/// Returns its text (the benchmarks' trivial tool).
#[tool(
    name = "echo",
    title_ru = "Эхо",
    title_en = "Echo",
    description_ru = "Возвращает переданный текст (инструмент для тестов и замеров)",
    description_en = "Returns the text it is given (a tool for tests and benchmarks)",
    read_only
)]
pub async fn echo(
    /// Текст
    #[arg(description_en = "The text")]
    text: String,
) -> Result<String, ToolError> {
    Ok(text)
}

/// Conformance `tools-call-simple-text`: text content.
#[tool(
    name = "test_simple_text",
    title_ru = "Тест: простой текст",
    title_en = "Test: simple text",
    description_ru = "Тестовый инструмент: возвращает простой текст",
    description_en = "Test tool: returns simple text",
    read_only
)]
pub async fn test_simple_text() -> Result<String, ToolError> {
    Ok("This is a simple text response for testing.".into())
}

/// Conformance `tools-call-error`: a tool error (`isError: true` with a message).
#[tool(
    name = "test_error_handling",
    title_ru = "Тест: ошибка",
    title_en = "Test: error",
    description_ru = "Тестовый инструмент: всегда завершается ошибкой",
    description_en = "Test tool: always fails",
    read_only
)]
pub async fn test_error_handling() -> Result<String, ToolError> {
    Err(ToolError::failed(
        "This tool intentionally returns an error for testing",
    ))
}

/// Conformance `tools-call-with-progress`: three progress reports, 0, 50 and 100 of 100.
#[tool(
    name = "test_tool_with_progress",
    title_ru = "Тест: ход работы",
    title_en = "Test: progress",
    description_ru = "Тестовый инструмент: сообщает о ходе работы три раза",
    description_en = "Test tool: reports progress three times",
    read_only
)]
pub async fn test_tool_with_progress(progress: Progress) -> Result<String, ToolError> {
    for done in [0, 50, 100] {
        progress.report(done, Some(100), format!("{done}%"));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok("Progress test completed".into())
}

/// A 1×1 red PNG.
const RED_PIXEL_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x08, 0xd7, 0x63, 0xf8, 0xcf, 0xc0, 0x00,
    0x00, 0x03, 0x01, 0x01, 0x00, 0x18, 0xdd, 0x8d, 0xb0, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

/// A WAV file of one silent sample (8 kHz, 8-bit mono).
fn silent_wav() -> Vec<u8> {
    let mut w = Vec::with_capacity(45);
    w.extend_from_slice(b"RIFF");
    w.extend_from_slice(&37u32.to_le_bytes());
    w.extend_from_slice(b"WAVEfmt ");
    w.extend_from_slice(&16u32.to_le_bytes());
    w.extend_from_slice(&1u16.to_le_bytes()); // PCM
    w.extend_from_slice(&1u16.to_le_bytes()); // mono
    w.extend_from_slice(&8000u32.to_le_bytes());
    w.extend_from_slice(&8000u32.to_le_bytes());
    w.extend_from_slice(&1u16.to_le_bytes());
    w.extend_from_slice(&8u16.to_le_bytes());
    w.extend_from_slice(b"data");
    w.extend_from_slice(&1u32.to_le_bytes());
    w.push(128);
    w
}

fn image() -> Attachment {
    Attachment::Image {
        mime_type: "image/png".into(),
        data: RED_PIXEL_PNG.to_vec(),
    }
}

fn resource() -> Attachment {
    Attachment::Resource {
        uri: "test://embedded-resource".into(),
        mime_type: "text/plain".into(),
        content: ResourceContent::Text("This is an embedded resource content.".into()),
    }
}

/// Conformance `tools-call-image`: an image and no text.
#[tool(
    name = "test_image_content",
    title_ru = "Тест: картинка",
    title_en = "Test: image",
    description_ru = "Тестовый инструмент: возвращает картинку",
    description_en = "Test tool: returns an image",
    read_only
)]
pub async fn test_image_content() -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::plain("").with_attachment(image()))
}

/// Conformance `tools-call-audio`: a sound and no text.
#[tool(
    name = "test_audio_content",
    title_ru = "Тест: звук",
    title_en = "Test: audio",
    description_ru = "Тестовый инструмент: возвращает звук",
    description_en = "Test tool: returns audio",
    read_only
)]
pub async fn test_audio_content() -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::plain("").with_attachment(Attachment::Audio {
        mime_type: "audio/wav".into(),
        data: silent_wav(),
    }))
}

/// Conformance `tools-call-embedded-resource`: a text document.
#[tool(
    name = "test_embedded_resource",
    title_ru = "Тест: документ",
    title_en = "Test: resource",
    description_ru = "Тестовый инструмент: возвращает встроенный документ",
    description_en = "Test tool: returns an embedded resource",
    read_only
)]
pub async fn test_embedded_resource() -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::plain("").with_attachment(resource()))
}

/// Conformance `tools-call-mixed-content`: text, an image and a document.
#[tool(
    name = "test_multiple_content_types",
    title_ru = "Тест: разное содержимое",
    title_en = "Test: mixed content",
    description_ru = "Тестовый инструмент: возвращает текст, картинку и документ",
    description_en = "Test tool: returns text, an image and a resource",
    read_only
)]
pub async fn test_multiple_content_types() -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::plain("Multiple content types test:")
        .with_attachment(image())
        .with_attachment(resource()))
}

/// Conformance `tools-call-with-logging`: three log messages, 50 ms apart.
#[tool(
    name = "test_tool_with_logging",
    title_ru = "Тест: журнал",
    title_en = "Test: logging",
    description_ru = "Тестовый инструмент: пишет в журнал три сообщения",
    description_en = "Test tool: logs three messages",
    read_only
)]
pub async fn test_tool_with_logging(log: Log) -> Result<String, ToolError> {
    for message in [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ] {
        log.info(message);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok("Logging test completed".into())
}

// The conformance suite's resources and prompts, served by the engine's MCP server after
// its own.

klaw_mcp_ext::inventory::submit! {
    McpExtension {
        resources,
        resource_templates,
        read_resource,
        prompts,
        get_prompt,
        get_prompt_asking,
        tools,
        call_tool,
    }
}

/// The suite's tools whose schemas a `#[tool]` cannot have: conformance
/// `json-schema-2020-12` (the whole 2020-12 vocabulary kept as given) and
/// `http-custom-header-server-validation` (an argument mirrored in an `Mcp-Param-*`
/// header, SEP-2243).
fn tools() -> Vec<rmcp::model::Tool> {
    let schema = |v: Value| match v {
        Value::Object(m) => std::sync::Arc::new(m),
        _ => std::sync::Arc::default(),
    };
    vec![
        rmcp::model::Tool::new(
            "json_schema_2020_12_tool",
            "Test tool: a JSON Schema 2020-12 input schema kept as given",
            schema(json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"},
                    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                    "phone": {"type": "string"},
                    "email": {"type": "string"}
                },
                "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
                "then": {"required": ["phone"]},
                "else": {"required": ["email"]},
                "additionalProperties": false
            })),
        ),
        rmcp::model::Tool::new(
            "test_custom_header",
            "Test tool: its argument `region` travels in the Mcp-Param-Region header too",
            schema(json!({
                "type": "object",
                "properties": {
                    "region": {"type": "string", "x-mcp-header": "Region"},
                    "query": {"type": "string"}
                },
                "required": ["region", "query"]
            })),
        ),
    ]
}

/// [`tools`], called: each answers what it was given.
fn call_tool(
    name: &str,
    args: &serde_json::Map<String, Value>,
) -> Option<rmcp::model::CallToolResult> {
    let text = match name {
        "json_schema_2020_12_tool" => "ok".to_owned(),
        "test_custom_header" => format!(
            "region {}",
            args.get("region")
                .and_then(Value::as_str)
                .unwrap_or_default()
        ),
        _ => return None,
    };
    Some(rmcp::model::CallToolResult::success(vec![
        rmcp::model::ContentBlock::text(text),
    ]))
}

/// [`INPUT_PROMPT`], the one prompt of the fixtures that asks the client first.
fn get_prompt_asking(
    name: &str,
    responses: Option<&rmcp::model::InputResponses>,
    in_result: bool,
) -> Option<Result<rmcp::model::GetPromptResponse, ToolError>> {
    (name == INPUT_PROMPT).then(|| input_prompt(responses, in_result))
}

use rmcp::model::{
    ContentBlock, GetPromptResult, Prompt, PromptArgument, PromptMessage, Resource,
    ResourceContents, ResourceTemplate, Role,
};

const STATIC_TEXT: &str = "test://static-text";
const STATIC_BINARY: &str = "test://static-binary";
const WATCHED: &str = "test://watched-resource";

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Conformance `resources-list`, `resources-read-*`, `resources-subscribe`: the static
/// resources.
fn resources() -> Vec<Resource> {
    vec![
        Resource::new(STATIC_TEXT, "static-text")
            .with_description("Test: a static text resource")
            .with_mime_type("text/plain"),
        Resource::new(STATIC_BINARY, "static-binary")
            .with_description("Test: a static binary resource (a PNG)")
            .with_mime_type("image/png"),
        Resource::new(WATCHED, "watched-resource")
            .with_description("Test: a resource to subscribe to")
            .with_mime_type("text/plain"),
    ]
}

/// Conformance `resources-templates-read`: `test://template/{id}/data`.
fn resource_templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new("test://template/{id}/data", "template")
            .with_description("Test: data by id")
            .with_mime_type("application/json"),
    ]
}

/// The fixtures' resource at `uri`, if it is one.
fn read_resource(uri: &str) -> Option<ResourceContents> {
    match uri {
        STATIC_TEXT => Some(
            ResourceContents::text("This is the content of the static text resource.", uri)
                .with_mime_type("text/plain"),
        ),
        STATIC_BINARY => {
            Some(ResourceContents::blob(b64(RED_PIXEL_PNG), uri).with_mime_type("image/png"))
        }
        WATCHED => {
            Some(ResourceContents::text("A resource to watch.", uri).with_mime_type("text/plain"))
        }
        _ => {
            let id = uri
                .strip_prefix("test://template/")?
                .strip_suffix("/data")
                .filter(|id| !id.is_empty() && !id.contains('/'))?;
            let text = serde_json::json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
            Some(ResourceContents::text(text.to_string(), uri).with_mime_type("application/json"))
        }
    }
}

/// Conformance `prompts-get-*`: the test prompts.
fn prompts() -> Vec<Prompt> {
    let arg = |name: &str, description: &str| {
        PromptArgument::new(name)
            .with_description(description)
            .with_required(true)
    };
    [
        Prompt::new("test_simple_prompt", Some("Test: a simple prompt"), None),
        Prompt::new(
            "test_prompt_with_arguments",
            Some("Test: a prompt with arguments"),
            Some(vec![
                arg("arg1", "First test argument"),
                arg("arg2", "Second test argument"),
            ]),
        ),
        Prompt::new(
            "test_prompt_with_embedded_resource",
            Some("Test: a prompt with an embedded resource"),
            Some(vec![arg("resourceUri", "URI of the resource to embed")]),
        ),
        Prompt::new(
            "test_prompt_with_image",
            Some("Test: a prompt with an image"),
            None,
        ),
        Prompt::new(
            INPUT_PROMPT,
            Some("Test: a prompt that asks the client for its context first"),
            None,
        ),
    ]
    .into_iter()
    .chain(
        DYNAMIC_PROMPT
            .load(std::sync::atomic::Ordering::Relaxed)
            .then(|| {
                Prompt::new(
                    "test_dynamic_prompt",
                    Some("Test: a prompt added at run time"),
                    None,
                )
            }),
    )
    .collect()
}

/// The fixture prompt `name` with `args`, if it is one.
fn get_prompt(
    name: &str,
    args: &serde_json::Map<String, serde_json::Value>,
) -> Option<GetPromptResult> {
    let arg = |k: &str| args.get(k).and_then(|v| v.as_str()).unwrap_or_default();
    let text = |t: String| PromptMessage::new_text(Role::User, t);
    let messages = match name {
        "test_simple_prompt" => vec![text("This is a simple prompt for testing.".into())],
        "test_dynamic_prompt" if DYNAMIC_PROMPT.load(std::sync::atomic::Ordering::Relaxed) => {
            vec![text("A prompt added at run time.".into())]
        }
        "test_prompt_with_arguments" => vec![text(format!(
            "Prompt with arguments: arg1='{}', arg2='{}'",
            arg("arg1"),
            arg("arg2")
        ))],
        "test_prompt_with_embedded_resource" => vec![
            PromptMessage::new(
                Role::User,
                ContentBlock::resource(
                    ResourceContents::text(
                        "Embedded resource content for testing.",
                        arg("resourceUri"),
                    )
                    .with_mime_type("text/plain"),
                ),
            ),
            text("Please process the embedded resource above.".into()),
        ],
        "test_prompt_with_image" => vec![
            PromptMessage::new(
                Role::User,
                ContentBlock::image(b64(RED_PIXEL_PNG), "image/png"),
            ),
            text("Please analyze the image above.".into()),
        ],
        _ => return None,
    };
    Some(GetPromptResult::new(messages))
}

// The conformance suite's tools that ask the client: elicitation and sampling, through
// the calling session's client (`SessionClients`, which the engine's MCP server sets).

/// The client of the session that made the call, when it declared `capability`.
fn client(
    ctx: &ToolContext,
    offers: fn(&rmcp::Peer<rmcp::RoleServer>) -> bool,
    what: &str,
) -> Result<rmcp::Peer<rmcp::RoleServer>, ToolError> {
    ctx.shared_state::<SessionClients>()
        .client_of(ctx.caller())
        .filter(offers)
        .ok_or_else(|| {
            ToolError::failed(format!("the client does not offer {what}: nothing to ask"))
        })
}

/// Asks the calling client's user to fill `schema` (a JSON object schema).
async fn elicit(
    ctx: &ToolContext,
    message: String,
    schema: serde_json::Value,
) -> Result<rmcp::model::ElicitResult, ToolError> {
    let peer = client(ctx, offers_elicitation, "elicitation")?;
    let requested_schema = serde_json::from_value(schema)
        .map_err(|e| ToolError::failed(format!("the form's schema: {e}")))?;
    peer.create_elicitation(rmcp::model::ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    })
    .await
    .map_err(|e| ToolError::failed(format!("elicitation failed: {e}")))
}

fn answer(r: &rmcp::model::ElicitResult) -> String {
    let action = serde_json::to_value(&r.action).unwrap_or_default();
    let content = r.content.clone().unwrap_or(serde_json::Value::Null);
    format!(
        "action={}, content={content}",
        action.as_str().unwrap_or_default()
    )
}

/// Conformance `tools-call-elicitation`: asks for a user name and an email.
#[tool(
    name = "test_elicitation",
    title_ru = "Тест: вопрос пользователю",
    title_en = "Test: elicitation",
    description_ru = "Тестовый инструмент: спрашивает у пользователя клиента имя и почту",
    description_en = "Test tool: asks the client's user for a user name and an email",
    read_only
)]
pub async fn test_elicitation(
    ctx: ToolContext,
    /// Сообщение пользователю
    #[arg(description_en = "The message to show the user")]
    message: String,
) -> Result<String, ToolError> {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"}
        },
        "required": ["username", "email"]
    });
    let r = elicit(&ctx, message, schema).await?;
    Ok(format!("User response: {}", answer(&r)))
}

/// Conformance `elicitation-sep1034-defaults`: a form whose fields have defaults.
#[tool(
    name = "test_elicitation_sep1034_defaults",
    title_ru = "Тест: вопрос со значениями по умолчанию",
    title_en = "Test: elicitation with defaults",
    description_ru = "Тестовый инструмент: форма, у полей которой есть значения по умолчанию",
    description_en = "Test tool: a form whose fields have default values",
    read_only
)]
pub async fn test_elicitation_sep1034_defaults(ctx: ToolContext) -> Result<String, ToolError> {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "description": "User status",
                       "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "description": "Verification status", "default": true}
        }
    });
    let r = elicit(
        &ctx,
        "Please review and update the form fields with defaults".into(),
        schema,
    )
    .await?;
    Ok(format!("Elicitation completed: {}", answer(&r)))
}

/// Conformance `elicitation-sep1330-enums`: the five kinds of enum field.
#[tool(
    name = "test_elicitation_sep1330_enums",
    title_ru = "Тест: вопрос с перечислениями",
    title_en = "Test: elicitation with enums",
    description_ru = "Тестовый инструмент: форма с пятью видами выбора из списка",
    description_en = "Test tool: a form with the five kinds of enum field",
    read_only
)]
pub async fn test_elicitation_sep1330_enums(ctx: ToolContext) -> Result<String, ToolError> {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "description": "Untitled single-select",
                               "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "description": "Titled single-select", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"}
            ]},
            "legacyEnum": {"type": "string", "description": "Legacy titled enum",
                           "enum": ["opt1", "opt2", "opt3"],
                           "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "description": "Untitled multi-select",
                              "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "description": "Titled multi-select", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"}
            ]}}
        }
    });
    let r = elicit(
        &ctx,
        "Please select options from the enum fields".into(),
        schema,
    )
    .await?;
    Ok(format!("Elicitation completed: {}", answer(&r)))
}

/// Conformance `tools-call-sampling`: asks the client's model.
#[tool(
    name = "test_sampling",
    title_ru = "Тест: вопрос модели клиента",
    title_en = "Test: sampling",
    description_ru = "Тестовый инструмент: спрашивает модель клиента",
    description_en = "Test tool: asks the client's model",
    read_only
)]
#[allow(deprecated)] // sampling (SEP-2577 deprecates it; clients still offer it)
pub async fn test_sampling(
    ctx: ToolContext,
    /// Запрос к модели
    #[arg(description_en = "The prompt to send to the LLM")]
    prompt: String,
) -> Result<String, ToolError> {
    let peer = client(&ctx, offers_sampling, "sampling")?;
    let params = rmcp::model::CreateMessageRequestParams::new(
        vec![rmcp::model::SamplingMessage::user_text(prompt)],
        100,
    );
    let r = peer
        .create_message(params)
        .await
        .map_err(|e| ToolError::failed(format!("sampling failed: {e}")))?;
    Ok(format!("LLM response: {}", sampled_text(&r)))
}

/// The text of a client's sampling answer (its text blocks, joined).
#[allow(deprecated)] // sampling (SEP-2577 deprecates it; clients still offer it)
fn sampled_text(result: &rmcp::model::CreateMessageResult) -> String {
    let content = serde_json::to_value(&result.message.content).unwrap_or_default();
    let blocks = match content {
        serde_json::Value::Array(blocks) => blocks,
        one => vec![one],
    };
    blocks
        .iter()
        .filter_map(|b| b.get("text").and_then(serde_json::Value::as_str))
        .collect::<Vec<_>>()
        .join("")
}

// The conformance suite's tools of MCP 2026-07-28: questions asked through the result
// (SEP-2322, `klaw_mcp_ext::input`), a capability the client must declare, a call's log
// only at the level it asks for.

use klaw_mcp_ext::input::{ask, keep_state, offers, state};
use rmcp::model::InputRequest;
use serde_json::{Value, json};

/// A question to the client: `method` with `params`.
fn question(key: &str, method: &str, params: Value) -> Result<(String, InputRequest), ToolError> {
    let request = serde_json::from_value(json!({"method": method, "params": params}))
        .map_err(|e| ToolError::failed(format!("the question {key}: {e}")))?;
    Ok((key.to_owned(), request))
}

/// An elicitation of one field, `field` of `kind`.
fn form(
    key: &str,
    message: &str,
    field: &str,
    kind: &str,
) -> Result<(String, InputRequest), ToolError> {
    question(
        key,
        "elicitation/create",
        json!({
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {field: {"type": kind}},
                "required": [field]
            }
        }),
    )
}

/// A sampling of `text`, at most `max` tokens.
fn sampling(key: &str, text: &str, max: u32) -> Result<(String, InputRequest), ToolError> {
    question(
        key,
        "sampling/createMessage",
        json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": max
        }),
    )
}

/// The client's roots.
fn roots(key: &str) -> Result<(String, InputRequest), ToolError> {
    question(key, "roots/list", json!({}))
}

/// Field `field` of an elicitation's answer, as text.
fn field(answer: Option<&Value>, field: &str) -> String {
    match answer.and_then(|a| a["content"].get(field)) {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => String::new(),
    }
}

/// Conformance `input-required-result-basic-elicitation` (and `-result-type`,
/// `-missing-input-response`, `-ignore-extra-params`, `-validate-input`): asks the
/// user's name.
#[tool(
    name = "test_input_required_result_elicitation",
    title_ru = "Тест: вопрос в результате",
    title_en = "Test: input-required elicitation",
    description_ru = "Тестовый инструмент: спрашивает имя пользователя через результат",
    description_en = "Test tool: asks the user's name through the result",
    read_only
)]
pub async fn test_input_required_result_elicitation(
    ctx: klaw_core::ToolContext,
) -> Result<String, ToolError> {
    let a = ask(
        &ctx,
        vec![form("user_name", "What is your name?", "name", "string")?],
    )
    .await?;
    Ok(format!("Hello, {}!", field(a.get("user_name"), "name")))
}

/// Conformance `input-required-result-basic-sampling`: asks the client's model.
#[tool(
    name = "test_input_required_result_sampling",
    title_ru = "Тест: модель клиента через результат",
    title_en = "Test: input-required sampling",
    description_ru = "Тестовый инструмент: спрашивает модель клиента через результат",
    description_en = "Test tool: asks the client's model through the result",
    read_only
)]
pub async fn test_input_required_result_sampling(
    ctx: klaw_core::ToolContext,
) -> Result<String, ToolError> {
    let a = ask(
        &ctx,
        vec![sampling(
            "capital_question",
            "What is the capital of France?",
            100,
        )?],
    )
    .await?;
    let text = a
        .get("capital_question")
        .and_then(|r| r["content"]["text"].as_str())
        .unwrap_or_default()
        .to_owned();
    Ok(format!("LLM response: {text}"))
}

/// Conformance `input-required-result-basic-list-roots`: asks the client's roots.
#[tool(
    name = "test_input_required_result_list_roots",
    title_ru = "Тест: корни клиента через результат",
    title_en = "Test: input-required roots",
    description_ru = "Тестовый инструмент: спрашивает корни клиента через результат",
    description_en = "Test tool: asks the client's roots through the result",
    read_only
)]
pub async fn test_input_required_result_list_roots(
    ctx: klaw_core::ToolContext,
) -> Result<String, ToolError> {
    let a = ask(&ctx, vec![roots("client_roots")?]).await?;
    let uris: Vec<&str> = a
        .get("client_roots")
        .and_then(|r| r["roots"].as_array())
        .map(|all| all.iter().filter_map(|r| r["uri"].as_str()).collect())
        .unwrap_or_default();
    Ok(format!("Client roots: {}", uris.join(", ")))
}

/// Conformance `input-required-result-request-state`: the state kept between the two
/// rounds comes back sealed.
#[tool(
    name = "test_input_required_result_request_state",
    title_ru = "Тест: состояние между раундами",
    title_en = "Test: request state",
    description_ru = "Тестовый инструмент: хранит состояние между раундами вопроса",
    description_en = "Test tool: keeps a state between the rounds of a question",
    read_only
)]
pub async fn test_input_required_result_request_state(
    ctx: klaw_core::ToolContext,
) -> Result<String, ToolError> {
    let kept = state(&ctx);
    keep_state(&ctx, json!({"step": "confirm"}));
    let a = ask(
        &ctx,
        vec![form("confirm", "Please confirm", "ok", "boolean")?],
    )
    .await?;
    if kept != Some(json!({"step": "confirm"})) {
        return Err(ToolError::failed("the request state did not come back"));
    }
    Ok(format!(
        "state-ok: confirmed={}",
        field(a.get("confirm"), "ok")
    ))
}

/// Conformance `input-required-result-multiple-input-requests`: three questions at once.
#[tool(
    name = "test_input_required_result_multiple_inputs",
    title_ru = "Тест: три вопроса сразу",
    title_en = "Test: multiple inputs",
    description_ru = "Тестовый инструмент: задаёт клиенту три вопроса за раз",
    description_en = "Test tool: asks the client three questions at once",
    read_only
)]
pub async fn test_input_required_result_multiple_inputs(
    ctx: klaw_core::ToolContext,
) -> Result<String, ToolError> {
    keep_state(&ctx, json!({"asked": 3}));
    let a = ask(
        &ctx,
        vec![
            form("user_name", "What is your name?", "name", "string")?,
            sampling("greeting", "Generate a greeting", 50)?,
            roots("client_roots")?,
        ],
    )
    .await?;
    Ok(format!(
        "All inputs received: name={}, greeting={}",
        field(a.get("user_name"), "name"),
        a.get("greeting")
            .and_then(|r| r["content"]["text"].as_str())
            .unwrap_or_default()
    ))
}

/// Conformance `input-required-result-multi-round`: a second question after the first
/// answer, the state telling the rounds apart.
#[tool(
    name = "test_input_required_result_multi_round",
    title_ru = "Тест: два раунда вопросов",
    title_en = "Test: multi-round input",
    description_ru = "Тестовый инструмент: задаёт второй вопрос после первого ответа",
    description_en = "Test tool: asks a second question after the first answer",
    read_only
)]
pub async fn test_input_required_result_multi_round(
    ctx: klaw_core::ToolContext,
) -> Result<String, ToolError> {
    let step2 = || {
        form(
            "step2",
            "Step 2: What is your favorite color?",
            "color",
            "string",
        )
    };
    let kept = state(&ctx);
    if let Some(name) = kept
        .as_ref()
        .filter(|s| s["round"] == 2)
        .map(|s| s["name"].clone())
    {
        keep_state(&ctx, json!({"round": 2, "name": name}));
        let a = ask(&ctx, vec![step2()?]).await?;
        return Ok(format!(
            "Done: name={}, color={}",
            name.as_str().unwrap_or_default(),
            field(a.get("step2"), "color")
        ));
    }
    keep_state(&ctx, json!({"round": 1}));
    let a = ask(
        &ctx,
        vec![form(
            "step1",
            "Step 1: What is your name?",
            "name",
            "string",
        )?],
    )
    .await?;
    keep_state(
        &ctx,
        json!({"round": 2, "name": field(a.get("step1"), "name")}),
    );
    ask(&ctx, vec![step2()?]).await?;
    Err(ToolError::failed(
        "the second question was answered before it was asked",
    ))
}

/// Conformance `input-required-result-tampered-state`: a state changed by the client is
/// refused (by the server, before the tool runs again).
#[tool(
    name = "test_input_required_result_tampered_state",
    title_ru = "Тест: подделанное состояние",
    title_en = "Test: tampered state",
    description_ru = "Тестовый инструмент: состояние, изменённое клиентом, отвергается",
    description_en = "Test tool: a state the client changed is refused",
    read_only
)]
pub async fn test_input_required_result_tampered_state(
    ctx: klaw_core::ToolContext,
) -> Result<String, ToolError> {
    keep_state(&ctx, json!({"approved": false}));
    let a = ask(
        &ctx,
        vec![form("confirm", "Please confirm", "ok", "boolean")?],
    )
    .await?;
    Ok(format!("Confirmed: {}", field(a.get("confirm"), "ok")))
}

/// Conformance `input-required-result-capability-check`: asks only through what the
/// client declared (elicitation, else sampling).
#[tool(
    name = "test_input_required_result_capabilities",
    title_ru = "Тест: вопрос по возможностям клиента",
    title_en = "Test: capability check",
    description_ru = "Тестовый инструмент: спрашивает только так, как умеет клиент",
    description_en = "Test tool: asks only in a way the client declared",
    read_only
)]
pub async fn test_input_required_result_capabilities(
    ctx: klaw_core::ToolContext,
) -> Result<String, ToolError> {
    let q = if offers(&ctx, "elicitation") {
        form("user_name", "What is your name?", "name", "string")?
    } else {
        sampling("user_name", "Make up a name", 20)?
    };
    ask(&ctx, vec![q]).await?;
    Ok("Asked through a declared capability".into())
}

/// Conformance `server-stateless` (`sep-2575-server-rejects-undeclared-capability`):
/// needs sampling, which the client must declare (else `-32021`).
#[tool(
    name = "test_missing_capability",
    title_ru = "Тест: нужна возможность клиента",
    title_en = "Test: missing capability",
    description_ru = "Тестовый инструмент: нужна выборка (sampling) у клиента",
    description_en = "Test tool: needs the client's sampling",
    read_only
)]
pub async fn test_missing_capability(ctx: klaw_core::ToolContext) -> Result<String, ToolError> {
    let a = ask(&ctx, vec![sampling("answer", "Say hello", 20)?]).await?;
    Ok(format!(
        "LLM response: {}",
        a.get("answer")
            .and_then(|r| r["content"]["text"].as_str())
            .unwrap_or_default()
    ))
}

/// Conformance `server-stateless` (`sep-2575-http-server-no-independent-requests-on-stream`):
/// a question during the call goes in its result, never as a request on its stream.
#[tool(
    name = "test_streaming_elicitation",
    title_ru = "Тест: вопрос во время вызова",
    title_en = "Test: elicitation during a call",
    description_ru = "Тестовый инструмент: спрашивает пользователя во время вызова",
    description_en = "Test tool: asks the user during the call",
    read_only
)]
pub async fn test_streaming_elicitation(ctx: klaw_core::ToolContext) -> Result<String, ToolError> {
    let a = ask(
        &ctx,
        vec![form("user_name", "What is your name?", "name", "string")?],
    )
    .await?;
    Ok(format!("Hello, {}!", field(a.get("user_name"), "name")))
}

/// Conformance `server-stateless` (`sep-2575-server-no-log-without-loglevel`): logs, as
/// `test_tool_with_logging` does.
#[tool(
    name = "test_logging_tool",
    title_ru = "Тест: журнал (2026-07-28)",
    title_en = "Test: logging (2026-07-28)",
    description_ru = "Тестовый инструмент: пишет в журнал три сообщения",
    description_en = "Test tool: logs three messages",
    read_only
)]
pub async fn test_logging_tool(log: Log) -> Result<String, ToolError> {
    test_tool_with_logging(log).await
}

/// Conformance `input-required-result-non-tool-request`: the prompt that asks for its
/// context first (in MCP 2026-07-28, through the result; older clients get it without).
const INPUT_PROMPT: &str = "test_input_required_result_prompt";

/// The prompt [`INPUT_PROMPT`] with the answers a request brought (`in_result`: the
/// request may be answered with an input-required result).
fn input_prompt(
    responses: Option<&rmcp::model::InputResponses>,
    in_result: bool,
) -> Result<rmcp::model::GetPromptResponse, ToolError> {
    let context = responses.and_then(|r| r.get("user_context"));
    match context {
        None if in_result => {
            let (key, request) = form(
                "user_context",
                "What context should the prompt use?",
                "context",
                "string",
            )?;
            let mut asked = rmcp::model::InputRequests::new();
            asked.insert(key, request);
            Ok(rmcp::model::InputRequiredResult::from_input_requests(asked).into())
        }
        _ => Ok(GetPromptResult::new(vec![PromptMessage::new_text(
            Role::User,
            format!("Use this context: {}", field(context, "context")),
        )])
        .into()),
    }
}

/// Whether the prompt `test_dynamic_prompt` is there ([`test_trigger_prompt_change`]).
static DYNAMIC_PROMPT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Conformance `server-stateless` (a change announced on a `subscriptions/listen`
/// stream): adds the tool `test_dynamic_tool`, or removes it when it is there.
#[tool(
    name = "test_trigger_tool_change",
    title_ru = "Тест: изменить список инструментов",
    title_en = "Test: change the tool list",
    description_ru = "Тестовый инструмент: добавляет или убирает инструмент test_dynamic_tool",
    description_en = "Test tool: adds or removes the tool test_dynamic_tool"
)]
pub async fn test_trigger_tool_change(ctx: klaw_core::ToolContext) -> Result<String, ToolError> {
    const NAME: &str = "test_dynamic_tool";
    let registrar = ctx
        .service::<klaw_mcp_ext::RuntimeTools>()
        .ok_or_else(|| ToolError::failed("no engine whose tools could change"))?;
    let registrar = &registrar.0;
    if registrar.unregister(NAME) {
        return Ok(format!("removed {NAME}"));
    }
    let mut spec = klaw_core::ToolSpec::new(
        NAME,
        "Тестовый инструмент, добавленный во время работы",
        json!({"type": "object", "properties": {}}),
    );
    spec.description.en = Some("Test tool added at run time".into());
    spec.origin = "fixtures".into();
    let tool = klaw_core::FnTool::new(spec, |_ctx, _args| async {
        Ok(ToolOutput::plain("added at run time"))
    });
    registrar.register(std::sync::Arc::new(tool))?;
    Ok(format!("added {NAME}"))
}

/// Conformance `server-stateless` (a change announced on a `subscriptions/listen`
/// stream): adds the prompt `test_dynamic_prompt`, or removes it when it is there.
#[tool(
    name = "test_trigger_prompt_change",
    title_ru = "Тест: изменить список подсказок",
    title_en = "Test: change the prompt list",
    description_ru = "Тестовый инструмент: добавляет или убирает подсказку test_dynamic_prompt",
    description_en = "Test tool: adds or removes the prompt test_dynamic_prompt"
)]
pub async fn test_trigger_prompt_change(ctx: klaw_core::ToolContext) -> Result<String, ToolError> {
    let was = DYNAMIC_PROMPT.fetch_xor(true, std::sync::atomic::Ordering::Relaxed);
    ctx.shared_state::<SessionClients>().prompts_changed().await;
    Ok(if was {
        "removed test_dynamic_prompt"
    } else {
        "added test_dynamic_prompt"
    }
    .into())
}

// The conformance suite's tools of MCP's tasks extension (SEP-2663,
// `io.modelcontextprotocol/tasks`): a call running past the server's grace becomes a
// task; its questions are the task's (answered by `tasks/update`).

use klaw_mcp_ext::{TaskSupport, TaskTool};

klaw_mcp_ext::inventory::submit! { TaskTool { name: "slow_compute", support: TaskSupport::Optional } }
klaw_mcp_ext::inventory::submit! { TaskTool { name: "failing_job", support: TaskSupport::Required } }
klaw_mcp_ext::inventory::submit! { TaskTool { name: "protocol_error_job", support: TaskSupport::Optional } }
klaw_mcp_ext::inventory::submit! { TaskTool { name: "confirm_delete", support: TaskSupport::Optional } }
klaw_mcp_ext::inventory::submit! { TaskTool { name: "multi_input", support: TaskSupport::Optional } }
klaw_mcp_ext::inventory::submit! { TaskTool { name: "test_tool_with_task", support: TaskSupport::Required } }

/// How long the tasks' tools prepare before they ask: past the server's grace, so the
/// call is a task by then.
const PREPARE: Duration = Duration::from_millis(400);

/// Conformance `tasks-*`: a tool that never runs as a task.
#[tool(
    name = "greet",
    title_ru = "Тест: приветствие",
    title_en = "Test: greet",
    description_ru = "Тестовый инструмент: здоровается (никогда не задача)",
    description_en = "Test tool: says hello (never a task)",
    read_only
)]
pub async fn greet(
    /// Имя
    #[arg(description_en = "The name")]
    name: String,
) -> Result<String, ToolError> {
    Ok(format!("Hello, {name}!"))
}

/// Conformance `tasks-*`: waits `seconds` (a task past the grace; `0`: an immediate
/// result), then answers.
#[tool(
    name = "slow_compute",
    title_ru = "Тест: долгое вычисление",
    title_en = "Test: slow compute",
    description_ru = "Тестовый инструмент: ждёт seconds секунд и отвечает (задача)",
    description_en = "Test tool: waits `seconds` seconds, then answers (a task)",
    read_only
)]
pub async fn slow_compute(
    /// Сколько секунд ждать
    #[arg(description_en = "How many seconds to wait")]
    seconds: f64,
    /// Метка
    #[arg(description_en = "A label")]
    label: Option<String>,
) -> Result<String, ToolError> {
    let wait = Duration::try_from_secs_f64(seconds)
        .map_err(|e| ToolError::invalid_arguments("/seconds", e.to_string()))?;
    tokio::time::sleep(wait).await;
    Ok(format!(
        "computed {} after {seconds} s",
        label.unwrap_or_default()
    ))
}

/// Conformance `tasks-lifecycle`, `tasks-required-task-error`: runs only as a task,
/// and fails (a tool error) after a second.
#[tool(
    name = "failing_job",
    title_ru = "Тест: задача с ошибкой",
    title_en = "Test: failing job",
    description_ru = "Тестовый инструмент: только задача; через секунду завершается ошибкой",
    description_en = "Test tool: a task only; fails after a second",
    read_only
)]
pub async fn failing_job() -> Result<String, ToolError> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    Err(ToolError::failed("the job failed, as it always does"))
}

/// Conformance `tasks-lifecycle`: crashes after a second (a protocol error: the task
/// fails).
#[tool(
    name = "protocol_error_job",
    title_ru = "Тест: задача, которая падает",
    title_en = "Test: crashing job",
    description_ru = "Тестовый инструмент: через секунду падает (ошибка протокола)",
    description_en = "Test tool: crashes after a second (a protocol error)",
    read_only
)]
pub async fn protocol_error_job() -> Result<String, ToolError> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    panic!("protocol_error_job crashes, as it always does")
}

/// Conformance `tasks-mrtr-input`, `tasks-dispatch-and-envelope`: prepares, then asks
/// the user to confirm deleting `filename` (the task waits for `tasks/update`).
#[tool(
    name = "confirm_delete",
    title_ru = "Тест: подтвердить удаление",
    title_en = "Test: confirm a delete",
    description_ru = "Тестовый инструмент: спрашивает подтверждение удаления файла (задача)",
    description_en = "Test tool: asks to confirm deleting a file (a task)",
    read_only
)]
pub async fn confirm_delete(
    ctx: klaw_core::ToolContext,
    /// Файл
    #[arg(description_en = "The file")]
    filename: String,
) -> Result<String, ToolError> {
    tokio::time::sleep(PREPARE).await;
    let a = ask(
        &ctx,
        vec![form(
            "confirm",
            &format!("Delete {filename}?"),
            "confirm",
            "boolean",
        )?],
    )
    .await?;
    let yes = a
        .get("confirm")
        .and_then(|a| a["content"]["confirm"].as_bool())
        == Some(true);
    Ok(if yes {
        format!("deleted {filename}")
    } else {
        format!("kept {filename}")
    })
}

/// Conformance `tasks-mrtr-input`: prepares, then asks two questions at once (both
/// pending until answered, one at a time or together).
#[tool(
    name = "multi_input",
    title_ru = "Тест: два вопроса сразу",
    title_en = "Test: two questions at once",
    description_ru = "Тестовый инструмент: задаёт два вопроса одновременно (задача)",
    description_en = "Test tool: asks two questions at once (a task)",
    read_only
)]
pub async fn multi_input(ctx: klaw_core::ToolContext) -> Result<String, ToolError> {
    tokio::time::sleep(PREPARE).await;
    let a = ask(
        &ctx,
        vec![
            form("name", "What is your name?", "name", "string")?,
            form("confirm", "Go on?", "confirm", "boolean")?,
        ],
    )
    .await?;
    Ok(format!(
        "{} answered; go on: {}",
        field(a.get("name"), "name"),
        field(a.get("confirm"), "confirm")
    ))
}

/// Conformance `tasks-mrtr-composition`: asks the user's name through the result (MCP
/// 2026-07-28's input-required result), then, with it, works a second: a task, whose
/// result greets the name.
#[tool(
    name = "test_tool_with_task",
    title_ru = "Тест: вопрос, затем задача",
    title_en = "Test: a question, then a task",
    description_ru = "Тестовый инструмент: спрашивает имя через результат, затем работает как задача",
    description_en = "Test tool: asks the name through the result, then runs as a task",
    read_only
)]
pub async fn test_tool_with_task(ctx: klaw_core::ToolContext) -> Result<String, ToolError> {
    let a = ask(
        &ctx,
        vec![form("user_name", "What is your name?", "name", "string")?],
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    Ok(format!("Hello, {}!", field(a.get("user_name"), "name")))
}

/// Conformance `server-sse-polling` (SEP-1699): closes the HTTP stream it is answered
/// on, then answers a moment later: the answer comes when the client reconnects with
/// `Last-Event-ID`.
#[tool(
    name = "test_reconnection",
    title_ru = "Тест: переподключение",
    title_en = "Test: reconnection",
    description_ru = "Тестовый инструмент: закрывает свой поток ответа и отвечает после переподключения",
    description_en = "Test tool: closes its response stream and answers after the client reconnects",
    read_only
)]
pub async fn test_reconnection(ctx: klaw_core::ToolContext) -> Result<String, ToolError> {
    let call = ctx.call_id().unwrap_or_default().to_owned();
    let closed = ctx
        .shared_state::<SessionClients>()
        .close_stream(&call, Duration::from_millis(500))
        .await;
    if closed {
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    Ok("Reconnection test completed successfully".into())
}
