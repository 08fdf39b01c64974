//! `Engine` as the runtime: call ids in events and progress, pre-call hooks that refuse,
//! cancellation by id (an `exec` in flight loses its process), shutdown, and tools added
//! at run time.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::sync::{Arc, Mutex};
use std::time::Duration;

use klaw_engine::{Config, Engine, FAILURE_STREAK, FailedTool, ToolCall};
use klaw_tools::{
    ErrorKind, FnTool, Progress, ProgressUpdate, ToolError, ToolEvent, ToolOutput, ToolSpec, tool,
};
use serde_json::json;

/// Counts to `to`, reporting each step.
#[tool(
    name = "engine_test_count",
    description_ru = "Считает до числа, сообщая о ходе"
)]
async fn engine_test_count(
    progress: Progress,
    /// До скольких
    to: u64,
) -> Result<String, ToolError> {
    for i in 1..=to {
        progress.report(i, Some(to), format!("counted {i}"));
    }
    Ok(format!("counted to {to}"))
}

struct Setup {
    _dir: tempfile::TempDir,
    engine: Engine,
}

/// A configuration on a temporary data dir and workspace (under `dir`), commands
/// unsandboxed (this test binary cannot play the sandbox helper; the sandbox has its own
/// tests).
fn config_in(dir: &std::path::Path) -> Config {
    let home = dir.to_owned();
    let env = move |name: &str| match name {
        "HOME" => Some(home.display().to_string()),
        "KLAW_SANDBOX" => Some("off".to_owned()),
        "KLAW_CONFIG" => Some(home.join("none.json").display().to_string()),
        _ => None,
    };
    std::fs::write(dir.join("none.json"), "{}").unwrap();
    Config::load_with(&env).unwrap()
}

/// An engine on a temporary data dir and workspace ([`config_in`]).
fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    Setup {
        engine: Engine::new(config_in(dir.path())).unwrap(),
        _dir: dir,
    }
}

#[tokio::test]
async fn every_call_has_an_id_in_its_events_and_progress() {
    let s = setup();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let events = Arc::clone(&seen);
    s.engine.subscribe(move |e: &ToolEvent| {
        if let ToolEvent::Executed { tool, call_id, .. } = e {
            events.lock().unwrap().push(format!("{tool} {call_id:?}"));
        }
    });
    let reports = Arc::new(Mutex::new(Vec::<ProgressUpdate>::new()));
    let sink = Arc::clone(&reports);
    let out = s
        .engine
        .execute(
            ToolCall::new("engine_test_count", json!({"to": 3})).with_id("req-7"),
            Some(Arc::new(move |u: &ProgressUpdate| {
                sink.lock().unwrap().push(u.clone())
            })),
        )
        .await
        .unwrap();
    assert_eq!(out.text(), "counted to 3");
    assert_eq!(*seen.lock().unwrap(), ["engine_test_count Some(\"req-7\")"]);
    let reports = reports.lock().unwrap();
    assert_eq!(reports.len(), 3);
    assert_eq!(reports[2].done, 3);
    assert_eq!(reports[2].total, Some(3));
    assert_eq!(reports[2].call_id.as_deref(), Some("req-7"));
    // Fresh ids are distinct.
    assert_ne!(ToolCall::new("a", "{}").id, ToolCall::new("a", "{}").id);
}

#[tokio::test]
async fn a_pre_call_hook_refuses_with_a_reason_and_the_tool_does_not_run() {
    let s = setup();
    s.engine.before_call(|call: &ToolCall, spec: &ToolSpec| {
        if spec.annotations.destructive && call.caller.channel == "telegram" {
            Err(format!("`{}` needs a person's approval", call.name))
        } else {
            Ok(())
        }
    });
    let write = |channel: &str| {
        ToolCall::new(
            "file_write",
            json!({"path": format!("{channel}.txt"), "content": "x"}),
        )
        .with_caller(klaw_tools::Caller::new(channel, None))
    };
    let e = s.engine.execute(write("telegram"), None).await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Refused);
    assert!(e.message().contains("needs a person's approval"), "{e}");
    assert!(!s.engine.config().workspace.join("telegram.txt").exists());
    s.engine.execute(write("cli"), None).await.unwrap();
    assert!(s.engine.config().workspace.join("cli.txt").exists());
    // Unknown tools are not shown to hooks: they fail as unknown.
    let e = s.engine.call("no_such_tool", "{}").await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::UnknownTool);
}

/// A long `exec` that wrote its child's pid to `pid` in the workspace.
fn long_exec(id: &str) -> ToolCall {
    ToolCall::new(
        "exec",
        json!({"command": "sleep 300 & echo $! > pid; wait", "timeout": 300}),
    )
    .with_id(id)
}

async fn wait_for_pid(engine: &Engine) -> i32 {
    let file = engine.config().workspace.join("pid");
    for _ in 0..1000 {
        if let Ok(text) = std::fs::read_to_string(&file)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the command never wrote its pid");
}

/// Whether `pid` still runs (a zombie does not).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

async fn gone(pid: i32) -> bool {
    for _ in 0..500 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
async fn cancel_by_id_ends_a_running_exec_and_its_processes() {
    let s = setup();
    let engine = s.engine.clone();
    let call = tokio::spawn(async move { engine.execute(long_exec("long-1"), None).await });
    let pid = wait_for_pid(&s.engine).await;
    assert!(alive(pid));
    assert_eq!(s.engine.running_calls(), ["long-1"]);
    // The same id cannot run twice at once.
    let e = s
        .engine
        .execute(ToolCall::new("current_time", "{}").with_id("long-1"), None)
        .await
        .unwrap_err();
    assert!(e.message().contains("already running"), "{e}");
    assert!(s.engine.cancel("long-1"));
    let e = call.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Cancelled, "{e}");
    assert!(gone(pid).await, "the command's process {pid} survived");
    assert!(s.engine.running_calls().is_empty());
    assert!(!s.engine.cancel("long-1"), "no such call any more");
}

#[tokio::test]
async fn shutdown_cancels_running_calls_and_refuses_new_ones() {
    let s = setup();
    let engine = s.engine.clone();
    let call = tokio::spawn(async move { engine.execute(long_exec("long-2"), None).await });
    let pid = wait_for_pid(&s.engine).await;
    s.engine.shutdown().await;
    let e = call.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Cancelled, "{e}");
    assert!(gone(pid).await, "the command's process {pid} survived");
    let e = s.engine.call("current_time", "{}").await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Unavailable);
    assert!(e.message().contains("shutting down"), "{e}");
    s.engine.shutdown().await; // idempotent
}

#[tokio::test]
async fn tools_added_at_run_time_are_announced_and_callable() {
    let s = setup();
    let mut changes = s.engine.tools_changed();
    let before = s.engine.registry().len();
    let echo = FnTool::new(
        ToolSpec::new(
            "runtime_echo",
            "Повторяет текст",
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        ),
        |_ctx, args| async move { Ok(ToolOutput::plain(args["text"].as_str().unwrap_or_default())) },
    );
    s.engine.register(Arc::new(echo)).unwrap();
    assert!(changes.has_changed().unwrap());
    changes.mark_unchanged();
    assert_eq!(s.engine.registry().len(), before + 1);
    let out = s
        .engine
        .call("runtime_echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(out.text(), "hi");
    // Validated like any tool.
    let e = s.engine.call("runtime_echo", "{}").await.unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::InvalidArguments { .. }),
        "{e}"
    );
    // A second tool by the same name is refused, and nothing is announced.
    let again = FnTool::new(
        ToolSpec::new("runtime_echo", "Ещё раз", json!({"type": "object"})),
        |_ctx, _args| async move { Ok(ToolOutput::plain("")) },
    );
    assert!(s.engine.register(Arc::new(again)).is_err());
    assert!(!changes.has_changed().unwrap());
    assert!(s.engine.unregister("runtime_echo"));
    assert!(changes.has_changed().unwrap());
    assert!(!s.engine.unregister("runtime_echo"));
    let e = s.engine.call("runtime_echo", "{}").await.unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::UnknownTool);
}

/// Tools added and removed at run time are events; what a loader could not load is
/// listed until that loader reports again; a tool whose calls fail on its side
/// [`FAILURE_STREAK`] times in a row is listed with its last error, until a call succeeds
/// (a model's bad arguments do not count).
#[tokio::test]
async fn added_removed_and_failed_tools_are_events_and_listed() {
    let s = setup();
    let events = Arc::new(Mutex::new(Vec::new()));
    {
        let events = Arc::clone(&events);
        s.engine.subscribe(move |e: &ToolEvent| {
            let line = match e {
                ToolEvent::Created { tool, origin, .. } => format!("created {tool} {origin}"),
                ToolEvent::Removed { tool, .. } => format!("removed {tool}"),
                ToolEvent::LoadFailed { tool, problem, .. } => format!("load {tool}: {problem}"),
                ToolEvent::Failed { tool, .. } => format!("failed {tool}"),
                _ => return,
            };
            events.lock().unwrap().push(line);
        });
    }
    let flaky = FnTool::new(
        ToolSpec::new(
            "flaky",
            "Ломается, когда попросят",
            json!({"type": "object", "properties": {"fail": {"type": "boolean"}}, "required": ["fail"]}),
        )
        .with_origin("test:flaky"),
        |_ctx, args| async move {
            if args["fail"] == true {
                Err(ToolError::failed("broke on purpose"))
            } else {
                Ok(ToolOutput::plain("fine"))
            }
        },
    );
    s.engine.register(Arc::new(flaky)).unwrap();
    s.engine.set_failed(
        "manifests",
        vec![FailedTool::load("broken", "manifest:x", "bad YAML")],
    );
    // Reported again unchanged: listed once, announced once.
    s.engine.set_failed(
        "manifests",
        vec![FailedTool::load("broken", "manifest:x", "bad YAML")],
    );
    assert_eq!(s.engine.failed().len(), 1);
    for _ in 0..FAILURE_STREAK + 2 {
        // Bad arguments are the caller's fault, not the tool's.
        let _ = s.engine.call("flaky", json!({})).await.unwrap_err();
    }
    assert_eq!(s.engine.failed().len(), 1, "{:?}", s.engine.failed());
    for _ in 0..FAILURE_STREAK {
        s.engine
            .call("flaky", json!({"fail": true}))
            .await
            .unwrap_err();
    }
    let failed = s.engine.failed();
    assert_eq!(failed.len(), 2, "{failed:?}");
    let flaky = failed.iter().find(|f| f.name == "flaky").unwrap();
    assert_eq!(
        (
            flaky.failures,
            flaky.origin.as_str(),
            flaky.problem.as_str()
        ),
        (FAILURE_STREAK, "test:flaky", "broke on purpose")
    );
    assert!(flaky.is_failing_calls());
    s.engine
        .call("flaky", json!({"fail": false}))
        .await
        .unwrap();
    s.engine.set_failed("manifests", Vec::new());
    assert!(s.engine.failed().is_empty());
    assert!(s.engine.unregister("flaky"));
    let events = events.lock().unwrap().clone();
    assert_eq!(events.first().unwrap(), "created flaky test:flaky");
    assert_eq!(
        events
            .iter()
            .filter(|e| e.starts_with("load broken"))
            .count(),
        1,
        "{events:?}"
    );
    assert_eq!(events.last().unwrap(), "removed flaky");
}

/// The builder adds services, tools and hooks before the engine starts, and every
/// context holds a `Registrar` bound to the engine once built: a tool made before the
/// engine existed registers another one at run time (as `tool_create` will), which is
/// then called like any other, and subscribers hear of it.
#[tokio::test]
async fn the_builder_adds_services_tools_and_a_late_bound_registrar() {
    #[derive(Debug)]
    struct Greeting(&'static str);
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path());
    let maker = FnTool::new(
        ToolSpec::new(
            "engine_test_make",
            "Создаёт инструмент",
            json!({"type": "object"}),
        ),
        |ctx: klaw_tools::ToolContext, _args| async move {
            let greeting = ctx.service::<Greeting>().unwrap().0;
            let made = FnTool::new(
                ToolSpec::new("engine_test_made", "Здоровается", json!({"type": "object"})),
                move |_ctx, _args| async move { Ok(ToolOutput::plain(greeting)) },
            );
            ctx.service::<klaw_engine::Registrar>()
                .unwrap()
                .register(Arc::new(made))?;
            Ok(ToolOutput::plain("made"))
        },
    );
    let engine = Engine::builder(config)
        .service(Greeting("hello"))
        .tool(Arc::new(maker))
        .hook(|call: &ToolCall, _: &ToolSpec| {
            if call.name == "engine_test_count" {
                Err("no counting here".to_owned())
            } else {
                Ok(())
            }
        })
        .build()
        .unwrap();
    let changed = engine.tools_changed();
    assert!(engine.registry().by_name("engine_test_made").is_none());
    assert_eq!(
        engine
            .call("engine_test_make", json!({}))
            .await
            .unwrap()
            .text(),
        "made"
    );
    assert!(changed.has_changed().unwrap());
    assert_eq!(
        engine
            .call("engine_test_made", json!({}))
            .await
            .unwrap()
            .text(),
        "hello"
    );
    let refused = engine
        .call("engine_test_count", json!({"to": 1}))
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), &ErrorKind::Refused, "{refused:?}");
    // A second maker call: the name is taken, an error the model reads.
    let again = engine
        .call("engine_test_make", json!({}))
        .await
        .unwrap_err();
    assert!(again.message().contains("engine_test_made"), "{again:?}");
    engine.shutdown().await;
}

/// Every span's name and fields, by span id: a `tracing` layer for the test.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<std::collections::BTreeMap<u64, (String, Fields)>>>);

type Fields = std::collections::BTreeMap<String, String>;

struct Visit<'a>(&'a mut Fields);

impl tracing::field::Visit for Visit<'_> {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Spans {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut fields = Fields::new();
        attrs.record(&mut Visit(&mut fields));
        self.0
            .lock()
            .unwrap()
            .insert(id.into_u64(), (attrs.metadata().name().to_owned(), fields));
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if let Some((_, fields)) = self.0.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Visit(fields));
        }
    }
}

/// Each call is an `execute_tool` span with the GenAI attributes, its caller, the size
/// of its arguments and its outcome; never the arguments themselves.
#[tokio::test]
async fn each_call_is_a_span_with_the_gen_ai_attributes_and_no_arguments() {
    use tracing_subscriber::layer::SubscriberExt;
    let s = setup();
    let spans = Spans::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let args = json!({"timezone": "UTC"});
    s.engine
        .execute(
            ToolCall::new("current_time", args.clone()).with_id("c-1"),
            None,
        )
        .await
        .unwrap();
    let secret = json!({"text": "sk-secret-value"});
    s.engine
        .execute(
            ToolCall::new("engine_test_count", secret).with_id("c-2"),
            None,
        )
        .await
        .unwrap_err();
    let spans = spans.0.lock().unwrap().clone();
    let calls: Vec<&Fields> = spans
        .values()
        .filter(|(name, _)| name == "execute_tool")
        .map(|(_, f)| f)
        .collect();
    assert_eq!(calls.len(), 2, "{spans:#?}");
    let ok = calls
        .iter()
        .find(|f| f["gen_ai.tool.call.id"] == "c-1")
        .unwrap();
    assert_eq!(ok["gen_ai.operation.name"], "execute_tool");
    assert_eq!(ok["gen_ai.tool.name"], "current_time");
    assert_eq!(ok["otel.name"], "execute_tool current_time");
    assert_eq!(ok["klaw.caller.channel"], "cli");
    assert_eq!(
        ok["klaw.arguments.bytes"],
        args.to_string().len().to_string()
    );
    assert_eq!(ok["klaw.outcome"], "ok");
    assert!(!ok.contains_key("error.type"));
    let failed = calls
        .iter()
        .find(|f| f["gen_ai.tool.call.id"] == "c-2")
        .unwrap();
    assert_eq!(failed["klaw.outcome"], "invalid_arguments");
    assert_eq!(failed["error.type"], "invalid_arguments");
    let all = format!("{spans:?}");
    assert!(
        !all.contains("sk-secret-value"),
        "an argument leaked into a span: {all}"
    );
}

#[tokio::test]
async fn idle_after_calls_waits_for_the_calls_to_end_and_stay_quiet() {
    let s = setup();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let held = Arc::clone(&gate);
    let blocked = FnTool::new(
        ToolSpec::new("idle_test_wait", "Ждёт сигнала", json!({"type": "object"})),
        move |_ctx, _args| {
            let held = Arc::clone(&held);
            async move {
                let _permit = held.acquire().await;
                Ok(ToolOutput::plain("done"))
            }
        },
    );
    s.engine.register(Arc::new(blocked)).unwrap();
    let quiet = Duration::from_millis(20);
    // No call has run yet: nothing to wait for the end of.
    let mut idle = tokio::spawn({
        let engine = s.engine.clone();
        async move { engine.idle_after_calls(quiet).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!idle.is_finished(), "idle before any call ran");
    // A call that runs on: not idle while it does.
    let call = tokio::spawn({
        let engine = s.engine.clone();
        async move { engine.call("idle_test_wait", "{}").await }
    });
    while s.engine.running_calls().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!idle.is_finished(), "idle while a call runs");
    // It ends: idle once quiet.
    gate.add_permits(1);
    assert_eq!(call.await.unwrap().unwrap().text(), "done");
    tokio::time::timeout(Duration::from_secs(30), &mut idle)
        .await
        .expect("idle once the call ended")
        .unwrap();
    // And again only after another call.
    let again = tokio::spawn({
        let engine = s.engine.clone();
        async move { engine.idle_after_calls(quiet).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!again.is_finished(), "idle again without a call in between");
    s.engine.call("current_time", "{}").await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), again)
        .await
        .expect("idle after the next call")
        .unwrap();
}
