//! `ToolRegistry::execute`: validation, dispatch and every failure path, through tools
//! defined with `#[tool]` exactly as users write them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::sync::{Arc, Mutex};
use std::time::Duration;

use klaw_tools::testing::Kit;
use klaw_tools::{
    ErrorKind, FnTool, State, ToolContext, ToolError, ToolEvent, ToolOutput, ToolRegistry,
    ToolSchema, ToolSpec, tool,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[tool(name = "echo3", description_ru = "Повторяет три аргумента", read_only)]
async fn echo3(
    /// Текст
    text: String,
    /// Число
    count: i64,
    /// Флаг
    loud: Option<bool>,
) -> Result<String, ToolError> {
    let s = format!("{text}:{count}:{}", loud.unwrap_or(false));
    Ok(if loud == Some(true) {
        s.to_uppercase()
    } else {
        s
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToolSchema)]
#[serde(rename_all = "lowercase")]
enum Mode {
    /// Оба способа
    Hybrid,
    /// Только текст
    Text,
}

#[derive(Debug, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
struct Found {
    /// Сколько
    top_k: u32,
    /// Как
    mode: Mode,
    /// Что
    query: String,
}

#[tool(
    name = "search_like",
    description_ru = "Поиск с умолчаниями",
    rename_all = "camelCase",
    idempotent
)]
async fn search_like(
    query: String,
    #[arg(default = 10)] top_k: u32,
    #[arg(default = Mode::Hybrid)] mode: Mode,
) -> Result<Found, ToolError> {
    Ok(Found { top_k, mode, query })
}

#[tool(name = "send_like", description_ru = "Отправляет сообщение")]
async fn send_like(
    #[arg(rename = "chatId", alias = "chat_id", alias = "chat")] chat_id: String,
    text: String,
) -> Result<String, ToolError> {
    Ok(format!("{chat_id} <- {text}"))
}

#[tool(
    name = "sleepy",
    description_ru = "Спит слишком долго",
    timeout = "50ms"
)]
async fn sleepy() -> Result<String, ToolError> {
    tokio::time::sleep(Duration::from_secs(3600)).await;
    Ok("woke".into())
}

#[tool(name = "panicky", description_ru = "Падает с паникой")]
async fn panicky(index: usize) -> Result<String, ToolError> {
    let v: Vec<u8> = Vec::new();
    Ok(v[index].to_string())
}

struct Counter(Mutex<u32>);

#[tool(name = "count_up", description_ru = "Увеличивает счётчик из сервиса")]
async fn count_up(counter: State<Counter>) -> Result<ToolOutput, ToolError> {
    let mut n = counter
        .0
        .0
        .lock()
        .map_err(|_| ToolError::failed("poisoned"))?;
    *n += 1;
    Ok(ToolOutput::plain(n.to_string()))
}

#[tool(
    name = "fails_cleanly",
    description_ru = "Возвращает ошибку «не найдено»"
)]
async fn fails_cleanly(path: String) -> Result<String, ToolError> {
    Err(ToolError::not_found(format!("no such file: {path}")).with_detail("ENOENT from the test"))
}

fn kit() -> Kit {
    Kit::new().expect("kit")
}

#[tokio::test]
async fn a_valid_call_reaches_the_function() {
    let kit = kit();
    let out = kit
        .call("echo3", json!({"text": "hi", "count": 3, "loud": true}))
        .await
        .unwrap();
    assert_eq!(out.text(), "HI:3:TRUE");
    assert!(out.structured().is_none());
    let out = kit
        .call_text("echo3", r#"{"text": "hi", "count": -1}"#)
        .await
        .unwrap();
    assert_eq!(out.text(), "hi:-1:false");
}

#[tokio::test]
async fn strict_mode_nulls_mean_absent() {
    let out = kit()
        .call("echo3", json!({"text": "a", "count": 1, "loud": null}))
        .await
        .unwrap();
    assert_eq!(out.text(), "a:1:false");
}

#[tokio::test]
async fn wrong_type_names_the_field_and_the_expectation() {
    let e = kit()
        .call("echo3", json!({"text": "a", "count": "3"}))
        .await
        .unwrap_err();
    assert_eq!(e.pointer(), Some("/count"));
    assert_eq!(e.message(), "/count: expected integer, got string \"3\"");
    assert_eq!(e.tool(), Some("echo3"));
}

#[tokio::test]
async fn missing_and_unknown_fields_are_all_reported() {
    let e = kit().call("echo3", json!({"txt": "a"})).await.unwrap_err();
    assert!(e.is_invalid_arguments());
    assert_eq!(e.pointer(), Some("/text"));
    assert_eq!(
        e.message(),
        "/text: missing required argument `text` (string); /count: missing required argument `count` (integer); \
         /txt: unknown argument `txt`; did you mean `text`? (expected one of: text, count, loud)"
    );
}

#[tokio::test]
async fn malformed_json_is_an_error_with_position() {
    let kit = kit();
    let e = kit
        .call_text("echo3", r#"{"text": "a", "count": 1"#)
        .await
        .unwrap_err();
    assert!(e.is_invalid_arguments());
    assert!(
        e.message().starts_with(
            "the arguments are not valid JSON: EOF while parsing an object at line 1 column"
        ),
        "{e}"
    );
    let e = kit.call_text("echo3", "[1, 2]").await.unwrap_err();
    assert_eq!(
        e.message(),
        "the arguments must be a JSON object, got array"
    );
    let e = kit.call("echo3", json!("text")).await.unwrap_err();
    assert_eq!(
        e.message(),
        "the arguments must be a JSON object, got string"
    );
}

#[tokio::test]
async fn empty_text_means_no_arguments() {
    let out = kit().call_text("search_like", "").await.unwrap_err();
    assert_eq!(
        out.message(),
        "/query: missing required argument `query` (string)"
    );
}

#[tokio::test]
async fn out_of_range_integers_are_refused_before_the_call() {
    let kit = kit();
    let e = kit
        .call("search_like", json!({"query": "q", "topK": -1}))
        .await
        .unwrap_err();
    assert_eq!(e.message(), "/topK: expected a number ≥ 0, got -1");
    let e = kit
        .call(
            "search_like",
            json!({"query": "q", "topK": 4_294_967_296_u64}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        e.message(),
        "/topK: expected a number ≤ 4294967295, got 4294967296"
    );
    let e = kit
        .call("search_like", json!({"query": "q", "topK": 2.5}))
        .await
        .unwrap_err();
    assert_eq!(e.message(), "/topK: expected integer, got number 2.5");
    let e = kit
        .call("search_like", json!({"query": "q", "topK": 3.0}))
        .await
        .unwrap_err();
    assert_eq!(e.message(), "/topK: expected integer, got number 3.0");
}

#[tokio::test]
async fn defaults_renames_and_structured_output() {
    let kit = kit();
    let out = kit
        .call("search_like", json!({"query": "погода"}))
        .await
        .unwrap();
    assert_eq!(
        out.structured(),
        Some(&json!({"topK": 10, "mode": "hybrid", "query": "погода"}))
    );
    let out = kit
        .call(
            "search_like",
            json!({"query": "q", "top_k": 3, "mode": "text"}),
        )
        .await
        .unwrap();
    assert_eq!(
        out.structured().unwrap()["topK"],
        3,
        "snake_case alias from rename_all"
    );
    let e = kit
        .call("search_like", json!({"query": "q", "mode": "fuzzy"}))
        .await
        .unwrap_err();
    assert_eq!(
        e.message(),
        "/mode: expected one of \"hybrid\", \"text\", got \"fuzzy\""
    );
    let spec = kit.registry().by_name("search_like").unwrap().spec();
    assert_eq!(spec.input_schema["properties"]["topK"]["default"], 10);
    assert_eq!(spec.input_schema["properties"]["mode"]["default"], "hybrid");
    assert_eq!(spec.input_schema["required"], json!(["query"]));
    assert_eq!(
        spec.output_schema.as_ref().unwrap()["required"],
        json!(["topK", "mode", "query"])
    );
}

#[tokio::test]
async fn aliases_are_accepted_but_not_both() {
    let kit = kit();
    for key in ["chatId", "chat_id", "chat"] {
        let out = kit
            .call("send_like", json!({key: "tg_1", "text": "hi"}))
            .await
            .unwrap();
        assert_eq!(out.text(), "tg_1 <- hi");
    }
    let e = kit
        .call(
            "send_like",
            json!({"chatId": "a", "chat_id": "b", "text": "x"}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.pointer(), Some("/chat_id"));
    let spec = kit.registry().by_name("send_like").unwrap().spec();
    assert!(
        spec.input_schema["properties"].get("chat_id").is_none(),
        "aliases are not shown to clients"
    );
}

#[tokio::test]
async fn unknown_tool_suggests_the_closest_names() {
    let kit = kit();
    let e = kit.call("echo", json!({})).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::UnknownTool);
    assert_eq!(e.message(), "unknown tool `echo`; did you mean `echo3`?");
    let e = kit.call("zzz", json!({})).await.unwrap_err();
    // Nothing is close: every tool is listed, by name (which ones depends on the features).
    let m = e.message();
    // (`code_execute`, of the shell group, sorts first.)
    let first = if cfg!(feature = "shell") {
        "code_execute, count_up, current_time, "
    } else {
        "count_up, current_time, "
    };
    assert!(
        m.starts_with(&format!("unknown tool `zzz`; available tools: {first}")),
        "{e}"
    );
    assert!(m.contains(", echo3, ") && m.contains(", sleepy"), "{e}");
}

#[tokio::test]
async fn timeout_stops_the_call() {
    let e = kit().call("sleepy", json!({})).await.unwrap_err();
    assert!(e.is_timeout());
    assert_eq!(
        e.message(),
        "`sleepy` did not finish within 50 ms and was stopped"
    );
}

#[tokio::test]
async fn a_panic_in_a_tool_is_an_error_not_a_crash() {
    let kit = kit();
    let e = kit.call("panicky", json!({"index": 7})).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Failed);
    assert_eq!(e.message(), "`panicky` failed with an internal error");
    assert!(
        e.detail().unwrap().contains("index out of bounds"),
        "{:?}",
        e.detail()
    );
    // the registry still works afterwards
    assert!(
        kit.call("echo3", json!({"text": "a", "count": 1}))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn tool_errors_keep_kind_and_detail() {
    let e = kit()
        .call("fails_cleanly", json!({"path": "x.md"}))
        .await
        .unwrap_err();
    assert!(e.is_not_found());
    assert_eq!(e.to_model_text(), "Error [not_found]: no such file: x.md");
    assert_eq!(e.detail(), Some("ENOENT from the test"));
}

#[tokio::test]
async fn services_are_injected_and_missing_ones_are_unavailable() {
    let kit = kit();
    let e = kit.call("count_up", json!({})).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Unavailable);
    let kit = kit.with_context(|b| b.service(Counter(Mutex::new(41))));
    assert_eq!(kit.call("count_up", json!({})).await.unwrap().text(), "42");
}

#[tokio::test]
async fn cancellation_ends_the_call() {
    let registry = ToolRegistry::collect().unwrap();
    let token = tokio_util::sync::CancellationToken::new();
    let ctx = ToolContext::builder()
        .build()
        .with_cancellation(token.clone());
    let call = registry.execute(&ctx, "sleepy", json!({}));
    token.cancel();
    let e = call.await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Cancelled);
}

#[tokio::test]
async fn events_reach_subscribers() {
    let mut registry = ToolRegistry::collect().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    registry.subscribe(move |e: &ToolEvent| {
        let line = match e {
            ToolEvent::Executed { tool, .. } => format!("ok {tool}"),
            ToolEvent::Failed { tool, error, .. } => {
                format!("failed {tool} {}", error.kind().code())
            }
            ToolEvent::LoadFailed { tool, .. } => format!("load {tool}"),
            _ => "other".into(),
        };
        sink.lock().unwrap().push(line);
    });
    let ctx = ToolContext::builder().build();
    let _ = registry
        .execute(&ctx, "echo3", json!({"text": "a", "count": 1}))
        .await;
    let _ = registry.execute(&ctx, "nope", json!({})).await;
    let bad = FnTool::new(
        ToolSpec::new("bad name", "Плохое имя", json!({"type": "object"})),
        |_, _| async { Ok(ToolOutput::plain("")) },
    );
    assert!(registry.register(Arc::new(bad)).is_err());
    assert_eq!(
        *seen.lock().unwrap(),
        ["ok echo3", "failed nope unknown_tool", "load bad name"]
    );
}

#[tokio::test]
async fn runtime_tools_are_validated_like_static_ones() {
    let mut registry = ToolRegistry::collect().unwrap();
    let schema = json!({
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1}},
        "required": ["n"],
        "additionalProperties": false,
    });
    let double = FnTool::new(
        ToolSpec::new("double", "Удваивает число", schema.clone()),
        |_, args: Value| async move {
            Ok(ToolOutput::plain(
                (args["n"].as_i64().unwrap_or(0) * 2).to_string(),
            ))
        },
    );
    registry.register(Arc::new(double)).unwrap();
    let ctx = ToolContext::builder().build();
    assert_eq!(
        registry
            .execute(&ctx, "double", json!({"n": 21}))
            .await
            .unwrap()
            .text(),
        "42"
    );
    let e = registry
        .execute(&ctx, "double", json!({"n": 0}))
        .await
        .unwrap_err();
    assert_eq!(e.message(), "/n: expected a number ≥ 1, got 0");

    let dup = FnTool::new(
        ToolSpec::new("echo3", "Дубликат", schema),
        |_, _| async { Ok(ToolOutput::plain("")) },
    );
    let e = registry.register(Arc::new(dup)).unwrap_err();
    assert!(
        e.problem.starts_with(
            "the name is already taken by the tool defined at klaw-tools/tests/execute.rs:"
        ),
        "{e}"
    );

    let refs = FnTool::new(
        ToolSpec::new(
            "refs",
            "С $ref",
            json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}),
        ),
        |_, _| async { Ok(ToolOutput::plain("")) },
    );
    let e = registry.register(Arc::new(refs)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "tool `refs` (runtime): input schema: /properties/a: `$ref` is not allowed (schemas are served inlined)"
    );
    let empty = FnTool::new(
        ToolSpec::new("empty", " ", json!({"type": "object"})),
        |_, _| async { Ok(ToolOutput::plain("")) },
    );
    assert_eq!(
        registry.register(Arc::new(empty)).unwrap_err().problem,
        "the Russian description is empty"
    );
}

/// Hostile arguments: every one must come back as an error value, none may panic.
#[tokio::test]
async fn hostile_arguments_never_panic() {
    let kit = kit();
    let deep_array = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_object = format!(
        "{{\"text\":{}1{}}}",
        "{\"a\":".repeat(5_000),
        "}".repeat(5_000)
    );
    let huge_number = format!("{{\"text\":\"a\",\"count\":1{}}}", "0".repeat(400));
    let mut inputs: Vec<String> = vec![
        deep_array,
        deep_object,
        huge_number,
        "\u{0}".into(),
        "{\"text\":\"\\ud800\",\"count\":1}".into(),
        "{\"text\":\"a\",\"count\":1e400}".into(),
        "{\"text\":\"a\",\"count\":-0}".into(),
        "{\"text\":\"a\",\"count\":1.0}".into(),
        "{\"text\":\"a\",\"text\":\"b\",\"count\":1}".into(),
        "null".into(),
        "true".into(),
        "\"{}\"".into(),
        "{\"__proto__\":{},\"count\":1,\"text\":\"x\"}".into(),
        "{\"text\":[\"a\"],\"count\":{}}".into(),
        "{\"text\":\"a\",\"count\":1,\"loud\":\"yes\"}".into(),
        "{\"text\":\"a\",\"count\":9223372036854775808}".into(),
        "{\"text\":\"a\",\"count\":-9223372036854775809}".into(),
    ];
    for b in 0u8..=255 {
        inputs.push(format!("{{\"text\":\"{}\",\"count\":1}}", char::from(b)));
    }
    for tool in [
        "echo3",
        "search_like",
        "send_like",
        "panicky",
        "current_time",
        "nonexistent",
    ] {
        for input in &inputs {
            let r = kit.call_text(tool, input).await;
            if let Err(e) = r {
                assert!(!e.message().is_empty());
            }
        }
    }
}
