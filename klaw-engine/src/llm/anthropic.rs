//! Anthropic's Messages API (`POST {baseUrl}/v1/messages`): `tool_use` blocks in the
//! answer, `tool_result` blocks in the next user turn, streaming by server-sent events.
//! Tools are described with Klaw's `anthropic` format.

use futures_util::future::BoxFuture;
use klaw_tools::Format;
use serde_json::{Value, json};

use super::http::{Sse, Transport, error_message};
use crate::Secret;

use super::{
    Arguments, AssistantMessage, ChatRequest, ChatResponse, LlmClient, LlmError, Message, OnText,
    StopReason, ToolCallRequest, ToolChoice, Usage,
};

/// The API version every request names.
const API_VERSION: &str = "2023-06-01";
/// `max_tokens` is required by the API: this when the request sets none.
const DEFAULT_MAX_TOKENS: u32 = 4096;

/// A client of the Anthropic Messages API (or a server that speaks it).
#[derive(Debug, Clone)]
pub struct AnthropicClient {
    base_url: String,
    api_key: Option<Secret>,
    transport: Transport,
}

impl AnthropicClient {
    /// A client of the API at `base_url` (`https://api.anthropic.com`).
    pub fn new(base_url: &str, api_key: Option<Secret>, transport: Transport) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            transport,
        }
    }

    fn url(&self) -> String {
        // Both `https://api.anthropic.com` and `.../v1` are accepted as the base.
        if self.base_url.ends_with("/v1") {
            format!("{}/messages", self.base_url)
        } else {
            format!("{}/v1/messages", self.base_url)
        }
    }

    /// The request body. Consecutive messages of one role are merged (the API wants
    /// them alternating): tool results after one answer are one user turn.
    pub fn body(request: &ChatRequest, stream: bool) -> Value {
        let mut messages: Vec<Value> = Vec::new();
        for m in &request.messages {
            let (role, blocks) = match m {
                Message::User(text) => ("user", vec![json!({"type": "text", "text": text})]),
                Message::Assistant(a) => {
                    let mut blocks = Vec::new();
                    if !a.text.is_empty() {
                        blocks.push(json!({"type": "text", "text": a.text}));
                    }
                    for c in &a.tool_calls {
                        blocks.push(json!({
                            "type": "tool_use",
                            "id": c.id,
                            "name": c.name,
                            "input": c.arguments.to_value(),
                        }));
                    }
                    if blocks.is_empty() {
                        blocks.push(json!({"type": "text", "text": "…"}));
                    }
                    ("assistant", blocks)
                }
                Message::Tool(r) => (
                    "user",
                    vec![json!({
                        "type": "tool_result",
                        "tool_use_id": r.call_id,
                        "content": r.content,
                        "is_error": r.is_error,
                    })],
                ),
            };
            match messages.last_mut() {
                Some(last) if last["role"] == role => {
                    if let Some(content) = last["content"].as_array_mut() {
                        content.extend(blocks);
                    }
                }
                _ => messages.push(json!({"role": role, "content": blocks})),
            }
        }
        let mut body = json!({
            "model": request.model,
            "max_tokens": request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            "messages": messages,
        });
        if !request.system.is_empty() {
            body["system"] = json!(request.system);
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| klaw_tools::definition(t, Format::Anthropic, request.lang))
                .collect();
            body["tool_choice"] = match &request.tool_choice {
                ToolChoice::Auto => json!({"type": "auto"}),
                ToolChoice::None => json!({"type": "none"}),
                ToolChoice::Required => json!({"type": "any"}),
                ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
            };
        }
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        if stream {
            body["stream"] = json!(true);
        }
        body
    }

    async fn send(
        &self,
        request: &ChatRequest,
        on_text: Option<OnText<'_>>,
    ) -> Result<ChatResponse, LlmError> {
        let url = self.url();
        let mut headers = vec![("anthropic-version", API_VERSION)];
        if let Some(key) = self.api_key.as_ref().map(Secret::expose) {
            headers.push(("x-api-key", key));
        }
        let decode = |message: String| LlmError::Decode {
            url: url.clone(),
            message,
        };
        let Some(on_text) = on_text else {
            let v = self
                .transport
                .post_json(&url, &headers, &Self::body(request, false))
                .await?;
            return parse_response(&v).map_err(|e| decode(e.to_string()));
        };
        let response = self
            .transport
            .post(&url, &headers, &Self::body(request, true), true)
            .await?;
        // A server that ignores `stream` answers with one JSON document.
        let response = match self
            .transport
            .unstreamed(&url, response, parse_response, on_text)
            .await
        {
            Ok(answer) => return answer,
            Err(stream) => stream,
        };
        let mut sse = Sse::new(response);
        let mut acc = Accumulator::default();
        let mut stopped = false;
        while let Some((event, data)) = sse
            .next()
            .await
            .map_err(|e| self.transport.sse_error(&url, e))?
        {
            let v: Value = serde_json::from_str(&data).map_err(|e| {
                decode(format!(
                    "a stream event is not JSON ({e}): {}",
                    super::http::preview(&data)
                ))
            })?;
            let kind = v.get("type").and_then(Value::as_str).unwrap_or(&event);
            if kind == "error" {
                return Err(LlmError::Status {
                    url,
                    status: 200,
                    message: error_message(&data),
                });
            }
            if acc.add(kind, &v, on_text) {
                stopped = true;
                break;
            }
        }
        if !stopped {
            return Err(decode("the stream ended before message_stop".into()));
        }
        Ok(acc.finish())
    }
}

impl LlmClient for AnthropicClient {
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: Option<OnText<'a>>,
    ) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        Box::pin(self.send(request, on_text))
    }

    fn provider_name(&self) -> &'static str {
        "anthropic"
    }

    fn describe(&self) -> String {
        format!("anthropic at {}", self.base_url)
    }
}

/// Reads a non-streamed answer.
pub fn parse_response(v: &Value) -> Result<ChatResponse, super::MalformedResponse> {
    let Some(Value::Array(blocks)) = v.get("content") else {
        return Err(super::MalformedResponse::new("`content` array", v));
    };
    let mut message = AssistantMessage::default();
    for (i, b) in blocks.iter().enumerate() {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => message
                .text
                .push_str(b.get("text").and_then(Value::as_str).unwrap_or_default()),
            Some("tool_use") => message.tool_calls.push(ToolCallRequest {
                id: b
                    .get("id")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("toolu_{i}"), str::to_owned),
                name: b
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                arguments: Arguments::from_wire(b.get("input")),
            }),
            _ => {}
        }
    }
    let u = v.get("usage");
    let n = |k: &str| {
        u.and_then(|u| u.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    Ok(ChatResponse {
        stop: stop_reason(v.get("stop_reason"), !message.tool_calls.is_empty()),
        usage: Usage {
            input_tokens: n("input_tokens"),
            output_tokens: n("output_tokens"),
        },
        message,
    })
}

fn stop_reason(v: Option<&Value>, has_calls: bool) -> StopReason {
    match v.and_then(Value::as_str) {
        Some("tool_use") => StopReason::ToolCalls,
        Some("max_tokens") => StopReason::MaxTokens,
        _ if has_calls => StopReason::ToolCalls,
        Some("end_turn" | "stop_sequence") | None => StopReason::EndTurn,
        Some(other) => StopReason::Other(other.to_owned()),
    }
}

/// One content block being streamed.
enum Block {
    Text,
    Tool {
        id: String,
        name: String,
        json: String,
    },
    Other,
}

/// Builds an answer from the stream's events.
#[derive(Default)]
struct Accumulator {
    text: String,
    blocks: Vec<(usize, Block)>,
    calls: Vec<ToolCallRequest>,
    stop: Option<Value>,
    usage: Usage,
}

impl Accumulator {
    /// Takes one event; true at `message_stop`.
    fn add(&mut self, kind: &str, v: &Value, on_text: OnText<'_>) -> bool {
        let index = v
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|i| usize::try_from(i).ok())
            .unwrap_or(0);
        match kind {
            "message_start" => {
                let u = v.pointer("/message/usage");
                self.usage.input_tokens = u
                    .and_then(|u| u.get("input_tokens"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
            }
            "content_block_start" => {
                let b = v.get("content_block").unwrap_or(&Value::Null);
                let block = match b.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(t) = b
                            .get("text")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            on_text(t);
                            self.text.push_str(t);
                        }
                        Block::Text
                    }
                    Some("tool_use") => Block::Tool {
                        id: b
                            .get("id")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        name: b
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        json: String::new(),
                    },
                    _ => Block::Other,
                };
                self.blocks.push((index, block));
            }
            "content_block_delta" => {
                let d = v.get("delta").unwrap_or(&Value::Null);
                let Some((_, block)) = self.blocks.iter_mut().rev().find(|(i, _)| *i == index)
                else {
                    return false;
                };
                match (block, d.get("type").and_then(Value::as_str)) {
                    (Block::Text, Some("text_delta")) => {
                        if let Some(t) = d.get("text").and_then(Value::as_str) {
                            on_text(t);
                            self.text.push_str(t);
                        }
                    }
                    (Block::Tool { json, .. }, Some("input_json_delta")) => {
                        json.push_str(d.get("partial_json").and_then(Value::as_str).unwrap_or(""));
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(pos) = self.blocks.iter().position(|(i, _)| *i == index)
                    && let (_, Block::Tool { id, name, json }) = self.blocks.remove(pos)
                {
                    let n = self.calls.len();
                    self.calls.push(ToolCallRequest {
                        id: if id.is_empty() {
                            format!("toolu_{n}")
                        } else {
                            id
                        },
                        name,
                        arguments: Arguments::parse(&json),
                    });
                }
            }
            "message_delta" => {
                if let Some(s) = v.pointer("/delta/stop_reason").filter(|s| !s.is_null()) {
                    self.stop = Some(s.clone());
                }
                if let Some(n) = v.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                    self.usage.output_tokens = n;
                }
            }
            "message_stop" => return true,
            _ => {}
        }
        false
    }

    fn finish(self) -> ChatResponse {
        ChatResponse {
            stop: stop_reason(self.stop.as_ref(), !self.calls.is_empty()),
            message: AssistantMessage {
                text: self.text,
                tool_calls: self.calls,
            },
            usage: self.usage,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolResult;

    #[test]
    fn a_response_becomes_text_and_calls() {
        let r = parse_response(&json!({
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "current_time", "input": {"timezone": "UTC"}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 12, "output_tokens": 7},
        }))
        .unwrap();
        assert_eq!(r.message.text, "Let me check.");
        assert_eq!(
            r.message.tool_calls[0].arguments,
            Arguments::Json(json!({"timezone": "UTC"}))
        );
        assert_eq!(r.stop, StopReason::ToolCalls);
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 12,
                output_tokens: 7
            }
        );
    }

    #[test]
    fn tool_results_after_one_answer_are_one_user_turn() {
        let call = |id: &str| ToolCallRequest {
            id: id.into(),
            name: "t".into(),
            arguments: Arguments::Json(json!({})),
        };
        let result = |id: &str| {
            Message::Tool(ToolResult {
                call_id: id.into(),
                name: "t".into(),
                content: "ok".into(),
                is_error: id == "b",
            })
        };
        let req = ChatRequest {
            model: "m".into(),
            system: "sys".into(),
            messages: vec![
                Message::User("hi".into()),
                Message::Assistant(AssistantMessage {
                    text: String::new(),
                    tool_calls: vec![call("a"), call("b")],
                }),
                result("a"),
                result("b"),
            ],
            ..ChatRequest::default()
        };
        let b = AnthropicClient::body(&req, false);
        assert_eq!(b["system"], "sys");
        assert_eq!(b["max_tokens"], DEFAULT_MAX_TOKENS);
        let m = b["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[1]["content"][1]["type"], "tool_use");
        assert_eq!(m[2]["role"], "user");
        assert_eq!(m[2]["content"].as_array().unwrap().len(), 2);
        assert_eq!(m[2]["content"][1]["is_error"], true);
    }

    #[test]
    fn streamed_events_make_one_answer() {
        let seen = std::sync::Mutex::new(String::new());
        let on = |s: &str| seen.lock().unwrap().push_str(s);
        let mut acc = Accumulator::default();
        let events = [
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 9}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "On "}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "it."}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_9", "name": "current_time", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"timez"}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "one\": \"UTC\"}"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 20}}),
            json!({"type": "message_stop"}),
        ];
        let mut stopped = false;
        for e in &events {
            stopped = acc.add(e["type"].as_str().unwrap(), e, &on);
        }
        assert!(stopped);
        let r = acc.finish();
        assert_eq!(*seen.lock().unwrap(), "On it.");
        assert_eq!(r.message.tool_calls[0].id, "toolu_9");
        assert_eq!(
            r.message.tool_calls[0].arguments,
            Arguments::Json(json!({"timezone": "UTC"}))
        );
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 9,
                output_tokens: 20
            }
        );
        assert_eq!(r.stop, StopReason::ToolCalls);
    }
}
