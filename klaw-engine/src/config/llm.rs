//! The `llm` section of `engine.json`: the model the agent talks to, and the named models
//! (`llm.models`) a subagent or a job may pick.

use super::keys::{at_least, at_least_if_set, http_or_https, section};
use super::{Protocol, Provider, Secret};

section! {
    /// The `llm` section of `engine.json`: the model the agent talks to, and named
    /// models a subagent or a job may pick. Every key is optional.
    pub struct LlmSection {
        keys {
            /// Which API the model speaks: `openai` (OpenAI-compatible chat completions:
            /// OpenAI, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter), `anthropic`, or
            /// `mcp-sampling` (the connected MCP client's model, through MCP sampling).
            provider: Provider = Provider::OpenAi;
                key "provider", env "KLAW_LLM_PROVIDER", type "`\"openai\"`, `\"anthropic\"` or `\"mcp-sampling\"`";
            /// With `mcp-sampling`: the MCP client (its `clientInfo.name` at `initialize`)
            /// whose model runs the work no MCP session started (a channel's turns,
            /// scheduled jobs). `null`: such work is never sampled through a client and
            /// fails saying so; work a session started is sampled only through that
            /// session.
            sampling_client: Option<String> = None;
                key "samplingClient", env "KLAW_LLM_SAMPLING_CLIENT", type "string or `null`";
            /// The API's base URL.
            base_url: Option<String> = None;
                key "baseUrl", env "KLAW_LLM_BASE_URL", type "string (URL) or `null`",
                shown "`https://api.openai.com/v1` (openai), `https://api.anthropic.com` (anthropic)",
                check http_url;
            /// The model's name at the provider (`gpt-4.1-mini`, `qwen2.5:7b`, ...);
            /// `chat` and `run` need one.
            model: Option<String> = None;
                key "model", env "KLAW_LLM_MODEL", type "string or `null`";
            /// The API key. Never printed (`config` shows `"***"`); when unset, the
            /// provider's usual variable is read (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`).
            api_key: Option<Secret> = None;
                key "apiKey", env "KLAW_LLM_API_KEY", type "string or `null`";
            /// How the model calls tools: `native` function calling, `text` (`TOOL:` /
            /// `TOOL_PARAMS:` in the reply) or `json` (the reply constrained to a tool
            /// call or an answer), for models without function calling.
            protocol: Protocol = Protocol::Native;
                key "protocol", env "KLAW_LLM_PROTOCOL", type "`\"native\"`, `\"text\"` or `\"json\"`";
            /// Time limit of one request, in seconds (for a streamed answer: between
            /// two pieces).
            timeout_seconds: u64 = 120;
                key "timeoutSeconds", env "KLAW_LLM_TIMEOUT_SECONDS", type "integer ≥ 1",
                check at_least(1);
            /// Time limit of connecting to the API, in seconds.
            connect_timeout_seconds: u64 = 10;
                key "connectTimeoutSeconds", env "KLAW_LLM_CONNECT_TIMEOUT_SECONDS",
                type "integer ≥ 1", check at_least(1);
            /// Retries of a request that got 429, a 5xx status or no connection (with
            /// backoff, honouring `Retry-After`).
            retries: u32 = 3;
                key "retries", env "KLAW_LLM_RETRIES", type "integer, 0 to 10",
                check at_most_10;
            /// Most tokens of one answer (`null`: the provider's default; Anthropic: 4096).
            max_tokens: Option<u32> = None;
                key "maxTokens", env "KLAW_LLM_MAX_TOKENS", type "integer ≥ 1, or `null`",
                check at_least_if_set(1);
            /// Sampling temperature (`null`: the provider's default); `0` makes a local
            /// model's answers repeatable.
            temperature: Option<f64> = None;
                key "temperature", env "KLAW_LLM_TEMPERATURE", type "number, 0 to 2, or `null`",
                check temperature_range;
            /// The tools the model is offered, by name (`null`: every tool). Small local
            /// models choose better among a few.
            tools: Option<Vec<String>> = None;
                key "tools", env "KLAW_LLM_TOOLS", type "array of tool names, or `null`",
                shown "`null` (every tool)";
            /// Named models: `{"small": {"model": "qwen2.5:3b", "protocol": "json"}}`.
            /// Each takes `provider`, `baseUrl`, `model`, `apiKey`, `protocol`, `tools`; what it
            /// leaves out comes from this section.
            models: std::collections::BTreeMap<String, NamedModel> = Default::default();
                key "models", type "object: name → model", check named_models;
        }
    }
}

/// One of `llm.models`: what differs from the `llm` section.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NamedModel {
    /// The API it speaks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<Provider>,
    /// The API's base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The model's name at the provider.
    pub model: String,
    /// The API key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Secret>,
    /// How it calls tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    /// The tools it is offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
}

fn http_url(url: &Option<String>, _: &LlmSection) -> Result<(), String> {
    url.as_deref().map_or(Ok(()), http_or_https)
}

fn temperature_range(t: &Option<f64>, _: &LlmSection) -> Result<(), String> {
    match t {
        Some(t) if !(0.0..=2.0).contains(t) => Err(format!("{t} is not between 0 and 2")),
        _ => Ok(()),
    }
}

fn at_most_10(n: &u32, _: &LlmSection) -> Result<(), String> {
    if *n > 10 {
        return Err(format!("{n} is more than 10"));
    }
    Ok(())
}

fn named_models(
    models: &std::collections::BTreeMap<String, NamedModel>,
    _: &LlmSection,
) -> Result<(), String> {
    for (name, m) in models {
        if m.model.trim().is_empty() {
            return Err(format!("`{name}`: `model` is empty"));
        }
        if let Some(u) = &m.base_url
            && !(u.starts_with("http://") || u.starts_with("https://"))
        {
            return Err(format!("`{name}`: {u:?} is not an http:// or https:// URL"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{env, resolve_defaults};
    use crate::config::{Config, ConfigSource, parse};
    use std::path::Path;

    #[test]
    fn llm_values_are_checked_by_name() {
        for (json, message) in [
            (
                r#"{"llm": {"provider": "gemini"}}"#,
                "unknown variant `gemini`",
            ),
            (
                r#"{"llm": {"baseUrl": "ftp://x"}}"#,
                "llm.baseUrl: \"ftp://x\" is not an http:// or https:// URL",
            ),
            (
                r#"{"llm": {"retries": 11}}"#,
                "llm.retries: 11 is more than 10",
            ),
            (
                r#"{"llm": {"models": {"s": {"model": " "}}}}"#,
                "llm.models: `s`: `model` is empty",
            ),
            (
                r#"{"llm": {"models": {"s": {"model": "m", "temp": 1}}}}"#,
                "unknown field `temp`",
            ),
        ] {
            let err = parse(Path::new("e.json"), json)
                .map_err(|e| e.to_string())
                .and_then(|raw| {
                    Config::resolve(
                        raw,
                        ConfigSource::File(Path::new("e.json").into()),
                        &env(&[("HOME", "/h")]),
                    )
                    .map(|_| ())
                    .map_err(|e| e.to_string())
                })
                .unwrap_err();
            assert!(err.contains(message), "{json}: {err}");
        }
        let err =
            resolve_defaults(&env(&[("HOME", "/h"), ("KLAW_LLM_PROTOCOL", "xml")])).unwrap_err();
        assert!(err.to_string().contains("KLAW_LLM_PROTOCOL"), "{err}");
    }
}
