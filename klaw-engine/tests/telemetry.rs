//! OpenTelemetry (issue 33): an agent's turn, its model requests and its tool calls as
//! nested spans with the GenAI attributes, a subagent in a trace of its own linked to
//! the call that started it — through the SDK's in-memory exporter; and the binary's
//! export over OTLP/HTTP (protobuf) to a receiver on loopback that decodes it, with an
//! MCP client's `traceparent` continued and a scheduled run's spans.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::path::Path;

use klaw_engine::llm::Model;
use klaw_engine::{App, Config};
use klaw_tools::Caller;
use opentelemetry::trace::{SpanId, SpanKind, Status, TracerProvider as _};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use prost::Message as _;
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

use crate::common;
use common::mcp_client::Mcp;
use common::scripted::{Reply, ScriptedServer};
use common::{engine_in, eventually};

/// The spans exported, kept in memory. (The SDK has one behind its `testing` feature,
/// whose other features would make the test build compile again much of what `make run`
/// built.)
#[derive(Debug, Clone, Default)]
struct Kept(std::sync::Arc<std::sync::Mutex<Vec<SpanData>>>);

impl SpanExporter for Kept {
    fn export(
        &self,
        batch: Vec<SpanData>,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(batch);
        std::future::ready(Ok(()))
    }
}

/// Spans collected in memory while the guard is held (this thread's subscriber: the
/// tests run on a current-thread runtime).
struct Collected {
    exporter: Kept,
    provider: SdkTracerProvider,
    _guard: tracing::subscriber::DefaultGuard,
}

fn collect() -> Collected {
    let exporter = Kept::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    // The engine's own layer, with the filter the exporter gets.
    let layer = klaw_engine::telemetry::layer(provider.tracer("test"));
    let guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
    Collected {
        exporter,
        provider,
        _guard: guard,
    }
}

impl Collected {
    fn spans(&self) -> Vec<SpanData> {
        let _ = self.provider.force_flush();
        self.exporter.0.lock().unwrap().clone()
    }
}

fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| s.name == name).collect()
}

/// An app on a temporary home whose model is `server` (OpenAI-compatible).
fn app(home: &Path, server: &ScriptedServer) -> App {
    std::fs::write(home.join("engine.json"), "{}").unwrap();
    let (home, base) = (home.to_owned(), format!("{}/v1", server.url));
    let env = move |name: &str| match name {
        "HOME" => Some(home.display().to_string()),
        "KLAW_CONFIG" => Some(home.join("engine.json").display().to_string()),
        "KLAW_LLM_BASE_URL" => Some(base.clone()),
        "KLAW_LLM_MODEL" => Some("test-model".to_owned()),
        "KLAW_LLM_API_KEY" => Some("sk-telemetry-test".to_owned()),
        _ => None,
    };
    let config = Config::load_with(&env).unwrap();
    let model = Model::from_config(&config, None).unwrap();
    App::assemble(config, Some(model)).unwrap()
}

#[tokio::test]
async fn a_turn_holds_its_model_requests_and_tool_calls_with_the_gen_ai_attributes() {
    let server = ScriptedServer::script(vec![
        Reply::openai_calls(&[
            ("c1", "current_time", json!({"timezone": "UTC"})),
            (
                "c2",
                "file_read",
                json!({"path": "sk-secret-file-name.txt"}),
            ),
        ]),
        Reply::openai_answer("It is noon."),
    ]);
    let home = tempfile::tempdir().unwrap();
    let app = app(home.path(), &server);
    let otel = collect();
    let answer = app
        .agent()
        .unwrap()
        .turn(
            "chat-1",
            Caller::new("console", Some("me".into())),
            "What time is it? my key is sk-secret-in-the-prompt",
            &(),
        )
        .await
        .unwrap();
    assert_eq!(answer, "It is noon.");
    let spans = otel.spans();
    let turns = named(&spans, "invoke_agent klaw");
    assert_eq!(turns.len(), 1, "{spans:#?}");
    let turn = turns[0];
    assert_eq!(
        turn.parent_span_id,
        SpanId::INVALID,
        "a turn starts a trace"
    );
    for (key, value) in [
        ("gen_ai.operation.name", "invoke_agent"),
        ("gen_ai.agent.name", "klaw"),
        ("gen_ai.conversation.id", "chat-1"),
        ("gen_ai.request.model", "test-model"),
        ("gen_ai.provider.name", "openai"),
        ("klaw.caller.channel", "console"),
        ("klaw.rounds", "2"),
        // The script's usage: 100 + 120 in, 10 + 5 out.
        ("gen_ai.usage.input_tokens", "220"),
        ("gen_ai.usage.output_tokens", "15"),
        ("klaw.output.bytes", "11"),
    ] {
        assert_eq!(attr(turn, key).as_deref(), Some(value), "{key}: {turn:#?}");
    }
    // Turn → model requests.
    let requests = named(&spans, "chat test-model");
    assert_eq!(requests.len(), 2, "{spans:#?}");
    for r in &requests {
        assert_eq!(r.parent_span_id, turn.span_context.span_id());
        assert_eq!(r.span_context.trace_id(), turn.span_context.trace_id());
        assert_eq!(r.span_kind, SpanKind::Client);
        assert_eq!(attr(r, "gen_ai.operation.name").as_deref(), Some("chat"));
        assert_eq!(attr(r, "gen_ai.provider.name").as_deref(), Some("openai"));
    }
    let first = requests
        .iter()
        .find(|r| attr(r, "klaw.round").as_deref() == Some("0"))
        .unwrap();
    assert_eq!(
        attr(first, "gen_ai.usage.input_tokens").as_deref(),
        Some("100")
    );
    assert_eq!(
        attr(first, "gen_ai.response.finish_reasons").as_deref(),
        Some("tool_calls")
    );
    // Turn → tool calls; the failed one carries an error status and its kind.
    let time = named(&spans, "execute_tool current_time");
    let read = named(&spans, "execute_tool file_read");
    assert_eq!((time.len(), read.len()), (1, 1), "{spans:#?}");
    for call in [time[0], read[0]] {
        assert_eq!(call.parent_span_id, turn.span_context.span_id());
        assert_eq!(
            attr(call, "gen_ai.operation.name").as_deref(),
            Some("execute_tool")
        );
    }
    assert_eq!(time[0].status, Status::Unset);
    assert_eq!(attr(time[0], "klaw.outcome").as_deref(), Some("ok"));
    assert!(
        matches!(read[0].status, Status::Error { .. }),
        "{:#?}",
        read[0]
    );
    assert_eq!(attr(read[0], "error.type").as_deref(), Some("not_found"));
    // No text of the conversation, no argument, in any span.
    let all = format!("{spans:?}");
    for secret in [
        "sk-secret-in-the-prompt",
        "sk-secret-file-name",
        "It is noon",
    ] {
        assert!(!all.contains(secret), "{secret} is in a span: {all}");
    }
    app.shutdown().await;
}

#[tokio::test]
async fn a_failed_model_request_marks_the_request_and_the_turn_as_errors() {
    let server = ScriptedServer::script(vec![Reply::status(
        400,
        r#"{"error": {"message": "bad request"}}"#,
    )]);
    let home = tempfile::tempdir().unwrap();
    let app = app(home.path(), &server);
    let otel = collect();
    let failed = app
        .agent()
        .unwrap()
        .turn("chat-2", Caller::new("console", None), "hi", &())
        .await;
    assert!(failed.is_err());
    let spans = otel.spans();
    for name in ["invoke_agent klaw", "chat test-model"] {
        let span = named(&spans, name)[0];
        assert!(matches!(span.status, Status::Error { .. }), "{span:#?}");
        assert_eq!(
            attr(span, "error.type").as_deref(),
            Some("400"),
            "{span:#?}"
        );
    }
    app.shutdown().await;
}

#[tokio::test]
async fn a_subagent_runs_in_its_own_trace_linked_to_the_call_that_started_it() {
    let server = ScriptedServer::respond(|r| {
        let subagent = r.body.to_string().contains("Summarise the notes");
        let first = !r.body.to_string().contains("\"tool\"");
        if !subagent && first {
            Reply::openai_calls(&[(
                "s1",
                "subagent_spawn",
                json!({"name": "digest", "message": "Summarise the notes"}),
            )])
        } else {
            Reply::openai_answer("{\"silent\": true}")
        }
    });
    let home = tempfile::tempdir().unwrap();
    let app = app(home.path(), &server);
    let otel = collect();
    app.agent()
        .unwrap()
        .turn(
            "chat-3",
            Caller::new("console", None),
            "Digest my notes",
            &(),
        )
        .await
        .unwrap();
    // The subagent runs on this thread's runtime: give it turns until it ends.
    let mut spans = Vec::new();
    for _ in 0..600 {
        spans = otel.spans();
        if !named(&spans, "subagent digest").is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let sub = named(&spans, "subagent digest");
    assert_eq!(sub.len(), 1, "{spans:#?}");
    let sub = sub[0];
    let spawn = named(&spans, "execute_tool subagent_spawn")[0];
    assert_eq!(sub.parent_span_id, SpanId::INVALID, "a trace of its own");
    assert_ne!(sub.span_context.trace_id(), spawn.span_context.trace_id());
    let links: Vec<_> = sub.links.iter().map(|l| l.span_context.clone()).collect();
    assert_eq!(links, vec![spawn.span_context.clone()], "{sub:#?}");
    assert_eq!(attr(sub, "klaw.subagent.name").as_deref(), Some("digest"));
    // Its turn is inside it.
    let turn = named(&spans, "invoke_agent klaw")
        .into_iter()
        .find(|t| t.parent_span_id == sub.span_context.span_id())
        .unwrap_or_else(|| panic!("no turn in the subagent's span: {spans:#?}"));
    // Its own history, kept across spawns of its name.
    assert_eq!(
        attr(turn, "gen_ai.conversation.id").as_deref(),
        Some("subagent:digest")
    );
    app.shutdown().await;
}

/// The spans a receiver was sent, decoded, with the resource's `service.name` of each.
fn exported(
    receiver: &ScriptedServer,
) -> Vec<(String, opentelemetry_proto::tonic::trace::v1::Span)> {
    let mut out = Vec::new();
    for r in receiver.requests() {
        assert_eq!(r.path, "/v1/traces");
        assert_eq!(r.header("content-type"), Some("application/x-protobuf"));
        let request = ExportTraceServiceRequest::decode(r.raw.as_slice()).unwrap();
        for rs in request.resource_spans {
            let service = rs
                .resource
                .as_ref()
                .and_then(|res| string_attr(&res.attributes, "service.name"))
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for span in ss.spans {
                    out.push((service.clone(), span));
                }
            }
        }
    }
    out
}

fn string_attr(attrs: &[KeyValue], key: &str) -> Option<String> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            AnyValue::StringValue(s) => Some(s.clone()),
            AnyValue::IntValue(i) => Some(i.to_string()),
            AnyValue::BoolValue(b) => Some(b.to_string()),
            other => Some(format!("{other:?}")),
        }
    })
}

/// The OTLP receiver: 200 to every export (its requests are kept).
fn receiver() -> ScriptedServer {
    ScriptedServer::respond(|_| Reply::status(200, ""))
}

#[test]
fn an_mcp_clients_traceparent_is_continued_and_the_spans_reach_an_otlp_receiver() {
    let receiver = receiver();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = engine_in(home.path(), &["mcp"]);
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)
        .env("OTEL_SERVICE_NAME", "klaw-under-test");
    let mut mcp = Mcp::start(cmd);
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let answer = mcp.request(
        "tools/call",
        json!({
            "name": "current_time",
            "arguments": {"timezone": "UTC"},
            "_meta": {"traceparent": format!("00-{trace}-{parent}-01")},
        }),
    );
    assert!(answer["result"]["isError"] != json!(true), "{answer}");
    let unknown = mcp.request(
        "tools/call",
        json!({"name": "no_such_tool", "arguments": {}}),
    );
    assert!(unknown["error"].is_object(), "{unknown}");
    // The engine exports what is left as it exits.
    assert!(mcp.finish().success());
    let spans = exported(&receiver);
    let find = |name: &str| {
        spans
            .iter()
            .find(|(_, s)| s.name == name)
            .unwrap_or_else(|| panic!("no span {name}: {spans:#?}"))
    };
    let (service, call) = find("tools/call current_time");
    assert_eq!(service, "klaw-under-test");
    assert_eq!(hex(&call.trace_id), trace, "the client's trace goes on");
    assert_eq!(hex(&call.parent_span_id), parent);
    assert_eq!(call.kind, 2, "SPAN_KIND_SERVER");
    assert_eq!(
        string_attr(&call.attributes, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(
        string_attr(&call.attributes, "gen_ai.tool.name").as_deref(),
        Some("current_time")
    );
    let (_, inner) = find("execute_tool current_time");
    assert_eq!(inner.parent_span_id, call.span_id);
    assert_eq!(inner.trace_id, call.trace_id);
    assert_eq!(
        string_attr(&inner.attributes, "klaw.caller.channel").as_deref(),
        Some("mcp")
    );
    let (_, failed) = find("tools/call no_such_tool");
    assert_ne!(
        hex(&failed.trace_id),
        trace,
        "no traceparent: a trace of its own"
    );
    assert!(failed.parent_span_id.is_empty());
    assert_eq!(
        failed.status.as_ref().map(|s| s.code),
        Some(2),
        "STATUS_CODE_ERROR"
    );
    assert_eq!(
        string_attr(&failed.attributes, "error.type").as_deref(),
        Some("unknown_tool")
    );
}

#[test]
fn nothing_is_sent_when_telemetry_is_off() {
    let receiver = receiver();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("engine.json"),
        r#"{"telemetry": {"enabled": false}}"#,
    )
    .unwrap();
    let mut cmd = engine_in(
        home.path(),
        &["call", "current_time", r#"{"timezone":"UTC"}"#],
    );
    cmd.env("KLAW_CONFIG", home.path().join("engine.json"))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url);
    assert!(cmd.output().unwrap().status.success());
    // The same call exported, to show the receiver would have seen it.
    let mut cmd = engine_in(
        home.path(),
        &["call", "current_time", r#"{"timezone":"UTC"}"#],
    );
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url);
    assert!(cmd.output().unwrap().status.success());
    let spans = exported(&receiver);
    assert_eq!(spans.len(), 1, "{spans:#?}");
    assert_eq!(spans[0].1.name, "execute_tool current_time");
}

#[test]
fn a_collector_that_cannot_be_reached_or_fails_costs_the_call_nothing() {
    let failing = ScriptedServer::respond(|_| Reply::status(503, "down"));
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    for endpoint in [closed_url, failing.url.clone()] {
        let home = tempfile::tempdir().unwrap();
        let mut cmd = engine_in(
            home.path(),
            &["call", "current_time", r#"{"timezone":"UTC"}"#],
        );
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint);
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{endpoint}: {}", common::stderr(&o));
        assert!(common::stdout(&o).contains("UTC"), "{}", common::stdout(&o));
    }
    assert!(!failing.requests().is_empty(), "the export was tried");
}

#[test]
fn a_scheduled_run_is_a_trace_with_its_turn_and_requests_inside() {
    let model = ScriptedServer::script(vec![Reply::openai_answer("{\"silent\": true}")]);
    let receiver = receiver();
    let home = tempfile::tempdir().unwrap();
    let with_model = |args: &[&str]| {
        let mut cmd = engine_in(home.path(), args);
        cmd.env("KLAW_LLM_BASE_URL", format!("{}/v1", model.url))
            .env("KLAW_LLM_MODEL", "test-model")
            .env("KLAW_LLM_API_KEY", "sk-telemetry-test");
        cmd
    };
    let mut add = with_model(&["schedule", "add", "digest", "0 9 * * *", "Digest the day"]);
    add.env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url);
    let added = add.output().unwrap();
    assert!(added.status.success(), "{}", common::stderr(&added));
    let adding = exported(&receiver)
        .into_iter()
        .find(|(_, s)| s.name == "execute_tool schedule_add")
        .unwrap_or_else(|| panic!("{:#?}", exported(&receiver)))
        .1;
    let mut cmd = with_model(&["schedule", "run-now", "digest"]);
    cmd.env(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        format!("{}/v1/traces", receiver.url),
    );
    let ran = cmd.output().unwrap();
    assert!(ran.status.success(), "{}", common::stderr(&ran));
    assert!(eventually(10, || !receiver.requests().is_empty()));
    let spans = exported(&receiver);
    let find = |name: &str| {
        &spans
            .iter()
            .find(|(_, s)| s.name == name)
            .unwrap_or_else(|| panic!("no span {name}: {spans:#?}"))
            .1
    };
    let run = find("scheduled_run digest");
    assert!(run.parent_span_id.is_empty(), "a trace of its own");
    // Linked to the call that added the job, in another process, earlier.
    let links: Vec<(String, String)> = run
        .links
        .iter()
        .map(|l| (hex(&l.trace_id), hex(&l.span_id)))
        .collect();
    assert_eq!(
        links,
        vec![(hex(&adding.trace_id), hex(&adding.span_id))],
        "{run:#?}"
    );
    assert_eq!(
        string_attr(&run.attributes, "klaw.job.name").as_deref(),
        Some("digest")
    );
    let turn = find("invoke_agent klaw");
    assert_eq!(turn.parent_span_id, run.span_id);
    let request = find("chat test-model");
    assert_eq!(request.parent_span_id, turn.span_id);
    assert_eq!(request.trace_id, run.trace_id);
    // The model server was told the request's span (W3C traceparent), so a server that
    // traces joins the run's trace.
    let asked = model.requests();
    let traceparent = asked[0].header("traceparent").unwrap();
    assert_eq!(
        traceparent,
        format!("00-{}-{}-01", hex(&request.trace_id), hex(&request.span_id))
    );
}

#[test]
fn an_imported_mcp_server_is_passed_the_calls_trace() {
    let Some(py) = common::test_python() else {
        eprintln!("skipped: the test venv (scripts/setup-test-tools.sh) is not installed");
        return;
    };
    let receiver = receiver();
    let home = tempfile::tempdir().unwrap();
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/imports/server.py");
    let config = json!({"mcpServers": {"py": {"command": py, "args": [server]}}});
    std::fs::write(home.path().join("engine.json"), config.to_string()).unwrap();
    let mut cmd = engine_in(home.path(), &["call", "py__trace", "{}"]);
    cmd.env("KLAW_CONFIG", home.path().join("engine.json"))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url);
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let seen = common::stdout(&o).trim().to_owned();
    let spans = exported(&receiver);
    let call = &spans
        .iter()
        .find(|(_, s)| s.name == "execute_tool py__trace")
        .unwrap_or_else(|| panic!("{spans:#?}"))
        .1;
    assert_eq!(
        seen,
        format!("00-{}-{}-01", hex(&call.trace_id), hex(&call.span_id)),
        "the server got the call's span as its parent"
    );
    // Without telemetry, nothing is passed on.
    let mut cmd = engine_in(home.path(), &["call", "py__trace", "{}"]);
    cmd.env("KLAW_CONFIG", home.path().join("engine.json"));
    let o = cmd.output().unwrap();
    assert_eq!(common::stdout(&o).trim(), "none", "{}", common::stderr(&o));
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
