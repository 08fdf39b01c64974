//! The `web` section of `engine.json`; [`Config::web`] gives the web tools their settings
//! and [`Config::browser`] the browser `render_js` runs ([`Config::remote_browser`]
//! without one).

use std::path::PathBuf;
use std::time::Duration;

use klaw_tools::tools::web::WebSettings;

use super::Config;
use super::Secret;
use super::keys::{at_least, http_or_https, section};

section! {
    /// The `web` section of `engine.json`: what `web_fetch` and `web_search` may reach and
    /// how much they read. Every key is optional.
    pub struct WebSection {
        keys {
            /// `host:port` pairs `web_fetch` may reach although their addresses are
            /// private (`["127.0.0.1:8080"]`); every other private, loopback, link-local
            /// or metadata address is refused, however it is spelled or reached.
            allowed_private_hosts: Vec<String> = Vec::new();
                key "allowedPrivateHosts", env "KLAW_WEB_ALLOWED_PRIVATE_HOSTS",
                type "array of `host:port` strings", check host_ports;
            /// Most bytes read of one response body; the rest is cut (`truncated`).
            max_bytes: usize = WebSettings::default().max_bytes;
                key "maxBytes", env "KLAW_WEB_MAX_BYTES", type "integer ≥ 1",
                shown "`5242880` (5 MiB)", check at_least(1);
            /// Time limit of one request, body included, in seconds; for `web_fetch`, of
            /// the whole call (the request, the body and the page's extraction).
            timeout_seconds: u64 = WebSettings::default().timeout.as_secs();
                key "timeoutSeconds", env "KLAW_WEB_TIMEOUT_SECONDS",
                type "integer, 1 to 2^64−1", check at_least(1);
            /// The Brave Search API key for `web_search`; when unset, `BRAVE_API_KEY` is
            /// read. Never printed (`config` shows `"***"`).
            brave_api_key: Option<Secret> = None;
                key "braveApiKey", env "KLAW_BRAVE_API_KEY", type "string or `null`";
            /// The Brave Search endpoint.
            brave_endpoint: String = klaw_tools::tools::web::BRAVE_ENDPOINT.into();
                key "braveEndpoint", env "KLAW_BRAVE_ENDPOINT", type "string (URL)",
                check web_url;
            /// A SearXNG instance (`http://127.0.0.1:8888`, its JSON format enabled) that
            /// `web_search` asks when there is no Brave key.
            searxng_url: Option<String> = None;
                key "searxngUrl", env "KLAW_SEARXNG_URL", type "string (URL) or `null`",
                check searxng_url;
            /// The headless browser `render_js` runs (Chromium or Chrome); when unset, the
            /// first of `chromium-headless-shell`, `chrome-headless-shell`, `chromium`,
            /// `chromium-browser`, `google-chrome` on `PATH`. Without one, `render_js`
            /// renders through Cloudflare's Browser Rendering when `CLOUDFLARE_API_TOKEN`
            /// and `CLOUDFLARE_ACCOUNT_ID` are set, and is not offered otherwise.
            browser: Option<PathBuf> = None;
                key "browser", env "KLAW_BROWSER", type "string (path) or `null`",
                shown "found on `PATH`";
            /// Cloudflare's API, which `render_js` asks without a local browser
            /// (`{base}/accounts/{CLOUDFLARE_ACCOUNT_ID}/browser-rendering/content`);
            /// another only for a test server.
            cloudflare_base_url: String = "https://api.cloudflare.com/client/v4".into();
                key "cloudflareBaseUrl", env "KLAW_CLOUDFLARE_BASE_URL", type "string (URL)",
                check web_url;
        }
    }
}

fn host_ports(hosts: &Vec<String>, _: &WebSection) -> Result<(), String> {
    for h in hosts {
        let port = h
            .rsplit_once(':')
            .map(|(host, port)| (host, port.parse::<u16>()));
        if !matches!(port, Some((host, Ok(_))) if !host.is_empty()) {
            return Err(format!("{h:?} is not host:port (e.g. \"127.0.0.1:8080\")"));
        }
    }
    Ok(())
}

#[allow(clippy::ptr_arg)] // a key's check takes the field's own type
fn web_url(url: &String, _: &WebSection) -> Result<(), String> {
    http_or_https(url)
}

fn searxng_url(url: &Option<String>, _: &WebSection) -> Result<(), String> {
    url.as_deref().map_or(Ok(()), http_or_https)
}

impl Config {
    /// The web tools' settings; the engine registers them as a service.
    pub fn web(&self) -> WebSettings {
        let w = &self.raw.web;
        let mut settings = WebSettings::default()
            .with_limits(w.max_bytes, Duration::from_secs(w.timeout_seconds))
            .with_search(
                w.brave_api_key
                    .as_ref()
                    .or(self.provider_keys.brave())
                    .map(|k| k.expose().to_owned()),
                w.brave_endpoint.clone(),
                w.searxng_url.clone(),
            );
        for host in &w.allowed_private_hosts {
            settings = settings.allow_private(host.clone());
        }
        settings
    }

    /// The browser `render_js` runs: `web.browser`, else one found on `PATH`.
    #[cfg(feature = "render")]
    pub fn browser(&self) -> Option<PathBuf> {
        klaw_tools::tools::web::find_browser(self.raw.web.browser.as_deref())
    }

    /// Cloudflare's Browser Rendering (at `web.cloudflareBaseUrl`), when
    /// `CLOUDFLARE_API_TOKEN` and `CLOUDFLARE_ACCOUNT_ID` are both set: what `render_js`
    /// uses where [`browser`](Self::browser) finds none.
    #[cfg(feature = "render")]
    pub fn remote_browser(&self) -> Option<klaw_tools::tools::web::RemoteBrowser> {
        let (token, account) = self.provider_keys.cloudflare()?;
        Some(klaw_tools::tools::web::RemoteBrowser::cloudflare(
            self.raw.web.cloudflare_base_url.clone(),
            account,
            token.expose(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{env, resolve_defaults};

    /// The web settings: `BRAVE_API_KEY` when `web.braveApiKey` is unset (the key wins),
    /// the allow-list from its variable, and an entry that is not `host:port` refused.
    #[test]
    fn web_settings_come_from_the_section_and_brave_api_key() {
        let c = resolve_defaults(&env(&[
            ("HOME", "/h"),
            ("BRAVE_API_KEY", "from-env"),
            (
                "KLAW_WEB_ALLOWED_PRIVATE_HOSTS",
                "127.0.0.1:8080,wiki.lan:443",
            ),
        ]))
        .unwrap();
        let w = c.web();
        assert_eq!(w.brave_api_key.as_deref(), Some("from-env"));
        assert_eq!(w.allowed_private_hosts, ["127.0.0.1:8080", "wiki.lan:443"]);
        let c = resolve_defaults(&env(&[
            ("HOME", "/h"),
            ("BRAVE_API_KEY", "from-env"),
            ("KLAW_BRAVE_API_KEY", "from-key"),
        ]))
        .unwrap();
        assert_eq!(c.web().brave_api_key.as_deref(), Some("from-key"));
        assert_eq!(c.effective()["web"]["braveApiKey"], "***");
        let e = resolve_defaults(&env(&[
            ("HOME", "/h"),
            ("KLAW_WEB_ALLOWED_PRIVATE_HOSTS", "127.0.0.1"),
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("web.allowedPrivateHosts"), "{e}");
    }
}
