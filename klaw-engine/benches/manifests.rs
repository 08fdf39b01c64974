//! A manifest tool's call beside `exec` of the same command (a bench binary: `cargo bench
//! -p klaw-engine --bench manifests`): both run `true` through the same runner, in each
//! sandbox mode that works here, side by side in one run; and one `Manifests::sync` over
//! 50 unchanged manifests (what the watcher costs every 2 s).
//!
//! Numbers are printed, never asserted: machines differ.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a bench binary

use std::time::{Duration, Instant};

use klaw_engine::manifests::Manifests;
use klaw_engine::{Config, Engine};
use klaw_tools::tools::shell::SandboxHelper;
use serde_json::json;

const ENGINE: &str = env!("CARGO_BIN_EXE_klaw-engine");

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn engine(home: &std::path::Path, sandbox: &str) -> Engine {
    let home = home.to_owned();
    let sandbox = sandbox.to_owned();
    let env = move |name: &str| match name {
        "HOME" => Some(home.display().to_string()),
        "KLAW_SANDBOX" => Some(sandbox.clone()),
        "KLAW_CONFIG" => Some(home.join("none.json").display().to_string()),
        _ => None,
    };
    let config = Config::load_with(&env).unwrap();
    Engine::builder(config)
        .service(SandboxHelper::new(ENGINE))
        .build()
        .unwrap()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for sandbox in ["off", "landlock", "bwrap"] {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("none.json"), "{}").unwrap();
        let engine = engine(home.path(), sandbox);
        let dir = engine.config().workspace.join("tools/yes");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("tool.yaml"),
            "name: yes\ndescription_ru: Ничего не делает\ncommand: [\"true\"]\n",
        )
        .unwrap();
        let manifests = Manifests::new(engine.config());
        let report = manifests.sync(&engine);
        assert_eq!(report.loaded, ["yes"], "{report:?}");
        if let Err(e) = rt.block_on(engine.call("yes", json!({}))) {
            println!("{sandbox:<9} skipped: {e}");
            continue;
        }
        let (mut tool, mut exec) = (Vec::new(), Vec::new());
        for _ in 0..40 {
            let t = Instant::now();
            rt.block_on(engine.call("yes", json!({}))).unwrap();
            tool.push(t.elapsed());
            let t = Instant::now();
            rt.block_on(engine.call("exec", json!({"command": ["true"]})))
                .unwrap();
            exec.push(t.elapsed());
        }
        let (tool, exec) = (median(tool), median(exec));
        println!(
            "{sandbox:<9} manifest tool {:>8.2} ms   exec {:>8.2} ms   ratio {:.2}",
            tool.as_secs_f64() * 1e3,
            exec.as_secs_f64() * 1e3,
            tool.as_secs_f64() / exec.as_secs_f64()
        );
        rt.block_on(engine.shutdown());
    }

    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("none.json"), "{}").unwrap();
    let engine = engine(home.path(), "off");
    for i in 0..50 {
        let dir = engine.config().workspace.join(format!("tools/t{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("tool.yaml"),
            format!("name: t{i}\ndescription_ru: Инструмент {i}\ncommand: [\"true\"]\nparameters: {{type: object, properties: {{text: {{type: string}}}}}}\n"),
        )
        .unwrap();
    }
    let manifests = Manifests::new(engine.config());
    assert_eq!(manifests.sync(&engine).loaded.len(), 50);
    let mut each = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        manifests.sync(&engine);
        each.push(t.elapsed());
    }
    println!(
        "sync of 50 unchanged manifests {:>8.2} ms (median)",
        median(each).as_secs_f64() * 1e3
    );
}
