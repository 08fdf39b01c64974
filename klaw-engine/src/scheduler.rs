//! The scheduler: jobs added with `schedule_add` (or `klaw-engine schedule add`) run an
//! agent turn at each occurrence of their cron expression, like a subagent's — isolated
//! history, the job's model, the answer to its `injectInto` chat through the gateway.
//!
//! - [`cron`]: the expression and its time zone (croner on jiff), next runs across DST;
//! - [`store`]: the jobs and runs in SQLite behind [`JobStore`], an occurrence claimed
//!   once in one `BEGIN IMMEDIATE` transaction with a lease, missed runs settled by the
//!   job's [`Misfire`] policy;
//! - `runner`: the loop of `klaw-engine run` (claim what is due, run it unattended,
//!   record how it ended).
//!
//! How it behaves for a user: `doc/scheduling/how-scheduling-works.md`.

pub mod cron;
pub mod store;

pub use cron::{Schedule, ScheduleError};
pub use store::{Claim, Job, JobStore, Misfire, NewJob, RunRecord, SqliteStore, StoreError};

/// The database's file name in the data dir.
pub const DB: &str = "schedule.sqlite";
