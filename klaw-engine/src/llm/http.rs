//! What both clients share: one `reqwest` client (rustls with the ring provider),
//! timeouts, retries with backoff on 429, 5xx and connection errors (honouring
//! `Retry-After`), errors that name the URL and the status, and an SSE reader.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;

use super::LlmError;

/// The longest wait a `Retry-After` may ask for; a server that wants more gets its error
/// reported instead.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

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
        body: &Value,
        streamed: bool,
    ) -> Result<reqwest::Response, LlmError> {
        let mut attempt = 0;
        loop {
            let mut request = self.client.post(url).json(body);
            if !streamed {
                request = request.timeout(self.timeout);
            }
            for (k, v) in headers {
                request = request.header(*k, *v);
            }
            let failure = match request.send().await {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => {
                    let status = response.status();
                    let wait = retry_after(response.headers());
                    let message = error_message(&response.text().await.unwrap_or_default());
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
        body: &Value,
    ) -> Result<Value, LlmError> {
        let response = self.post(url, headers, body, false).await?;
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.transport_error(url, &e))?;
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

    pub(crate) fn transport_error(&self, url: &str, e: &reqwest::Error) -> LlmError {
        if e.is_timeout() {
            return LlmError::Timeout {
                url: url.to_owned(),
                after: self.timeout,
            };
        }
        // The innermost cause says what happened (refused, DNS, TLS); reqwest's own
        // text repeats the URL.
        let mut source: &dyn std::error::Error = e;
        while let Some(inner) = source.source() {
            source = inner;
        }
        LlmError::Connect {
            url: url.to_owned(),
            message: source.to_string(),
        }
    }
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
/// `data:` lines joined.
pub(crate) struct Sse {
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buf: Vec<u8>,
}

impl Sse {
    pub(crate) fn new(response: reqwest::Response) -> Self {
        Self {
            body: response.bytes_stream().boxed(),
            buf: Vec::new(),
        }
    }

    /// The next event, `None` at the end of the stream.
    pub(crate) async fn next(&mut self) -> Result<Option<(String, String)>, reqwest::Error> {
        loop {
            if let Some(event) = self.take_event() {
                return Ok(Some(event));
            }
            match self.body.next().await {
                Some(chunk) => self.buf.extend_from_slice(&chunk?),
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
            let text = &self.buf;
            let end = find_blank_line(text)?;
            let raw = String::from_utf8_lossy(&text[..end.0]).into_owned();
            self.buf.drain(..end.1);
            let mut name = String::new();
            let mut data: Vec<&str> = Vec::new();
            for line in raw.lines() {
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

/// Where the first event ends: (end of its text, start of the next).
fn find_blank_line(b: &[u8]) -> Option<(usize, usize)> {
    for i in 0..b.len() {
        if b[i..].starts_with(b"\n\n") {
            return Some((i, i + 2));
        }
        if b[i..].starts_with(b"\r\n\r\n") {
            return Some((i, i + 4));
        }
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
    fn backoff_doubles_and_is_capped() {
        let t = Transport::new(Duration::from_secs(1), Duration::from_secs(1), 3).unwrap();
        let b0 = t.backoff(0);
        let b3 = t.backoff(3);
        assert!(b0 >= Duration::from_millis(500) && b0 <= Duration::from_millis(625));
        assert!(b3 >= Duration::from_secs(4) && b3 <= Duration::from_secs(5));
        assert!(t.backoff(30) <= Duration::from_millis(37_500));
    }
}
