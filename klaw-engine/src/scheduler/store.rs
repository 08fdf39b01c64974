//! Where jobs and their runs are kept: a [`JobStore`], with two backends that run one
//! logic (this file, written once against [`Tx`]): [`SqliteStore`] over
//! `<dataDir>/schedule.sqlite` (WAL, a busy timeout), shared by every engine on the data
//! dir, and [`PgStore`] in the PostgreSQL of `storage.url`, shared by every engine given
//! it. An occurrence is claimed in one transaction that excludes every other writer
//! (SQLite's `BEGIN IMMEDIATE`; PostgreSQL's `pg_advisory_xact_lock`), which inserts its
//! run keyed by (job, scheduled time) with `INSERT ... ON CONFLICT DO NOTHING` — a
//! second claim of it is a no-op — with a lease (owner, expiry), and advances the job's
//! next run; missed occurrences and the expired leases of dead engines are settled by
//! the job's misfire policy there too.
//!
//! The bounds every store keeps, whatever the cron: at most `scheduler.maxJobs` jobs
//! (checked in the transaction that adds one); at most one run of a job waiting or
//! running at a time (a job with a `running` run is not claimed: occurrences that come
//! meanwhile are settled by its misfire policy once that run ends, Quartz's "disallow
//! concurrent execution"); at most [`RUNS_KEPT`] recorded runs per job.
//!
//! Why [`JobStore`] is a synchronous, object-safe trait (`Arc<dyn JobStore>`), not an
//! async one: every caller already runs it on the blocking pool (`spawn_blocking`), as
//! SQLite needs; a claim is one transaction of a few statements decided between them in
//! Rust, which the SQLite backend runs as it is and the PostgreSQL backend drives on its
//! client's runtime ([`crate::storage::Postgres::block_on`]). One logic for both, no
//! boxed futures, and a third backend is one [`Transact`] impl.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use jiff::Timestamp;

use super::cron::{Schedule, ScheduleError};

mod postgres;
mod sqlite;

pub use postgres::PgStore;
pub(crate) use postgres::in_transaction;
pub use sqlite::SqliteStore;

/// How late an occurrence may be claimed and still count as on time; older ones were
/// missed (the engine was down) and follow the misfire policy.
pub const MISFIRE_GRACE: Duration = Duration::from_secs(60);

/// Runs kept per job (the latest; older finished ones are dropped as runs end and as
/// missed ones are recorded).
pub const RUNS_KEPT: u32 = 1000;

/// Most occurrences looked at when settling one job's missed runs (a per-second job
/// down for a day): beyond it they are skipped without a row each.
const MAX_SCAN: usize = 1000;

/// What happens to the runs a job missed while no engine ran it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Misfire {
    /// One catch-up run for all that were missed (the latest), the others skipped.
    #[default]
    Once,
    /// None: missed runs are recorded as skipped; the job waits for its next run.
    Skip,
    /// Each missed run, up to `scheduler.maxCatchUpRuns` (the latest ones), one after
    /// another.
    All,
}

impl Misfire {
    /// Its name in the store and in arguments.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Once => "once",
            Self::Skip => "skip",
            Self::All => "all",
        }
    }

    /// The policy named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "once" => Some(Self::Once),
            "skip" => Some(Self::Skip),
            "all" => Some(Self::All),
            _ => None,
        }
    }
}

/// A job to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    /// Its unique name.
    pub name: String,
    /// The cron expression.
    pub cron: String,
    /// The IANA time zone the expression is read in.
    pub timezone: String,
    /// What the agent is told at each run.
    pub message: String,
    /// A model of `llm.models`, or the default one.
    pub model: Option<String>,
    /// The chat the answer goes to (`telegram_123`), or the log.
    pub inject_into: Option<String>,
    /// What happens to missed runs.
    pub misfire: Misfire,
    /// The W3C `traceparent` of the call that added it (telemetry on), so that each of
    /// its runs links to that call.
    pub origin: Option<String>,
    /// How many messages of its own earlier runs each run is given; `None`:
    /// `agent.ownHistoryMessages`.
    pub history_messages: Option<u32>,
}

/// A job as stored: what was added, and its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The job as it was added (name, cron, zone, message, model, chat, misfire).
    pub spec: NewJob,
    /// When it was added.
    pub created: Timestamp,
    /// Its next occurrence, when it has one.
    pub next_run: Option<Timestamp>,
    /// The occurrence of its last finished run.
    pub last_run: Option<Timestamp>,
    /// How that run ended: `ok`, `failed`.
    pub last_status: Option<String>,
    /// Why it failed.
    pub last_error: Option<String>,
}

/// One occurrence this engine claimed and must run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The job, as it was when claimed.
    pub job: Job,
    /// The occurrence (the run's key with the job's name).
    pub scheduled: Timestamp,
}

/// One run as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    /// The job's name.
    pub job: String,
    /// The occurrence.
    pub scheduled: Timestamp,
    /// The engine that holds (or held) it.
    pub owner: String,
    /// `running`, `ok`, `failed`, `skipped`.
    pub status: String,
    /// Why it failed or was skipped.
    pub error: Option<String>,
    /// How many times an engine started it (more than 1 after a dead engine's lease).
    pub attempts: u32,
}

/// A run going now, and the engine that holds it (`schedule list` shows them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holding {
    /// The job's name.
    pub job: String,
    /// The occurrence.
    pub scheduled: Timestamp,
    /// The engine that holds its lease (`host-pid123-5f3a9c`).
    pub engine: String,
    /// Until when, unless renewed; past it, another engine takes the run over.
    pub lease_until: Timestamp,
}

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database could not be opened or set up.
    #[error("cannot open the schedule database {path}: {source}")]
    Open {
        /// Its path.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// A statement failed.
    #[error("the schedule database failed while {doing}: {source}")]
    Sql {
        /// What was being done.
        doing: &'static str,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// PostgreSQL could not be reached, or a statement failed there.
    #[error("the schedule in PostgreSQL failed while {doing}: {source}")]
    Postgres {
        /// What was being done.
        doing: &'static str,
        /// Why (the host named, never the password).
        source: Box<crate::storage::StorageError>,
    },
    /// A job of that name exists.
    #[error("a job named `{0}` already exists; remove it first or pick another name")]
    Duplicate(String),
    /// The store holds as many jobs as `scheduler.maxJobs` allows.
    #[error(
        "the schedule already holds {max} job{s}, the most scheduler.maxJobs allows; remove one \
         first (schedule_remove) or raise scheduler.maxJobs in engine.json",
        s = if *max == 1 { "" } else { "s" }
    )]
    Full {
        /// The cap, `scheduler.maxJobs`.
        max: u32,
    },
    /// The job has a run waiting or running; a job runs one at a time.
    #[error(
        "the job `{name}` has a run going (the occurrence of {scheduled}); a job runs one at a \
         time: try again when it ends"
    )]
    Busy {
        /// The job's name.
        name: String,
        /// The occurrence of the run going.
        scheduled: Timestamp,
    },
    /// No job has that name.
    #[error("no job named `{name}`; {}", known_jobs(.known))]
    NotFound {
        /// The name asked for.
        name: String,
        /// The jobs there are, the most similar first.
        known: Vec<String>,
    },
    /// The job's schedule is unusable.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
}

fn known_jobs(known: &[String]) -> String {
    if known.is_empty() {
        "there are no jobs".into()
    } else {
        format!("jobs: {}", known.join(", "))
    }
}

impl StoreError {
    /// Whether no job had the name asked for.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// Whether a job of that name existed already.
    pub fn is_duplicate(&self) -> bool {
        matches!(self, Self::Duplicate(_))
    }

    /// Whether the store held `scheduler.maxJobs` jobs already.
    pub fn is_full(&self) -> bool {
        matches!(self, Self::Full { .. })
    }

    /// Whether the job had a run going.
    pub fn is_busy(&self) -> bool {
        matches!(self, Self::Busy { .. })
    }
}

/// Where jobs and runs are kept; shared by every engine on one data dir.
///
/// Every store keeps the same bounds, in the same transaction as the change they
/// bound: at most `max_jobs` jobs ([`add`](Self::add)); at most one run of a job
/// `running` (claimed, waiting for a place or running) at a time ([`claim_due`](
/// Self::claim_due), [`claim_now`](Self::claim_now)); at most [`RUNS_KEPT`] runs recorded
/// per job.
pub trait JobStore: Send + Sync {
    /// Adds `job`, its first run the first occurrence after `now`; [`StoreError::Full`]
    /// when the store holds `max_jobs` jobs already.
    fn add(&self, job: &NewJob, now: Timestamp, max_jobs: u32) -> Result<Job, StoreError>;
    /// Removes the job `name` and its runs.
    fn remove(&self, name: &str) -> Result<(), StoreError>;
    /// Every job, by name.
    fn list(&self) -> Result<Vec<Job>, StoreError>;
    /// The job `name`.
    fn get(&self, name: &str) -> Result<Job, StoreError>;
    /// The earliest next run of any job that has no run going.
    fn next_due(&self) -> Result<Option<Timestamp>, StoreError>;
    /// Claims for `owner` the due occurrence of every job that has no run going (and
    /// runs of dead engines whose lease expired), at most one per job, settling the
    /// others by each job's policy, holding each for `lease`; advances each job's next
    /// run. A job whose run is going is left as it is: what comes meanwhile is settled
    /// once that run ends.
    fn claim_due(
        &self,
        now: Timestamp,
        owner: &str,
        lease: Duration,
    ) -> Result<Vec<Claim>, StoreError>;
    /// Claims a run of `name` now, off its schedule (`schedule run-now`);
    /// [`StoreError::Busy`] when the job has a run going.
    fn claim_now(
        &self,
        name: &str,
        now: Timestamp,
        owner: &str,
        lease: Duration,
    ) -> Result<Claim, StoreError>;
    /// Extends `owner`'s lease on a run to `until`; false when it is no longer its own.
    fn renew(&self, claim: &Claim, owner: &str, until: Timestamp) -> Result<bool, StoreError>;
    /// Extends `owner`'s lease on every run it holds to `until` (one statement, however
    /// many jobs); how many it holds.
    fn renew_all(&self, owner: &str, until: Timestamp) -> Result<usize, StoreError>;
    /// Records how `owner`'s run ended (`Err` with why it failed).
    fn finish(
        &self,
        claim: &Claim,
        owner: &str,
        outcome: Result<(), String>,
        now: Timestamp,
    ) -> Result<(), StoreError>;
    /// The runs of `name`, oldest occurrence first.
    fn runs(&self, name: &str) -> Result<Vec<RunRecord>, StoreError>;
    /// The runs going now (claimed, waiting or running) and who holds each, by job.
    fn holdings(&self) -> Result<Vec<Holding>, StoreError>;
}

/// One value of a statement's parameters or of a row: what both backends store (times
/// as whole seconds since the epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// SQL `NULL`.
    Null,
    /// A whole number.
    Int(i64),
    /// Text.
    Text(String),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Self::Int(v)
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Self::Int(i64::from(v))
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Self::Text(v.to_owned())
    }
}

impl From<&String> for Value {
    fn from(v: &String) -> Self {
        Self::Text(v.clone())
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

/// A row as read: its columns in the order selected.
pub type Row = Vec<Value>;

/// The parameters of a statement, each turned into a [`Value`].
macro_rules! values {
    ($($v:expr),* $(,)?) => { &[$(Value::from($v)),*][..] };
}

fn int(r: &Row, i: usize) -> Option<i64> {
    match r.get(i) {
        Some(Value::Int(v)) => Some(*v),
        _ => None,
    }
}

fn text(r: &Row, i: usize) -> Option<String> {
    match r.get(i) {
        Some(Value::Text(v)) => Some(v.clone()),
        _ => None,
    }
}

/// One transaction of a backend: statements written once, in the SQL both backends
/// read (`?1`-style parameters, `ON CONFLICT DO NOTHING`; PostgreSQL's backend rewrites
/// the parameters to `$1`).
pub trait Tx {
    /// Runs `sql`; how many rows it changed.
    fn execute(
        &mut self,
        doing: &'static str,
        sql: &str,
        params: &[Value],
    ) -> Result<u64, StoreError>;
    /// Runs `sql`; the rows it returned.
    fn query(
        &mut self,
        doing: &'static str,
        sql: &str,
        params: &[Value],
    ) -> Result<Vec<Row>, StoreError>;
}

/// A backend: runs a closure in one transaction. `write` transactions exclude every
/// other writer on the same database, whichever engine runs them (SQLite's `BEGIN
/// IMMEDIATE`, PostgreSQL's `pg_advisory_xact_lock`): the bounds are checked and the
/// claims made in them. The closure's error rolls the transaction back.
pub trait Transact: Send + Sync {
    /// Runs `f` in one transaction.
    fn transact(
        &self,
        write: bool,
        doing: &'static str,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;
    /// The most missed runs a job with misfire `all` catches up.
    fn max_catch_up(&self) -> u32;
}

/// [`Transact::transact`] with a result.
fn run<T>(
    b: &(impl Transact + ?Sized),
    write: bool,
    doing: &'static str,
    f: impl FnOnce(&mut dyn Tx) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let mut f = Some(f);
    let mut out = None;
    b.transact(write, doing, &mut |tx| {
        if let Some(f) = f.take() {
            out = Some(f(tx)?);
        }
        Ok(())
    })?;
    out.ok_or(StoreError::Sql {
        doing,
        source: rusqlite::Error::InvalidQuery,
    })
}

/// The jobs with a run going (claimed, waiting or running): they are not claimed again
/// until it ends.
const BUSY: &str = "SELECT job FROM runs WHERE status = 'running'";

const JOB_COLUMNS: &str = "name, cron, timezone, message, model, inject_into, misfire, created, \
                           next_run, last_run, last_status, last_error, origin, \
                           history_messages";

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn job_from_row(r: &Row) -> Job {
    Job {
        spec: NewJob {
            name: text(r, 0).unwrap_or_default(),
            cron: text(r, 1).unwrap_or_default(),
            timezone: text(r, 2).unwrap_or_default(),
            message: text(r, 3).unwrap_or_default(),
            model: text(r, 4),
            inject_into: text(r, 5),
            misfire: text(r, 6)
                .and_then(|m| Misfire::parse(&m))
                .unwrap_or_default(),
            origin: text(r, 12),
            history_messages: int(r, 13).and_then(|n| u32::try_from(n).ok()),
        },
        created: ts(int(r, 7).unwrap_or_default()),
        next_run: int(r, 8).map(ts),
        last_run: int(r, 9).map(ts),
        last_status: text(r, 10),
        last_error: text(r, 11),
    }
}

fn lease_end(now: Timestamp, lease: Duration) -> i64 {
    now.as_second()
        .saturating_add(i64::try_from(lease.as_secs()).unwrap_or(i64::MAX))
}

/// The names of the jobs, the most similar to `near` first.
fn names(tx: &mut dyn Tx, near: &str) -> Result<Vec<String>, StoreError> {
    let names: Vec<String> = tx
        .query(
            "listing the jobs",
            "SELECT name FROM jobs ORDER BY name",
            &[],
        )?
        .iter()
        .filter_map(|r| text(r, 0))
        .collect();
    Ok(
        klaw_tools::by_similarity(near, names.iter().map(String::as_str))
            .into_iter()
            .map(|(_, n)| n.to_owned())
            .collect(),
    )
}

fn get_in(tx: &mut dyn Tx, name: &str) -> Result<Job, StoreError> {
    let rows = tx.query(
        "reading a job",
        &format!("SELECT {JOB_COLUMNS} FROM jobs WHERE name = ?1"),
        values![name],
    )?;
    match rows.first() {
        Some(r) => Ok(job_from_row(r)),
        None => Err(StoreError::NotFound {
            name: name.to_owned(),
            known: names(tx, name)?,
        }),
    }
}

/// Inserts a run for `owner`, or does nothing when the occurrence has one; whether it
/// was inserted.
fn insert_run(
    tx: &mut dyn Tx,
    job: &str,
    scheduled: i64,
    owner: &str,
    (status, error): (&str, Option<&str>),
    lease_until: i64,
    now: i64,
) -> Result<bool, StoreError> {
    let n = tx.execute(
        "claiming a run",
        "INSERT INTO runs (job, scheduled, owner, lease_until, status, error, started)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING",
        values![job, scheduled, owner, lease_until, status, error, now],
    )?;
    Ok(n == 1)
}

/// Drops the runs of `job` older than its latest [`RUNS_KEPT`] (never one `running`):
/// the record stays bounded, though a per-second job makes 86,400 runs a day.
fn prune(tx: &mut dyn Tx, job: &str) -> Result<(), StoreError> {
    tx.execute(
        "dropping old runs",
        "DELETE FROM runs WHERE job = ?1 AND status != 'running' AND scheduled <
           (SELECT scheduled FROM runs WHERE job = ?1
            ORDER BY scheduled DESC LIMIT 1 OFFSET ?2)",
        values![job, RUNS_KEPT - 1],
    )?;
    Ok(())
}

/// Why an expired run of a job with misfire `skip` is not run again.
const EXPIRED_SKIP: &str = "the engine running it stopped before it finished (its lease \
                            expired); misfire skip: not run again";

/// Why an expired run is not run again when another run of its job is going.
const EXPIRED_BUSY: &str = "the engine running it stopped before it finished (its lease \
                            expired), and another run of the job is going: a job runs one \
                            at a time";

/// Settles the runs of engines that died holding them (their lease expired) by each
/// job's policy; never `owner`'s own (a renewal of this engine's late under load does
/// not make it run its own occurrence twice: its runs end by being recorded): under `once` and `all` the latest is run again by `owner` (same row, one
/// more attempt), under `skip` it is recorded failed. A job never gets a second run
/// going: any other expired run of it, or one of a job whose run is going in a live
/// engine, is recorded failed.
fn settle_expired(
    tx: &mut dyn Tx,
    now_s: i64,
    owner: &str,
    until: i64,
) -> Result<Vec<Claim>, StoreError> {
    let columns = JOB_COLUMNS.split(", ").count();
    let expired: Vec<(Job, i64)> = tx
        .query(
            "reading expired leases",
            &format!(
                "SELECT {}, r.scheduled FROM runs r JOIN jobs j ON j.name = r.job
                 WHERE r.status = 'running' AND r.lease_until < ?1 AND r.owner <> ?2
                 ORDER BY r.job, r.scheduled DESC",
                JOB_COLUMNS
                    .split(", ")
                    .map(|c| format!("j.{c}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            values![now_s, owner],
        )?
        .iter()
        // The run's column follows the job's.
        .map(|r| (job_from_row(r), int(r, columns).unwrap_or_default()))
        .collect();
    if expired.is_empty() {
        return Ok(Vec::new());
    }
    let mut going: HashSet<String> = tx
        .query(
            "reading runs going",
            "SELECT DISTINCT job FROM runs
             WHERE status = 'running' AND (lease_until >= ?1 OR owner = ?2)",
            values![now_s, owner],
        )?
        .iter()
        .filter_map(|r| text(r, 0))
        .collect();
    let mut claims = Vec::new();
    for (job, scheduled) in expired {
        let why = if job.spec.misfire == Misfire::Skip {
            Some(EXPIRED_SKIP)
        } else if going.contains(&job.spec.name) {
            Some(EXPIRED_BUSY)
        } else {
            None
        };
        if let Some(why) = why {
            tx.execute(
                "settling an expired lease",
                "UPDATE runs SET status = 'failed', finished = ?3, error = ?4
                 WHERE job = ?1 AND scheduled = ?2",
                values![&job.spec.name, scheduled, now_s, why],
            )?;
            continue;
        }
        tx.execute(
            "taking over an expired lease",
            "UPDATE runs SET owner = ?3, lease_until = ?4, attempts = attempts + 1, started = ?5
             WHERE job = ?1 AND scheduled = ?2",
            values![&job.spec.name, scheduled, owner, until, now_s],
        )?;
        going.insert(job.spec.name.clone());
        claims.push(Claim {
            job,
            scheduled: ts(scheduled),
        });
    }
    Ok(claims)
}
/// The occurrences of `schedule` from `first` (one of them) up to `now`: all of them, or
/// when there are more than [`MAX_SCAN`], the latest ones (then `true`: the older ones
/// are skipped without a row).
fn due_occurrences(
    schedule: &Schedule,
    first: Timestamp,
    now: Timestamp,
) -> (Vec<Timestamp>, bool) {
    let scan = |from: Timestamp| {
        let mut occurrences = vec![from];
        let mut at = from;
        while let Some(n) = schedule.next_after(at) {
            if n > now {
                return (occurrences, false);
            }
            if occurrences.len() >= MAX_SCAN {
                return (occurrences, true);
            }
            occurrences.push(n);
            at = n;
        }
        (occurrences, false)
    };
    let (mut occurrences, mut cut) = scan(first);
    let mut more = false;
    // Cut: scan again from as far before now as the scan spanned (a few times for an
    // irregular expression), so the latest occurrences are the ones looked at.
    for _ in 0..4 {
        if !cut {
            break;
        }
        more = true;
        let (Some(&from), Some(&to)) = (occurrences.first(), occurrences.last()) else {
            break;
        };
        let start = now
            .checked_sub(to.duration_since(from))
            .ok()
            .and_then(|t| t.checked_sub(jiff::SignedDuration::from_secs(1)).ok())
            .and_then(|t| schedule.next_after(t));
        match start {
            Some(s) if s > to && s <= now => (occurrences, cut) = scan(s),
            _ => break,
        }
    }
    (occurrences, more)
}

/// Claims for `owner` the occurrence of `job` (due, with no run going) that its misfire
/// policy runs now, records the older ones it does not run as skipped, and moves the
/// job's next run on: to its next occurrence after `now`, or under `all` to the next
/// missed one, claimed once this run ends (one run at a time).
fn claim_job(
    tx: &mut dyn Tx,
    job: Job,
    now: Timestamp,
    owner: &str,
    until: i64,
    max_catch_up: usize,
) -> Result<Option<Claim>, StoreError> {
    let now_s = now.as_second();
    let Some(first) = job.next_run else {
        return Ok(None);
    };
    let schedule = match Schedule::parse_cached(&job.spec.cron, &job.spec.timezone) {
        Ok(s) => s,
        Err(e) => {
            // Stored before a change of rules: it is not run, and says why.
            tx.execute(
                "disabling a job",
                "UPDATE jobs SET next_run = NULL, last_status = 'failed', last_error = ?2 WHERE name = ?1",
                values![&job.spec.name, e.to_string().as_str()],
            )?;
            return Ok(None);
        }
    };
    let (occurrences, more) = due_occurrences(&schedule, first, now);
    let after_now = schedule.next_after(now);
    let grace = i64::try_from(MISFIRE_GRACE.as_secs()).unwrap_or(60);
    let on_time = |t: &Timestamp| now_s - t.as_second() <= grace;
    // The one occurrence run now, and the job's next run.
    let (run, next) = match job.spec.misfire {
        Misfire::Once => (occurrences.last().copied(), after_now),
        Misfire::Skip => (occurrences.last().copied().filter(on_time), after_now),
        Misfire::All => {
            // Each of the latest maxCatchUpRuns, oldest first, one at a time.
            let window = &occurrences[occurrences.len().saturating_sub(max_catch_up)..];
            (
                window.first().copied(),
                window.get(1).copied().or(after_now),
            )
        }
    };
    // When the job's last run ended: what came before it came while it was going.
    let last_end: Option<i64> = tx
        .query(
            "reading the last run",
            "SELECT MAX(finished) FROM runs WHERE job = ?1 AND status IN ('ok', 'failed')",
            values![&job.spec.name],
        )?
        .first()
        .and_then(|r| int(r, 0));
    let mut claim = None;
    let mut skipped = false;
    for t in &occurrences {
        let s = t.as_second();
        if Some(*t) == run {
            if insert_run(
                tx,
                &job.spec.name,
                s,
                owner,
                ("running", None),
                until,
                now_s,
            )? {
                claim = Some(Claim {
                    job: job.clone(),
                    scheduled: *t,
                });
            }
        } else if run.is_none_or(|r| *t < r) {
            let why = if last_end.is_some_and(|e| s < e) {
                format!(
                    "came while the job's run before it was still going: a job runs one at a \
                     time (misfire {})",
                    job.spec.misfire.as_str()
                )
            } else {
                format!(
                    "missed while no engine ran (misfire {})",
                    job.spec.misfire.as_str()
                )
            };
            insert_run(
                tx,
                &job.spec.name,
                s,
                owner,
                ("skipped", Some(&why)),
                now_s,
                now_s,
            )?;
            skipped = true;
        }
    }
    if skipped {
        prune(tx, &job.spec.name)?;
    }
    if more {
        tracing::warn!(target: "klaw::scheduler", job = job.spec.name, "more than {MAX_SCAN} runs were missed; the older ones are skipped without a record");
    }
    tx.execute(
        "advancing a job",
        "UPDATE jobs SET next_run = ?2 WHERE name = ?1",
        values![&job.spec.name, next.map(|t| t.as_second())],
    )?;
    Ok(claim)
}

impl<B: Transact> JobStore for B {
    fn add(&self, job: &NewJob, now: Timestamp, max_jobs: u32) -> Result<Job, StoreError> {
        let schedule = Schedule::parse_cached(&job.cron, &job.timezone)?;
        let next = schedule.next_after(now).map(|t| t.as_second());
        run(self, true, "adding a job", |tx| {
            // Counted under the write lock: two engines adding at once cannot pass it.
            let count = tx
                .query("counting the jobs", "SELECT COUNT(*) FROM jobs", &[])?
                .first()
                .and_then(|r| int(r, 0))
                .unwrap_or_default();
            let taken = !tx
                .query(
                    "adding a job",
                    "SELECT name FROM jobs WHERE name = ?1",
                    values![&job.name],
                )?
                .is_empty();
            if taken {
                return Err(StoreError::Duplicate(job.name.clone()));
            }
            if count >= i64::from(max_jobs) {
                return Err(StoreError::Full { max: max_jobs });
            }
            let n = tx.execute(
                "adding a job",
                "INSERT INTO jobs (name, cron, timezone, message, model, inject_into, misfire, created, next_run, origin, history_messages)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) ON CONFLICT DO NOTHING",
                values![
                    &job.name,
                    job.cron.trim(),
                    schedule.zone(),
                    &job.message,
                    job.model.as_ref(),
                    job.inject_into.as_ref(),
                    job.misfire.as_str(),
                    now.as_second(),
                    next,
                    job.origin.as_ref(),
                    job.history_messages
                ],
            )?;
            if n == 0 {
                return Err(StoreError::Duplicate(job.name.clone()));
            }
            get_in(tx, &job.name)
        })
    }

    fn remove(&self, name: &str) -> Result<(), StoreError> {
        run(self, true, "removing a job", |tx| {
            let n = tx.execute(
                "removing a job",
                "DELETE FROM jobs WHERE name = ?1",
                values![name],
            )?;
            if n == 0 {
                return Err(StoreError::NotFound {
                    name: name.to_owned(),
                    known: names(tx, name)?,
                });
            }
            tx.execute(
                "removing a job's runs",
                "DELETE FROM runs WHERE job = ?1",
                values![name],
            )?;
            Ok(())
        })
    }

    fn list(&self) -> Result<Vec<Job>, StoreError> {
        run(self, false, "listing the jobs", |tx| {
            let mut jobs: Vec<Job> = tx
                .query(
                    "listing the jobs",
                    &format!("SELECT {JOB_COLUMNS} FROM jobs"),
                    &[],
                )?
                .iter()
                .map(job_from_row)
                .collect();
            // By name, bytewise, whatever the database's collation.
            jobs.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
            Ok(jobs)
        })
    }

    fn get(&self, name: &str) -> Result<Job, StoreError> {
        run(self, false, "reading a job", |tx| get_in(tx, name))
    }

    fn next_due(&self) -> Result<Option<Timestamp>, StoreError> {
        run(self, false, "reading the next run", |tx| {
            Ok(tx
                .query(
                    "reading the next run",
                    &format!("SELECT MIN(next_run) FROM jobs WHERE name NOT IN ({BUSY})"),
                    &[],
                )?
                .first()
                .and_then(|r| int(r, 0))
                .map(ts))
        })
    }

    fn claim_due(
        &self,
        now: Timestamp,
        owner: &str,
        lease: Duration,
    ) -> Result<Vec<Claim>, StoreError> {
        let max_catch_up = usize::try_from(self.max_catch_up().max(1)).unwrap_or(usize::MAX);
        run(self, true, "claiming due runs", |tx| {
            let until = lease_end(now, lease);
            let mut claims = settle_expired(tx, now.as_second(), owner, until)?;
            // Jobs whose next run has come and that have no run going: a job whose run
            // goes on is looked at again once it ends.
            let due: Vec<Job> = tx
                .query(
                    "reading due jobs",
                    &format!(
                        "SELECT {JOB_COLUMNS} FROM jobs WHERE next_run <= ?1 AND name NOT IN ({BUSY})
                         ORDER BY next_run, name"
                    ),
                    values![now.as_second()],
                )?
                .iter()
                .map(job_from_row)
                .collect();
            for job in due {
                claims.extend(claim_job(tx, job, now, owner, until, max_catch_up)?);
            }
            Ok(claims)
        })
    }

    fn claim_now(
        &self,
        name: &str,
        now: Timestamp,
        owner: &str,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        run(self, true, "claiming a run", |tx| {
            let job = get_in(tx, name)?;
            // One run of a job at a time, this one too.
            let going = tx
                .query(
                    "claiming a run",
                    "SELECT scheduled FROM runs WHERE job = ?1 AND status = 'running'
                     ORDER BY scheduled DESC LIMIT 1",
                    values![name],
                )?
                .first()
                .and_then(|r| int(r, 0));
            if let Some(scheduled) = going {
                return Err(StoreError::Busy {
                    name: name.to_owned(),
                    scheduled: ts(scheduled),
                });
            }
            // A second run-now in the same second is the next second's.
            let mut s = now.as_second();
            while !insert_run(
                tx,
                name,
                s,
                owner,
                ("running", None),
                lease_end(now, lease),
                now.as_second(),
            )? {
                s += 1;
            }
            Ok(Claim {
                job,
                scheduled: ts(s),
            })
        })
    }

    fn renew(&self, claim: &Claim, owner: &str, until: Timestamp) -> Result<bool, StoreError> {
        run(self, true, "renewing a lease", |tx| {
            tx.execute(
                "renewing a lease",
                "UPDATE runs SET lease_until = ?4 WHERE job = ?1 AND scheduled = ?2 AND owner = ?3 AND status = 'running'",
                values![&claim.job.spec.name, claim.scheduled.as_second(), owner, until.as_second()],
            )
            .map(|n| n == 1)
        })
    }

    fn renew_all(&self, owner: &str, until: Timestamp) -> Result<usize, StoreError> {
        run(self, true, "renewing the leases", |tx| {
            tx.execute(
                "renewing the leases",
                "UPDATE runs SET lease_until = ?2 WHERE owner = ?1 AND status = 'running'",
                values![owner, until.as_second()],
            )
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        })
    }

    fn finish(
        &self,
        claim: &Claim,
        owner: &str,
        outcome: Result<(), String>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let (status, error) = match &outcome {
            Ok(()) => ("ok", None),
            Err(e) => ("failed", Some(e.as_str())),
        };
        run(self, true, "recording a run", |tx| {
            let n = tx.execute(
                "recording a run",
                "UPDATE runs SET status = ?4, error = ?5, finished = ?6
                 WHERE job = ?1 AND scheduled = ?2 AND owner = ?3 AND status = 'running'",
                values![
                    &claim.job.spec.name,
                    claim.scheduled.as_second(),
                    owner,
                    status,
                    error,
                    now.as_second()
                ],
            )?;
            if n == 1 {
                tx.execute(
                    "recording a run",
                    "UPDATE jobs SET last_run = ?2, last_status = ?3, last_error = ?4 WHERE name = ?1",
                    values![&claim.job.spec.name, claim.scheduled.as_second(), status, error],
                )?;
                prune(tx, &claim.job.spec.name)?;
            } else {
                tracing::warn!(target: "klaw::scheduler", job = claim.job.spec.name, "the run's lease had passed to another engine; its end was not recorded");
            }
            Ok(())
        })
    }

    fn runs(&self, name: &str) -> Result<Vec<RunRecord>, StoreError> {
        run(self, false, "listing runs", |tx| {
            Ok(tx
                .query(
                    "listing runs",
                    "SELECT job, scheduled, owner, status, error, attempts FROM runs
                     WHERE job = ?1 ORDER BY scheduled",
                    values![name],
                )?
                .iter()
                .map(|r| RunRecord {
                    job: text(r, 0).unwrap_or_default(),
                    scheduled: ts(int(r, 1).unwrap_or_default()),
                    owner: text(r, 2).unwrap_or_default(),
                    status: text(r, 3).unwrap_or_default(),
                    error: text(r, 4),
                    attempts: int(r, 5)
                        .and_then(|a| u32::try_from(a).ok())
                        .unwrap_or_default(),
                })
                .collect())
        })
    }

    fn holdings(&self) -> Result<Vec<Holding>, StoreError> {
        run(self, false, "listing runs going", |tx| {
            Ok(tx
                .query(
                    "listing runs going",
                    "SELECT job, scheduled, owner, lease_until FROM runs
                     WHERE status = 'running' ORDER BY job, scheduled",
                    &[],
                )?
                .iter()
                .map(|r| Holding {
                    job: text(r, 0).unwrap_or_default(),
                    scheduled: ts(int(r, 1).unwrap_or_default()),
                    engine: text(r, 2).unwrap_or_default(),
                    lease_until: ts(int(r, 3).unwrap_or_default()),
                })
                .collect())
        })
    }
}

/// The tests' PostgreSQL (`crate::pg_harness`).
#[cfg(test)]
use crate::pg_harness;

#[cfg(test)]
mod tests {
    use super::pg_harness;
    use super::*;
    use rusqlite::Connection;
    use std::sync::Arc;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn job(name: &str, cron: &str, misfire: Misfire) -> NewJob {
        NewJob {
            name: name.into(),
            cron: cron.into(),
            timezone: "UTC".into(),
            message: "do it".into(),
            model: None,
            inject_into: None,
            misfire,
            origin: None,
            history_messages: None,
        }
    }

    /// What the tests use of a store: the trait, and raw statements.
    trait Both: JobStore + Transact {}
    impl<T: JobStore + Transact> Both for T {}

    /// One database of a test: its store, and how to open another store on it (another
    /// engine's).
    struct Db {
        _dir: Option<tempfile::TempDir>,
        open: Box<dyn Fn() -> Arc<dyn Both>>,
    }

    impl Db {
        fn other(&self) -> Arc<dyn Both> {
            (self.open)()
        }
    }

    /// Runs `test` against each backend: SQLite, then PostgreSQL (a server of the
    /// test's own, a database per store made) where it is installed; it is given the
    /// maker of a fresh database and its store.
    fn each_backend(test: impl Fn(&dyn Fn() -> (Db, Arc<dyn Both>))) {
        test(&|| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("schedule.sqlite");
            let open: Box<dyn Fn() -> Arc<dyn Both>> =
                Box::new(move || Arc::new(SqliteStore::new(path.clone(), 3)));
            let s = open();
            (
                Db {
                    _dir: Some(dir),
                    open,
                },
                s,
            )
        });
        let Some(server) = pg_harness::Postgres::start() else {
            return;
        };
        test(&|| {
            let url = crate::config::DatabaseUrl::new(server.fresh_db());
            let open: Box<dyn Fn() -> Arc<dyn Both>> = Box::new(move || {
                let db = crate::storage::Postgres::connect(&url).unwrap();
                Arc::new(PgStore::new(Arc::new(db), 3))
            });
            let s = open();
            (Db { _dir: None, open }, s)
        });
    }

    /// Adds `job` at `now` under a cap no test reaches.
    fn add(s: &dyn Both, job: &NewJob, now: Timestamp) {
        s.add(job, now, 100).unwrap();
    }

    const LEASE: Duration = Duration::from_secs(30);

    #[test]
    fn a_schedule_of_an_older_engine_gains_the_origin_column_and_keeps_its_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("schedule.sqlite");
        {
            // The jobs table as engines before the origin column wrote it.
            let old = Connection::open(&path).unwrap();
            old.execute_batch(
                "CREATE TABLE jobs (name TEXT PRIMARY KEY, cron TEXT NOT NULL,
                 timezone TEXT NOT NULL, message TEXT NOT NULL, model TEXT, inject_into TEXT,
                 misfire TEXT NOT NULL DEFAULT 'once', created INTEGER NOT NULL,
                 next_run INTEGER, last_run INTEGER, last_status TEXT, last_error TEXT);
                 INSERT INTO jobs (name, cron, timezone, message, created)
                 VALUES ('old', '0 9 * * *', 'UTC', 'report', 0);",
            )
            .unwrap();
        }
        let s = SqliteStore::new(path, 3);
        let old = s.get("old").unwrap();
        assert_eq!(old.spec.origin, None);
        let mut new = job("new", "0 10 * * *", Misfire::Once);
        new.origin = Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into());
        add(&s, &new, at("2026-03-01T00:00:00Z"));
        assert_eq!(s.get("new").unwrap().spec.origin, new.origin);
        assert_eq!(s.list().unwrap().len(), 2);
        // And the history_messages column: none for the old job, kept for a new one.
        assert_eq!(old.spec.history_messages, None);
        let mut own = job("own", "0 11 * * *", Misfire::Once);
        own.history_messages = Some(3);
        add(&s, &own, at("2026-03-01T00:00:00Z"));
        assert_eq!(s.get("own").unwrap().spec.history_messages, Some(3));
    }

    #[test]
    fn add_list_remove_and_their_errors() {
        each_backend(|store| {
            let (_d, s) = store();
            let j = s
                .add(
                    &job("report", "0 9 * * *", Misfire::Once),
                    at("2026-01-01T10:00:00Z"),
                    100,
                )
                .unwrap();
            assert_eq!(j.next_run, Some(at("2026-01-02T09:00:00Z")));
            let dup = s
                .add(
                    &job("report", "0 10 * * *", Misfire::Once),
                    at("2026-01-01T10:00:00Z"),
                    100,
                )
                .unwrap_err();
            assert!(dup.is_duplicate() && dup.to_string().contains("`report` already exists"));
            let bad = s
                .add(
                    &job("x", "61 * * * *", Misfire::Once),
                    at("2026-01-01T10:00:00Z"),
                    100,
                )
                .unwrap_err();
            assert!(
                bad.to_string().contains("minute 61 is out of range 0-59"),
                "{bad}"
            );
            add(
                &*s,
                &job("backup", "@daily", Misfire::Skip),
                at("2026-01-01T10:00:00Z"),
            );
            let names: Vec<String> = s.list().unwrap().into_iter().map(|j| j.spec.name).collect();
            assert_eq!(names, ["backup", "report"]);
            let missing = s.remove("reprot").unwrap_err();
            assert!(missing.is_not_found());
            assert_eq!(
                missing.to_string(),
                "no job named `reprot`; jobs: report, backup"
            );
            s.remove("report").unwrap();
            assert_eq!(s.list().unwrap().len(), 1);
        });
    }

    #[test]
    fn a_claim_is_made_once_and_advances_the_job() {
        each_backend(|store| {
            let (dir, s) = store();
            add(
                &*s,
                &job("tick", "* * * * * *", Misfire::Once),
                at("2026-01-01T00:00:00Z"),
            );
            let other = dir.other();
            let now = at("2026-01-01T00:00:01Z");
            let mine = s.claim_due(now, "a", LEASE).unwrap();
            assert_eq!(mine.len(), 1);
            assert_eq!(mine[0].scheduled, now);
            // The other engine, at the same instant: nothing left.
            assert!(other.claim_due(now, "b", LEASE).unwrap().is_empty());
            assert_eq!(
                s.get("tick").unwrap().next_run,
                Some(at("2026-01-01T00:00:02Z"))
            );
            s.finish(&mine[0], "a", Ok(()), now).unwrap();
            let runs = s.runs("tick").unwrap();
            assert_eq!(runs.len(), 1);
            assert_eq!((runs[0].status.as_str(), runs[0].attempts), ("ok", 1));
            let j = s.get("tick").unwrap();
            assert_eq!(
                (j.last_run, j.last_status.as_deref()),
                (Some(now), Some("ok"))
            );
            // A failure is recorded on the job and the run.
            let next = other
                .claim_due(at("2026-01-01T00:00:02Z"), "b", LEASE)
                .unwrap();
            other
                .finish(
                    &next[0],
                    "b",
                    Err("the model failed".into()),
                    at("2026-01-01T00:00:02Z"),
                )
                .unwrap();
            let j = s.get("tick").unwrap();
            assert_eq!(j.last_error.as_deref(), Some("the model failed"));
            // Someone else's run cannot be finished.
            s.finish(&next[0], "a", Ok(()), at("2026-01-01T00:00:03Z"))
                .unwrap();
            assert_eq!(s.runs("tick").unwrap()[1].status, "failed");
        });
    }

    /// Down for three days: a daily job's three missed runs under each policy.
    #[test]
    fn missed_runs_follow_the_misfire_policy() {
        each_backend(|store| {
            for (misfire, ran, skipped) in [
                (Misfire::Once, vec!["2026-01-04T09:00:00Z"], 2),
                (Misfire::Skip, vec![], 3),
                (
                    Misfire::All,
                    vec![
                        "2026-01-02T09:00:00Z",
                        "2026-01-03T09:00:00Z",
                        "2026-01-04T09:00:00Z",
                    ],
                    0,
                ),
            ] {
                let (_d, s) = store();
                add(
                    &*s,
                    &job("daily", "0 9 * * *", misfire),
                    at("2026-01-01T10:00:00Z"),
                );
                let got = claim_all(&*s, at("2026-01-04T12:00:00Z"));
                assert_eq!(got, ran, "{misfire:?}");
                let runs = s.runs("daily").unwrap();
                assert_eq!(runs.len(), 3, "{misfire:?}");
                assert_eq!(
                    runs.iter().filter(|r| r.status == "skipped").count(),
                    skipped,
                    "{misfire:?}"
                );
                assert_eq!(
                    s.get("daily").unwrap().next_run,
                    Some(at("2026-01-05T09:00:00Z"))
                );
            }
        });
    }

    /// Claims at `now` until nothing more is due, finishing each run before the next
    /// claim (a job runs one at a time); the occurrences run, in order.
    fn claim_all(s: &dyn Both, now: Timestamp) -> Vec<String> {
        let mut got = Vec::new();
        loop {
            let claims = s.claim_due(now, "a", LEASE).unwrap();
            if claims.is_empty() {
                return got;
            }
            assert_eq!(claims.len(), 1, "one run of the job at a time: {claims:?}");
            assert!(
                s.claim_due(now, "a", LEASE).unwrap().is_empty(),
                "a second run claimed while one goes"
            );
            s.finish(&claims[0], "a", Ok(()), now).unwrap();
            got.push(claims[0].scheduled.to_string());
        }
    }

    /// `all` catches up at most maxCatchUpRuns (3 here), the latest ones, one after
    /// another.
    #[test]
    fn all_is_capped() {
        each_backend(|store| {
            let (_d, s) = store();
            add(
                &*s,
                &job("hourly", "0 * * * *", Misfire::All),
                at("2026-01-01T00:30:00Z"),
            );
            let got = claim_all(&*s, at("2026-01-01T10:30:00Z"));
            assert_eq!(
                got,
                [
                    "2026-01-01T08:00:00Z",
                    "2026-01-01T09:00:00Z",
                    "2026-01-01T10:00:00Z"
                ]
            );
            assert_eq!(s.runs("hourly").unwrap().len(), 10);
        });
    }

    /// A dead engine's run: after its lease it is run again (once, all) by whoever
    /// claims next, with the same key; under skip it is recorded as failed.
    #[test]
    fn an_expired_lease_is_settled_by_the_policy() {
        each_backend(|store| {
            for misfire in [Misfire::Once, Misfire::All, Misfire::Skip] {
                let (_d, s) = store();
                add(
                    &*s,
                    &job("daily", "0 9 * * *", misfire),
                    at("2026-01-01T08:00:00Z"),
                );
                let t = at("2026-01-01T09:00:00Z");
                let dead = s.claim_due(t, "dead", LEASE).unwrap();
                assert_eq!(dead.len(), 1);
                // Within the lease: nobody takes it.
                assert!(
                    s.claim_due(at("2026-01-01T09:00:20Z"), "b", LEASE)
                        .unwrap()
                        .is_empty()
                );
                let after = s.claim_due(at("2026-01-01T09:01:00Z"), "b", LEASE).unwrap();
                let runs = s.runs("daily").unwrap();
                assert_eq!(runs.len(), 1);
                if misfire == Misfire::Skip {
                    assert!(after.is_empty());
                    assert_eq!(runs[0].status, "failed");
                    assert!(runs[0].error.as_deref().unwrap().contains("lease expired"));
                } else {
                    assert_eq!(after.len(), 1);
                    assert_eq!(after[0].scheduled, t);
                    assert_eq!((runs[0].owner.as_str(), runs[0].attempts), ("b", 2));
                    // The dead engine's finish, were it to come back, changes nothing.
                    s.finish(&dead[0], "dead", Ok(()), at("2026-01-01T09:02:00Z"))
                        .unwrap();
                    assert_eq!(s.runs("daily").unwrap()[0].status, "running");
                }
            }
        });
    }

    /// An engine whose renewal came late (a loaded machine) does not take its own run
    /// over: it is still running it, and running it again would ask the model twice.
    /// Another engine still does, after the lease.
    #[test]
    fn an_engine_never_takes_over_its_own_run() {
        each_backend(|store| {
            let (_d, s) = store();
            add(
                &*s,
                &job("daily", "0 9 * * *", Misfire::Once),
                at("2026-01-01T08:00:00Z"),
            );
            let first = s.claim_due(at("2026-01-01T09:00:00Z"), "a", LEASE).unwrap();
            assert_eq!(first.len(), 1);
            let late = at("2026-01-01T09:01:00Z");
            assert!(s.claim_due(late, "a", LEASE).unwrap().is_empty());
            let runs = s.runs("daily").unwrap();
            assert_eq!((runs.len(), runs[0].status.as_str()), (1, "running"));
            assert_eq!((runs[0].owner.as_str(), runs[0].attempts), ("a", 1));
            let taken = s.claim_due(late, "b", LEASE).unwrap();
            assert_eq!(taken.len(), 1);
            assert_eq!(s.runs("daily").unwrap()[0].owner, "b");
        });
    }

    /// Only the latest RUNS_KEPT runs of a job are kept.
    #[test]
    fn old_runs_are_dropped() {
        each_backend(|store| {
            let (_d, s) = store();
            add(
                &*s,
                &job("tick", "* * * * * *", Misfire::Once),
                at("2026-01-01T00:00:00Z"),
            );
            let start = at("2026-01-01T00:00:00Z");
            for i in 1..=i64::from(RUNS_KEPT) + 5 {
                let now = start + jiff::SignedDuration::from_secs(i);
                for c in s.claim_due(now, "a", LEASE).unwrap() {
                    s.finish(&c, "a", Ok(()), now).unwrap();
                }
            }
            let runs = s.runs("tick").unwrap();
            assert_eq!(runs.len(), RUNS_KEPT as usize);
            assert_eq!(
                runs[0].scheduled,
                start + jiff::SignedDuration::from_secs(6)
            );
        });
    }

    #[test]
    fn renewing_keeps_the_lease() {
        each_backend(|store| {
            let (_d, s) = store();
            add(
                &*s,
                &job("daily", "0 9 * * *", Misfire::Once),
                at("2026-01-01T08:00:00Z"),
            );
            let c = s.claim_due(at("2026-01-01T09:00:00Z"), "a", LEASE).unwrap();
            assert!(s.renew(&c[0], "a", at("2026-01-01T09:10:00Z")).unwrap());
            assert!(!s.renew(&c[0], "b", at("2026-01-01T09:10:00Z")).unwrap());
            assert_eq!(s.renew_all("b", at("2026-01-01T09:10:00Z")).unwrap(), 0);
            assert_eq!(s.renew_all("a", at("2026-01-01T09:10:00Z")).unwrap(), 1);
            assert!(
                s.claim_due(at("2026-01-01T09:05:00Z"), "b", LEASE)
                    .unwrap()
                    .is_empty()
            );
        });
    }

    #[test]
    fn run_now_claims_a_run_off_the_schedule() {
        each_backend(|store| {
            let (_d, s) = store();
            add(
                &*s,
                &job("daily", "0 9 * * *", Misfire::Once),
                at("2026-01-01T08:00:00Z"),
            );
            let now = at("2026-01-01T08:30:00Z");
            let a = s.claim_now("daily", now, "a", LEASE).unwrap();
            // One run of a job at a time, run-now's too.
            let busy = s.claim_now("daily", now, "a", LEASE).unwrap_err();
            assert!(busy.is_busy(), "{busy}");
            assert!(busy.to_string().contains("has a run going"), "{busy}");
            s.finish(&a, "a", Ok(()), now).unwrap();
            let b = s.claim_now("daily", now, "a", LEASE).unwrap();
            assert_ne!(a.scheduled, b.scheduled);
            assert_eq!(
                s.get("daily").unwrap().next_run,
                Some(at("2026-01-01T09:00:00Z"))
            );
            assert!(
                s.claim_now("nope", now, "a", LEASE)
                    .unwrap_err()
                    .is_not_found()
            );
        });
    }

    /// `scheduler.maxJobs`: past the cap, adding fails naming it, and nothing is added;
    /// a name in use is still reported as such.
    /// The refusal reads right for a cap of one.
    #[test]
    fn a_cap_of_one_job_is_said_in_the_singular() {
        let one = StoreError::Full { max: 1 }.to_string();
        assert!(one.contains("holds 1 job,"), "{one}");
    }

    #[test]
    fn adding_past_max_jobs_is_refused() {
        each_backend(|store| {
            let (_d, s) = store();
            let now = at("2026-01-01T00:00:00Z");
            for i in 0..3 {
                s.add(&job(&format!("j{i}"), "* * * * * *", Misfire::Once), now, 3)
                    .unwrap();
            }
            let full = s
                .add(&job("j3", "* * * * * *", Misfire::Once), now, 3)
                .unwrap_err();
            assert!(full.is_full(), "{full}");
            assert!(
                full.to_string().contains("holds 3 jobs")
                    && full.to_string().contains("scheduler.maxJobs"),
                "{full}"
            );
            let dup = s
                .add(&job("j0", "* * * * * *", Misfire::Once), now, 3)
                .unwrap_err();
            assert!(dup.is_duplicate(), "{dup}");
            assert_eq!(s.list().unwrap().len(), 3);
            s.remove("j0").unwrap();
            s.add(&job("j3", "* * * * * *", Misfire::Once), now, 3)
                .unwrap();
        });
    }

    /// A per-second job whose runs take 5 s, for three hours (the store's clock, a
    /// claim each second as `run` makes): never more than one run going, the
    /// occurrences that came meanwhile settled by the policy (recorded skipped, the
    /// latest run), and never more than RUNS_KEPT rows.
    #[test]
    fn a_slow_per_second_job_has_one_run_at_a_time_and_a_bounded_record() {
        each_backend(|store| {
            for misfire in [Misfire::Once, Misfire::Skip, Misfire::All] {
                let (_d, s) = store();
                let start = at("2026-01-01T00:00:00Z");
                add(&*s, &job("tick", "* * * * * *", misfire), start);
                let mut going: Option<(Claim, i64)> = None;
                let mut ran = 0;
                for i in 1..=3 * 3600 {
                    let now = start + jiff::SignedDuration::from_secs(i);
                    if let Some((c, since)) = &going
                        && i - since >= 5
                    {
                        s.finish(c, "a", Ok(()), now).unwrap();
                        going = None;
                    }
                    let claims = s.claim_due(now, "a", LEASE).unwrap();
                    if going.is_some() {
                        assert!(claims.is_empty(), "{misfire:?} at {now}: {claims:?}");
                    } else {
                        assert!(claims.len() <= 1, "{misfire:?} at {now}: {claims:?}");
                        going = claims.into_iter().next().map(|c| (c, i));
                        ran += usize::from(going.is_some());
                    }
                    if i % 600 == 0 {
                        let runs = s.runs("tick").unwrap();
                        assert!(
                            runs.len() <= RUNS_KEPT as usize,
                            "{misfire:?}: {}",
                            runs.len()
                        );
                        let running = runs.iter().filter(|r| r.status == "running").count();
                        assert!(running <= 1, "{misfire:?}: {running} running");
                    }
                }
                // A run every 5 s or so, not one per second.
                assert!(
                    (3 * 3600 / 6..=3 * 3600 / 5 + 1).contains(&ran),
                    "{misfire:?}: {ran}"
                );
                let runs = s.runs("tick").unwrap();
                let skipped = runs.iter().find(|r| r.status == "skipped").unwrap();
                assert!(
                    skipped.error.as_deref().unwrap().contains("still going"),
                    "{skipped:?}"
                );
            }
        });
    }

    /// Occurrences missed with no run at all (an engine down, again and again) are
    /// recorded skipped, and the record of a job stays bounded all the same.
    #[test]
    fn skipped_runs_alone_keep_the_record_bounded() {
        each_backend(|store| {
            let (_d, s) = store();
            let start = at("2026-01-01T00:00:00Z");
            add(&*s, &job("tick", "* * * * * *", Misfire::Skip), start);
            for day in 1..=4 {
                let now = start + jiff::SignedDuration::from_hours(24 * day);
                assert!(s.claim_due(now, "a", LEASE).unwrap().len() <= 1);
                let runs = s.runs("tick").unwrap();
                assert!(
                    runs.len() <= RUNS_KEPT as usize,
                    "day {day}: {}",
                    runs.len()
                );
            }
        });
    }

    /// A per-second job down for a day is caught up from its latest occurrences, not
    /// from the oldest ones scanned.
    #[test]
    fn a_long_miss_runs_the_latest_occurrence() {
        each_backend(|store| {
            let (_d, s) = store();
            let start = at("2026-01-01T00:00:00Z");
            add(&*s, &job("tick", "* * * * * *", Misfire::Once), start);
            let now = start + jiff::SignedDuration::from_hours(24);
            let claims = s.claim_due(now, "a", LEASE).unwrap();
            assert_eq!(claims.len(), 1);
            assert_eq!(claims[0].scheduled, now);
        });
    }

    /// Expired runs left by an older engine that claimed many runs of one job: one is
    /// run again, the others are recorded failed.
    #[test]
    fn many_expired_runs_of_a_job_give_one_run() {
        each_backend(|store| {
            let (_d, s) = store();
            let start = at("2026-01-01T00:00:00Z");
            add(&*s, &job("tick", "0 9 * * *", Misfire::Once), start);
            s.transact(true, "test", &mut |tx| {
            for i in 0..50 {
                tx.execute(
                    "test",
                    "INSERT INTO runs (job, scheduled, owner, lease_until, status) VALUES ('tick', ?1, 'old', ?2, 'running')",
                    values![start.as_second() + i, start.as_second() + 30],
                )
                .unwrap();
            }
            Ok(())
        })
        .unwrap();
            let claims = s
                .claim_due(start + jiff::SignedDuration::from_secs(120), "b", LEASE)
                .unwrap();
            assert_eq!(claims.len(), 1);
            assert_eq!(claims[0].scheduled.as_second(), start.as_second() + 49);
            let runs = s.runs("tick").unwrap();
            assert_eq!(runs.iter().filter(|r| r.status == "running").count(), 1);
            assert_eq!(runs.iter().filter(|r| r.status == "failed").count(), 49);
        });
    }
}

/// The benchmark of issue 44: claims per second with three engines (three stores, each
/// its own pool, on threads of their own) racing for 1,000 due jobs, on PostgreSQL and
/// on SQLite. Run with `cargo test -p klaw-engine --lib claims_per_second -- --ignored
/// --nocapture`; it asserts only that each job is claimed once.
#[cfg(test)]
mod bench {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    const JOBS: usize = 1000;
    const ROUNDS: usize = 5;

    fn race(stores: &[Arc<dyn JobStore>], reset: &dyn Fn(Timestamp)) -> (f64, Vec<usize>) {
        let start = Timestamp::from_second(1_767_225_600).unwrap(); // 2026-01-01
        let mut secs = 0.0;
        let mut per = vec![0; stores.len()];
        for round in 0..ROUNDS {
            let now = start + jiff::SignedDuration::from_hours(24 * (round as i64 + 1));
            reset(now);
            let t = Instant::now();
            let got: Vec<usize> = std::thread::scope(|s| {
                let handles: Vec<_> = stores
                    .iter()
                    .enumerate()
                    .map(|(i, st)| {
                        s.spawn(move || {
                            let owner = format!("e{i}");
                            let mut n = 0;
                            loop {
                                let c = st
                                    .claim_due(now, &owner, Duration::from_secs(60))
                                    .unwrap()
                                    .len();
                                n += c;
                                if c == 0 && st.next_due().unwrap().is_none_or(|t| t > now) {
                                    return n;
                                }
                            }
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            secs += t.elapsed().as_secs_f64();
            assert_eq!(got.iter().sum::<usize>(), JOBS, "{got:?}");
            for (p, g) in per.iter_mut().zip(got) {
                *p += g;
            }
        }
        (JOBS as f64 * ROUNDS as f64 / secs, per)
    }

    fn fill(s: &dyn JobStore) {
        let at = Timestamp::from_second(1_767_225_600).unwrap();
        for i in 0..JOBS {
            let job = NewJob {
                name: format!("j{i:04}"),
                cron: "0 9 * * *".into(),
                timezone: "UTC".into(),
                message: "go".into(),
                model: None,
                inject_into: None,
                misfire: Misfire::Skip,
                origin: None,
                history_messages: None,
            };
            s.add(&job, at, JOBS as u32).unwrap();
        }
    }

    /// Fills the first of `stores` (three engines on one database) and races them over
    /// [`ROUNDS`] rounds in which every job is due; prints the claims per second.
    fn measure<S: JobStore + Transact + 'static>(backend: &str, stores: Vec<Arc<S>>) {
        fill(&*stores[0]);
        let first = Arc::clone(&stores[0]);
        let stores: Vec<Arc<dyn JobStore>> = stores.into_iter().map(|s| s as _).collect();
        // Every job made due at `now` (its occurrence within the grace), no run left.
        let (rate, per) = race(&stores, &|now| {
            first
                .transact(true, "bench", &mut |t| {
                    t.execute("bench", "DELETE FROM runs", &[])?;
                    t.execute(
                        "bench",
                        "UPDATE jobs SET next_run = ?1",
                        values![now.as_second() - 1],
                    )?;
                    Ok(())
                })
                .unwrap()
        });
        eprintln!("{backend}, 3 engines, {JOBS} due jobs: {rate:.0} claims/s (by engine: {per:?})");
    }

    #[test]
    #[ignore = "a benchmark: run it by name with --ignored --nocapture"]
    fn claims_per_second_with_three_engines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("schedule.sqlite");
        measure(
            "SQLite",
            (0..3)
                .map(|_| Arc::new(SqliteStore::new(path.clone(), 3)))
                .collect(),
        );
        let Some(server) = super::pg_harness::Postgres::start() else {
            return;
        };
        let url = crate::config::DatabaseUrl::new(server.url());
        measure(
            "PostgreSQL",
            (0..3)
                .map(|_| {
                    let db = crate::storage::Postgres::connect(&url).unwrap();
                    Arc::new(PgStore::new(Arc::new(db), 3))
                })
                .collect(),
        );
    }
}
