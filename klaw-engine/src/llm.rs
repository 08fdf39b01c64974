//! LLM clients: one [`LlmClient`] trait and two wire protocols over `reqwest` + serde
//! (no SDK crate): OpenAI-compatible chat completions ([`openai`]: OpenAI, Ollama, vLLM,
//! llama.cpp's server, LM Studio, OpenRouter) and Anthropic's Messages API
//! ([`anthropic`]). Both retry 429, 5xx and connection errors with backoff (honouring
//! `Retry-After`), name the URL and the status in every other error, never show the API
//! key, and are lenient with what local servers send (see [`ToolCallRequest`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use klaw_tools::{Lang, ToolSpec};

use crate::Secret;
use serde_json::Value;

pub mod anthropic;
mod http;
pub mod mcp_sampling;
pub mod openai;

pub use http::Transport;
pub(crate) use http::{MAX_BODY_BYTES, innermost, preview, read_capped};

pub use crate::config::{Protocol, Provider};

/// One message of a conversation, as the loop keeps it (the system prompt is separate:
/// [`ChatRequest::system`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// What the person (or the channel) said.
    User(String),
    /// What the model answered: text, tool calls, or both.
    Assistant(AssistantMessage),
    /// The result of one tool call, for the model.
    Tool(ToolResult),
}

/// A model's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AssistantMessage {
    /// Its text (may be empty when it only calls tools).
    pub text: String,
    /// The tools it calls, in order (run concurrently by the loop).
    pub tool_calls: Vec<ToolCallRequest>,
}

/// A tool call a model asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRequest {
    /// The provider's id of the call (made up as `call_N` when a server sends none).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments: JSON whether the server sent a string (the standard) or an object
    /// (some local servers), or what could not be read, which the loop returns to the
    /// model as an error it can fix.
    pub arguments: Arguments,
}

/// The arguments of a [`ToolCallRequest`].
#[derive(Debug, Clone, PartialEq)]
pub enum Arguments {
    /// Valid JSON (an empty string counts as `{}`).
    Json(Value),
    /// Not JSON: the text as sent and why it is not.
    Malformed {
        /// The text the model wrote.
        raw: String,
        /// The parser's message.
        error: String,
    },
}

impl Arguments {
    /// Reads arguments sent as a JSON string (or as JSON itself, by lenient servers).
    pub fn from_wire(v: Option<&Value>) -> Self {
        match v {
            None | Some(Value::Null) => Arguments::Json(Value::Object(Default::default())),
            Some(Value::String(s)) => Self::parse(s),
            Some(other) => Arguments::Json(other.clone()),
        }
    }

    /// Parses a JSON text (empty or blank is `{}`).
    pub fn parse(raw: &str) -> Self {
        if raw.trim().is_empty() {
            return Arguments::Json(Value::Object(Default::default()));
        }
        match serde_json::from_str(raw) {
            Ok(v) => Arguments::Json(v),
            Err(e) => Arguments::Malformed {
                raw: raw.to_owned(),
                error: e.to_string(),
            },
        }
    }

    /// The arguments as the JSON text providers send back in the history.
    pub fn to_wire_string(&self) -> String {
        match self {
            Arguments::Json(v) => v.to_string(),
            Arguments::Malformed { raw, .. } => raw.clone(),
        }
    }

    /// The arguments as a JSON value (a malformed text becomes `{}`: Anthropic wants
    /// an object in the history, and the error went back to the model already).
    pub fn to_value(&self) -> Value {
        match self {
            Arguments::Json(v) => v.clone(),
            Arguments::Malformed { .. } => Value::Object(Default::default()),
        }
    }
}

/// The result of a tool call, sent back to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The id of the [`ToolCallRequest`] it answers.
    pub call_id: String,
    /// The tool's name (Anthropic does not need it; text protocols do).
    pub name: String,
    /// What the tool returned, or its error message.
    pub content: String,
    /// Whether it failed.
    pub is_error: bool,
}

/// Whether and which tools the model must call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// This tool.
    Tool(String),
}

/// Whether a model of `config` is the MCP client's (`mcp-sampling`: `llm.provider`, or
/// a model of `llm.models`).
pub fn uses_sampling(config: &crate::Config) -> bool {
    let llm = &config.raw.llm;
    llm.provider == Provider::McpSampling
        || llm
            .models
            .values()
            .any(|m| m.provider == Some(Provider::McpSampling))
}

/// One request to a model.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    /// The model's name at the provider.
    pub model: String,
    /// The system prompt (empty: none).
    pub system: String,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools the model may call, described in `lang`.
    pub tools: Vec<ToolSpec>,
    /// The language of the tools' descriptions.
    pub lang: Lang,
    /// Whether it must call tools.
    pub tool_choice: ToolChoice,
    /// A JSON Schema the reply must follow (`response_format: json_schema`; the `json`
    /// protocol's tool-or-answer schema).
    pub response_schema: Option<Value>,
    /// Most tokens of the answer.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Who started the work the request is for: the turn's caller, or for a subagent
    /// (however deep) the caller that started its line. `mcp-sampling` asks only that
    /// caller's MCP session's client (`mcp::Peers::sampling_peer`).
    pub origin: klaw_tools::Caller,
}

/// Tokens a request used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    /// Tokens read (prompt).
    pub input_tokens: u64,
    /// Tokens written (answer).
    pub output_tokens: u64,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// It finished its answer.
    EndTurn,
    /// It wants tool results.
    ToolCalls,
    /// It hit the token limit.
    MaxTokens,
    /// Something else the provider said.
    Other(String),
}

/// A model's reply to one request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    /// The answer.
    pub message: AssistantMessage,
    /// Why it stopped.
    pub stop: StopReason,
    /// Tokens used.
    pub usage: Usage,
}

/// Receives the answer's text as it is written (streaming).
pub type OnText<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// A model behind an API.
pub trait LlmClient: Send + Sync + 'static {
    /// Sends `request`; with `on_text`, the answer is streamed and its text given to
    /// `on_text` piece by piece as it arrives (the response still has all of it).
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: Option<OnText<'a>>,
    ) -> BoxFuture<'a, Result<ChatResponse, LlmError>>;

    /// What the client talks to, for messages: `openai at http://…/v1`.
    fn describe(&self) -> String;

    /// The provider's name in telemetry (`gen_ai.provider.name`: `openai`,
    /// `anthropic`, ...); `unknown` unless a client says.
    fn provider_name(&self) -> &'static str {
        "unknown"
    }

    /// Called once with the engine's context when the App assembles the agent on this
    /// client: a client that asks through the engine (`mcp-sampling`: its MCP sessions)
    /// finds what it needs there. Nothing by default.
    fn attach(&self, _ctx: &klaw_tools::ToolContext) {}
}

/// Why a request to a model failed.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The server answered with an error status (after the retries, for 429 and 5xx).
    #[error("{url} answered {status}: {message}")]
    Status {
        /// The URL asked.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The provider's error message (or the start of the body).
        message: String,
    },
    /// The server could not be reached (after the retries).
    #[error("cannot reach {url}: {message}")]
    Connect {
        /// The URL asked.
        url: String,
        /// Why.
        message: String,
    },
    /// The server took longer than the configured timeout.
    #[error("{url} did not answer within {}s", after.as_secs())]
    Timeout {
        /// The URL asked.
        url: String,
        /// The timeout.
        after: Duration,
    },
    /// The answer is not what the protocol says.
    #[error("{url} sent an answer that cannot be read: {message}")]
    Decode {
        /// The URL asked.
        url: String,
        /// What is wrong.
        message: String,
    },
    /// The client is not configured well enough to send anything.
    #[error("{0}")]
    Config(String),
}

impl LlmError {
    /// What kind of failure it is, for telemetry's `error.type`: the HTTP status
    /// (`429`), or `connect`, `timeout`, `decode`, `config`.
    pub fn error_type(&self) -> String {
        match self {
            Self::Status { status, .. } => status.to_string(),
            Self::Connect { .. } => "connect".into(),
            Self::Timeout { .. } => "timeout".into(),
            Self::Decode { .. } => "decode".into(),
            Self::Config(_) => "config".into(),
        }
    }
}

/// A non-streamed answer without the part the protocol requires (`choices[0]`, a
/// `content` array); [`LlmError::Decode`] gives it with the URL asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no {missing} in {answer}")]
pub struct MalformedResponse {
    /// What is missing (`` `choices[0]` ``, `` `content` array ``).
    pub missing: &'static str,
    /// The start of the answer, on one line.
    pub answer: String,
}

impl MalformedResponse {
    /// `missing` is not in `v`.
    pub(crate) fn new(missing: &'static str, v: &serde_json::Value) -> Self {
        Self {
            missing,
            answer: http::preview(&v.to_string()),
        }
    }
}

/// A model ready to be asked: its client, its name at the provider and how it calls
/// tools.
#[derive(Clone)]
pub struct Model {
    /// The client of its API.
    pub client: Arc<dyn LlmClient>,
    /// Its name at the provider.
    pub name: String,
    /// How it calls tools.
    pub protocol: Protocol,
    /// Most tokens of one answer.
    pub max_tokens: Option<u32>,
    /// The tools it is offered, by name (`None`: every tool).
    pub tools: Option<Vec<String>>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
}

impl fmt::Debug for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Model")
            .field("client", &self.client.describe())
            .field("name", &self.name)
            .field("protocol", &self.protocol)
            .finish()
    }
}

impl Model {
    /// The model `name` of `llm.models`, or the section's own with `None`. The API key
    /// falls back to the provider's usual variable (`OPENAI_API_KEY`, ...).
    pub fn from_config(config: &crate::Config, name: Option<&str>) -> Result<Self, LlmError> {
        let llm = &config.raw.llm;
        let named = match name {
            None => None,
            Some(n) => Some(llm.models.get(n).ok_or_else(|| {
                let known: Vec<&str> = llm.models.keys().map(String::as_str).collect();
                LlmError::Config(format!(
                    "no model named `{n}` in llm.models{}",
                    if known.is_empty() {
                        String::from(" (it is empty)")
                    } else {
                        format!("; named models: {}", known.join(", "))
                    }
                ))
            })?),
        };
        let provider = named.and_then(|m| m.provider).unwrap_or(llm.provider);
        let (client, model, protocol) = if provider == Provider::McpSampling {
            // The client picks its model: a name is only a hint for the log. No function
            // calling through sampling: the tools go in the prompt.
            let hint = named
                .map(|m| m.model.clone())
                .or_else(|| llm.model.clone())
                .filter(|m| !m.trim().is_empty())
                .unwrap_or_else(|| "mcp-client".into());
            let client: Arc<dyn LlmClient> = Arc::new(mcp_sampling::McpSamplingClient::new(
                llm.sampling_client.clone(),
            ));
            (client, hint, Protocol::Text)
        } else {
            Self::http_client(config, named, provider)?
        };
        Ok(Self {
            client,
            name: model,
            protocol,
            max_tokens: llm.max_tokens,
            tools: named
                .and_then(|m| m.tools.clone())
                .or_else(|| llm.tools.clone()),
            #[allow(clippy::cast_possible_truncation)] // checked to be within 0..=2
            temperature: llm.temperature.map(|t| t as f32),
        })
    }

    /// The client, model name and protocol of a model served over HTTP (OpenAI-compatible
    /// or Anthropic): its server, key and protocol from `named` over the section's own.
    fn http_client(
        config: &crate::Config,
        named: Option<&crate::NamedModel>,
        provider: Provider,
    ) -> Result<(Arc<dyn LlmClient>, String, Protocol), LlmError> {
        let llm = &config.raw.llm;
        let model = match named {
            Some(m) => m.model.clone(),
            None => llm
                .model
                .clone()
                .filter(|m| !m.trim().is_empty())
                .ok_or_else(|| {
                    LlmError::Config(
                        "no model is configured: set llm.model in engine.json or KLAW_LLM_MODEL \
                     (e.g. KLAW_LLM_BASE_URL=http://127.0.0.1:11434/v1 KLAW_LLM_MODEL=qwen2.5:3b \
                     for a local Ollama)"
                            .into(),
                    )
                })?,
        };
        // A named model with its own server (base URL or provider) inherits neither the
        // section's server nor its key: a key goes only where it was configured for.
        let own_server = named
            .is_some_and(|m| m.base_url.is_some() || m.provider.is_some_and(|p| p != llm.provider));
        let base_url = named
            .and_then(|m| m.base_url.clone())
            .or_else(|| (!own_server).then(|| llm.base_url.clone()).flatten())
            .unwrap_or_else(|| provider.default_base_url().to_owned());
        // The provider's usual variable is read only for the provider's own server.
        let key = named
            .and_then(|m| m.api_key.as_ref())
            .or_else(|| (!own_server).then_some(llm.api_key.as_ref()).flatten())
            .or_else(|| {
                (base_url.trim_end_matches('/') == provider.default_base_url())
                    .then(|| config.provider_keys.get(provider))
                    .flatten()
            })
            .filter(|k| !k.expose().trim().is_empty())
            .map(|k| Secret::new(k.expose().trim()));
        let protocol = named.and_then(|m| m.protocol).unwrap_or(llm.protocol);
        if provider == Provider::Anthropic && protocol == Protocol::Json {
            return Err(LlmError::Config(
                "the json protocol needs an OpenAI-compatible server (response_format \
                 json_schema); with the anthropic provider use native or text"
                    .into(),
            ));
        }
        let transport = Transport::new(
            Duration::from_secs(llm.timeout_seconds),
            Duration::from_secs(llm.connect_timeout_seconds),
            llm.retries,
        )?;
        let client: Arc<dyn LlmClient> = match provider {
            Provider::OpenAi => Arc::new(openai::OpenAiClient::new(&base_url, key, transport)),
            Provider::Anthropic => {
                Arc::new(anthropic::AnthropicClient::new(&base_url, key, transport))
            }
            Provider::McpSampling => Arc::new(mcp_sampling::McpSamplingClient::new(
                llm.sampling_client.clone(),
            )),
        };
        Ok((client, model, protocol))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn arguments_are_read_leniently() {
        assert_eq!(Arguments::from_wire(None), Arguments::Json(json!({})));
        assert_eq!(
            Arguments::from_wire(Some(&json!("  "))),
            Arguments::Json(json!({}))
        );
        assert_eq!(
            Arguments::from_wire(Some(&json!("{\"a\":1}"))),
            Arguments::Json(json!({"a": 1}))
        );
        assert_eq!(
            Arguments::from_wire(Some(&json!({"a": 1}))),
            Arguments::Json(json!({"a": 1}))
        );
        let bad = Arguments::from_wire(Some(&json!("{\"a\":")));
        assert!(matches!(&bad, Arguments::Malformed { raw, .. } if raw == "{\"a\":"));
        assert_eq!(bad.to_value(), json!({}));
        assert_eq!(bad.to_wire_string(), "{\"a\":");
    }
}
