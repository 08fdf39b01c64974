//! `klaw-engine doctor`: checks the configuration, the directories and every
//! subsystem, and says how to fix what is wrong.

use std::fmt;
use std::path::Path;

use klaw_tools::ToolRegistry;

use crate::Config;
use crate::config::ConfigSource;
#[cfg(feature = "memory")]
use klaw_tools::tools::memory::{EmbedError, EmbedderConfig};

/// How a check went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Fine.
    Ok,
    /// Works, but something is worth knowing.
    Warn,
    /// Broken: the engine will not work until it is fixed.
    Fail,
}

/// One line of the doctor's report.
#[derive(Debug, Clone)]
pub struct Check {
    /// What was checked.
    pub name: &'static str,
    /// The outcome.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// How to fix it, for warnings and failures.
    pub fix: Option<String>,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        write!(f, "{tag}  {:10}  {}", self.name, self.detail)?;
        if let Some(fix) = &self.fix {
            write!(f, "\n      {:10}  fix: {fix}", "")?;
        }
        Ok(())
    }
}

fn check(
    name: &'static str,
    status: Status,
    detail: impl Into<String>,
    fix: Option<String>,
) -> Check {
    Check {
        name,
        status,
        detail: detail.into(),
        fix,
    }
}

/// Runs every check.
pub fn doctor() -> Vec<Check> {
    let mut out = Vec::new();
    let config = match Config::load() {
        Ok(c) => c,
        Err(e) => {
            out.push(check(
                "config",
                Status::Fail,
                e.to_string(),
                Some("correct engine.json (see doc/config/engine-json.md) or the KLAW_* variable named above".into()),
            ));
            out.push(tools_check(None));
            return out;
        }
    };
    out.push(match &config.source {
        ConfigSource::File(p) => check("config", Status::Ok, p.display().to_string(), None),
        ConfigSource::Defaults(p) => check(
            "config",
            Status::Ok,
            format!("built-in defaults (no file at {})", p.display()),
            None,
        ),
    });
    out.push(dir_check("data dir", &config.data_dir, "KLAW_DATA"));
    out.push(dir_check("workspace", &config.workspace, "KLAW_WORKSPACE"));
    out.push(
        match klaw_tools::tools::utilities::zone_named(&config.timezone) {
            Ok(tz) => {
                let offset = klaw_tools::tools::utilities::utc_offset(
                    tz.to_offset(jiff::Timestamp::now()).seconds(),
                );
                check(
                    "timezone",
                    Status::Ok,
                    format!("{} (UTC{offset})", config.timezone),
                    None,
                )
            }
            Err(problem) => check(
                "timezone",
                Status::Fail,
                problem,
                Some("set `timezone` to an IANA name".into()),
            ),
        },
    );
    if let Some(url) = &config.raw.storage.url {
        out.push(database_check(url));
    }
    out.push(sandbox_check(&config));
    #[cfg(feature = "render")]
    out.push(browser_check(&config));
    #[cfg(feature = "skills")]
    out.push(skills_check(&config));
    #[cfg(feature = "memory")]
    {
        // klaw-model.json, read once for both checks
        let model = config.memory().embedder_config();
        out.push(memory_check(&model));
        if !config.memory_more_model_dirs.is_empty() {
            // `memory.model` lists several: each of the others, as the first
            for c in config.memory().embedder_configs().map_or_else(
                |e| vec![Err(e)],
                |all| all.into_iter().skip(1).map(Ok).collect(),
            ) {
                out.push(memory_check(&c));
            }
        }
        out.push(memory_index_check(&config, model.as_ref().ok()));
    }
    #[cfg(feature = "docs")]
    out.push(docs_index_check(&config));
    out.push(tools_check(Some(&config)));
    out
}

/// The embedding runtime library and the configured model (`make setup` installs both).
/// Reads `klaw-model.json` and loads the runtime library, never the model (that takes
/// seconds and hundreds of MB). Only a warning when missing: the engine runs without
/// memory.
#[cfg(feature = "memory")]
fn memory_check(model: &Result<EmbedderConfig, EmbedError>) -> Check {
    let warn = |e: &EmbedError| {
        let fix = if e.needs_setup() {
            "run `make setup` (scripts/setup-models.sh; KLAW_CACHE overrides ~/.cache/klaw), \
             or point memory.model / memory.runtimeLibrary in engine.json at installed files"
        } else {
            "correct the model's files, or set memory.model in engine.json to another model"
        };
        check("memory", Status::Warn, e.to_string(), Some(fix.into()))
    };
    let c = match model {
        Ok(c) => c,
        Err(e) => return warn(e),
    };
    match c.probe_runtime() {
        Ok(version) => {
            let fingerprint = c.fingerprint.get(..19).unwrap_or(&c.fingerprint);
            let detail = format!(
                "ONNX Runtime {version} ({}); model {} ({}), {} dims, {} tokens, {fingerprint}",
                c.runtime_library.display(),
                c.name,
                c.model_dir.display(),
                c.dims,
                c.max_tokens,
            );
            check("memory", Status::Ok, detail, None)
        }
        Err(e) => warn(&e),
    }
}

/// The memory index in the data directory, looked into read-only (the model is not
/// loaded): its size and the model that built it.
#[cfg(feature = "memory")]
fn memory_index_check(config: &Config, model: Option<&EmbedderConfig>) -> Check {
    use klaw_tools::tools::memory::{Index, MEMORY_DB};
    if let Some(url) = &config.raw.storage.url {
        return memory_postgres_check(url);
    }
    let path = config.data_dir.join(MEMORY_DB);
    match Index::inspect(&path) {
        Ok(None) => check(
            "memory db",
            Status::Ok,
            format!(
                "{} not created yet (the first memory_save or `memory import` creates it)",
                path.display()
            ),
            None,
        ),
        Ok(Some(info)) => {
            let detail = format!(
                "{}: {}; model {}",
                path.display(),
                plural(info.chunks, "chunk"),
                info.fingerprint.as_deref().unwrap_or("not recorded")
            );
            // Built by another model (the default changed, or memory.model): the first
            // memory call re-embeds it, which takes a while for a big index.
            match (model, info.fingerprint.as_deref()) {
                (Some(c), Some(built)) if built != c.fingerprint && info.chunks > 0 => check(
                    "memory db",
                    Status::Warn,
                    format!(
                        "{detail}, not the configured {} ({})",
                        c.name, c.fingerprint
                    ),
                    Some(format!(
                        "the first memory call re-embeds its {} with {} (`klaw-engine memory \
                         search x` does it now); or set memory.model back",
                        plural(info.chunks, "chunk"),
                        c.name
                    )),
                ),
                _ => check("memory db", Status::Ok, detail, None),
            }
        }
        Err(e) => check(
            "memory db",
            Status::Fail,
            format!("{} cannot be read: {e}", path.display()),
            Some(format!(
                "move {} aside and re-import your notes (`klaw-engine memory import`)",
                path.display()
            )),
        ),
    }
}

/// The memory on the PostgreSQL of `storage.url`: the backend, pgvector's version, the
/// chunks, each model's HNSW index and its size, the tables' size. A database the engine
/// cannot reach is the `database` line's failure; here it is only not checked.
#[cfg(feature = "memory")]
fn memory_postgres_check(url: &crate::config::DatabaseUrl) -> Check {
    use klaw_tools::tools::memory::PgMemory;
    let db = match crate::storage::Postgres::open(url) {
        Ok(db) => db,
        Err(e) => {
            return check(
                "memory db",
                Status::Warn,
                format!("PostgreSQL: not checked ({e})"),
                None,
            );
        }
    };
    let pg = PgMemory::new(db.pool().clone(), db.handle().clone());
    // off this thread: the caller may be on an async runtime of its own
    let found = std::thread::scope(|s| s.spawn(|| pg.inspect()).join());
    match found {
        Ok(Ok(None)) => check(
            "memory db",
            Status::Ok,
            format!(
                "PostgreSQL {}: memory not created yet (the first memory_save or `memory import` creates it)",
                db.target()
            ),
            None,
        ),
        Ok(Ok(Some(r))) => {
            let indexes = r
                .indexes
                .iter()
                .map(|(name, size)| format!("{name} {size}"))
                .collect::<Vec<_>>()
                .join(", ");
            check(
                "memory db",
                Status::Ok,
                format!(
                    "PostgreSQL {} with pgvector {}: {}; HNSW {}; {} in all",
                    db.target(),
                    r.pgvector,
                    plural(usize::try_from(r.chunks).unwrap_or_default(), "chunk"),
                    if indexes.is_empty() { "none".into() } else { indexes },
                    r.total_size
                ),
                None,
            )
        }
        Ok(Err(e @ klaw_tools::tools::memory::StoreError::NoVectorExtension)) => check(
            "memory db",
            Status::Fail,
            format!("PostgreSQL {}: {e}", db.target()),
            Some("CREATE EXTENSION vector; in the database of storage.url (pgvector must be installed on the server)".into()),
        ),
        Ok(Err(e)) => check(
            "memory db",
            Status::Warn,
            format!("PostgreSQL {}: not checked ({e})", db.target()),
            None,
        ),
        Err(_) => check("memory db", Status::Warn, "PostgreSQL: the check stopped unexpectedly", None),
    }
}

/// The docs search index in the data directory, looked into read-only (the model is not
/// loaded): its size and whether it is in step with the docs built into this binary.
/// It is a cache: missing or out of date is normal, and the first `docs_search` syncs it.
#[cfg(feature = "docs")]
fn docs_index_check(config: &Config) -> Check {
    use klaw_tools::tools::docs::{DOCS_DB, embedded, index};
    let path = config.data_dir.join(DOCS_DB);
    match index::inspect(&path, embedded()) {
        Ok(None) => check(
            "docs",
            Status::Ok,
            format!(
                "{} not built yet (built on first docs_search, or run `klaw-engine docs index`)",
                path.display()
            ),
            None,
        ),
        Ok(Some(info)) if info.is_up_to_date() => check(
            "docs",
            Status::Ok,
            format!(
                "{}: {}; up to date with the embedded docs ({})",
                path.display(),
                plural(info.chunks, "chunk"),
                plural(info.files, "file")
            ),
            None,
        ),
        Ok(Some(info)) => check(
            "docs",
            Status::Ok,
            format!(
                "{}: {}; out of date with the embedded docs ({} new or changed, {} removed): \
                 synced on the next docs_search, or run `klaw-engine docs index`",
                path.display(),
                plural(info.chunks, "chunk"),
                plural(info.stale, "file"),
                info.removed
            ),
            None,
        ),
        Err(e) => check(
            "docs",
            Status::Warn,
            format!(
                "{} cannot be read: {e}; docs_search fails until it is rebuilt",
                path.display()
            ),
            Some(format!(
                "delete {} and run `klaw-engine docs index` (it holds nothing but the index)",
                path.display()
            )),
        ),
    }
}

/// Which OS sandbox shell commands get here (probed by running a command in it).
/// `storage.url`: the connection, the server's version, and the schema's against this
/// engine's (looked at, not migrated).
fn database_check(url: &crate::config::DatabaseUrl) -> Check {
    use crate::storage::{Postgres, known_version};
    let fix = || {
        Some(
            "check storage.url (or KLAW_DATABASE_URL): the server is running and reachable, the \
             user, password and database exist (see doc/scaling.md)"
                .to_owned(),
        )
    };
    // On a thread of its own: the client waits on its runtime.
    let looked = std::thread::scope(|s| {
        s.spawn(|| {
            let db = Postgres::open(url)?;
            Ok::<_, crate::storage::StorageError>((
                db.target().to_owned(),
                db.server_version()?,
                db.schema_version()?,
            ))
        })
        .join()
    });
    let known = known_version();
    match looked {
        Ok(Ok((target, version, schema))) if schema > known => check(
            "database",
            Status::Fail,
            format!(
                "PostgreSQL {version}, {target}: schema version {schema}, newer than this \
                 engine knows ({known})"
            ),
            Some("upgrade this engine to the version of the engines that migrated it".into()),
        ),
        Ok(Ok((target, version, schema))) if schema < known => check(
            "database",
            Status::Ok,
            format!(
                "PostgreSQL {version}, {target}: schema version {schema}; this engine brings \
                 it to {known} at start"
            ),
            None,
        ),
        Ok(Ok((target, version, schema))) => check(
            "database",
            Status::Ok,
            format!("PostgreSQL {version}, {target}: schema version {schema}"),
            None,
        ),
        Ok(Err(e)) => check("database", Status::Fail, e.to_string(), fix()),
        Err(_) => check(
            "database",
            Status::Fail,
            "the check of storage.url failed",
            fix(),
        ),
    }
}

fn sandbox_check(config: &Config) -> Check {
    let shell = config.shell();
    let mode = shell.sandbox;
    let helper = crate::engine::sandbox_helper();
    let network = if shell.network {
        "network allowed"
    } else {
        "no network"
    };
    match klaw_sandbox::describe(mode, helper.as_deref()) {
        Ok(active) if mode == klaw_tools::tools::shell::SandboxMode::Off => check(
            "sandbox",
            Status::Warn,
            active,
            Some("set `sandbox` to `auto` (KLAW_SANDBOX=auto) to confine shell commands".into()),
        ),
        Ok(active) => check("sandbox", Status::Ok, format!("{active}; {network}"), None),
        Err(why) => check(
            "sandbox",
            Status::Warn,
            format!("exec and process refuse to run: {why}"),
            Some(
                "install bubblewrap (scripts/setup.sh does), or use a kernel with Landlock; \
                 `sandbox: off` runs commands unconfined"
                    .into(),
            ),
        ),
    }
}

/// The browser of `render_js`: without one the tool renders through Cloudflare's
/// Browser Rendering where its token and account are set, and is not offered otherwise.
#[cfg(feature = "render")]
fn browser_check(config: &Config) -> Check {
    match (config.browser(), &config.raw.web.browser) {
        (Some(path), _) => check(
            "browser",
            Status::Ok,
            format!("render_js runs {}", path.display()),
            None,
        ),
        (None, _) if config.provider_keys.cloudflare().is_some() => check(
            "browser",
            Status::Ok,
            format!(
                "no local browser; render_js renders through Cloudflare's Browser Rendering ({})",
                config.raw.web.cloudflare_base_url
            ),
            None,
        ),
        (None, Some(configured)) => check(
            "browser",
            Status::Warn,
            format!(
                "web.browser {} is not a file; render_js is not offered",
                configured.display()
            ),
            Some("set web.browser (KLAW_BROWSER) to a Chromium or Chrome executable".into()),
        ),
        (None, None) => check(
            "browser",
            Status::Warn,
            "no Chromium or Chrome on PATH; render_js is not offered",
            Some(
                "apt-get install chromium-headless-shell (scripts/setup.sh does), or set \
                 web.browser (KLAW_BROWSER)"
                    .into(),
            ),
        ),
    }
}

/// Whether every tool is valid: those of the engine assembled from `config` (the
/// engine's own tools too), or, without a usable configuration, the linked ones.
fn tools_check(config: Option<&Config>) -> Check {
    let count = match config {
        Some(config) => match crate::App::for_listing(config.clone()) {
            Ok(app) => Ok((app.engine().registry().len(), app.engine().failed())),
            // The `database` line says what is wrong; the tools are not to blame.
            Err(crate::app::AppError::Storage(_)) => {
                return check(
                    "tools",
                    Status::Warn,
                    "not checked: the engine cannot be assembled without its database",
                    Some("fix the database first (the `database` line)".into()),
                );
            }
            Err(e) => Err(e.to_string()),
        },
        None => ToolRegistry::collect()
            .map(|r| (r.len(), Vec::new()))
            .map_err(|e| e.to_string()),
    };
    match count {
        Ok((n, failed)) if failed.is_empty() => {
            check("tools", Status::Ok, format!("{} valid", plural(n, "tool")), None)
        }
        // The others work: a manifest or an imported server that failed is a warning.
        Ok((n, failed)) => {
            let each: Vec<String> = failed
                .iter()
                .map(|f| format!("{} ({}): {}", f.name, f.origin, f.problem))
                .collect();
            check(
                "tools",
                Status::Warn,
                format!(
                    "{} valid; {} not loaded: {}",
                    plural(n, "tool"),
                    failed.len(),
                    each.join("; ")
                ),
                Some("fix or remove what is named (`klaw-engine tools --failed` lists it)".into()),
            )
        }
        Err(e) => check(
            "tools",
            Status::Fail,
            e,
            Some("fix the tool definitions named above; the engine does not start with an invalid tool".into()),
        ),
    }
}

/// The skills of every skills folder: how many, which shadow which, each one skipped
/// with its file and problem (a warning: the others work), each loaded with warnings.
#[cfg(feature = "skills")]
fn skills_check(config: &Config) -> Check {
    let found = klaw_tools::tools::skills::SkillCatalog::default()
        .scan_sources(&config.skills().sources(&config.workspace, &config.data_dir));
    let shadowed = if found.shadowed.is_empty() {
        String::new()
    } else {
        // Each shadowed skill: the one in effect names its folder, the shadowed one its.
        let each: Vec<String> = found
            .shadowed
            .iter()
            .filter_map(|old| {
                let new = found.get(old.name())?;
                Some(format!(
                    "{} ({} at {} over {} at {})",
                    old.name(),
                    new.origin,
                    new.dir().display(),
                    old.origin,
                    old.dir().display()
                ))
            })
            .collect();
        format!("; shadowed: {}", each.join(", "))
    };
    let mut detail = format!("{} in use{shadowed}", plural(found.skills.len(), "skill"));
    // What loads but breaks the format's rules (unknown keys, a name not the folder's).
    let warnings: Vec<String> = found
        .skills
        .iter()
        .chain(&found.shadowed)
        .flat_map(|s| {
            let file = s.root.join(s.skill_md());
            s.warnings
                .iter()
                .map(move |w| format!("{}: {w}", file.display()))
        })
        .collect();
    if found.malformed.is_empty() && warnings.is_empty() {
        return check("skills", Status::Ok, detail, None);
    }
    let line = |text: &str| {
        format!(
            "\n      {:10}  {}",
            "",
            crate::terminal::terminal_safe(text)
        )
    };
    if !found.malformed.is_empty() {
        detail.push_str(&format!(
            "; {} skipped:",
            plural(found.malformed.len(), "skill")
        ));
        for m in &found.malformed {
            detail.push_str(&line(&m.to_string()));
        }
    }
    if !warnings.is_empty() {
        detail.push_str(&line("loaded, with warnings:"));
        for w in &warnings {
            detail.push_str(&line(w));
        }
    }
    // "Skipped until then" only of the skills that are skipped.
    let fix = if found.malformed.is_empty() {
        "the skills above load; fix their SKILL.md to silence the warnings (see doc/tools/skills.md)"
    } else {
        "fix each skipped SKILL.md named above (see doc/tools/skills.md); it is skipped until then"
    };
    check("skills", Status::Warn, detail, Some(fix.into()))
}

/// `1 tool`, `2 tools`.
pub(crate) fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn dir_check(name: &'static str, dir: &Path, var: &str) -> Check {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => match tempfile::tempfile_in(dir) {
            Ok(_) => check(
                name,
                Status::Ok,
                format!("{} (writable)", dir.display()),
                None,
            ),
            Err(e) => check(
                name,
                Status::Fail,
                format!("{} is not writable: {e}", dir.display()),
                Some(format!(
                    "chmod u+w {} or point {var} elsewhere",
                    dir.display()
                )),
            ),
        },
        Ok(_) => check(
            name,
            Status::Fail,
            format!("{} is not a directory", dir.display()),
            Some(format!("remove it or point {var} elsewhere")),
        ),
        Err(_) => check(
            name,
            Status::Warn,
            format!("{} does not exist yet", dir.display()),
            Some(format!(
                "the engine creates it when it starts (e.g. on `klaw-engine call`); or run: mkdir -p {}",
                dir.display()
            )),
        ),
    }
}
