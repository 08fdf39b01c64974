//! `mcpServers`: the MCP servers whose tools the engine imports, in the shape Claude
//! Desktop, Claude Code and Cursor use, so a user pastes the block they already have.
//! Checked here (names, transport, time limits); `${VAR}` is expanded when a server is
//! started (`imports`), so a variable set later is seen and a missing one fails only
//! its server.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// Longest server name: `<server>__<tool>` must fit the 64 characters of a tool name.
pub const MAX_SERVER_NAME: usize = 32;

/// How an imported server is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerType {
    /// A program started by the engine, speaking MCP on its stdin and stdout.
    Stdio,
    /// Streamable HTTP at `url`.
    Http,
    /// The same as `http` (the name some clients write).
    StreamableHttp,
    /// The legacy HTTP+SSE transport: refused with a message (Streamable HTTP replaced it).
    Sse,
}

/// One server of `mcpServers`: `command` (with `args`, `env`, `cwd`) for a program
/// speaking MCP over stdio, or `url` (with `headers`, `type: "http"`) for Streamable
/// HTTP. Values of `env` and `headers` are never printed (`config` shows `"***"`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImportedServer {
    /// `stdio`, `http` or `streamable-http`; without it, `url` means HTTP and
    /// `command` stdio.
    #[serde(default, rename = "type")]
    pub kind: Option<ServerType>,
    /// The program (stdio), looked up on `PATH`.
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// The program's variables (it also gets `HOME`, `PATH` and a few others from the
    /// engine, never the engine's whole environment).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working directory (default: the engine's).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// The server's Streamable HTTP endpoint.
    #[serde(default)]
    pub url: Option<String>,
    /// Headers sent with every request (`Authorization`, ...).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// `false` keeps the entry without starting the server.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// How long the server has to answer `initialize` and list its tools.
    #[serde(default = "ten")]
    pub startup_timeout_seconds: u64,
    /// Time limit of one call of its tools.
    #[serde(default = "sixty")]
    pub call_timeout_seconds: u64,
}

fn yes() -> bool {
    true
}
fn ten() -> u64 {
    10
}
fn sixty() -> u64 {
    60
}

impl ImportedServer {
    /// Whether the server is reached over HTTP (else it is a program on stdio).
    pub fn is_http(&self) -> bool {
        match self.kind {
            Some(ServerType::Http | ServerType::StreamableHttp | ServerType::Sse) => true,
            Some(ServerType::Stdio) => false,
            None => self.url.is_some() && self.command.is_none(),
        }
    }

    fn check(&self) -> Result<(), String> {
        if self.kind == Some(ServerType::Sse) {
            return Err(
                "the legacy SSE transport is not supported: use the server's \
                        Streamable HTTP endpoint with \"type\": \"http\""
                    .into(),
            );
        }
        if self.is_http() {
            let Some(url) = &self.url else {
                return Err("an HTTP server needs `url`".into());
            };
            if !(url.contains("${") || url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!("{url:?} is not an http:// or https:// URL"));
            }
            if self.command.is_some() || !self.args.is_empty() || !self.env.is_empty() {
                return Err(
                    "an HTTP server takes `url` and `headers`, not `command`, `args` or `env`"
                        .into(),
                );
            }
        } else {
            if self.command.as_deref().is_none_or(|c| c.trim().is_empty()) {
                return Err("needs `command` (a program speaking MCP on stdio) or `url`".into());
            }
            if self.url.is_some() || !self.headers.is_empty() {
                return Err(
                    "a stdio server takes `command`, `args`, `env` and `cwd`, not `url` or `headers`"
                        .into(),
                );
            }
        }
        if !(1..=600).contains(&self.startup_timeout_seconds) {
            return Err(format!(
                "`startupTimeoutSeconds`: {} is not between 1 and 600",
                self.startup_timeout_seconds
            ));
        }
        if self.call_timeout_seconds == 0 {
            return Err("`callTimeoutSeconds` must be at least 1".into());
        }
        Ok(())
    }
}

impl serde::Serialize for ImportedServer {
    /// Every key, with the values of `env` and `headers` hidden (they hold tokens).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let hidden = |m: &BTreeMap<String, String>| -> BTreeMap<String, &'static str> {
            m.keys().map(|k| (k.clone(), "***")).collect()
        };
        let mut m = s.serialize_map(None)?;
        if self.is_http() {
            m.serialize_entry("type", &self.kind.unwrap_or(ServerType::Http))?;
            m.serialize_entry("url", &self.url)?;
            m.serialize_entry("headers", &hidden(&self.headers))?;
        } else {
            m.serialize_entry("type", &ServerType::Stdio)?;
            m.serialize_entry("command", &self.command)?;
            m.serialize_entry("args", &self.args)?;
            m.serialize_entry("env", &hidden(&self.env))?;
            m.serialize_entry("cwd", &self.cwd)?;
        }
        m.serialize_entry("enabled", &self.enabled)?;
        m.serialize_entry("startupTimeoutSeconds", &self.startup_timeout_seconds)?;
        m.serialize_entry("callTimeoutSeconds", &self.call_timeout_seconds)?;
        m.end()
    }
}

/// Whether `name` may name a server: `[a-zA-Z0-9_-]`, 1 to [`MAX_SERVER_NAME`]
/// characters, no `__` (the separator of imported tool names).
pub fn valid_server_name(name: &str) -> bool {
    (1..=MAX_SERVER_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
        && !name.contains("__")
}

/// The check of `mcpServers`: every name, then every server.
pub(super) fn check_servers(
    servers: &BTreeMap<String, ImportedServer>,
    _: &super::EngineConfig,
) -> Result<(), String> {
    for (name, server) in servers {
        if !valid_server_name(name) {
            return Err(format!(
                "`{name}`: a server name is 1 to {MAX_SERVER_NAME} of a-z, A-Z, 0-9, `_` and `-`, \
                 without `__` (its tools are named `<server>__<tool>`)"
            ));
        }
        server.check().map_err(|e| format!("`{name}`: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(json: &str) -> Result<ImportedServer, String> {
        let s: ImportedServer = serde_json::from_str(json).map_err(|e| e.to_string())?;
        s.check().map(|()| s)
    }

    #[test]
    fn the_blocks_other_clients_use_are_read() {
        let s = server(r#"{"command": "npx", "args": ["-y", "x"], "env": {"K": "${K}"}}"#).unwrap();
        assert!(!s.is_http());
        assert!(s.enabled);
        assert_eq!(
            (s.startup_timeout_seconds, s.call_timeout_seconds),
            (10, 60)
        );
        let s =
            server(r#"{"type": "http", "url": "https://x/mcp", "headers": {"A": "b"}}"#).unwrap();
        assert!(s.is_http());
        assert!(
            server(r#"{"url": "http://127.0.0.1:1/mcp"}"#)
                .unwrap()
                .is_http()
        );
        assert!(
            server(r#"{"type": "streamable-http", "url": "${BASE}/mcp"}"#)
                .unwrap()
                .is_http()
        );
    }

    #[test]
    fn mistakes_are_named() {
        for (json, message) in [
            (r#"{"type": "sse", "url": "http://x"}"#, "legacy SSE"),
            (r#"{"args": ["x"]}"#, "needs `command`"),
            (r#"{"type": "http"}"#, "needs `url`"),
            (r#"{"url": "ftp://x"}"#, "not an http"),
            (r#"{"command": "x", "url": "http://x"}"#, "not `url`"),
            (
                r#"{"command": "x", "startupTimeoutSeconds": 0}"#,
                "between 1 and 600",
            ),
            (r#"{"command": "x", "callTimeoutSeconds": 0}"#, "at least 1"),
            (r#"{"command": "x", "autoApprove": []}"#, "unknown field"),
        ] {
            let e = server(json).unwrap_err();
            assert!(e.contains(message), "{json}: {e}");
        }
        for bad in ["", "a.b", "a b", "a__b", &"x".repeat(33), "сервер"] {
            assert!(!valid_server_name(bad), "{bad:?}");
        }
        assert!(valid_server_name("files-2_b"));
    }

    #[test]
    fn env_and_headers_are_never_printed() {
        let s = server(r#"{"command": "x", "env": {"TOKEN": "sk-secret"}}"#).unwrap();
        let shown = serde_json::to_string(&s).unwrap();
        assert!(!shown.contains("sk-"), "{shown}");
        assert!(shown.contains(r#""TOKEN":"***""#), "{shown}");
        let s =
            server(r#"{"url": "http://x", "headers": {"Authorization": "Bearer sk-1"}}"#).unwrap();
        assert!(!serde_json::to_string(&s).unwrap().contains("sk-"));
    }
}
