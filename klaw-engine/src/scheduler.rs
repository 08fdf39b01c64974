//! The scheduler: jobs added with `schedule_add` (or `klaw-engine schedule add`) run an
//! agent turn at each occurrence of their cron expression, like a subagent's — the
//! job's own history (`schedule:<job>`, apart from the user's chats, its last
//! `historyMessages` given to each run), the job's model, the answer to its
//! `injectInto` chat through the gateway.
//!
//! - [`cron`]: the expression and its time zone (croner on jiff), next runs across DST;
//! - [`store`]: the jobs and runs in SQLite behind [`JobStore`], an occurrence claimed
//!   once in one `BEGIN IMMEDIATE` transaction with a lease, missed runs settled by the
//!   job's [`Misfire`] policy; at most `scheduler.maxJobs` jobs, one run of a job going
//!   at a time, a bounded record of runs;
//! - `runner`: the loop of `klaw-engine run` (claim what is due, run it unattended,
//!   record how it ended).
//!
//! How it behaves for a user: `doc/scheduling/how-scheduling-works.md`.

pub mod cron;
mod runner;
pub mod store;

use std::sync::Arc;
use std::time::Duration;

use klaw_tools::Caller;

pub use cron::{Schedule, ScheduleError};
pub use store::{
    Claim, Holding, Job, JobStore, Misfire, NewJob, PgStore, RunRecord, SqliteStore, StoreError,
};

use crate::Config;

/// The caller channel of a job's calls (refused what needs approval: nobody is there);
/// the chat id is the job's name.
pub const CHANNEL: &str = "schedule";

/// The database's file name in the data dir.
pub const DB: &str = "schedule.sqlite";

/// Whether `caller` is a run nobody attends: a scheduled run or a subagent (the
/// channels whose calls that need approval are refused, there being nobody to ask).
/// Such a run cannot add jobs, nor remove another job, unless
/// `scheduler.unattendedChanges` is on: one instruction injected into what it reads
/// must not multiply itself.
pub fn unattended(caller: &Caller) -> bool {
    caller.channel == CHANNEL || caller.channel == crate::agent::subagent::CHANNEL
}

/// The jobs of one data dir, and how this engine runs them.
#[derive(Clone)]
pub struct Scheduler {
    store: Arc<dyn JobStore>,
    owner: String,
    lease: Duration,
    timeout: Duration,
    enabled: bool,
    max_jobs: u32,
    unattended_changes: bool,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("owner", &self.owner)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl Scheduler {
    /// The scheduler of `config`: its store in the PostgreSQL `db` (the engine's, of
    /// `storage.url`, connected and migrated), else `<dataDir>/schedule.sqlite` (opened
    /// on first use); the `scheduler` section's settings.
    pub fn from_config(
        config: &Config,
        db: Option<&Arc<crate::storage::Postgres>>,
    ) -> Result<Self, crate::storage::StorageError> {
        let s = &config.raw.scheduler;
        let store: Arc<dyn JobStore> = match db {
            Some(db) => Arc::new(PgStore::new(Arc::clone(db), s.max_catch_up_runs)),
            None => Arc::new(SqliteStore::new(
                config.data_dir.join(DB),
                s.max_catch_up_runs,
            )),
        };
        Ok(Self::with_store(store, config))
    }

    /// A scheduler over `store` with `config`'s settings.
    pub fn with_store(store: Arc<dyn JobStore>, config: &Config) -> Self {
        let s = &config.raw.scheduler;
        Self {
            store,
            owner: crate::storage::engine_id(config.raw.storage.engine_id.as_deref()),
            lease: Duration::from_secs(s.lease_seconds.max(3)),
            timeout: Duration::from_secs(s.run_timeout_seconds.max(1)),
            enabled: s.enabled,
            max_jobs: s.max_jobs,
            unattended_changes: s.unattended_changes,
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn JobStore> {
        &self.store
    }

    /// This engine's name in run leases.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Whether `run` fires due jobs (`scheduler.enabled`).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The most jobs the store may hold (`scheduler.maxJobs`).
    pub fn max_jobs(&self) -> u32 {
        self.max_jobs
    }

    /// Whether scheduled runs and subagents may add and remove jobs
    /// (`scheduler.unattendedChanges`).
    pub fn unattended_changes(&self) -> bool {
        self.unattended_changes
    }
}
