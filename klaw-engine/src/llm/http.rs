//! What both clients share: one `reqwest` client (rustls with the ring provider) that
//! follows redirects only within the origin asked, timeouts, retries with backoff on
//! 429, 5xx and connection errors (honouring `Retry-After`), errors that name the URL
//! and the status, and an SSE reader.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;

use super::LlmError;

/// The longest wait a `Retry-After` may ask for; a server that wants more gets its error
/// reported instead.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The largest answer read (a whole body, or a whole stream): a model's reply is far
/// smaller; a server that sends more is refused rather than allowed to fill memory.
pub(crate) const MAX_BODY_BYTES: usize = 16 << 20;

/// The longest a streamed answer may take in all (`timeout` bounds each gap).
const MAX_STREAM: Duration = Duration::from_secs(30 * 60);

/// How a client reaches its server: the HTTP client, the time limits and the retries.
#[derive(Debug, Clone)]
pub struct Transport {
    client: reqwest::Client,
    /// Time limit of a whole request that is not streamed, and between two pieces of a
    /// streamed one.
    timeout: Duration,
    /// Retries after the first attempt.
    retries: u32,
    /// The first backoff (doubled each retry).
    backoff: Duration,
}

impl Transport {
    /// A transport with these limits. Fails only when the TLS stack cannot start.
    pub fn new(
        timeout: Duration,
        connect_timeout: Duration,
        retries: u32,
    ) -> Result<Self, LlmError> {
        // rustls needs one process-wide crypto provider: ring (no aws-lc). Installing
        // it twice is harmless (the second attempt is refused and ignored).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .redirect(same_origin_redirects())
            .connect_timeout(connect_timeout)
            .read_timeout(timeout)
            .user_agent(concat!("klaw-engine/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LlmError::Config(format!("cannot start the HTTP client: {e}")))?;
        Ok(Self {
            client,
            timeout,
            retries,
            backoff: Duration::from_millis(500),
        })
    }

    /// The same transport with a shorter first backoff (tests).
    #[must_use]
    pub fn with_backoff(mut self, backoff: Duration) -> Self {
        self.backoff = backoff;
        self
    }

    /// POSTs `body` to `url` with `headers` and returns the response once its status is
    /// a success; 429, 5xx and connection errors are retried.
    pub(crate) async fn post(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: &(impl serde::Serialize + ?Sized),
        streamed: bool,
    ) -> Result<reqwest::Response, LlmError> {
        let mut attempt = 0;
        // The request's span goes on at the model server when it traces (telemetry on).
        let trace = crate::telemetry::passed_on();
        loop {
            let mut request = self.client.post(url).json(body);
            if !streamed {
                request = request.timeout(self.timeout);
            }
            for (k, v) in &trace {
                request = request.header(*k, v.as_str());
            }
            for (k, v) in headers {
                // Keys are marked sensitive: never in reqwest's or hyper's debug output.
                let Ok(mut value) = reqwest::header::HeaderValue::from_str(v) else {
                    return Err(LlmError::Config(format!(
                        "the {k} header has characters HTTP does not allow"
                    )));
                };
                if k.eq_ignore_ascii_case("authorization") || k.eq_ignore_ascii_case("x-api-key") {
                    value.set_sensitive(true);
                }
                request = request.header(*k, value);
            }
            let failure = match request.send().await {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) if let Some(to) = elsewhere(&response) => {
                    return Err(not_followed(url, &response, &to));
                }
                Err(e) if e.is_redirect() => {
                    return Err(LlmError::Connect {
                        url: url.to_owned(),
                        message: innermost(&e),
                    });
                }
                Ok(response) => {
                    let status = response.status();
                    let wait = retry_after(response.headers());
                    let body = read_capped(response, 64 << 10).await.unwrap_or_default();
                    let message = error_message(&String::from_utf8_lossy(&body));
                    let error = LlmError::Status {
                        url: url.to_owned(),
                        status: status.as_u16(),
                        message,
                    };
                    let retryable = status.as_u16() == 429 || status.is_server_error();
                    if !retryable || wait.is_some_and(|w| w > MAX_RETRY_AFTER) {
                        return Err(error);
                    }
                    (error, wait)
                }
                Err(e) => (self.transport_error(url, &e), None),
            };
            let (error, wait) = failure;
            if attempt >= self.retries {
                return Err(error);
            }
            let delay = wait.unwrap_or_else(|| self.backoff(attempt));
            tracing::warn!(target: "klaw::llm", "{error}; retrying in {} ms", delay.as_millis());
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// POSTs and reads the whole answer as JSON.
    pub(crate) async fn post_json(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: &(impl serde::Serialize + ?Sized),
    ) -> Result<Value, LlmError> {
        let response = self.post(url, headers, body, false).await?;
        let bytes = self.read_body(url, response).await?;
        serde_json::from_slice(&bytes).map_err(|e| LlmError::Decode {
            url: url.to_owned(),
            message: format!(
                "not JSON ({e}): {}",
                preview(&String::from_utf8_lossy(&bytes))
            ),
        })
    }

    /// The backoff before retry `attempt` (0-based): the first backoff doubled each
    /// time, up to 30 s, with up to a quarter more at random so clients spread out.
    fn backoff(&self, attempt: u32) -> Duration {
        let base = self
            .backoff
            .saturating_mul(1u32 << attempt.min(16))
            .min(Duration::from_secs(30));
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        base + base.mul_f64(f64::from(nanos % 1000) / 4000.0)
    }

    /// The answer of a server that ignored `stream` and sent one JSON document (read
    /// with `parse`, its text given to `on_text`), or `Err(response)` for a real stream.
    pub(crate) async fn unstreamed(
        &self,
        url: &str,
        response: reqwest::Response,
        parse: fn(&Value) -> Result<super::ChatResponse, super::MalformedResponse>,
        on_text: super::OnText<'_>,
    ) -> Result<Result<super::ChatResponse, LlmError>, reqwest::Response> {
        let is_sse = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if is_sse {
            return Err(response);
        }
        let answer = async {
            let bytes = self.read_body(url, response).await?;
            let decode = |message: String| LlmError::Decode {
                url: url.to_owned(),
                message,
            };
            let v: Value =
                serde_json::from_slice(&bytes).map_err(|e| decode(format!("not JSON: {e}")))?;
            let r = parse(&v).map_err(|e| decode(e.to_string()))?;
            if !r.message.text.is_empty() {
                on_text(&r.message.text);
            }
            Ok(r)
        };
        Ok(answer.await)
    }

    /// A stream's error as the client reports it.
    pub(crate) fn sse_error(&self, url: &str, e: SseError) -> LlmError {
        match e {
            SseError::Http(e) => self.transport_error(url, &e),
            SseError::TooLarge => LlmError::Decode {
                url: url.to_owned(),
                message: format!("the streamed answer is larger than {MAX_BODY_BYTES} bytes"),
            },
            SseError::TooLong => LlmError::Timeout {
                url: url.to_owned(),
                after: MAX_STREAM,
            },
        }
    }

    /// A whole body, at most [`MAX_BODY_BYTES`].
    pub(crate) async fn read_body(
        &self,
        url: &str,
        response: reqwest::Response,
    ) -> Result<Vec<u8>, LlmError> {
        match read_capped(response, MAX_BODY_BYTES).await {
            Ok(b) if b.len() <= MAX_BODY_BYTES => Ok(b),
            Ok(_) => Err(LlmError::Decode {
                url: url.to_owned(),
                message: format!("the answer is larger than {MAX_BODY_BYTES} bytes"),
            }),
            Err(e) => Err(self.transport_error(url, &e)),
        }
    }

    pub(crate) fn transport_error(&self, url: &str, e: &reqwest::Error) -> LlmError {
        if e.is_timeout() {
            return LlmError::Timeout {
                url: url.to_owned(),
                after: self.timeout,
            };
        }
        LlmError::Connect {
            url: url.to_owned(),
            message: innermost(e),
        }
    }
}

/// The most redirects followed for one request (reqwest's default).
const MAX_REDIRECTS: usize = 10;

/// Redirects are followed only within the origin asked (scheme, host and port alike):
/// a redirect re-sends the conversation (307 and 308 with the whole body), and reqwest
/// strips `Authorization` on the way to another host but not `x-api-key`. Any other
/// redirect stops there, and [`Transport::post`] reports it ([`not_followed`]).
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let asked = attempt.previous().first().map(reqwest::Url::origin);
        if asked.as_ref() != Some(&attempt.url().origin()) {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!(
                "more than {MAX_REDIRECTS} redirects, none followed further"
            ))
        } else {
            attempt.follow()
        }
    })
}

/// Where `response` redirects to, when that is another origin than its own (a
/// redirect [`same_origin_redirects`] stopped).
fn elsewhere(response: &reqwest::Response) -> Option<reqwest::Url> {
    if !response.status().is_redirection() {
        return None;
    }
    let location = response.headers().get(reqwest::header::LOCATION)?;
    let to = response.url().join(location.to_str().ok()?).ok()?;
    (to.origin() != response.url().origin()).then_some(to)
}

/// The error of a redirect to `to` that the client did not follow: where it pointed
/// (its origin only: the rest of a URL may hold a token) and why.
fn not_followed(url: &str, response: &reqwest::Response, to: &reqwest::Url) -> LlmError {
    LlmError::Status {
        url: url.to_owned(),
        status: response.status().as_u16(),
        message: format!(
            "a redirect to another origin ({}), not followed: the request would carry \
             the conversation there; if that server is the right one, set `baseUrl` to it",
            to.origin().ascii_serialization()
        ),
    }
}

/// What happened, from the innermost cause (refused, DNS, TLS): reqwest's own text
/// carries the URL, which may hold a secret (Telegram's bot token).
pub(crate) fn innermost(e: &reqwest::Error) -> String {
    let mut source: &dyn std::error::Error = e;
    while let Some(inner) = source.source() {
        source = inner;
    }
    if std::ptr::eq(source, e as &dyn std::error::Error) {
        // No cause: reqwest's text without the URL.
        return format!("{}", ReqwestWithoutUrl(e));
    }
    source.to_string()
}

/// Displays a reqwest error without its URL.
struct ReqwestWithoutUrl<'a>(&'a reqwest::Error);

impl std::fmt::Display for ReqwestWithoutUrl<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_timeout() {
            f.write_str("timed out")
        } else if self.0.is_decode() {
            f.write_str("the body could not be read")
        } else if self.0.is_connect() {
            f.write_str("cannot connect")
        } else {
            f.write_str("the request failed")
        }
    }
}

/// Reads a body up to `cap` bytes (one more than `cap` means it was longer).
pub(crate) async fn read_capped(
    response: reqwest::Response,
    cap: usize,
) -> Result<Vec<u8>, reqwest::Error> {
    let mut stream = response.bytes_stream();
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        let room = cap.saturating_add(1).saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if out.len() > cap {
            break;
        }
    }
    Ok(out)
}

/// `Retry-After` as seconds or as an HTTP date.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = jiff::fmt::rfc2822::parse(v).ok()?;
    let left = when.timestamp().duration_since(jiff::Timestamp::now());
    Some(Duration::try_from(left).unwrap_or(Duration::ZERO))
}

/// The provider's error message (`{"error": {"message": ...}}` or `{"error": "..."}`),
/// else the start of the body.
pub(crate) fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let found = parsed.as_ref().and_then(|v| {
        let e = v.get("error")?;
        e.get("message")
            .and_then(Value::as_str)
            .or_else(|| e.as_str())
            .map(str::to_owned)
    });
    found.unwrap_or_else(|| preview(body))
}

/// The first 300 characters of `s`, on one line.
pub(crate) fn preview(s: &str) -> String {
    let one_line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None if one_line.is_empty() => "(empty body)".into(),
        None => one_line,
    }
}

/// Reads a `text/event-stream` body: each event's `event:` name (if any) and its
/// `data:` lines joined. At most [`MAX_BODY_BYTES`] in all and [`MAX_STREAM`] long.
pub(crate) struct Sse {
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buf: Vec<u8>,
    /// Where the search for the end of the current event goes on.
    scanned: usize,
    read: usize,
    deadline: tokio::time::Instant,
}

/// Why a stream could not be read.
pub(crate) enum SseError {
    Http(reqwest::Error),
    TooLarge,
    TooLong,
}

impl Sse {
    pub(crate) fn new(response: reqwest::Response) -> Self {
        Self {
            body: response.bytes_stream().boxed(),
            buf: Vec::new(),
            scanned: 0,
            read: 0,
            deadline: tokio::time::Instant::now() + MAX_STREAM,
        }
    }

    /// The next event, `None` at the end of the stream.
    pub(crate) async fn next(&mut self) -> Result<Option<(String, String)>, SseError> {
        loop {
            if let Some(event) = self.take_event() {
                return Ok(Some(event));
            }
            let chunk = tokio::time::timeout_at(self.deadline, self.body.next())
                .await
                .map_err(|_| SseError::TooLong)?;
            match chunk {
                Some(chunk) => {
                    let chunk = chunk.map_err(SseError::Http)?;
                    self.read = self.read.saturating_add(chunk.len());
                    if self.read > MAX_BODY_BYTES {
                        return Err(SseError::TooLarge);
                    }
                    self.buf.extend_from_slice(&chunk);
                }
                None => {
                    // A last event without its blank line still counts.
                    if self.buf.iter().any(|b| !b.is_ascii_whitespace()) {
                        self.buf.extend_from_slice(b"\n\n");
                        continue;
                    }
                    return Ok(None);
                }
            }
        }
    }

    fn take_event(&mut self) -> Option<(String, String)> {
        loop {
            let (end, next) =
                find_blank_line(&self.buf, self.scanned.saturating_sub(3)).or_else(|| {
                    self.scanned = self.buf.len();
                    None
                })?;
            let raw = String::from_utf8_lossy(&self.buf[..end]).into_owned();
            self.buf.drain(..next);
            self.scanned = 0;
            let mut name = String::new();
            let mut data: Vec<&str> = Vec::new();
            for line in raw.split(['\n', '\r']) {
                if let Some(v) = line.strip_prefix("data:") {
                    data.push(v.strip_prefix(' ').unwrap_or(v));
                } else if let Some(v) = line.strip_prefix("event:") {
                    v.trim().clone_into(&mut name);
                }
            }
            if !data.is_empty() {
                return Some((name, data.join("\n")));
            }
        }
    }
}

/// Where the first event ends at or after `from`: (end of its text, start of the next).
/// Events end with a blank line: two line ends, each `\n`, `\r\n` or `\r`.
fn find_blank_line(b: &[u8], from: usize) -> Option<(usize, usize)> {
    let line_end = |i: usize| -> Option<usize> {
        match b.get(i)? {
            b'\n' => Some(i + 1),
            b'\r' if b.get(i + 1) == Some(&b'\n') => Some(i + 2),
            // A lone `\r` at the end of what arrived may be half of `\r\n`: wait.
            b'\r' if i + 1 < b.len() => Some(i + 1),
            _ => None,
        }
    };
    let mut i = from;
    while i < b.len() {
        if let Some(after) = line_end(i)
            && let Some(next) = line_end(after)
        {
            return Some((i, next));
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_come_from_the_body() {
        assert_eq!(
            error_message(r#"{"error": {"message": "Rate limit", "type": "x"}}"#),
            "Rate limit"
        );
        assert_eq!(
            error_message(r#"{"error": "model not found"}"#),
            "model not found"
        );
        assert_eq!(
            error_message("<html>\n Bad   gateway</html>"),
            "<html> Bad gateway</html>"
        );
        assert_eq!(error_message(""), "(empty body)");
        assert!(error_message(&"x".repeat(1000)).ends_with('…'));
    }

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(reqwest::header::RETRY_AFTER, "7".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        h.insert(
            reqwest::header::RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO), "a date in the past");
        h.insert(reqwest::header::RETRY_AFTER, "soon".parse().unwrap());
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn events_end_at_any_blank_line() {
        assert_eq!(find_blank_line(b"data: a\n\ndata: b", 0), Some((7, 9)));
        assert_eq!(find_blank_line(b"data: a\r\n\r\nx", 0), Some((7, 11)));
        assert_eq!(find_blank_line(b"data: a\r\rx", 0), Some((7, 9)));
        assert_eq!(
            find_blank_line(b"data: a\r", 0),
            None,
            "maybe half of \\r\\n"
        );
        assert_eq!(find_blank_line(b"data: a\n", 0), None);
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let t = Transport::new(Duration::from_secs(1), Duration::from_secs(1), 3).unwrap();
        let b0 = t.backoff(0);
        let b3 = t.backoff(3);
        assert!(b0 >= Duration::from_millis(500) && b0 <= Duration::from_millis(625));
        assert!(b3 >= Duration::from_secs(4) && b3 <= Duration::from_secs(5));
        assert!(t.backoff(30) <= Duration::from_millis(37_500));
    }
}
