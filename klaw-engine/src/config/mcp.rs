//! The `mcp` section of `engine.json`: the MCP server over HTTP (`klaw-engine mcp
//! --http`, and `run` with `mcp.enabled`).

use std::net::SocketAddr;

use super::Secret;
use super::keys::{FromEnv, at_least, between, section};

section! {
    /// The `mcp` section of `engine.json`: the MCP server over HTTP
    /// (`klaw-engine mcp --http`). Every key is optional.
    pub struct McpSection {
        keys {
            /// Address and port the HTTP server listens on (`klaw-engine mcp --http`
            /// without an address). Anything but a loopback address needs `mcp.token`.
            bind: BindAddr = BindAddr::DEFAULT;
                key "bind", env "KLAW_MCP_BIND", type "string: `host:port`";
            /// Bearer token every HTTP request must carry (`Authorization: Bearer ...`);
            /// required for a non-loopback `bind`. Never printed (`config` shows `"***"`).
            token: Option<Secret> = None;
                key "token", env "KLAW_MCP_TOKEN", type "string (at least 16 characters) or `null`",
                check token_long_enough;
            /// Extra `Host` names the HTTP server answers to, besides `localhost`,
            /// `127.0.0.1`, `::1` and the `bind` host (DNS-rebinding protection).
            allowed_hosts: Vec<String> = Vec::new();
                key "allowedHosts", env "KLAW_MCP_ALLOWED_HOSTS",
                type "array of strings";
            /// Browser origins allowed to call the HTTP server (`Origin` header), e.g.
            /// `https://app.example.com`; requests from other origins get 403. Requests
            /// without `Origin` (not from a browser) are not affected.
            allowed_origins: Vec<String> = Vec::new();
                key "allowedOrigins", env "KLAW_MCP_ALLOWED_ORIGINS",
                type "array of strings";
            /// Largest HTTP request body, in bytes; a bigger one gets 413.
            max_body_bytes: usize = 4_194_304;
                key "maxBodyBytes", env "KLAW_MCP_MAX_BODY_BYTES", type "integer ≥ 1024",
                shown "`4194304` (4 MiB)", check at_least(1024);
            /// Most tool calls running at once over MCP (all sessions together); more wait.
            max_concurrent_calls: usize = 16;
                key "maxConcurrentCalls", env "KLAW_MCP_MAX_CONCURRENT_CALLS",
                type "integer ≥ 1", check at_least(1);
            /// Serve MCP over HTTP at `bind` as part of `klaw-engine run`.
            enabled: bool = false;
                key "enabled", env "KLAW_MCP_ENABLED", type "`true` or `false`";
            /// Tools per `tools/list` page.
            page_size: usize = 100;
                key "pageSize", env "KLAW_MCP_PAGE_SIZE", type "integer ≥ 1",
                check at_least(1);
            /// Seconds a connection has to send a request's headers (the first one, and each
            /// next one on a kept-alive connection); a slower one is closed.
            header_timeout_seconds: u64 = 10;
                key "headerTimeoutSeconds", env "KLAW_MCP_HEADER_TIMEOUT_SECONDS",
                type "integer, 1 to 3600", check between(1, 3600);
            /// Most HTTP connections open at once; past it new ones wait, in order, until
            /// one closes. Keep it well under the process's open-file limit.
            max_connections: usize = 128;
                key "maxConnections", env "KLAW_MCP_MAX_CONNECTIONS",
                type "integer, 1 to 65536", check between(1, 65536);
            /// Most MCP sessions alive at once; past it `initialize` gets 503.
            max_sessions: usize = 128;
                key "maxSessions", env "KLAW_MCP_MAX_SESSIONS",
                type "integer, 1 to 65536", check between(1, 65536);
            /// Seconds a session may go without a request or notification before it ends
            /// (its client then gets 404 and initializes again).
            session_idle_seconds: u64 = 120;
                key "sessionIdleSeconds", env "KLAW_MCP_SESSION_IDLE_SECONDS",
                type "integer, 1 to 86400", check between(1, 86400);
        }
    }
}

/// `mcp.bind`: the address and port the HTTP server listens on (`127.0.0.1:8765`,
/// `[::1]:8765`, `0.0.0.0:80`), a socket address from the moment the configuration is
/// read: a value that is not one is refused there, from the file or from
/// `KLAW_MCP_BIND`, and every user takes [`BindAddr::addr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BindAddr(SocketAddr);

impl BindAddr {
    /// `127.0.0.1:8765`.
    pub const DEFAULT: Self = Self(SocketAddr::V4(std::net::SocketAddrV4::new(
        std::net::Ipv4Addr::LOCALHOST,
        8765,
    )));

    /// The socket address.
    pub fn addr(self) -> SocketAddr {
        self.0
    }
}

impl From<SocketAddr> for BindAddr {
    fn from(addr: SocketAddr) -> Self {
        Self(addr)
    }
}

impl std::fmt::Display for BindAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for BindAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        s.parse()
            .map(Self)
            .map_err(|_| format!("{s:?} is not an address and port such as 127.0.0.1:8765"))
    }
}

impl serde::Serialize for BindAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for BindAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl FromEnv for BindAddr {
    // What the documentation has always said of `KLAW_MCP_BIND` (its type column says
    // `host:port`); a value that is not one is refused by name.
    const EXPECTED: &'static str = "text";
    fn from_env(value: &str) -> Result<Self, String> {
        value.parse()
    }
}

/// `mcp.token`: long enough not to be guessed.
fn token_long_enough(token: &Option<Secret>, _: &McpSection) -> Result<(), String> {
    match token {
        Some(t) if t.expose().chars().count() < 16 => {
            Err("must be at least 16 characters (e.g. `openssl rand -hex 24`)".into())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{env, resolve_defaults};

    /// `mcp.bind` is a socket address once read: a value that is not one is refused where
    /// the configuration is read, from the file (with its line and column) and from
    /// `KLAW_MCP_BIND` (by name), and is printed back as written.
    #[test]
    fn mcp_bind_is_a_socket_address_checked_at_load() {
        let c = resolve_defaults(&env(&[("HOME", "/h")])).unwrap();
        assert_eq!(c.raw.mcp.bind.addr(), "127.0.0.1:8765".parse().unwrap());
        assert_eq!(c.effective()["mcp"]["bind"], "127.0.0.1:8765");
        let c = resolve_defaults(&env(&[("HOME", "/h"), ("KLAW_MCP_BIND", "[::1]:9000")])).unwrap();
        assert_eq!(c.raw.mcp.bind.addr(), "[::1]:9000".parse().unwrap());
        assert_eq!(c.effective()["mcp"]["bind"], "[::1]:9000");
        let err = resolve_defaults(&env(&[("HOME", "/h"), ("KLAW_MCP_BIND", "localhost")]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "environment variable KLAW_MCP_BIND=\"localhost\": \"localhost\" is not an address \
             and port such as 127.0.0.1:8765"
        );
        let err = crate::config::parse(
            std::path::Path::new("e.json"),
            r#"{"mcp": {"bind": "0.0.0.0"}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with(
                "e.json: \"0.0.0.0\" is not an address and port such as 127.0.0.1:8765 at line 1"
            ),
            "{err}"
        );
    }

    #[test]
    fn the_mcp_token_is_never_printed() {
        let token = "0123456789abcdef-secret";
        let e = env(&[("HOME", "/h"), ("KLAW_MCP_TOKEN", token)]);
        let c = resolve_defaults(&e).unwrap();
        assert_eq!(c.raw.mcp.token.as_ref().map(Secret::expose), Some(token));
        let printed = c.effective().to_string();
        assert!(!printed.contains("secret"), "{printed}");
        assert_eq!(c.effective()["mcp"]["token"], "***");
        let e = env(&[("HOME", "/h"), ("KLAW_MCP_TOKEN", "short")]);
        let err = resolve_defaults(&e).unwrap_err().to_string();
        assert!(
            err.starts_with("mcp.token (set by KLAW_MCP_TOKEN): must be at least 16"),
            "{err}"
        );
        assert!(!err.contains("short"), "the value is not echoed: {err}");
    }
}
