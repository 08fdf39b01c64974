//! What telemetry costs a tool call (a bench binary: `cargo bench -p klaw-engine --bench
//! telemetry`): `Engine::execute` of a 3-argument tool from JSON text, against calling
//! its fn directly, in four set-ups, each in a process of its own (a `tracing`
//! subscriber is global) and taken in turns, nine rounds; the best and the median of
//! the rounds printed (on a shared machine the best is the steadier comparison):
//!
//! - `direct`: the fn itself;
//! - `none`: no subscriber at all (a library embedding the engine without one);
//! - `off`: what `klaw-engine` installs with telemetry off (the log at `warn`);
//! - `on`: telemetry on: the log plus the exporting layer, a batch processor sending
//!   OTLP/HTTP to a receiver on loopback that answers 200.
//!
//! The issue's target: `off` within 5% of `none`. Printed, never asserted.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a bench binary

use std::hint::black_box;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::Command;
use std::time::Instant;

use klaw_engine::{Config, Engine, ToolCall};
use klaw_tools::{ToolError, tool};

#[tool(name = "bench_telemetry3", description_ru = "Три аргумента для замера")]
async fn bench_telemetry3(
    text: String,
    count: i64,
    loud: Option<bool>,
) -> Result<String, ToolError> {
    Ok(if loud.unwrap_or(false) {
        format!("{}:{count}", text.to_uppercase())
    } else {
        format!("{text}:{count}")
    })
}

const CALLS: u32 = 200_000;
const ROUNDS: usize = 9;
const MODES: [&str; 4] = ["direct", "none", "off", "on"];
const ARGS: &str = r#"{"text": "hello", "count": 42, "loud": true}"#;

fn main() {
    if let Ok(mode) = std::env::var("KLAW_BENCH_TELEMETRY") {
        let ns = measure(&mode);
        println!("{ns:.1}");
        return;
    }
    let me = std::env::current_exe().unwrap();
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    for _ in 0..ROUNDS {
        for (i, mode) in MODES.iter().enumerate() {
            let out = Command::new(&me)
                .env("KLAW_BENCH_TELEMETRY", mode)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let ns: f64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
            results[i].push(ns);
        }
    }
    for v in &mut results {
        v.sort_by(f64::total_cmp);
    }
    let best: Vec<f64> = results.iter().map(|v| v[0]).collect();
    let median: Vec<f64> = results.iter().map(|v| v[v.len() / 2]).collect();
    println!(
        "telemetry: execute of a 3-argument tool from JSON text, {ROUNDS} processes × {CALLS} calls each"
    );
    println!("  mode        best   median  (ns/call)   overhead over the fn (best)");
    for (i, mode) in MODES.iter().enumerate() {
        println!(
            "  {mode:6} {:8.1} {:8.1}   {:8.1}",
            best[i],
            median[i],
            best[i] - best[0]
        );
    }
    println!(
        "  off / none = {:.3} best, {:.3} median (target ≤ 1.05); on / off = {:.2} best",
        best[2] / best[1],
        median[2] / median[1],
        best[3] / best[2]
    );
}

/// Nanoseconds per call in `mode`, this process's subscriber set up for it.
fn measure(mode: &str) -> f64 {
    let home = tempfile::tempdir().unwrap();
    let receiver = (mode == "on").then(receiver);
    let config = config(home.path(), receiver.as_deref());
    if mode == "off" || mode == "on" {
        klaw_engine::telemetry::init(&config);
    }
    let engine = Engine::new(config).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let run = |n: u32| {
        let started = Instant::now();
        for _ in 0..n {
            if mode == "direct" {
                let text = black_box("hello".to_owned());
                black_box(
                    rt.block_on(bench_telemetry3(text, black_box(42), black_box(Some(true))))
                        .unwrap(),
                );
            } else {
                let call = ToolCall::new("bench_telemetry3", black_box(ARGS));
                black_box(rt.block_on(engine.execute(call, None)).unwrap());
            }
        }
        started.elapsed()
    };
    run(CALLS / 10); // warm-up
    let elapsed = run(CALLS);
    klaw_engine::telemetry::shutdown();
    elapsed.as_secs_f64() * 1e9 / f64::from(CALLS)
}

fn config(home: &std::path::Path, endpoint: Option<&str>) -> Config {
    let json = match endpoint {
        Some(url) => format!(r#"{{"telemetry": {{"endpoint": "{url}"}}}}"#),
        None => "{}".to_owned(),
    };
    std::fs::write(home.join("engine.json"), json).unwrap();
    let home = home.to_owned();
    let env = move |name: &str| match name {
        "HOME" => Some(home.display().to_string()),
        "KLAW_CONFIG" => Some(home.join("engine.json").display().to_string()),
        _ => None,
    };
    Config::load_with(&env).unwrap()
}

/// An OTLP/HTTP receiver on loopback that reads each request and answers 200 (its
/// spans are dropped): `http://127.0.0.1:PORT`.
fn receiver() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || serve(stream));
        }
    });
    url
}

/// Answers each HTTP/1.1 request on one connection with an empty 200.
fn serve(stream: std::net::TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((k, v)) = header.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let reply =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}
