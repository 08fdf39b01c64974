//! A scripted model server: real HTTP on 127.0.0.1 (axum on a thread of its own), which
//! answers each request with the next reply of a script (or of a function of the
//! request) and records what it was sent. It stands in for a paid LLM API only: the
//! clients under test speak real HTTP to it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{HeaderMap, Response, StatusCode};
use serde_json::{Value, json};

/// One request as the server received it.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) path: String,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Value,
    /// The body as it came (a protobuf export, for the OTLP receiver).
    #[allow(dead_code)] // read by some test binaries only
    pub(crate) raw: Vec<u8>,
}

impl Recorded {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    content_type: &'static str,
    body: String,
}

impl Reply {
    /// 200 with a JSON body.
    pub(crate) fn json(v: Value) -> Self {
        Self {
            status: 200,
            headers: Vec::new(),
            content_type: "application/json",
            body: v.to_string(),
        }
    }

    /// 200 with server-sent events, one `data:` each (with `event:` when named).
    pub(crate) fn sse<'a>(events: impl IntoIterator<Item = (&'a str, Value)>) -> Self {
        let mut body = String::new();
        for (name, data) in events {
            if !name.is_empty() {
                body.push_str(&format!("event: {name}\n"));
            }
            body.push_str(&format!("data: {data}\n\n"));
        }
        Self {
            status: 200,
            headers: Vec::new(),
            content_type: "text/event-stream",
            body,
        }
    }

    /// OpenAI's stream end (`data: [DONE]`) after `events`.
    pub(crate) fn openai_sse(chunks: impl IntoIterator<Item = Value>) -> Self {
        let mut r = Self::sse(chunks.into_iter().map(|c| ("", c)));
        r.body.push_str("data: [DONE]\n\n");
        r
    }

    /// An OpenAI-compatible reply that calls tools: `(id, name, arguments)`, the
    /// arguments as JSON text (a JSON string is used as that text, any other value is
    /// written out).
    pub(crate) fn openai_calls(calls: &[(&str, &str, Value)]) -> Self {
        let calls: Vec<Value> = calls
            .iter()
            .map(|(id, name, args)| {
                let text = match args {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": text}})
            })
            .collect();
        Self::json(json!({
            "choices": [{"message": {"role": "assistant", "content": "", "tool_calls": calls}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10},
        }))
    }

    /// An OpenAI-compatible reply that answers `text`.
    pub(crate) fn openai_answer(text: &str) -> Self {
        Self::json(json!({
            "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 5},
        }))
    }

    /// `status` with a body.
    pub(crate) fn status(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: Vec::new(),
            content_type: "application/json",
            body: body.to_owned(),
        }
    }

    /// The same reply with a header.
    pub(crate) fn with_header(mut self, k: &str, v: &str) -> Self {
        self.headers.push((k.to_owned(), v.to_owned()));
        self
    }
}

type Responder = Box<dyn FnMut(&Recorded) -> Reply + Send>;

/// The running server; stops when dropped.
pub(crate) struct ScriptedServer {
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    /// Nanoseconds spent in the handler, answering (for benchmarks).
    busy: Arc<std::sync::atomic::AtomicU64>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ScriptedServer {
    /// Answers the requests with `replies` in order (then 500 "script exhausted").
    pub(crate) fn script(replies: Vec<Reply>) -> Self {
        let mut queue: VecDeque<Reply> = replies.into();
        Self::respond(move |_| {
            queue.pop_front().unwrap_or_else(|| {
                Reply::status(500, r#"{"error": {"message": "script exhausted"}}"#)
            })
        })
    }

    /// Answers each request with `f(request)`.
    pub(crate) fn respond(f: impl FnMut(&Recorded) -> Reply + Send + 'static) -> Self {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let responder: Arc<Mutex<Responder>> = Arc::new(Mutex::new(Box::new(f)));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let recorded = Arc::clone(&requests);
        let busy = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let spent = Arc::clone(&busy);
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let app = axum::Router::new().fallback(
                    move |uri: axum::http::Uri, headers: HeaderMap, body: axum::body::Bytes| {
                        let recorded = Arc::clone(&recorded);
                        let responder = Arc::clone(&responder);
                        let spent = Arc::clone(&spent);
                        async move {
                            let started = std::time::Instant::now();
                            let req = Recorded {
                                path: uri.path().to_owned(),
                                headers,
                                body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                                raw: body.to_vec(),
                            };
                            let reply = (responder.lock().unwrap())(&req);
                            recorded.lock().unwrap().push(req);
                            let mut r = Response::builder()
                                .status(StatusCode::from_u16(reply.status).unwrap())
                                .header("content-type", reply.content_type);
                            for (k, v) in &reply.headers {
                                r = r.header(k.as_str(), v.as_str());
                            }
                            let response = r.body(Body::from(reply.body)).unwrap();
                            let nanos =
                                u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
                            spent.fetch_add(nanos, std::sync::atomic::Ordering::Relaxed);
                            response
                        }
                    },
                );
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
            });
        });
        Self {
            url,
            requests,
            busy,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The time the server spent answering, in all.
    pub(crate) fn busy(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.busy.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// What the server was sent so far.
    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
