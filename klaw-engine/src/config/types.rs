//! The choices configuration shares with the parts above it (the LLM clients, the
//! agent): declared here, so that config imports nothing from above it; `llm` and
//! `agent` re-export them where their users look.

/// Which wire protocol a model speaks.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// OpenAI-compatible chat completions.
    #[default]
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
    /// The model of the MCP client connected to `klaw-engine mcp` (or to `run`'s MCP
    /// server), asked through MCP sampling (`sampling/createMessage`): no API, no key.
    #[serde(rename = "mcp-sampling")]
    McpSampling,
}

impl Provider {
    /// The base URL used when the configuration gives none.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Provider::OpenAi => "https://api.openai.com/v1",
            Provider::Anthropic => "https://api.anthropic.com",
            Provider::McpSampling => "",
        }
    }

    /// The variable read for the API key when the configuration gives none.
    pub fn key_variable(self) -> &'static str {
        match self {
            Provider::OpenAi => "OPENAI_API_KEY",
            Provider::Anthropic => "ANTHROPIC_API_KEY",
            Provider::McpSampling => "",
        }
    }
}

impl std::str::FromStr for Provider {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "openai" => Ok(Provider::OpenAi),
            "anthropic" => Ok(Provider::Anthropic),
            "mcp-sampling" => Ok(Provider::McpSampling),
            other => Err(format!(
                "unknown provider `{other}`: expected `openai`, `anthropic` or `mcp-sampling`"
            )),
        }
    }
}

/// How a model is asked to call tools.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// The provider's function calling (`tools` in the request).
    #[default]
    Native,
    /// Tools described in the system prompt, calls written as `TOOL:` / `TOOL_PARAMS:`.
    Text,
    /// The reply constrained by a JSON Schema to a tool call or a final answer.
    Json,
}

impl std::str::FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "native" => Ok(Protocol::Native),
            "text" => Ok(Protocol::Text),
            "json" => Ok(Protocol::Json),
            other => Err(format!(
                "unknown protocol `{other}`: expected `native`, `text` or `json`"
            )),
        }
    }
}

/// Which of the agent's tool calls need a person's approval (`agent.approval`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Approval {
    /// None.
    Never,
    /// Those of tools marked destructive, and those `agent.approvalTools` names.
    #[default]
    Destructive,
    /// All.
    Always,
}

impl std::str::FromStr for Approval {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "never" => Ok(Approval::Never),
            "destructive" => Ok(Approval::Destructive),
            "always" => Ok(Approval::Always),
            other => Err(format!(
                "unknown approval `{other}`: expected `never`, `destructive` or `always`"
            )),
        }
    }
}
