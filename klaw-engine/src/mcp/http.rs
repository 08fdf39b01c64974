//! The MCP server over Streamable HTTP (`klaw-engine mcp --http`): `/mcp` (rmcp's
//! transport, stateful sessions) and `GET /api/v1/tools`, behind one guard that every
//! request passes first: the `Host` and `Origin` checks (DNS rebinding), the bearer
//! token, the body size, and a free session slot for an `initialize`. Every refusal is a
//! status with a JSON body saying why. Connections are capped and must send their
//! headers in time (`connections`); sessions are capped and end when idle
//! (`sessions`).

mod connections;
mod sessions;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;

use super::{McpError, McpServer};
use crate::Engine;
use sessions::Sessions;

/// What the guard checks, from the `mcp` section.
struct Guard {
    /// Host names the server answers to (no port), lowercase.
    hosts: Vec<String>,
    /// Browser origins allowed besides loopback ones (`scheme://host[:port]`), lowercase.
    origins: Vec<String>,
    token: Option<String>,
    max_body: usize,
    /// Where an `initialize` takes its session's slot.
    sessions: Arc<Sessions>,
    /// `mcp.sessionIdleSeconds`, for the refusal when every slot is taken.
    session_idle: u64,
}

/// Why the server cannot start on `bind`, checked before it listens: a non-loopback
/// address without a token would let anyone who reaches it run tools.
pub fn check_bind(bind: SocketAddr, token: Option<&str>) -> Result<(), McpError> {
    if !bind.ip().is_loopback() && token.is_none() {
        return Err(McpError::NoToken { bind });
    }
    Ok(())
}

/// Why the server cannot start on `bind` with `config`, checked before it listens:
/// [`check_bind`], and with `mcp-sampling` a token whatever the address (any local
/// process could otherwise connect a client of its own and be the model, or read
/// the work a client's model is asked to do).
pub fn check_start(bind: SocketAddr, config: &crate::Config) -> Result<(), McpError> {
    let token = config.raw.mcp.token.as_ref().map(crate::Secret::expose);
    check_bind(bind, token)?;
    if token.is_none() && crate::llm::uses_sampling(config) {
        return Err(McpError::SamplingNoToken { bind });
    }
    Ok(())
}

/// Serves `engine` over HTTP on `bind` until `stop` is cancelled (the app's stop token:
/// SIGINT or SIGTERM); open connections then get 5 s to finish. Never shuts the engine
/// down: the app does, once every part has stopped. Says on stderr where it listens
/// (`bind` may have port 0).
pub async fn serve(
    engine: Engine,
    bind: SocketAddr,
    stop: tokio_util::sync::CancellationToken,
) -> Result<(), McpError> {
    let cfg = engine.config().raw.mcp.clone();
    check_start(bind, engine.config())?;
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    if !bind.ip().is_unspecified() {
        hosts.push(bind.ip().to_string());
    }
    // Entries are names; a port given with one is ignored (the Host check drops ports).
    hosts.extend(cfg.allowed_hosts.iter().map(|h| {
        let h = h.to_ascii_lowercase();
        match h.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or_default().to_owned(),
            None if h.matches(':').count() == 1 => {
                h.split(':').next().unwrap_or_default().to_owned()
            }
            None => h,
        }
    }));
    let sessions = Arc::new(
        Sessions::new(
            cfg.max_sessions,
            std::time::Duration::from_secs(cfg.session_idle_seconds),
        )
        .named(engine.config().raw.storage.engine_id.as_deref()),
    );
    let guard = Arc::new(Guard {
        hosts,
        origins: cfg
            .allowed_origins
            .iter()
            .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
            .collect(),
        token: cfg.token.as_ref().map(|t| t.expose().to_owned()),
        max_body: cfg.max_body_bytes,
        sessions: Arc::clone(&sessions),
        session_idle: cfg.session_idle_seconds,
    });
    let server = McpServer::new(engine.clone());
    // A call may close the stream it is answered on (SSE polling): through the sessions.
    let streams = Arc::clone(&sessions);
    engine
        .context()
        .shared_state::<super::Peers>()
        .set_closer(Arc::new(move |session, request, retry| {
            let sessions = Arc::clone(&streams);
            Box::pin(async move { sessions.close_stream(&session, &request, retry).await })
        }));
    // The guard checks Host and Origin for every route; rmcp's own check would apply a
    // second, different list.
    let transport = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_max_request_body_bytes(cfg.max_body_bytes)
        .with_cancellation_token(stop.child_token());
    let mcp = StreamableHttpService::new(move || Ok(server.session()), sessions, transport);
    let tools_engine = engine.clone();
    let app = axum::Router::new()
        .nest_service("/mcp", mcp)
        .route(
            "/api/v1/tools",
            get(move || {
                let engine = tools_engine.clone();
                async move {
                    let lang = engine.config().raw.language;
                    json_response(StatusCode::OK, &tools_json(&engine, lang))
                }
            }),
        )
        .fallback(|| async {
            refusal(
                StatusCode::NOT_FOUND,
                "not_found",
                "nothing here: the MCP endpoint is /mcp, the tool list /api/v1/tools",
            )
        })
        .layer(middleware::from_fn_with_state(guard, check));
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|source| McpError::Listen { bind, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| McpError::Listen { bind, source })?;
    eprintln!("klaw-engine: MCP over HTTP at http://{local}/mcp");
    let limits = connections::Limits {
        max_connections: cfg.max_connections,
        header_timeout: std::time::Duration::from_secs(cfg.header_timeout_seconds),
    };
    // Connections get 5 s to finish after the stop; then the server stops anyway.
    connections::serve(listener, app, limits, stop).await;
    tracing::info!(target: "klaw::mcp", "the MCP server over HTTP stopped");
    Ok(())
}

/// The tool list as `/api/v1/tools` and `klaw-engine tools --format json` give it: each
/// tool's MCP definition with its origin, and `failed`: the tools that could not be
/// loaded or whose last calls failed ([`Engine::failed`](crate::Engine::failed)).
pub fn tools_json(engine: &crate::Engine, lang: klaw_tools::Lang) -> serde_json::Value {
    let registry = engine.registry();
    let failed = engine.failed();
    let tools: Vec<_> = super::specs_by_name(&registry)
        .into_iter()
        .map(|spec| {
            let mut def = klaw_tools::definition(spec, klaw_tools::Format::Mcp, lang);
            def["origin"] = json!(spec.origin);
            def["loaded"] = json!(true);
            if let Some(f) = failed.iter().find(|f| f.name == spec.name) {
                def["failing"] = json!({"failures": f.failures, "problem": f.problem});
            }
            def
        })
        .collect();
    json!({"tools": tools, "count": tools.len(), "failed": failed})
}

/// The guard every request passes first. A client refused for who it is (Host, Origin,
/// token) loses its connection too: it must not keep one of `mcp.maxConnections` by
/// sending a refused request now and then.
async fn check(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    // Checked without a copy; the name is made only to say why it is refused.
    if !host_allowed(headers, &guard.hosts) {
        let host = host_name(headers);
        return closing(refusal(
            StatusCode::FORBIDDEN,
            "forbidden_host",
            &format!(
                "the Host {:?} is not one this server answers to (DNS-rebinding protection); \
                 add it to mcp.allowedHosts",
                host.unwrap_or_default()
            ),
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin
            .to_str()
            .unwrap_or("")
            .trim_end_matches('/')
            .to_ascii_lowercase();
        if !(loopback_origin(&origin) || guard.origins.contains(&origin)) {
            return closing(refusal(
                StatusCode::FORBIDDEN,
                "forbidden_origin",
                &format!(
                    "requests from the origin {origin:?} are not allowed; add it to \
                     mcp.allowedOrigins"
                ),
            ));
        }
    }
    if let Some(token) = &guard.token {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            // The scheme's name is case-insensitive (RFC 9110).
            .and_then(|v| {
                v.get(..7)
                    .filter(|s| s.eq_ignore_ascii_case("bearer "))
                    .map(|_| &v[7..])
            });
        if !given.is_some_and(|g| same(g.as_bytes(), token.as_bytes())) {
            let mut r = refusal(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a valid `Authorization: Bearer <mcp.token>` header is required",
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return closing(r);
        }
    }
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = || {
        refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            &format!(
                "the request body is larger than {} bytes (mcp.maxBodyBytes)",
                guard.max_body
            ),
        )
    };
    if length.is_some_and(|n| n > guard.max_body as u64) {
        return too_large();
    }
    if request.method() == axum::http::Method::DELETE {
        // A session ended: 204 (rmcp says 202, which clients report as a failure).
        let mut r = in_session(next, request).await;
        if r.status() == StatusCode::ACCEPTED {
            *r.status_mut() = StatusCode::NO_CONTENT;
        }
        return r;
    }
    if request.method() != axum::http::Method::POST {
        return in_session(next, request).await;
    }
    // A POST body is read here, bounded (also when it comes without a length), and
    // answered with a JSON-RPC error when it is not one JSON-RPC message.
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, guard.max_body).await else {
        return too_large();
    };
    // A request in a session is of an older protocol; without one it is a stateless
    // request or the `initialize` that opens a session.
    let sessionless = !parts.headers.contains_key(super::SESSION_ID);
    // Not one JSON-RPC message: checked here without a session or for an array, else
    // once rmcp, which reads every body, has refused it (a message in a session, the
    // common case, is read once, not twice).
    if (sessionless || bytes.trim_ascii_start().first() == Some(&b'['))
        && let Some(refused) = not_one_message(&bytes)
    {
        return refused;
    }
    if !sessionless {
        let response =
            in_session(next, Request::from_parts(parts, Body::from(bytes.clone()))).await;
        // rmcp refuses a body it cannot read (415) after checks with no effect (Accept,
        // Content-Type): the answer is then the one a request without a session gets.
        if response.status().is_client_error()
            && let Some(refused) = not_one_message(&bytes)
        {
            return refused;
        }
        return response;
    }
    // What the guard reads of a request without a session.
    let envelope = serde_json::from_slice::<Envelope>(&bytes).ok();
    // A method the stateless protocol (2026-07-28) removed, asked in that protocol: not
    // found (HTTP 404), whatever its params (rmcp would route an `initialize` to the
    // old handshake, and read a removed method without its old params as invalid).
    if let Some(e) = envelope.as_ref().filter(|e| e.removed_in_stateless()) {
        let method = e.method.as_deref().unwrap_or_default();
        return json_response(
            StatusCode::NOT_FOUND,
            &super::rpc_error(
                e.id.clone().unwrap_or_default(),
                -32601,
                format!(
                    "method not found: {method} is not part of MCP 2026-07-28 (the protocol \
                     this request names in its _meta)"
                ),
            ),
        );
    }
    // An `initialize` without a session is the one request that creates a session: it
    // needs a free slot, held from here until the session ends.
    let creates_session = envelope.is_some_and(|m| m.method.as_deref() == Some("initialize"));
    let request = Request::from_parts(parts, Body::from(bytes));
    if !creates_session {
        return in_session(next, request).await;
    }
    let Some(slot) = guard.sessions.reserve() else {
        let mut r = refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_sessions",
            &format!(
                "{} MCP sessions are open, the most this server keeps (mcp.maxSessions); \
                 end one (DELETE /mcp with its Mcp-Session-Id) or retry later: a session \
                 without a request for {} s ends (mcp.sessionIdleSeconds)",
                guard.sessions.max(),
                guard.session_idle
            ),
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(guard.session_idle));
        return r;
    };
    Sessions::with_slot(slot, next.run(request)).await
}

/// `request` handled by rmcp; when its session ended while it was handled (found, then
/// gone: [`Sessions::noting_ended`]), rmcp's 500 becomes the 404 of an ended session
/// (its own answer for a session it does not find), which tells the client to start a
/// new one.
async fn in_session(next: Next, request: Request) -> Response {
    let (response, ended) = Sessions::noting_ended(next.run(request)).await;
    if ended && response.status() == StatusCode::INTERNAL_SERVER_ERROR {
        return (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
    }
    response
}

/// What the guard reads of a JSON-RPC message: its method, its id and the protocol
/// version its `_meta` names (a request of the stateless protocol carries one).
#[derive(serde::Deserialize)]
struct Envelope {
    method: Option<String>,
    id: Option<serde_json::Value>,
    params: Option<EnvelopeParams>,
}

#[derive(serde::Deserialize)]
struct EnvelopeParams {
    #[serde(rename = "_meta")]
    meta: Option<EnvelopeMeta>,
}

#[derive(serde::Deserialize)]
struct EnvelopeMeta {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
    protocol_version: Option<String>,
}

/// The methods MCP 2026-07-28 removed (the handshake, the session's log level and
/// resource subscriptions: `subscriptions/listen` replaces them).
const REMOVED_IN_STATELESS: [&str; 5] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

impl Envelope {
    /// A request of the stateless protocol (its `_meta` names 2026-07-28 or later;
    /// dates compare as strings) for a method that protocol removed.
    fn removed_in_stateless(&self) -> bool {
        let stateless = self
            .params
            .as_ref()
            .and_then(|p| p.meta.as_ref())
            .and_then(|m| m.protocol_version.as_deref())
            .is_some_and(|v| v >= "2026-07-28");
        stateless
            && self.id.is_some()
            && self
                .method
                .as_deref()
                .is_some_and(|m| REMOVED_IN_STATELESS.contains(&m))
    }
}

/// `response`, and the connection closed after it.
fn closing(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// The JSON-RPC error for a body that is not one message: not JSON (-32700), or a batch
/// (-32600, not supported). Checked without building it.
fn not_one_message(bytes: &[u8]) -> Option<Response> {
    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
        return Some(rpc_error(
            -32700,
            format!("Parse error: the body is not JSON: {e}"),
        ));
    }
    (bytes.trim_ascii_start().first() == Some(&b'[')).then(|| {
        rpc_error(
            -32600,
            "Invalid request: JSON-RPC batches are not supported; send one message per request"
                .into(),
        )
    })
}

/// A JSON-RPC error for a body that is not one message (HTTP 400).
fn rpc_error(code: i32, message: String) -> Response {
    json_response(
        StatusCode::BAD_REQUEST,
        &super::rpc_error(serde_json::Value::Null, code, message),
    )
}

/// The `Host` header's name without its port, lowercase (`[::1]:80` → `::1`).
fn host_name(headers: &HeaderMap) -> Option<String> {
    let host = headers
        .get(header::HOST)?
        .to_str()
        .ok()?
        .to_ascii_lowercase();
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?.to_owned(),
        None => host
            .rsplit_once(':')
            .map_or(host.as_str(), |(h, _)| h)
            .to_owned(),
    };
    Some(name)
}

/// Whether the `Host` header's name (without its port, any case) is one of `hosts`
/// (lowercase): [`host_name`] without its allocations, for every request.
fn host_allowed(headers: &HeaderMap, hosts: &[String]) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => match v6.split(']').next() {
            Some(name) => name,
            None => return false,
        },
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    hosts.iter().any(|a| a.eq_ignore_ascii_case(name))
}

/// `http(s)://localhost|127.0.0.1|[::1]` with any port: a page the user opened locally.
fn loopback_origin(origin: &str) -> bool {
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    let Some(rest) = rest else { return false };
    let host = match rest.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => rest.split(':').next().unwrap_or(""),
    };
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

/// Compares without stopping at the first difference (the time does not tell how much
/// of a guessed token was right).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn refusal(status: StatusCode, error: &str, message: &str) -> Response {
    json_response(status, &json!({"error": error, "message": message}))
}

fn json_response(status: StatusCode, body: &serde_json::Value) -> Response {
    let mut r = (status, Body::from(body.to_string())).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_lose_their_port() {
        let h = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert(header::HOST, HeaderValue::from_str(v).unwrap());
            host_name(&m)
        };
        assert_eq!(h("LocalHost:8765").as_deref(), Some("localhost"));
        assert_eq!(h("[::1]:80").as_deref(), Some("::1"));
        assert_eq!(h("127.0.0.1").as_deref(), Some("127.0.0.1"));
        assert_eq!(h("evil.example:80").as_deref(), Some("evil.example"));
        // The check without copies agrees.
        let allowed = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert(header::HOST, HeaderValue::from_str(v).unwrap());
            host_allowed(&m, &["localhost".into(), "::1".into(), "127.0.0.1".into()])
        };
        assert!(allowed("LocalHost:8765") && allowed("[::1]:80") && allowed("127.0.0.1"));
        assert!(!allowed("evil.example:80") && !allowed("localhost.evil.example"));
        assert!(!host_allowed(&HeaderMap::new(), &["localhost".into()]));
    }

    #[test]
    fn loopback_origins_only() {
        assert!(loopback_origin("http://localhost:5173"));
        assert!(loopback_origin("http://127.0.0.1"));
        assert!(loopback_origin("https://[::1]:8443"));
        assert!(!loopback_origin("http://localhost.evil.example"));
        assert!(!loopback_origin("http://evil.example"));
        assert!(!loopback_origin("null"));
    }

    #[test]
    fn a_non_loopback_bind_needs_a_token() {
        let any: SocketAddr = "0.0.0.0:8765".parse().unwrap();
        assert!(
            check_bind(any, None)
                .unwrap_err()
                .to_string()
                .contains("without a token")
        );
        assert!(check_bind(any, Some("0123456789abcdef")).is_ok());
        assert!(check_bind("127.0.0.1:1".parse().unwrap(), None).is_ok());
        assert!(same(b"abc", b"abc") && !same(b"abc", b"abd") && !same(b"ab", b"abc"));
    }
}
