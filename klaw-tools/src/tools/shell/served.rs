//! A context's sandbox servers ([`klaw_sandbox::Server`]): one per helper, sandbox,
//! workspace (by path and identity), hidden data dir, read-only folders and network
//! setting, started at
//! the first command that is served ([`SandboxServer`]), started again when one dies,
//! and ended with the context.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use klaw_sandbox::{Backend, Policy, ServedCommand, Server, SpawnError, Started};

use super::scratch::CommandTmp;
use super::settings::SandboxServer;

/// What a server is kept for: the helper and sandbox, the workspace (path, device,
/// inode: a workspace replaced at the same path gets a new server), the hidden
/// directories and the network.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    backend: String,
    workspace: PathBuf,
    identity: (u64, u64),
    hidden: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
    network: bool,
}

/// The servers of one context (its shared state), and how many commands it started.
#[derive(Debug, Default)]
pub(crate) struct Servers {
    commands: AtomicU64,
    /// The servers, and (`None`) the keys no server could start for: their commands go
    /// to a helper each, without trying again (the first failure was logged).
    map: Mutex<HashMap<Key, Option<Arc<Server>>>>,
    /// The next served command's private temporary directory, made (off the command's
    /// way) after the last one started: no one has used it, it is as private as a new
    /// one, and removed with the context if no command takes it.
    ready: Mutex<Option<CommandTmp>>,
}

impl Servers {
    /// Whether this command is to be served under `setting` (counted: with `Auto`,
    /// every command after a context's first).
    pub(crate) fn wanted(&self, setting: SandboxServer) -> bool {
        let earlier = self.commands.fetch_add(1, Ordering::Relaxed);
        match setting {
            SandboxServer::Always => true,
            SandboxServer::Never => false,
            SandboxServer::Auto => earlier > 0,
        }
    }

    /// The temporary directory made ready for a served command (`serve`), if there is
    /// one.
    pub(crate) fn ready_tmp(&self, serve: bool) -> Option<CommandTmp> {
        if !serve {
            return None;
        }
        self.ready
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Makes a temporary directory ready for the next served command (blocking: call it
    /// off the async threads). A failure is left to that command, which then makes its
    /// own.
    pub(crate) fn make_tmp_ready(&self) {
        let ready = || self.ready.lock().unwrap_or_else(PoisonError::into_inner);
        if ready().is_some() {
            return;
        }
        // Made outside the lock (a command taking the ready one does not wait for it);
        // one made twice is removed again.
        let made = CommandTmp::new().ok();
        let mut ready = ready();
        if ready.is_none() {
            *ready = made;
        }
    }

    /// Starts `command` through the server of `backend` and `policy`, starting the
    /// server first if there is none (or it died). `None` when the command is not to be
    /// served ([`Server::serves`], a command too long for one message); an
    /// error when no server could start it: the caller runs it the one-shot way unless
    /// [`SpawnError::delivered`] (it may have started: it must not run twice).
    pub(crate) fn spawn(
        &self,
        backend: &Backend,
        policy: &Policy,
        command: &ServedCommand<'_>,
    ) -> Option<Result<Started, SpawnError>> {
        let failed = |error| SpawnError {
            error,
            delivered: false,
        };
        if !Server::serves(backend) || !Server::fits(command) {
            return None;
        }
        // A kept bubblewrap sandbox gives each command a fresh /tmp and /dev/shm, which
        // would cover a read-only folder there (the workspace alone is put back): such a
        // command runs the one-shot way.
        if matches!(backend, Backend::Bwrap(_))
            && policy
                .read_only
                .iter()
                .any(|d| d.starts_with("/tmp") || d.starts_with("/dev/shm"))
        {
            return None;
        }
        let identity = match std::fs::metadata(&policy.workspace) {
            Ok(m) => (m.dev(), m.ino()),
            Err(e) => return Some(Err(failed(e))),
        };
        let key = Key {
            backend: format!("{backend:?}"),
            workspace: policy.workspace.clone(),
            identity,
            hidden: policy.hidden.clone(),
            read_only: policy.read_only.clone(),
            network: policy.network,
        };
        // Twice at most: a kept server may have died since its last command (then it is
        // forgotten, and one new server gets the command) — unless it had taken the
        // command, which may have started.
        let mut last = None;
        for _ in 0..2 {
            let server = match self.server(&key, backend, policy) {
                Ok(Some(s)) => s,
                Ok(None) => return None,
                Err(e) => return Some(Err(failed(e))),
            };
            match server.spawn(command) {
                Ok(started) => return Some(Ok(started)),
                Err(e) => {
                    self.forget(&key, &server);
                    if e.delivered {
                        return Some(Err(e));
                    }
                    last = Some(e);
                }
            }
        }
        last.map(Err)
    }

    /// The server for `key`, started if there is none; `None` when none could start
    /// for it before.
    fn server(
        &self,
        key: &Key,
        backend: &Backend,
        policy: &Policy,
    ) -> std::io::Result<Option<Arc<Server>>> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = map.get(key) {
            return Ok(s.clone());
        }
        // Started under the lock: two first commands start one server.
        match Server::start(
            backend,
            &policy.workspace,
            &policy.hidden,
            &policy.read_only,
            policy.network,
        ) {
            Ok(server) => {
                let server = Arc::new(server);
                map.insert(key.clone(), Some(Arc::clone(&server)));
                Ok(Some(server))
            }
            Err(e) => {
                map.insert(key.clone(), None);
                Err(e)
            }
        }
    }

    /// Forgets `server` (dropped, so ended, once no command holds it).
    fn forget(&self, key: &Key, server: &Arc<Server>) {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if map
            .get(key)
            .is_some_and(|s| s.as_ref().is_some_and(|s| Arc::ptr_eq(s, server)))
        {
            map.remove(key);
        }
    }
}
