//! `llm.provider: "mcp-sampling"`: the agent's model is the MCP client's, asked with
//! `sampling/createMessage`. Work an MCP session started (its subagents, and theirs) is
//! sampled only through that session's client; work no session started (a channel's
//! turns, scheduled jobs) only through the client `llm.samplingClient` names, and
//! otherwise not at all (`mcp::Peers::sampling_peer`). The tools go in the system prompt
//! (the `text` protocol: MCP sampling has no function calling a client must offer), the
//! model the client picks answers, and the client may show the request to its user
//! first. With no such client, a request fails saying why.

use std::sync::{Arc, OnceLock};

use futures_util::future::BoxFuture;
use klaw_tools::ToolContext;

use super::{
    AssistantMessage, ChatRequest, ChatResponse, LlmClient, LlmError, Message, OnText, StopReason,
    Usage,
};
use crate::mcp::Peers;

/// Most tokens of an answer when the configuration gives no `llm.maxTokens` (MCP
/// sampling requires a number).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The client of `mcp-sampling`: bound to an engine's MCP sessions when the App
/// assembles the agent ([`LlmClient::attach`]).
#[derive(Debug, Default)]
pub struct McpSamplingClient {
    peers: OnceLock<Arc<Peers>>,
    /// `llm.samplingClient`: the client that samples for work no session started.
    named: Option<String>,
}

impl McpSamplingClient {
    /// A client not yet bound to an engine; `named` is `llm.samplingClient`.
    pub fn new(named: Option<String>) -> Self {
        Self {
            peers: OnceLock::new(),
            named,
        }
    }

    fn error(message: impl Into<String>) -> LlmError {
        LlmError::Connect {
            url: "mcp-sampling".into(),
            message: message.into(),
        }
    }
}

impl LlmClient for McpSamplingClient {
    #[allow(deprecated)] // sampling (SEP-2577 deprecates it; clients still offer it)
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: Option<OnText<'a>>,
    ) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        use rmcp::model::{CreateMessageRequestParams, SamplingMessage};
        Box::pin(async move {
            let peers = self.peers.get().ok_or_else(|| {
                Self::error("no MCP server runs (llm.provider is mcp-sampling: the model is the MCP client's)")
            })?;
            let peer = peers
                .sampling_peer(&request.origin, self.named.as_deref())
                .map_err(Self::error)?;
            let messages = request
                .messages
                .iter()
                .map(|m| match m {
                    Message::User(t) => SamplingMessage::user_text(t.clone()),
                    Message::Assistant(a) => SamplingMessage::assistant_text(a.text.clone()),
                    Message::Tool(r) => SamplingMessage::user_text(format!(
                        "The result of {}: {}",
                        r.name, r.content
                    )),
                })
                .collect();
            let mut params = CreateMessageRequestParams::new(
                messages,
                request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            );
            params.system_prompt = (!request.system.is_empty()).then(|| request.system.clone());
            params.temperature = request.temperature;
            let result = peer
                .create_message(params)
                .await
                .map_err(|e| Self::error(format!("the MCP client's model did not answer: {e}")))?;
            let text = crate::mcp::sampled_text(&result);
            if let Some(on_text) = on_text {
                on_text(&text);
            }
            let stop = match result.stop_reason.as_deref() {
                None | Some("endTurn" | "stopSequence") => StopReason::EndTurn,
                Some("maxTokens") => StopReason::MaxTokens,
                Some(other) => StopReason::Other(other.to_owned()),
            };
            Ok(ChatResponse {
                message: AssistantMessage {
                    text,
                    tool_calls: Vec::new(),
                },
                stop,
                usage: Usage::default(),
            })
        })
    }

    fn provider_name(&self) -> &'static str {
        "mcp.sampling"
    }

    fn describe(&self) -> String {
        "the MCP client's model (mcp-sampling)".into()
    }

    fn attach(&self, ctx: &ToolContext) {
        let _ = self.peers.set(ctx.shared_state::<Peers>());
    }
}
