//! The web group's settings.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::{FromToolContext, ToolContext, ToolError};

/// How the web tools reach the web: the size and time caps, the private services a user
/// lets them reach, and the search providers. The engine fills it from `engine.json`
/// (`web.*`) and registers it as a service; without one, tools use the defaults below.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WebSettings {
    /// Most bytes read of one response body (`web.maxBytes`, default 5 MiB).
    pub max_bytes: usize,
    /// Time limit of one request, body included; for `web_fetch`, of the whole call, the
    /// page's extraction included (`web.timeoutSeconds`, default 30 s).
    pub timeout: Duration,
    /// `host:port` pairs that may be reached although their addresses are private
    /// (`web.allowedPrivateHosts`, e.g. `127.0.0.1:8080`); empty by default.
    pub allowed_private_hosts: Vec<String>,
    /// Names answered with these addresses instead of DNS (like curl's `--resolve`); the
    /// addresses are checked like any other.
    pub hosts: HashMap<String, Vec<IpAddr>>,
    /// The Brave Search API key (`web.braveApiKey`, else `BRAVE_API_KEY`).
    pub brave_api_key: Option<String>,
    /// The Brave Search endpoint (`web.braveEndpoint`).
    pub brave_endpoint: String,
    /// A SearXNG instance (`web.searxngUrl`), asked when there is no Brave key.
    pub searxng_url: Option<String>,
}

impl std::fmt::Debug for WebSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSettings")
            .field("max_bytes", &self.max_bytes)
            .field("timeout", &self.timeout)
            .field("allowed_private_hosts", &self.allowed_private_hosts)
            .field("hosts", &self.hosts)
            .field("brave_api_key", &self.brave_api_key.as_ref().map(|_| "***"))
            .field("brave_endpoint", &self.brave_endpoint)
            .field("searxng_url", &self.searxng_url)
            .finish()
    }
}

/// Brave's web search endpoint.
pub const BRAVE_ENDPOINT: &str = "https://api.search.brave.com/res/v1/web/search";

impl Default for WebSettings {
    fn default() -> Self {
        Self {
            max_bytes: 5 * 1024 * 1024,
            timeout: Duration::from_secs(30),
            allowed_private_hosts: Vec::new(),
            hosts: HashMap::new(),
            brave_api_key: None,
            brave_endpoint: BRAVE_ENDPOINT.into(),
            searxng_url: None,
        }
    }
}

impl WebSettings {
    /// Sets the body cap and the time limit of one request.
    #[must_use]
    pub fn with_limits(mut self, max_bytes: usize, timeout: Duration) -> Self {
        self.max_bytes = max_bytes;
        self.timeout = timeout;
        self
    }

    /// Lets `host:port` be reached although its address is private.
    #[must_use]
    pub fn allow_private(mut self, host_port: impl Into<String>) -> Self {
        self.allowed_private_hosts.push(host_port.into());
        self
    }

    /// Answers `name` with `addrs` instead of DNS (the addresses are still checked).
    #[must_use]
    pub fn resolve(mut self, name: &str, addrs: Vec<IpAddr>) -> Self {
        self.hosts.insert(name.to_ascii_lowercase(), addrs);
        self
    }

    /// Sets the search providers: Brave's key and endpoint, and a SearXNG instance.
    #[must_use]
    pub fn with_search(
        mut self,
        brave_api_key: Option<String>,
        brave_endpoint: impl Into<String>,
        searxng_url: Option<String>,
    ) -> Self {
        self.brave_api_key = brave_api_key;
        self.brave_endpoint = brave_endpoint.into();
        self.searxng_url = searxng_url;
        self
    }

    /// The settings a context carries: its service, else the defaults.
    pub fn of(ctx: &ToolContext) -> Arc<Self> {
        ctx.shared_state::<Self>()
    }
}

impl FromToolContext for WebSettings {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        Ok(Self::of(ctx).as_ref().clone())
    }
}
