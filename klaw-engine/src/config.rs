//! `engine.json`: every key with its default, environment overrides, and errors that
//! name the key (or the line and column of broken JSON).
//!
//! This file only wires the files beside it: `top.rs` the top-level keys
//! ([`EngineConfig`]), `load.rs` loading ([`Config::load`]: the file, then the `KLAW_*`
//! variables, then the checks) and the resolved [`Config`]; its tests are those of the
//! whole declaration (the doc's tables, the full example, every variable read) and the
//! helpers the files' tests share. Each section of `engine.json` is a file of its own, with its
//! keys, their checks, the settings it gives its group, and its tests: `memory.rs`,
//! `mcp.rs`, `skills.rs`, `llm.rs`, `agent.rs`, `gateway.rs`, `web.rs`, `scheduler.rs`,
//! `telemetry.rs`; `mcp_servers.rs` is `mcpServers`. `keys.rs` is the macro that
//! declares keys, `secret.rs` the type of tokens and keys, `paths.rs` the checks of where
//! paths may lie, `types.rs` the choices shared with the parts above config,
//! `error.rs` [`ConfigError`], `provider_keys.rs` [`ProviderKeys`] (the providers' own
//! key variables), `timezone.rs` the zone used when none is configured.

mod agent;
mod error;
mod gateway;
pub mod keys;
mod llm;
mod load;
mod mcp;
mod mcp_servers;
mod memory;
mod paths;
mod provider_keys;
mod scheduler;
mod secret;
mod skills;
mod storage;
mod telemetry;
mod timezone;
mod top;
mod types;
mod web;

pub use agent::AgentSection;
pub use error::ConfigError;
pub use gateway::GatewaySection;
pub use keys::KeyDoc;
pub use llm::{LlmSection, NamedModel};
pub use load::{Config, ConfigSource, Env, parse, process_env};
pub use mcp::{BindAddr, McpSection};
pub use mcp_servers::{ImportedServer, MAX_SERVER_NAME, ServerType, valid_server_name};
pub use memory::{
    DEFAULT_MEMORY_MODEL, DEFAULT_RUNTIME_LIBRARY, MemoryModels, MemorySection, MemoryWeights,
};
pub use provider_keys::ProviderKeys;
pub use scheduler::SchedulerSection;
pub use secret::Secret;
pub use skills::SkillsSection;
pub use storage::{DatabaseUrl, SslMode, StorageSection, Tls};
pub use telemetry::TelemetrySection;
pub use top::EngineConfig;
pub use types::{Approval, Protocol, Provider};
pub use web::WebSection;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::path::Path;

    /// [`Config::resolve`] of the defaults under `env` (the section files' tests use it).
    pub(super) fn resolve_defaults(env: Env<'_>) -> Result<Config, ConfigError> {
        Config::resolve(
            EngineConfig::default(),
            ConfigSource::Defaults("x".into()),
            env,
        )
    }

    /// An environment of exactly `pairs`.
    pub(super) fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    /// The tables of `doc/config/engine-json.md` are the declarations; regenerate them
    /// with `KLAW_UPDATE_DOCS=1 cargo test -p klaw-engine --lib config` and read the diff.
    #[test]
    fn the_doc_tables_are_the_declarations() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../doc/config/engine-json.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let tables = keys::doc_tables(&EngineConfig::keys());
        for (name, _) in &tables {
            let marker = format!("<!-- generated: keys {name} -->");
            assert!(doc.contains(&marker), "{} lacks {marker}", path.display());
        }
        let want = keys::with_tables(&doc, &tables);
        if std::env::var_os("KLAW_UPDATE_DOCS").is_some() {
            std::fs::write(&path, &want).unwrap();
            return;
        }
        assert!(
            doc == want,
            "{} differs from the keys declared in config.rs and config/*.rs; run \
             KLAW_UPDATE_DOCS=1 cargo test -p klaw-engine --lib config, then read the diff",
            path.display()
        );
    }

    /// The doc's full example sets every key, and `klaw-engine config` prints it back
    /// exactly (same keys, same order).
    #[test]
    fn the_full_example_is_printed_back() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../doc/config/engine-json.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let example = doc.split("## A full example").nth(1).unwrap();
        let json = example.split("```json\n").nth(1).unwrap();
        let json = json.split("```").next().unwrap();
        let raw = parse(&path, json).unwrap();
        let c = Config::resolve(raw, ConfigSource::File(path), &env(&[("HOME", "/h")])).unwrap();
        let printed = serde_json::to_string_pretty(&c.effective()).unwrap();
        assert_eq!(printed.trim(), json.trim());
        let declared = EngineConfig::keys().len();
        let leaves = json.matches("\": ").count();
        assert_eq!(leaves, declared, "the example sets every key and section");
    }

    /// Every declared key is in `klaw-engine config`'s output, every variable belongs to
    /// one key, and every variable is read.
    #[test]
    fn every_key_is_in_the_effective_config_with_its_own_variable() {
        let keys = EngineConfig::keys();
        let c = resolve_defaults(&env(&[("HOME", "/h")])).unwrap();
        let effective = c.effective();
        let mut vars = std::collections::HashSet::new();
        for k in &keys {
            let mut v = &effective;
            for part in k.key.split('.') {
                v = v
                    .get(part)
                    .unwrap_or_else(|| panic!("{} is not in {effective}", k.key));
            }
            if let Some(var) = k.env {
                assert!(vars.insert(var), "{var} is declared twice");
                assert!(var.starts_with("KLAW_"), "{var}");
            }
        }
        // Every variable is read: set to a value unlike any default, it is either refused
        // by name or changes its key in the output.
        for k in &keys {
            let Some(var) = k.env else { continue };
            let pairs = [("HOME", "/h"), (var, "\u{1}not a value\u{1}")];
            let e = env(&pairs);
            match resolve_defaults(&e) {
                Err(err) => assert!(err.to_string().contains(var), "{var}: {err}"),
                Ok(set) => {
                    let at = |v: &serde_json::Value| {
                        k.key.split('.').fold(v.clone(), |v, part| v[part].clone())
                    };
                    assert_ne!(at(&set.effective()), at(&effective), "{var} was not read");
                }
            }
        }
    }
}
