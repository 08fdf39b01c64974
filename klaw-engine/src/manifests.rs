//! Tools defined by files: `<workspace>/tools/<name>/tool.yaml` and
//! `<dataDir>/tools/<name>/tool.yaml` (the workspace's wins). Each is a command the
//! engine runs through the shell tools' sandbox with the arguments as JSON on stdin.
//! [`Manifests::sync`] brings the engine's registry in step with the files: it is run at
//! start-up (`App::assemble`), by `tools_reload`-like callers (`tool_create`,
//! `tool_delete`), and every [`WATCH_INTERVAL`] or on SIGHUP while a front end runs
//! (`Manifests::watch`). What fails to load is reported to the engine
//! ([`Engine::set_failed`], source `manifests`) and harms no other tool.

pub(crate) mod manifest;
pub(crate) mod syntax;
mod tool;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use klaw_tools::tools::files::{dirs_beneath, read_text_beneath};
use klaw_tools::{ErrorKind, Tool, ToolRegistry};
use tokio_util::sync::CancellationToken;

use crate::{Config, Engine, FailedTool};
use manifest::{MAX_MANIFEST_BYTES, Root};
use tool::ManifestTool;

/// How often a running front end looks for added, changed and removed manifests.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// The loader's name in [`Engine::failed`]'s sources.
const SOURCE: &str = "manifests";

/// The folder, beneath the workspace and the data dir, that holds one folder per tool.
pub(crate) const TOOLS_DIR: &str = "tools";

/// What one [`Manifests::sync`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SyncReport {
    /// Manifest tools registered now.
    pub added: Vec<String>,
    /// Manifest tools whose manifest changed: registered again.
    pub changed: Vec<String>,
    /// Manifest tools whose manifest is gone (or no longer loads).
    pub removed: Vec<String>,
    /// Every manifest tool loaded after the sync.
    pub loaded: Vec<String>,
    /// What could not be loaded, with why.
    pub failed: Vec<FailedTool>,
}

/// The manifest tools of one engine: where they are looked for and which are loaded.
#[derive(Debug)]
pub struct Manifests {
    workspace: PathBuf,
    data_dir: PathBuf,
    /// The servers of `mcpServers` (enabled or not): the names of their tools are
    /// theirs, never a manifest's.
    servers: Vec<String>,
    /// The tools this loader registered, by name (one sync at a time).
    loaded: Mutex<BTreeMap<String, Arc<ManifestTool>>>,
}

impl Manifests {
    /// The manifests of `config`'s workspace and data dir (nothing loaded yet).
    pub fn new(config: &Config) -> Self {
        Self {
            workspace: config.workspace.clone(),
            data_dir: config.data_dir.clone(),
            servers: config.raw.mcp_servers.keys().cloned().collect(),
            loaded: Mutex::new(BTreeMap::new()),
        }
    }

    /// The folder of the workspace's manifest tools.
    pub fn workspace_dir(&self) -> PathBuf {
        self.workspace.join(TOOLS_DIR)
    }

    /// The origin a workspace manifest tool `name` has (`manifest:<its tool.yaml>`).
    pub(crate) fn workspace_origin(&self, name: &str) -> String {
        manifest::origin(&self.workspace_dir(), name)
    }

    /// The imported MCP server (of `mcpServers`) that owns the tool name `name`, if any:
    /// a manifest of that name is refused, whether the server's tools are registered
    /// yet or not.
    pub(crate) fn owner(&self, name: &str) -> Option<&str> {
        crate::imports::owner(self.servers.iter().map(String::as_str), name)
    }

    /// Reads every manifest and brings `engine` in step: new ones registered, changed
    /// ones registered again, removed ones unregistered (only tools this loader
    /// registered: never a compiled tool of the same name), failures reported.
    pub fn sync(&self, engine: &Engine) -> SyncReport {
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut found, mut failed) = self.scan();
        let mut report = SyncReport::default();
        let names: Vec<String> = loaded.keys().cloned().collect();
        for name in names {
            let unchanged = found.get(&name).is_some_and(|new| {
                loaded.get(&name).is_some_and(|old| {
                    old.text == new.text && old.spec().origin == new.spec().origin
                })
            });
            if unchanged {
                found.remove(&name);
                continue;
            }
            if let Some(old) = loaded.remove(&name) {
                let ours = engine
                    .registry()
                    .by_name(&name)
                    .is_some_and(|t| t.spec().origin == old.spec().origin);
                if ours {
                    engine.unregister(&name);
                }
                if found.contains_key(&name) {
                    report.changed.push(name);
                } else {
                    report.removed.push(name);
                }
            }
        }
        for (name, tool) in found {
            let tool = Arc::new(tool);
            // Checked before it is offered: a manifest that keeps failing is not
            // registered (and logged) again at every sync; only a new failure is logged.
            // A name an imported server owns is refused before the registry is asked:
            // the server may not be up yet (it starts after the manifests, and
            // restarts), and its tool must not find the name taken.
            let refused = if let Some(server) = self.owner(&name) {
                Some(format!(
                    "the name belongs to the imported MCP server `{server}` (mcpServers in \
                     engine.json): its tools are named `{server}__<tool>`, and no manifest \
                     may take one; rename the folder"
                ))
            } else {
                match engine.registry().by_name(&name) {
                    Some(existing) => Some(format!(
                        "the name is already taken by the tool defined at {}",
                        existing.spec().origin
                    )),
                    None => ToolRegistry::new()
                        .register(Arc::clone(&tool) as Arc<dyn Tool>)
                        .err()
                        .map(|e| e.problem),
                }
            };
            let registered = match refused {
                Some(problem) => Err(problem),
                None => engine
                    .register(Arc::clone(&tool) as Arc<dyn Tool>)
                    .map_err(|e| e.problem),
            };
            match registered {
                Ok(()) => {
                    if !report.changed.contains(&name) {
                        report.added.push(name.clone());
                    }
                    loaded.insert(name, tool);
                }
                Err(problem) => {
                    if let Some(i) = report.changed.iter().position(|n| n == &name) {
                        report.changed.remove(i);
                        report.removed.push(name.clone());
                    }
                    failed.push(FailedTool::load(name, tool.spec().origin.clone(), problem));
                }
            }
        }
        report.loaded = loaded.keys().cloned().collect();
        failed.sort_by(|a, b| a.name.cmp(&b.name));
        engine.set_failed(SOURCE, failed.clone());
        report.failed = failed;
        for name in &report.added {
            tracing::info!(target: "klaw::manifests", tool = name, "manifest tool loaded");
        }
        report
    }

    /// Every manifest that parses, by name (a workspace tool hides a system tool of
    /// the same name), and every one that does not.
    fn scan(&self) -> (BTreeMap<String, ManifestTool>, Vec<FailedTool>) {
        let mut found = BTreeMap::new();
        let mut failed = Vec::new();
        for (root, base) in [
            (Root::Workspace, &self.workspace),
            (Root::System, &self.data_dir),
        ] {
            let tools_dir = base.join(TOOLS_DIR);
            let folders = match dirs_beneath(base, TOOLS_DIR) {
                Ok(folders) => folders,
                Err(e) if e.kind() == &ErrorKind::NotFound => continue,
                Err(e) => {
                    failed.push(FailedTool::load(
                        format!("{} tools", root.as_str()),
                        format!("manifest:{}", tools_dir.display()),
                        format!("the folder cannot be read: {}", e.message()),
                    ));
                    continue;
                }
            };
            for folder in folders {
                // A tool being written by tool_create, or hidden on purpose.
                if folder.starts_with('.') || found.contains_key(&folder) {
                    continue;
                }
                match self.read(root, base, &tools_dir, &folder) {
                    Ok(Some(tool)) => {
                        found.insert(folder, tool);
                    }
                    Ok(None) => {}
                    Err(problem) => failed.push(FailedTool::load(
                        &folder,
                        manifest::origin(&tools_dir, &folder),
                        problem,
                    )),
                }
            }
        }
        (found, failed)
    }

    /// The tool of one folder; `None` for a folder without a `tool.yaml`.
    fn read(
        &self,
        root: Root,
        base: &Path,
        tools_dir: &Path,
        folder: &str,
    ) -> Result<Option<ManifestTool>, String> {
        let path = format!("{TOOLS_DIR}/{folder}/tool.yaml");
        let text = match read_text_beneath(base, &path, MAX_MANIFEST_BYTES) {
            Ok(text) => text,
            Err(e) if e.kind() == &ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.message().to_owned()),
        };
        let manifest = manifest::parse(&text, folder, root, tools_dir, &self.workspace)?;
        // A workspace script is checked by its interpreter's parser (a system tool's
        // program is on PATH: it has no script in its folder).
        if root == Root::Workspace {
            syntax::check_command(&manifest.argv, &tools_dir.join(folder))?;
        }
        Ok(Some(ManifestTool { manifest, text }))
    }

    /// Syncs every [`WATCH_INTERVAL`], and at once on SIGHUP, until `stop`.
    pub(crate) fn watch(self: Arc<Self>, engine: Engine, stop: CancellationToken) {
        tokio::spawn(async move {
            let mut hangup =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
            loop {
                let hup = async {
                    match hangup.as_mut() {
                        Some(s) => {
                            s.recv().await;
                        }
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(WATCH_INTERVAL) => {}
                    () = hup => {}
                }
                let (me, engine) = (Arc::clone(&self), engine.clone());
                if tokio::task::spawn_blocking(move || me.sync(&engine))
                    .await
                    .is_err()
                {
                    break;
                }
            }
        });
    }
}
