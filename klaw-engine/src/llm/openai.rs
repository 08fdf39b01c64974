//! OpenAI-compatible chat completions (`POST {baseUrl}/chat/completions`): OpenAI,
//! Ollama, vLLM, llama.cpp's server, LM Studio, OpenRouter. Tool calls (parallel ones
//! too), `tool_choice`, `response_format: json_schema`, streaming; lenient with local
//! servers (`content: ""` beside tool calls, calls without `type` or `id`, arguments as
//! an object).

use futures_util::future::BoxFuture;
use klaw_tools::Format;
use serde_json::{Value, json};

use super::http::{Sse, Transport};
use crate::Secret;

use super::{
    Arguments, AssistantMessage, ChatRequest, ChatResponse, LlmClient, LlmError, Message, OnText,
    StopReason, ToolCallRequest, ToolChoice, Usage,
};

/// A client of an OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    base_url: String,
    api_key: Option<Secret>,
    transport: Transport,
}

impl OpenAiClient {
    /// A client of the server at `base_url` (`https://api.openai.com/v1`,
    /// `http://127.0.0.1:11434/v1`, ...).
    pub fn new(base_url: &str, api_key: Option<Secret>, transport: Transport) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            transport,
        }
    }

    fn url(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }

    /// The request body, serialised straight from `request` (no JSON tree is built
    /// first: with a long history that tree cost a fifth of the agent loop's own time).
    pub fn body(request: &ChatRequest, stream: bool) -> Body<'_> {
        Body { request, stream }
    }

    async fn send(
        &self,
        request: &ChatRequest,
        on_text: Option<OnText<'_>>,
    ) -> Result<ChatResponse, LlmError> {
        let url = self.url();
        let auth = self
            .api_key
            .as_ref()
            .map(Secret::expose)
            .map(|k| format!("Bearer {k}"));
        let headers: Vec<(&str, &str)> = auth
            .as_deref()
            .map(|a| ("Authorization", a))
            .into_iter()
            .collect();
        let Some(on_text) = on_text else {
            let v = self
                .transport
                .post_json(&url, &headers, &Self::body(request, false))
                .await?;
            return parse_response(&v).map_err(|e| LlmError::Decode {
                url,
                message: e.to_string(),
            });
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
        let mut done = false;
        while let Some((_, data)) = sse
            .next()
            .await
            .map_err(|e| self.transport.sse_error(&url, e))?
        {
            if data.trim() == "[DONE]" {
                done = true;
                break;
            }
            let chunk: Value = serde_json::from_str(&data).map_err(|e| LlmError::Decode {
                url: url.clone(),
                message: format!(
                    "a stream event is not JSON ({e}): {}",
                    super::http::preview(&data)
                ),
            })?;
            if let Some(e) = chunk.get("error") {
                return Err(LlmError::Status {
                    url,
                    status: 200,
                    message: super::http::error_message(&json!({"error": e}).to_string()),
                });
            }
            acc.add(&chunk, on_text);
        }
        // Some servers end without `[DONE]` but after the finish reason; a stream cut
        // before either is not an answer.
        if !done && acc.finish.is_none() {
            return Err(LlmError::Decode {
                url,
                message: "the stream ended before the answer did".into(),
            });
        }
        Ok(acc.finish())
    }
}

impl LlmClient for OpenAiClient {
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: Option<OnText<'a>>,
    ) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        Box::pin(self.send(request, on_text))
    }

    fn provider_name(&self) -> &'static str {
        "openai"
    }

    fn describe(&self) -> String {
        format!("openai at {}", self.base_url)
    }
}

/// A chat completions request body ([`OpenAiClient::body`]), written as JSON when it is
/// serialised.
#[derive(Debug, Clone, Copy)]
pub struct Body<'a> {
    request: &'a ChatRequest,
    stream: bool,
}

impl serde::Serialize for Body<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let r = self.request;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("model", &r.model)?;
        m.serialize_entry("messages", &Messages(r))?;
        if !r.tools.is_empty() {
            let tools: Vec<Value> = r
                .tools
                .iter()
                .map(|t| klaw_tools::definition(t, Format::OpenAi, r.lang))
                .collect();
            m.serialize_entry("tools", &tools)?;
            let choice = match &r.tool_choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
            };
            m.serialize_entry("tool_choice", &choice)?;
        }
        if let Some(schema) = &r.response_schema {
            m.serialize_entry(
                "response_format",
                &json!({
                    "type": "json_schema",
                    "json_schema": {"name": "reply", "strict": true, "schema": schema},
                }),
            )?;
        }
        if let Some(n) = r.max_tokens {
            m.serialize_entry("max_tokens", &n)?;
        }
        if let Some(t) = r.temperature {
            m.serialize_entry("temperature", &t)?;
        }
        if self.stream {
            m.serialize_entry("stream", &true)?;
            m.serialize_entry("stream_options", &json!({"include_usage": true}))?;
        }
        m.end()
    }
}

/// The system prompt and the conversation, as `messages`.
struct Messages<'a>(&'a ChatRequest);

/// One message of `messages`.
#[derive(serde::Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    /// A string, never null (`""` beside tool calls).
    content: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireCall<'a>>,
}

#[derive(serde::Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(serde::Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    arguments: String,
}

impl serde::Serialize for Messages<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let r = self.0;
        let mut seq = s.serialize_seq(None)?;
        let plain = |role, content| WireMessage {
            role,
            tool_call_id: None,
            content,
            tool_calls: Vec::new(),
        };
        if !r.system.is_empty() {
            seq.serialize_element(&plain("system", &r.system))?;
        }
        for m in &r.messages {
            match m {
                Message::User(text) => seq.serialize_element(&plain("user", text))?,
                Message::Assistant(a) => seq.serialize_element(&WireMessage {
                    tool_calls: a
                        .tool_calls
                        .iter()
                        .map(|c| WireCall {
                            id: &c.id,
                            kind: "function",
                            function: WireFunction {
                                name: &c.name,
                                arguments: c.arguments.to_wire_string(),
                            },
                        })
                        .collect(),
                    ..plain("assistant", &a.text)
                })?,
                Message::Tool(t) => seq.serialize_element(&WireMessage {
                    tool_call_id: Some(&t.call_id),
                    ..plain("tool", &t.content)
                })?,
            }
        }
        seq.end()
    }
}

/// Reads a non-streamed answer.
pub fn parse_response(v: &Value) -> Result<ChatResponse, super::MalformedResponse> {
    let choice = v
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| super::MalformedResponse::new("`choices[0]`", v))?;
    let msg = choice.get("message").unwrap_or(&Value::Null);
    let text = content_text(msg.get("content"));
    let mut tool_calls = Vec::new();
    if let Some(Value::Array(calls)) = msg.get("tool_calls") {
        for (i, c) in calls.iter().enumerate() {
            let f = c.get("function").unwrap_or(c);
            let name = f.get("name").and_then(Value::as_str).unwrap_or_default();
            tool_calls.push(ToolCallRequest {
                id: call_id(c.get("id"), i),
                name: name.to_owned(),
                arguments: Arguments::from_wire(f.get("arguments")),
            });
        }
    }
    Ok(ChatResponse {
        stop: stop_reason(choice.get("finish_reason"), !tool_calls.is_empty()),
        message: AssistantMessage { text, tool_calls },
        usage: usage(v.get("usage")),
    })
}

/// `content` as text: a string, or the text parts of an array of parts.
fn content_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

fn call_id(v: Option<&Value>, i: usize) -> String {
    match v.and_then(Value::as_str) {
        Some(id) if !id.is_empty() => id.to_owned(),
        _ => format!("call_{i}"),
    }
}

fn stop_reason(v: Option<&Value>, has_calls: bool) -> StopReason {
    match v.and_then(Value::as_str) {
        Some("tool_calls" | "function_call") => StopReason::ToolCalls,
        Some("length") => StopReason::MaxTokens,
        // Some servers say `stop` after tool calls.
        _ if has_calls => StopReason::ToolCalls,
        Some("stop") | None => StopReason::EndTurn,
        Some(other) => StopReason::Other(other.to_owned()),
    }
}

fn usage(v: Option<&Value>) -> Usage {
    let n = |k: &str| {
        v.and_then(|u| u.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    Usage {
        input_tokens: n("prompt_tokens"),
        output_tokens: n("completion_tokens"),
    }
}

/// Builds an answer from streamed chunks: text deltas, and tool calls whose pieces
/// arrive by `index`.
#[derive(Default)]
struct Accumulator {
    text: String,
    /// (id, name, arguments so far), by index.
    calls: Vec<(Option<String>, String, String, Option<Value>)>,
    finish: Option<Value>,
    usage: Usage,
}

impl Accumulator {
    fn add(&mut self, chunk: &Value, on_text: OnText<'_>) {
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = usage(Some(u));
        }
        let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) else {
            return;
        };
        if let Some(f) = choice.get("finish_reason").filter(|f| !f.is_null()) {
            self.finish = Some(f.clone());
        }
        let Some(delta) = choice.get("delta").or_else(|| choice.get("message")) else {
            return;
        };
        let piece = content_text(delta.get("content"));
        if !piece.is_empty() {
            on_text(&piece);
            self.text.push_str(&piece);
        }
        let Some(Value::Array(calls)) = delta.get("tool_calls") else {
            return;
        };
        for (pos, c) in calls.iter().enumerate() {
            let index = c
                .get("index")
                .and_then(Value::as_u64)
                .and_then(|i| usize::try_from(i).ok())
                .unwrap_or(pos);
            if index > 1024 {
                continue;
            }
            if self.calls.len() <= index {
                self.calls
                    .resize(index + 1, (None, String::new(), String::new(), None));
            }
            let slot = &mut self.calls[index];
            if let Some(id) = c
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                slot.0 = Some(id.to_owned());
            }
            let f = c.get("function").unwrap_or(&Value::Null);
            if let Some(name) = f.get("name").and_then(Value::as_str) {
                slot.1.push_str(name);
            }
            match f.get("arguments") {
                Some(Value::String(s)) => slot.2.push_str(s),
                // A server that sends the arguments whole, as an object.
                Some(v) if !v.is_null() => slot.3 = Some(v.clone()),
                _ => {}
            }
        }
    }

    fn finish(self) -> ChatResponse {
        let tool_calls: Vec<ToolCallRequest> = self
            .calls
            .into_iter()
            .enumerate()
            .filter(|(_, c)| !c.1.is_empty())
            .map(|(i, (id, name, args, whole))| ToolCallRequest {
                id: id.unwrap_or_else(|| format!("call_{i}")),
                name,
                arguments: match whole {
                    Some(v) => Arguments::Json(v),
                    None => Arguments::parse(&args),
                },
            })
            .collect();
        ChatResponse {
            stop: stop_reason(self.finish.as_ref(), !tool_calls.is_empty()),
            message: AssistantMessage {
                text: self.text,
                tool_calls,
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
    fn a_response_is_read_leniently() {
        let r = parse_response(&json!({
            "choices": [{"message": {"content": "", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "t1", "arguments": "{\"x\":1}"}},
                {"function": {"name": "t2", "arguments": {"y": 2}}},
                {"id": "c", "function": {"name": "t3", "arguments": "{oops"}},
            ]}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        }))
        .unwrap();
        assert_eq!(r.stop, StopReason::ToolCalls);
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 10,
                output_tokens: 5
            }
        );
        let c = &r.message.tool_calls;
        assert_eq!(
            (c[0].id.as_str(), &c[0].arguments),
            ("a", &Arguments::Json(json!({"x": 1})))
        );
        assert_eq!(
            (c[1].id.as_str(), &c[1].arguments),
            ("call_1", &Arguments::Json(json!({"y": 2})))
        );
        assert!(matches!(c[2].arguments, Arguments::Malformed { .. }));
        assert!(
            parse_response(&json!({"nope": 1}))
                .unwrap_err()
                .to_string()
                .contains("choices")
        );
    }

    #[test]
    fn streamed_pieces_make_one_answer() {
        let mut acc = Accumulator::default();
        let seen = std::sync::Mutex::new(String::new());
        let on = |s: &str| seen.lock().unwrap().push_str(s);
        for chunk in [
            json!({"choices": [{"delta": {"content": "Hel"}}]}),
            json!({"choices": [{"delta": {"content": "lo"}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "x", "function": {"name": "current_time", "arguments": "{\"time"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "zone\":\"UTC\"}"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 1, "function": {"name": "echo", "arguments": ""}}]}}]}),
            json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}}),
        ] {
            acc.add(&chunk, &on);
        }
        let r = acc.finish();
        assert_eq!(*seen.lock().unwrap(), "Hello");
        assert_eq!(r.message.text, "Hello");
        assert_eq!(
            r.message.tool_calls[0].arguments,
            Arguments::Json(json!({"timezone": "UTC"}))
        );
        assert_eq!(r.message.tool_calls[1].id, "call_1");
        assert_eq!(
            r.message.tool_calls[1].arguments,
            Arguments::Json(json!({}))
        );
        assert_eq!(r.stop, StopReason::ToolCalls);
        assert_eq!(r.usage.output_tokens, 4);
    }

    #[test]
    fn the_history_goes_out_in_the_wire_format() {
        let req = ChatRequest {
            model: "m".into(),
            system: "sys".into(),
            messages: vec![
                Message::User("hi".into()),
                Message::Assistant(AssistantMessage {
                    text: String::new(),
                    tool_calls: vec![ToolCallRequest {
                        id: "c1".into(),
                        name: "t".into(),
                        arguments: Arguments::Json(json!({"a": 1})),
                    }],
                }),
                Message::Tool(ToolResult {
                    call_id: "c1".into(),
                    name: "t".into(),
                    content: "ok".into(),
                    is_error: false,
                }),
            ],
            ..ChatRequest::default()
        };
        let b = serde_json::to_value(OpenAiClient::body(&req, true)).unwrap();
        assert_eq!(
            b["messages"][0],
            json!({"role": "system", "content": "sys"})
        );
        assert_eq!(
            b["messages"][2]["content"], "",
            "content is a string, never null"
        );
        assert_eq!(
            b["messages"][2]["tool_calls"][0]["function"]["arguments"],
            "{\"a\":1}"
        );
        assert_eq!(
            b["messages"][3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "ok"})
        );
        assert_eq!(b["stream"], true);
        assert!(b.get("tools").is_none());
    }
}
