//! The LLM clients against scripted servers on loopback (real HTTP): the OpenAI and
//! Anthropic wire formats, streaming, parallel and malformed tool calls, retries on 429
//! and 5xx honouring `Retry-After`, clear errors that never show the API key.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::sync::{Arc, Mutex};
use std::time::Duration;

use klaw_engine::Secret;
use klaw_engine::llm::anthropic::AnthropicClient;
use klaw_engine::llm::openai::OpenAiClient;
use klaw_engine::llm::{
    Arguments, ChatRequest, LlmClient, LlmError, Message, StopReason, ToolChoice, Transport,
};
use klaw_tools::ToolSpec;
use serde_json::json;

use crate::common;
use common::scripted::{Reply, ScriptedServer};

const KEY: &str = "sk-test-secret-0123456789";

fn transport(retries: u32) -> Transport {
    Transport::new(Duration::from_secs(10), Duration::from_secs(2), retries)
        .unwrap()
        .with_backoff(Duration::from_millis(10))
}

fn openai(server: &ScriptedServer, retries: u32) -> OpenAiClient {
    OpenAiClient::new(
        &format!("{}/v1", server.url),
        Some(Secret::new(KEY)),
        transport(retries),
    )
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "test-model".into(),
        system: "You are a test.".into(),
        messages: vec![Message::User("What time is it?".into())],
        tools: vec![ToolSpec::new(
            "current_time",
            "Текущее время",
            json!({"type": "object", "properties": {"timezone": {"type": "string"}}}),
        )],
        ..ChatRequest::default()
    }
}

fn tool_call_reply() -> Reply {
    Reply::json(json!({
        "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "current_time", "arguments": "{\"timezone\":\"UTC\"}"}},
            {"id": "call_b", "function": {"name": "current_time", "arguments": {"timezone": "Europe/Moscow"}}},
            {"id": "call_c", "type": "function", "function": {"name": "current_time", "arguments": "{\"timezone\": "}},
        ]}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 31, "completion_tokens": 12},
    }))
}

#[tokio::test]
async fn openai_parallel_lenient_and_malformed_tool_calls() {
    let server = ScriptedServer::script(vec![tool_call_reply()]);
    let r = openai(&server, 0).chat(&request(), None).await.unwrap();
    assert_eq!(r.stop, StopReason::ToolCalls);
    assert_eq!(r.usage.input_tokens, 31);
    let calls = &r.message.tool_calls;
    assert_eq!(calls.len(), 3);
    assert_eq!(
        calls[0].arguments,
        Arguments::Json(json!({"timezone": "UTC"}))
    );
    assert_eq!(
        calls[1].arguments,
        Arguments::Json(json!({"timezone": "Europe/Moscow"}))
    );
    assert!(
        matches!(&calls[2].arguments, Arguments::Malformed { raw, .. } if raw == "{\"timezone\": ")
    );

    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(sent.body["model"], "test-model");
    assert_eq!(sent.body["messages"][0]["role"], "system");
    assert_eq!(sent.body["tools"][0]["function"]["name"], "current_time");
    assert_eq!(sent.body["tool_choice"], "auto");
}

#[tokio::test]
async fn openai_streams_text_and_tool_calls() {
    let server = ScriptedServer::script(vec![Reply::openai_sse([
        json!({"choices": [{"delta": {"role": "assistant", "content": null}}]}),
        json!({"choices": [{"delta": {"content": "Checking"}}]}),
        json!({"choices": [{"delta": {"content": " the clock."}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "current_time", "arguments": ""}}]}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"timezone\":"}}]}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "\"UTC\"}"}}]}}]}),
        json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
        json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 9}}),
    ])]);
    let pieces = Arc::new(Mutex::new(Vec::<String>::new()));
    let p = Arc::clone(&pieces);
    let on_text = move |s: &str| p.lock().unwrap().push(s.to_owned());
    let r = openai(&server, 0)
        .chat(&request(), Some(&on_text))
        .await
        .unwrap();
    assert_eq!(*pieces.lock().unwrap(), ["Checking", " the clock."]);
    assert_eq!(r.message.text, "Checking the clock.");
    assert_eq!(
        r.message.tool_calls[0].arguments,
        Arguments::Json(json!({"timezone": "UTC"}))
    );
    assert_eq!(r.usage.output_tokens, 9);
    let sent = &server.requests()[0];
    assert_eq!(sent.body["stream"], true);
    assert_eq!(sent.body["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn a_server_that_ignores_stream_still_works() {
    let server = ScriptedServer::script(vec![Reply::json(json!({
        "choices": [{"message": {"content": "It is noon."}, "finish_reason": "stop"}],
    }))]);
    let seen = Arc::new(Mutex::new(String::new()));
    let s = Arc::clone(&seen);
    let on_text = move |t: &str| s.lock().unwrap().push_str(t);
    let r = openai(&server, 0)
        .chat(&request(), Some(&on_text))
        .await
        .unwrap();
    assert_eq!(r.message.text, "It is noon.");
    assert_eq!(*seen.lock().unwrap(), "It is noon.");
    assert_eq!(r.stop, StopReason::EndTurn);
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried() {
    let server = ScriptedServer::script(vec![
        Reply::status(429, r#"{"error": {"message": "Rate limit reached"}}"#)
            .with_header("retry-after", "0"),
        Reply::status(503, "upstream down"),
        tool_call_reply(),
    ]);
    let r = openai(&server, 3).chat(&request(), None).await.unwrap();
    assert_eq!(r.message.tool_calls.len(), 3);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn errors_name_the_url_and_status_and_never_the_key() {
    // Retries run out.
    let server = ScriptedServer::script(vec![
        Reply::status(500, "boom"),
        Reply::status(500, "boom"),
        Reply::status(500, r#"{"error": {"message": "still broken"}}"#),
    ]);
    let e = openai(&server, 2).chat(&request(), None).await.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, LlmError::Status { status: 500, .. }), "{e:?}");
    assert!(
        text.contains(&format!("{}/v1/chat/completions", server.url))
            && text.contains("still broken"),
        "{text}"
    );
    assert_eq!(server.requests().len(), 3);

    // A client error is not retried; the provider's message is kept.
    let server = ScriptedServer::script(vec![Reply::status(
        401,
        r#"{"error": {"message": "Incorrect API key provided"}}"#,
    )]);
    let e = openai(&server, 3).chat(&request(), None).await.unwrap_err();
    assert_eq!(server.requests().len(), 1);
    let text = e.to_string();
    assert!(
        text.contains("401") && text.contains("Incorrect API key provided"),
        "{text}"
    );
    assert!(
        !text.contains(KEY) && !format!("{e:?}").contains(KEY),
        "{e:?}"
    );

    // A Retry-After longer than a minute is not waited for.
    let server = ScriptedServer::script(vec![
        Reply::status(429, "slow down").with_header("retry-after", "3600"),
    ]);
    let e = openai(&server, 3).chat(&request(), None).await.unwrap_err();
    assert!(e.to_string().contains("429"), "{e}");
    assert_eq!(server.requests().len(), 1);

    // Nobody listening.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = OpenAiClient::new(
        &format!("http://127.0.0.1:{port}/v1"),
        Some(Secret::new(KEY)),
        transport(1),
    );
    let e = client.chat(&request(), None).await.unwrap_err();
    assert!(matches!(e, LlmError::Connect { .. }), "{e:?}");
    assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
    assert!(!format!("{client:?}").contains(KEY), "{client:?}");

    // Not JSON.
    let server = ScriptedServer::script(vec![Reply::status(200, "<html>proxy login</html>")]);
    let e = openai(&server, 0).chat(&request(), None).await.unwrap_err();
    assert!(
        matches!(e, LlmError::Decode { .. }) && e.to_string().contains("proxy login"),
        "{e}"
    );
}

#[tokio::test]
async fn tool_choice_and_response_schema_go_out_as_openai_wants() {
    let server = ScriptedServer::script(vec![Reply::json(json!({
        "choices": [{"message": {"content": "{\"answer\": \"noon\"}"}, "finish_reason": "stop"}],
    }))]);
    let mut req = request();
    req.tool_choice = ToolChoice::Tool("current_time".into());
    req.response_schema = Some(json!({"type": "object"}));
    req.max_tokens = Some(64);
    openai(&server, 0).chat(&req, None).await.unwrap();
    let b = &server.requests()[0].body;
    assert_eq!(
        b["tool_choice"],
        json!({"type": "function", "function": {"name": "current_time"}})
    );
    assert_eq!(b["response_format"]["type"], "json_schema");
    assert_eq!(
        b["response_format"]["json_schema"]["schema"],
        json!({"type": "object"})
    );
    assert_eq!(b["max_tokens"], 64);
}

fn anthropic(server: &ScriptedServer) -> AnthropicClient {
    AnthropicClient::new(&server.url, Some(Secret::new(KEY)), transport(1))
}

#[tokio::test]
async fn anthropic_tool_use_and_headers() {
    let server = ScriptedServer::script(vec![Reply::json(json!({
        "id": "msg_1", "type": "message", "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "current_time", "input": {"timezone": "UTC"}},
            {"type": "tool_use", "id": "toolu_2", "name": "current_time", "input": {}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 40, "output_tokens": 22},
    }))]);
    let r = anthropic(&server).chat(&request(), None).await.unwrap();
    assert_eq!(r.message.text, "Let me look.");
    assert_eq!(r.message.tool_calls.len(), 2);
    assert_eq!(r.stop, StopReason::ToolCalls);
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some(KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert!(sent.header("authorization").is_none());
    assert_eq!(sent.body["system"], "You are a test.");
    assert_eq!(sent.body["tools"][0]["input_schema"]["type"], "object");
    assert_eq!(sent.body["tool_choice"], json!({"type": "auto"}));
}

#[tokio::test]
async fn anthropic_streams_and_reports_errors() {
    let server = ScriptedServer::script(vec![
        Reply::sse([
            (
                "message_start",
                json!({"type": "message_start", "message": {"usage": {"input_tokens": 8}}}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Noon"}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            ("ping", json!({"type": "ping"})),
            (
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ]),
        Reply::sse([(
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        )]),
    ]);
    let seen = Arc::new(Mutex::new(String::new()));
    let s = Arc::clone(&seen);
    let on_text = move |t: &str| s.lock().unwrap().push_str(t);
    let r = anthropic(&server)
        .chat(&request(), Some(&on_text))
        .await
        .unwrap();
    assert_eq!(
        (r.message.text.as_str(), seen.lock().unwrap().as_str()),
        ("Noon", "Noon")
    );
    assert_eq!(r.stop, StopReason::EndTurn);
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (8, 3));
    let e = anthropic(&server)
        .chat(&request(), Some(&on_text))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("Overloaded"), "{e}");
}

/// A stream that ends before the answer does is an error, not half an answer.
#[tokio::test]
async fn a_cut_stream_is_an_error() {
    let cut = Reply::sse([("", json!({"choices": [{"delta": {"content": "Half an"}}]}))]);
    let server = ScriptedServer::script(vec![cut]);
    let on_text = |_: &str| {};
    let e = openai(&server, 0)
        .chat(&request(), Some(&on_text))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("ended before the answer"), "{e}");

    let server = ScriptedServer::script(vec![Reply::sse([(
        "message_start",
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
    )])]);
    let e = anthropic(&server)
        .chat(&request(), Some(&on_text))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("message_stop"), "{e}");
}

/// A model server that redirects elsewhere: reqwest followed up to ten redirects to any
/// host, re-sending the conversation with 307 and 308 (and the Anthropic key, which it
/// does not strip). Now a redirect to another origin (here: another port of loopback,
/// a second real server) is not followed, by either client, for any status, and not
/// retried; the error names the status and where it pointed. A redirect within the
/// same origin is still followed.
#[tokio::test]
async fn redirects_to_another_origin_are_not_followed() {
    for status in [307, 308, 302, 301] {
        let elsewhere = ScriptedServer::script(vec![Reply::openai_answer("taken")]);
        let target = elsewhere.url.clone();
        let origin = ScriptedServer::respond(move |req| {
            Reply::status(status, "").with_header("location", &format!("{target}{}", req.path))
        });
        let openai = openai(&origin, 3).chat(&request(), None).await;
        let anthropic = anthropic(&origin).chat(&request(), None).await;
        let reached: Vec<_> = elsewhere
            .requests()
            .iter()
            .map(|r| {
                (
                    r.path.clone(),
                    r.header("x-api-key").map(str::to_owned),
                    r.body.clone(),
                )
            })
            .collect();
        assert!(
            reached.is_empty(),
            "{status}: the second server was sent {reached:?}"
        );
        for (which, r) in [("openai", openai), ("anthropic", anthropic)] {
            let e = r.unwrap_err();
            let text = e.to_string();
            assert!(
                matches!(e, LlmError::Status { status: s, .. } if s == status),
                "{which} {status}: {e:?}"
            );
            assert!(
                text.contains("another origin") && text.contains(&elsewhere.url),
                "{which} {status}: {text}"
            );
            assert!(!text.contains(KEY), "{text}");
        }
        // Once per client: a redirect is not retried.
        assert_eq!(origin.requests().len(), 2, "{status}");
    }
    // Within the origin (a relative `Location`), the request goes on with its body.
    let server = ScriptedServer::respond(|req| match req.path.as_str() {
        "/v1/chat/completions" => Reply::status(308, "").with_header("location", "/v2/chat"),
        _ => Reply::openai_answer("moved"),
    });
    let r = openai(&server, 0).chat(&request(), None).await.unwrap();
    assert_eq!(r.message.text, "moved");
    let sent = server.requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1].path, "/v2/chat");
    assert_eq!(sent[1].body["messages"], sent[0].body["messages"]);
}
