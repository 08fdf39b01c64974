//! Dispatch overhead of `ToolRegistry::execute` for a 3-argument tool (parse +
//! validate + call) against calling the fn directly. Target: under 2 µs.
//!
//! `registry/collect`: what every engine process pays at start-up to collect, check and
//! index every built-in tool (`ToolRegistry::collect`).
//!
//! Run with: cargo bench -p klaw-tools --bench dispatch

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use klaw_tools::{ToolContext, ToolError, ToolRegistry, tool};
use serde_json::json;

#[tool(name = "bench_echo3", description_ru = "Три аргумента для замера")]
async fn bench_echo3(text: String, count: i64, loud: Option<bool>) -> Result<String, ToolError> {
    Ok(if loud.unwrap_or(false) {
        format!("{}:{count}", text.to_uppercase())
    } else {
        format!("{text}:{count}")
    })
}

fn dispatch(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let registry = ToolRegistry::collect().unwrap();
    let ctx = ToolContext::builder().build();
    let text = r#"{"text": "hello", "count": 42, "loud": true}"#;
    let value = json!({"text": "hello", "count": 42, "loud": true});

    let mut g = c.benchmark_group("dispatch");
    g.bench_function("direct_fn_call", |b| {
        b.iter(|| {
            rt.block_on(bench_echo3(
                black_box("hello".to_owned()),
                black_box(42),
                black_box(Some(true)),
            ))
        })
    });
    g.bench_function("execute_json_text", |b| {
        b.iter(|| rt.block_on(registry.execute(&ctx, "bench_echo3", black_box(text))))
    });
    g.bench_function("execute_parsed_value", |b| {
        b.iter(|| rt.block_on(registry.execute(&ctx, "bench_echo3", black_box(value.clone()))))
    });
    g.finish();
}

fn collect(c: &mut Criterion) {
    let tools = ToolRegistry::collect().unwrap().len();
    let mut g = c.benchmark_group("registry");
    g.bench_function(format!("collect_{tools}_tools"), |b| {
        b.iter(|| black_box(ToolRegistry::collect().unwrap()))
    });
    g.finish();
}

criterion_group!(benches, dispatch, collect);
criterion_main!(benches);
