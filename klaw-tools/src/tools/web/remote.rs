//! `render_js` where no local browser is found: Cloudflare's Browser Rendering renders
//! the page on Cloudflare's network (`POST {base}/accounts/{account}/browser-rendering/content`
//! with `{"url": ...}` and the API token as a bearer header; the answer
//! `{"success": true, "result": "<html>"}`), and the HTML goes through the same
//! extraction and caps as a page the local browser rendered.
//!
//! The page's URL is checked by the guard first, as the local browser's is
//! (`render::start_url`: a scheme, a literal private address, or a name that resolves
//! here to one is refused before Cloudflare is asked); the page is fetched from
//! Cloudflare's network, never from this machine's, so the redirects and subresources
//! its browser follows cannot reach this machine's network (the local path's proxy
//! checks those; here there is nothing of ours to protect them from). The token is sent
//! only to the configured API and appears in no answer, error or log line.

use std::sync::Arc;

use serde_json::{Value, json};
use url::Url;

use super::clients::Clients;
use super::extract::Format;
use super::render::{Args, extracted, spec, start_url};
use super::settings::WebSettings;
use crate::{FnTool, Tool, ToolError};

/// Cloudflare's API, the default base of [`RemoteBrowser::cloudflare`].
pub const CLOUDFLARE_API: &str = "https://api.cloudflare.com/client/v4";

/// Cloudflare's Browser Rendering, as `render_js` calls it.
#[derive(Clone)]
pub struct RemoteBrowser {
    base_url: String,
    account_id: String,
    token: String,
}

impl std::fmt::Debug for RemoteBrowser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteBrowser")
            .field("base_url", &self.base_url)
            .field("account_id", &self.account_id)
            .field("token", &"***")
            .finish()
    }
}

impl RemoteBrowser {
    /// The Browser Rendering of `account_id` at `base_url` (normally [`CLOUDFLARE_API`];
    /// another for a test server), with the API `token`.
    pub fn cloudflare(
        base_url: impl Into<String>,
        account_id: impl Into<String>,
        token: impl Into<String>,
    ) -> Self {
        Self {
            base_url: base_url.into(),
            account_id: account_id.into(),
            token: token.into(),
        }
    }

    /// The endpoint that renders a page's HTML.
    fn content_url(&self) -> String {
        format!(
            "{}/accounts/{}/browser-rendering/content",
            self.base_url.trim_end_matches('/'),
            self.account_id
        )
    }
}

/// `render_js` through `remote` (the same name, description and schemas as the local
/// browser's; a screenshot cannot be had this way).
pub fn render_js_remote_tool(remote: RemoteBrowser) -> Arc<dyn Tool> {
    let remote = Arc::new(remote);
    Arc::new(FnTool::typed(spec(), move |ctx, args: Args| {
        let remote = Arc::clone(&remote);
        async move {
            let settings = WebSettings::of(&ctx);
            let web = ctx.shared_state::<Clients>();
            let (guard, _) = web.get(&settings)?;
            let start = start_url(guard, &args.url).await?;
            if args.screenshot == Some(true) {
                return Err(ToolError::invalid_arguments(
                    "/screenshot",
                    "no local browser here: Cloudflare's Browser Rendering gives the page's HTML only; call again without screenshot",
                ));
            }
            let html = fetch(&remote, &start, &settings).await?;
            let format = args.format.unwrap_or(Format::Markdown);
            let max_chars = args.max_chars.unwrap_or(50_000).clamp(1, 1_000_000);
            extracted(html, start.to_string(), None, format, max_chars).await
        }
    }))
}

/// The page's HTML as Cloudflare rendered it, cut to `web.maxBytes` characters.
async fn fetch(
    remote: &RemoteBrowser,
    start: &Url,
    settings: &WebSettings,
) -> Result<String, ToolError> {
    let service = "Cloudflare's Browser Rendering";
    let client = reqwest::Client::builder()
        .timeout(settings.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| ToolError::unavailable(format!("cannot set up the client: {e}")))?;
    let mut response = client
        .post(remote.content_url())
        .bearer_auth(&remote.token)
        .json(&json!({"url": start.as_str()}))
        .send()
        .await
        .map_err(|e| {
            if e.is_timeout() {
                ToolError::timeout(format!(
                    "{service} did not answer within {} s (web.timeoutSeconds)",
                    settings.timeout.as_secs()
                ))
            } else {
                ToolError::unavailable(format!("cannot reach {service}: {}", e.without_url()))
            }
        })?;
    let status = response.status();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    // The JSON around the HTML: its escapes may take up to six bytes a character.
    let limit = settings
        .max_bytes
        .saturating_mul(6)
        .saturating_add(64 * 1024);
    let mut body = Vec::new();
    loop {
        let chunk = response.chunk().await.map_err(|e| {
            ToolError::unavailable(format!("{service} stopped answering: {}", e.without_url()))
        })?;
        let Some(chunk) = chunk else { break };
        if body.len().saturating_add(chunk.len()) > limit {
            return Err(ToolError::failed(format!(
                "{service}'s answer for {start} is over {limit} bytes (web.maxBytes)"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();
    let errors = parsed.as_ref().map(errors).unwrap_or_default();
    let said = if errors.is_empty() {
        String::new()
    } else {
        format!(": {errors}")
    };
    match status.as_u16() {
        401 | 403 => {
            return Err(ToolError::access_denied(format!(
                "{service} refused the API token ({status}){said}; check CLOUDFLARE_API_TOKEN (it needs the Browser Rendering - Edit permission) and CLOUDFLARE_ACCOUNT_ID"
            )));
        }
        429 => {
            let wait = retry_after
                .map(|s| format!(" (retry after {s} s)"))
                .unwrap_or_default();
            return Err(ToolError::unavailable(format!(
                "{service} is rate-limited (429){wait}; try again later, or use web_fetch"
            )));
        }
        _ if !status.is_success() => {
            return Err(ToolError::failed(format!(
                "{service} could not render {start} ({status}){said}"
            )));
        }
        _ => {}
    }
    let Some(v) = parsed else {
        return Err(ToolError::failed(format!(
            "{service} answered {status} with something that is not its JSON"
        )));
    };
    if v.get("success") != Some(&Value::Bool(true)) {
        return Err(ToolError::failed(format!(
            "{service} could not render {start}{said}"
        )));
    }
    let Some(html) = v.get("result").and_then(Value::as_str) else {
        return Err(ToolError::failed(format!(
            "{service} answered without the page's HTML (no `result`)"
        )));
    };
    let mut html = html.to_owned();
    if let Some((cut, _)) = html.char_indices().nth(settings.max_bytes) {
        html.truncate(cut);
    }
    Ok(html)
}

/// The messages of a Cloudflare answer's `errors` (`[{"code": ..., "message": ...}]`),
/// joined.
fn errors(v: &Value) -> String {
    v.get("errors")
        .and_then(Value::as_array)
        .map(|e| {
            e.iter()
                .filter_map(|e| {
                    let message = e.get("message").and_then(Value::as_str)?;
                    Some(match e.get("code").and_then(Value::as_i64) {
                        Some(code) => format!("{message} (code {code})"),
                        None => message.to_owned(),
                    })
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default()
}
