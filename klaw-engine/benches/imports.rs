//! Imported MCP servers, measured (a bench binary: `cargo bench -p klaw-engine --features
//! fixtures --bench imports`). The imported server is `klaw-engine mcp` itself (its
//! fixture tool `echo`, a trivial tool), over stdio:
//!
//! - overhead: sequential calls of `echo` straight through rmcp's client (the server's
//!   own round trip) vs the same calls of the imported `k__echo` through
//!   `Engine::call` (Klaw's validation, hooks, the imported tool and the same client):
//!   p50 and p99 of each, and the median added;
//! - start-up: `App::start_imports` with 1 and with 5 servers (started in parallel):
//!   median of 5 runs.
//!
//! Numbers are printed, never asserted: machines differ.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a bench binary

use std::path::Path;
use std::time::{Duration, Instant};

use klaw_engine::{App, Config};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

const CALLS: usize = 2000;

/// A home with an engine.json importing `servers` copies of `klaw-engine mcp` (`k`, `k2`, ...).
fn config(dir: &Path, servers: usize) -> Config {
    let inner_home = dir.join("inner");
    std::fs::create_dir_all(&inner_home).unwrap();
    let inner_config = inner_home.join("engine.json");
    std::fs::write(&inner_config, "{}").unwrap();
    let mut map = serde_json::Map::new();
    for i in 0..servers {
        let name = if i == 0 {
            "k".to_owned()
        } else {
            format!("k{}", i + 1)
        };
        map.insert(
            name,
            json!({
                "command": env!("CARGO_BIN_EXE_klaw-engine"),
                "args": ["mcp"],
                "env": {"HOME": inner_home, "KLAW_CONFIG": inner_config},
            }),
        );
    }
    let path = dir.join(format!("engine-{servers}.json"));
    std::fs::write(
        &path,
        json!({"mcpServers": map, "dataDir": dir.join("data"), "workspace": dir.join("ws")})
            .to_string(),
    )
    .unwrap();
    let vars = [
        ("HOME", dir.display().to_string()),
        ("KLAW_CONFIG", path.display().to_string()),
        ("PATH", std::env::var("PATH").unwrap_or_default()),
    ];
    let env = move |name: &str| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
    };
    Config::load_with(&env).unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // The server's own round trip: rmcp's client straight to `klaw-engine mcp`.
        let inner_home = dir.path().join("inner");
        let config1 = config(dir.path(), 1);
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_klaw-engine"));
        cmd.arg("mcp")
            .env("HOME", &inner_home)
            .env("KLAW_CONFIG", inner_home.join("engine.json"))
            .stderr(std::process::Stdio::null());
        let direct = ().serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap()).await.unwrap();
        let args = json!({"text": "hello"}).as_object().cloned().unwrap();
        let mut own = Vec::with_capacity(CALLS);
        for i in 0..CALLS + 200 {
            let t = Instant::now();
            let r = direct
                .peer()
                .call_tool(CallToolRequestParams::new("echo").with_arguments(args.clone()))
                .await
                .unwrap();
            if i >= 200 {
                own.push(t.elapsed());
            }
            assert_ne!(r.is_error, Some(true));
        }
        let _ = direct.cancel().await;

        // Through Klaw: the imported `k__echo` by `Engine::call`.
        let app = App::assemble(config1, None).unwrap();
        app.start_imports().await;
        let engine = app.engine().clone();
        let mut through = Vec::with_capacity(CALLS);
        for i in 0..CALLS + 200 {
            let t = Instant::now();
            let out = engine
                .call("k__echo", json!({"text": "hello"}))
                .await
                .unwrap();
            if i >= 200 {
                through.push(t.elapsed());
            }
            assert_eq!(out.text(), "hello");
        }
        app.shutdown().await;
        own.sort();
        through.sort();
        let (o50, t50) = (percentile(&own, 0.5), percentile(&through, 0.5));
        println!(
            "stdio echo, the server's own round trip (rmcp client):  p50 {:7.1} µs  p99 {:7.1} µs",
            micros(o50),
            micros(percentile(&own, 0.99))
        );
        println!(
            "stdio echo, imported, through Engine::call:             p50 {:7.1} µs  p99 {:7.1} µs",
            micros(t50),
            micros(percentile(&through, 0.99))
        );
        println!(
            "added by the import (p50 difference):                   {:7.1} µs (target < 200 µs)",
            micros(t50.saturating_sub(o50))
        );

        // Start-up with 1 and with 5 servers.
        for servers in [1, 5] {
            let mut times = Vec::new();
            for _ in 0..5 {
                let app = App::assemble(config(dir.path(), servers), None).unwrap();
                let t = Instant::now();
                app.start_imports().await;
                times.push(t.elapsed());
                let n = app
                    .engine()
                    .registry()
                    .names()
                    .filter(|n| n.contains("__echo"))
                    .count();
                assert_eq!(n, servers, "every server imported");
                app.shutdown().await;
            }
            times.sort();
            println!(
                "start_imports with {servers} server(s) (klaw-engine mcp each): median {:6.1} ms",
                times[times.len() / 2].as_secs_f64() * 1e3
            );
        }
    });
}
