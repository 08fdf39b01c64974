//! `klaw-engine storage import`: what one engine kept in its data dir's SQLite files
//! copied into the PostgreSQL of `storage.url`, so that the engines given that URL start
//! with it (`doc/scaling.md`, "Moving from one engine to many"). Each store is read
//! whole from its file, then written in one transaction of its own:
//!
//! - the scheduler's jobs (`schedule.sqlite`), keyed by name, with their record of runs
//!   (an occurrence that ran there is never claimed again here);
//! - the agent's history (`agent.db`), keyed by chat: a chat's messages and usage (a
//!   chat the database holds beginning with them, continued since, is the same);
//! - core memory (`core_memory.json`), keyed by section and key;
//! - the gateway's inbox (`gateway.db`): each channel's cursor (the larger one is kept,
//!   a cursor never goes back) and the messages not answered yet, keyed by receipt.
//!
//! A key the database lacks is added; one it holds with the same data is left (so a
//! second import changes nothing); one it holds with other data refuses the store's
//! import, naming the keys, unless `force`, where the data dir's version replaces it.
//! Leases (who runs a run, serves a chat, polls) are the engines' own: a run left
//! `running` is taken over and settled by its misfire policy as after a crash.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rusqlite::Connection;
use serde_json::{Map, Value};
use tokio_postgres::Transaction;

use super::{Postgres, StorageError};

/// The scheduler's file in the data dir (`crate::scheduler::DB`).
const SCHEDULE_FILE: &str = "schedule.sqlite";
/// The history's file.
const HISTORY_FILE: &str = "agent.db";
/// Core memory's file.
const CORE_FILE: &str = "core_memory.json";
/// The gateway's inbox.
const INBOX_FILE: &str = "gateway.db";

/// How many conflicting keys an error names.
const NAMED: usize = 5;

/// Why a store was not imported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The data dir's file could not be read.
    #[error("cannot read {}: {reason}", path.display())]
    Source {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The database holds other data under keys the data dir has too.
    #[error(
        "the PostgreSQL database already holds other {what} for {count} of the {store}'s \
         {unit} ({}{}): nothing of the {store} was imported; `--force` replaces them with \
         the data dir's",
        keys.join(", "),
        if *count > keys.len() { ", …" } else { "" }
    )]
    Conflict {
        /// The store.
        store: &'static str,
        /// What its keys are (`jobs`, `chats`).
        unit: &'static str,
        /// What differs (`definitions`, `messages`).
        what: &'static str,
        /// The first few keys.
        keys: Vec<String>,
        /// How many.
        count: usize,
    },
    /// The database failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// What the import of one store did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreReport {
    /// The store (`schedule`, `history`, `core memory`, `inbox`).
    pub store: &'static str,
    /// Its file in the data dir.
    pub file: PathBuf,
    /// Whether there was one (none: nothing to import).
    pub found: bool,
    /// What its keys are (`jobs`, `chats`, `keys`, `messages`).
    pub unit: &'static str,
    /// Keys the database lacked, added.
    pub added: usize,
    /// Keys it held with the same data, left.
    pub same: usize,
    /// Keys it held with other data, replaced (`force`).
    pub replaced: usize,
    /// Rows written in all (messages, runs, cursors...).
    pub rows: u64,
}

impl std::fmt::Display for StoreReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.found {
            return write!(
                f,
                "{}: no {}, nothing to import",
                self.store,
                self.file.display()
            );
        }
        write!(
            f,
            "{} ({}): {} {} added, {} already there, {} replaced; {} rows written",
            self.store,
            self.file.display(),
            self.added,
            self.unit,
            self.same,
            self.replaced,
            self.rows
        )
    }
}

/// Imports each store of the data dir `from` into `db` (connected and migrated), each in
/// a transaction of its own: one store's refusal or failure leaves the others imported.
pub fn import(db: &Postgres, from: &Path, force: bool) -> Vec<Result<StoreReport, ImportError>> {
    // Off the caller's thread: the caller may be on an async runtime of its own.
    std::thread::scope(|s| {
        s.spawn(|| {
            vec![
                schedule(db, from, force),
                history(db, from, force),
                core_memory(db, from, force),
                inbox(db, from, force),
            ]
        })
        .join()
    })
    .unwrap_or_else(|_| {
        vec![Err(ImportError::Source {
            path: from.to_owned(),
            reason: "the import's thread panicked".into(),
        })]
    })
}

/// The SQLite file `name` of `from`, opened without creating it; `None` when absent.
/// A store's file copied, with its write-ahead log, into a folder of its own, and opened
/// there: importing never changes the data dir (no journal rolled back, no WAL
/// checkpointed, no `-shm` created that another user's engine could not open), and a
/// log an engine left beside the file is read as SQLite reads it (its whole
/// transactions, none torn).
struct Copied {
    conn: Connection,
    _dir: tempfile::TempDir,
}

fn open(from: &Path, name: &str) -> Result<Option<(PathBuf, Copied)>, ImportError> {
    let path = from.join(name);
    if !path.exists() {
        return Ok(None);
    }
    let failed = |e: std::io::Error| ImportError::Source {
        path: path.clone(),
        reason: e.to_string(),
    };
    let dir = tempfile::tempdir().map_err(failed)?;
    let copy = dir.path().join(name);
    std::fs::copy(&path, &copy).map_err(failed)?;
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    if wal.exists() {
        std::fs::copy(&wal, dir.path().join(format!("{name}-wal"))).map_err(failed)?;
    }
    let conn = Connection::open(&copy)
        .and_then(|c| {
            // A file that is no database fails here, not at the first table.
            c.query_row("SELECT COUNT(*) FROM sqlite_master", [], |_| Ok(()))?;
            Ok(c)
        })
        .map_err(|e| source(&path)(e))?;
    Ok(Some((path, Copied { conn, _dir: dir })))
}

fn source(path: &Path) -> impl Fn(rusqlite::Error) -> ImportError + '_ {
    move |e| ImportError::Source {
        path: path.to_owned(),
        reason: e.to_string(),
    }
}

/// Whether `table` of `conn` has `column` (files of older engines lack some).
fn has_column(conn: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    conn.prepare("SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2")?
        .exists([table, column])
}

/// Whether `conn` has `table`.
fn has_table(conn: &Connection, table: &str) -> rusqlite::Result<bool> {
    conn.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1")?
        .exists([table])
}

/// Runs `body` in one transaction of `db`, committed when it returns `Ok`.
fn in_transaction<T>(
    db: &Postgres,
    doing: &'static str,
    body: impl AsyncFnOnce(&Transaction<'_>) -> Result<T, ImportError>,
) -> Result<T, ImportError> {
    let sql = |source| StorageError::Sql {
        target: db.target().to_owned(),
        doing,
        source,
    };
    db.block_on(async {
        let mut client = db.client().await?;
        let tx = client.transaction().await.map_err(sql)?;
        let out = body(&tx).await?;
        tx.commit().await.map_err(sql)?;
        Ok(out)
    })
}

/// The error of a statement of `db` while `doing`.
fn sql(db: &Postgres, doing: &'static str) -> impl Fn(tokio_postgres::Error) -> ImportError {
    let target = db.target().to_owned();
    move |source| {
        ImportError::Storage(StorageError::Sql {
            target: target.clone(),
            doing,
            source,
        })
    }
}

/// The conflict of `store`, or `Ok` when there is none or `force`.
fn refuse(
    force: bool,
    store: &'static str,
    unit: &'static str,
    what: &'static str,
    conflicts: &[String],
) -> Result<(), ImportError> {
    if force || conflicts.is_empty() {
        return Ok(());
    }
    Err(ImportError::Conflict {
        store,
        unit,
        what,
        // Names a model or a user chose: shown with control characters escaped, so none
        // reaches the operator's terminal as an escape sequence.
        keys: conflicts
            .iter()
            .take(NAMED)
            .map(|k| k.escape_debug().to_string())
            .collect(),
        count: conflicts.len(),
    })
}

/// What `schedule_add` set of a job, in the columns' order: cron, time zone, message,
/// model, `inject_into`, misfire policy, origin and its own history's length.
type Definition = (
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    Option<String>,
    Option<i64>,
);

/// A scheduled job: its name, its definition (what `schedule_add` set) and its state.
#[derive(Debug, Clone, PartialEq)]
struct Job {
    name: String,
    definition: Definition,
    created: i64,
    next_run: Option<i64>,
    last_run: Option<i64>,
    last_status: Option<String>,
    last_error: Option<String>,
}

/// A run of a job (its record; a lease when still `running`).
type Run = (
    String,
    i64,
    String,
    i64,
    String,
    Option<String>,
    i64,
    Option<i64>,
    Option<i64>,
);

fn schedule(db: &Postgres, from: &Path, force: bool) -> Result<StoreReport, ImportError> {
    let mut report = StoreReport {
        store: "schedule",
        unit: "jobs",
        file: from.join(SCHEDULE_FILE),
        ..StoreReport::default()
    };
    let Some((path, copied)) = open(from, SCHEDULE_FILE)? else {
        return Ok(report);
    };
    let conn = &copied.conn;
    let read = || -> rusqlite::Result<(Vec<Job>, Vec<Run>)> {
        if !has_table(conn, "jobs")? {
            return Ok((Vec::new(), Vec::new()));
        }
        let origin = if has_column(conn, "jobs", "origin")? {
            "origin"
        } else {
            "NULL"
        };
        // A data dir of an engine before jobs had their own history's length.
        let history = if has_column(conn, "jobs", "history_messages")? {
            "history_messages"
        } else {
            "NULL"
        };
        let jobs = conn
            .prepare(&format!(
                "SELECT name, cron, timezone, message, model, inject_into, misfire, {origin},
                        created, next_run, last_run, last_status, last_error, {history}
                 FROM jobs ORDER BY name"
            ))?
            .query_map([], |r| {
                Ok(Job {
                    name: r.get(0)?,
                    definition: (
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                        r.get(6)?,
                        r.get(7)?,
                        r.get(13)?,
                    ),
                    created: r.get(8)?,
                    next_run: r.get(9)?,
                    last_run: r.get(10)?,
                    last_status: r.get(11)?,
                    last_error: r.get(12)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        let runs = if has_table(conn, "runs")? {
            conn.prepare(
                "SELECT job, scheduled, owner, lease_until, status, error, attempts, started,
                        finished
                 FROM runs ORDER BY job, scheduled",
            )?
            .query_map([], |r| r.try_into())?
            .collect::<rusqlite::Result<_>>()?
        } else {
            Vec::new()
        };
        Ok((jobs, runs))
    };
    let (jobs, runs) = read().map_err(source(&path))?;
    drop(copied);
    report.found = true;
    let doing = "importing the schedule";
    let err = sql(db, doing);
    let (added, same, replaced, rows) = in_transaction(db, doing, async |tx| {
        let find = tx
            .prepare(
                "SELECT cron, timezone, message, model, inject_into, misfire, origin,
                        history_messages
                 FROM jobs WHERE name = $1",
            )
            .await
            .map_err(&err)?;
        let (mut added, mut same, mut replaced, mut conflicts) =
            (Vec::new(), 0, Vec::new(), Vec::new());
        for job in &jobs {
            match tx.query_opt(&find, &[&job.name]).await.map_err(&err)? {
                None => added.push(job),
                Some(r) => {
                    let held = (
                        r.try_get(0).map_err(&err)?,
                        r.try_get(1).map_err(&err)?,
                        r.try_get(2).map_err(&err)?,
                        r.try_get(3).map_err(&err)?,
                        r.try_get(4).map_err(&err)?,
                        r.try_get(5).map_err(&err)?,
                        r.try_get(6).map_err(&err)?,
                        r.try_get(7).map_err(&err)?,
                    );
                    if held == job.definition {
                        same += 1;
                    } else {
                        conflicts.push(job.name.clone());
                        replaced.push(job);
                    }
                }
            }
        }
        refuse(force, "schedule", "jobs", "definitions", &conflicts)?;
        let mut rows = 0;
        for job in &replaced {
            tx.execute("DELETE FROM jobs WHERE name = $1", &[&job.name])
                .await
                .map_err(&err)?;
        }
        for job in added.iter().chain(&replaced) {
            let d = &job.definition;
            rows += tx
                .execute(
                    "INSERT INTO jobs (name, cron, timezone, message, model, inject_into,
                         misfire, origin, created, next_run, last_run, last_status, last_error,
                         history_messages)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
                    &[
                        &job.name,
                        &d.0,
                        &d.1,
                        &d.2,
                        &d.3,
                        &d.4,
                        &d.5,
                        &d.6,
                        &job.created,
                        &job.next_run,
                        &job.last_run,
                        &job.last_status,
                        &job.last_error,
                        &d.7,
                    ],
                )
                .await
                .map_err(&err)?;
        }
        // The record of runs: an occurrence that ran on the single engine is never
        // claimed again (a claim is keyed by job and time); what the database already
        // holds of an occurrence is kept.
        let insert_run = tx
            .prepare(
                "INSERT INTO runs (job, scheduled, owner, lease_until, status, error, attempts,
                     started, finished)
                 SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9
                 WHERE EXISTS (SELECT 1 FROM jobs WHERE name = $1)
                 ON CONFLICT (job, scheduled) DO NOTHING",
            )
            .await
            .map_err(&err)?;
        for r in &runs {
            rows += tx
                .execute(
                    &insert_run,
                    &[&r.0, &r.1, &r.2, &r.3, &r.4, &r.5, &r.6, &r.7, &r.8],
                )
                .await
                .map_err(&err)?;
        }
        Ok((added.len(), same, replaced.len(), rows))
    })?;
    report.added = added;
    report.same = same;
    report.replaced = replaced;
    report.rows = rows;
    Ok(report)
}

/// A chat's history: its messages (JSON text and time, oldest first) and its usage
/// (model, input and output tokens, time).
#[derive(Debug, Default)]
struct Chat {
    messages: Vec<(String, String)>,
    usage: Vec<(String, i64, i64, String)>,
}

/// The time a history row was written (RFC 3339 text), now when it cannot be read.
fn at(text: &str) -> SystemTime {
    text.parse::<jiff::Timestamp>()
        .map(SystemTime::from)
        .unwrap_or_else(|_| SystemTime::now())
}

fn history(db: &Postgres, from: &Path, force: bool) -> Result<StoreReport, ImportError> {
    let mut report = StoreReport {
        store: "history",
        unit: "chats",
        file: from.join(HISTORY_FILE),
        ..StoreReport::default()
    };
    let Some((path, copied)) = open(from, HISTORY_FILE)? else {
        return Ok(report);
    };
    let conn = &copied.conn;
    let read = || -> rusqlite::Result<BTreeMap<String, Chat>> {
        let mut chats: BTreeMap<String, Chat> = BTreeMap::new();
        if has_table(conn, "messages")? {
            let mut st = conn.prepare("SELECT chat, body, at FROM messages ORDER BY id")?;
            let mut rows = st.query([])?;
            while let Some(r) = rows.next()? {
                chats
                    .entry(r.get(0)?)
                    .or_default()
                    .messages
                    .push((r.get(1)?, r.get(2)?));
            }
        }
        if has_table(conn, "usage")? {
            let mut st = conn.prepare(
                "SELECT chat, model, input_tokens, output_tokens, at FROM usage ORDER BY id",
            )?;
            let mut rows = st.query([])?;
            while let Some(r) = rows.next()? {
                chats.entry(r.get(0)?).or_default().usage.push((
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                ));
            }
        }
        Ok(chats)
    };
    let chats = read().map_err(source(&path))?;
    drop(copied);
    report.found = true;
    let doing = "importing the history";
    let err = sql(db, doing);
    let (added, same, replaced, rows) = in_transaction(db, doing, async |tx| {
        let bodies = tx
            .prepare("SELECT body FROM history_messages WHERE chat = $1 ORDER BY id")
            .await
            .map_err(&err)?;
        let usage = tx
            .prepare(
                "SELECT model, input_tokens, output_tokens FROM history_usage
                 WHERE chat = $1 ORDER BY id",
            )
            .await
            .map_err(&err)?;
        let (mut added, mut same, mut replaced, mut conflicts) =
            (Vec::new(), 0, Vec::new(), Vec::new());
        for (name, chat) in &chats {
            let held: Vec<String> = tx
                .query(&bodies, &[name])
                .await
                .map_err(&err)?
                .iter()
                .map(|r| r.try_get(0))
                .collect::<Result<_, _>>()
                .map_err(&err)?;
            let held_usage: Vec<(String, i64, i64)> = tx
                .query(&usage, &[name])
                .await
                .map_err(&err)?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
                .collect::<Result<_, tokio_postgres::Error>>()
                .map_err(&err)?;
            // Imported before, and continued since by the engines on the database: the
            // chat begins with the data dir's messages and usage.
            let begins_with_ours = held.len() >= chat.messages.len()
                && held_usage.len() >= chat.usage.len()
                && held.iter().zip(&chat.messages).all(|(h, m)| *h == m.0)
                && held_usage
                    .iter()
                    .zip(&chat.usage)
                    .all(|(h, u)| (&h.0, h.1, h.2) == (&u.0, u.1, u.2));
            if held.is_empty() && held_usage.is_empty() {
                added.push((name, chat));
            } else if begins_with_ours {
                same += 1;
            } else {
                conflicts.push(name.clone());
                replaced.push((name, chat));
            }
        }
        refuse(force, "history", "chats", "messages", &conflicts)?;
        let insert = tx
            .prepare("INSERT INTO history_messages (chat, body, at) VALUES ($1, $2, $3)")
            .await
            .map_err(&err)?;
        let insert_usage = tx
            .prepare(
                "INSERT INTO history_usage (chat, model, input_tokens, output_tokens, at)
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .await
            .map_err(&err)?;
        let mut rows = 0;
        for (name, _) in &replaced {
            for table in ["history_messages", "history_usage"] {
                tx.execute(&format!("DELETE FROM {table} WHERE chat = $1"), &[name])
                    .await
                    .map_err(&err)?;
            }
        }
        for (name, chat) in added.iter().chain(&replaced) {
            for (body, time) in &chat.messages {
                rows += tx
                    .execute(&insert, &[name, body, &at(time)])
                    .await
                    .map_err(&err)?;
            }
            for (model, input, output, time) in &chat.usage {
                rows += tx
                    .execute(&insert_usage, &[name, model, input, output, &at(time)])
                    .await
                    .map_err(&err)?;
            }
        }
        Ok((added.len(), same, replaced.len(), rows))
    })?;
    report.added = added;
    report.same = same;
    report.replaced = replaced;
    report.rows = rows;
    Ok(report)
}

/// A section of core memory (`user`, `agent`) of `doc`: its keys and values.
fn section<'a>(doc: &'a Value, name: &str) -> Option<&'a Map<String, Value>> {
    doc.get(name).and_then(Value::as_object)
}

fn core_memory(db: &Postgres, from: &Path, force: bool) -> Result<StoreReport, ImportError> {
    let mut report = StoreReport {
        store: "core memory",
        unit: "keys",
        file: from.join(CORE_FILE),
        ..StoreReport::default()
    };
    let path = from.join(CORE_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(report),
        Err(e) => {
            return Err(ImportError::Source {
                path,
                reason: e.to_string(),
            });
        }
    };
    let bad = |reason: String| ImportError::Source {
        path: path.clone(),
        reason,
    };
    let ours: Value = if text.trim().is_empty() {
        serde_json::json!({})
    } else {
        serde_json::from_str(&text).map_err(|e| bad(format!("not core memory: {e}")))?
    };
    if !ours.is_object() {
        return Err(bad("not core memory: not a JSON object".into()));
    }
    report.found = true;
    let doing = "importing core memory";
    let err = sql(db, doing);
    let (added, same, replaced, rows) = in_transaction(db, doing, async |tx| {
        let held: Option<String> = tx
            .query_opt("SELECT doc FROM core_memory WHERE id = 1 FOR UPDATE", &[])
            .await
            .map_err(&err)?
            .map(|r| r.try_get(0))
            .transpose()
            .map_err(&err)?;
        let mut doc: Value = match held.as_deref().map(str::trim) {
            None | Some("") => serde_json::json!({}),
            Some(d) => serde_json::from_str(d).map_err(|e| ImportError::Source {
                path: PathBuf::from("core_memory (the database's row)"),
                reason: format!("not core memory: {e}"),
            })?,
        };
        let (mut added, mut same, mut conflicts) = (0, 0, Vec::new());
        let mut merged = Map::new();
        for name in ["user", "agent"] {
            let mut keys = section(&doc, name).cloned().unwrap_or_default();
            for (key, value) in section(&ours, name).into_iter().flatten() {
                match keys.get(key) {
                    None => added += 1,
                    Some(v) if v == value => {
                        same += 1;
                        continue;
                    }
                    Some(_) => conflicts.push(format!("{name}.{key}")),
                }
                keys.insert(key.clone(), value.clone());
            }
            merged.insert(name.to_owned(), Value::Object(keys));
        }
        refuse(force, "core memory", "keys", "values", &conflicts)?;
        let mut rows = 0;
        if added + conflicts.len() > 0 {
            doc = Value::Object(merged);
            let text = doc.to_string();
            rows = tx
                .execute(
                    "INSERT INTO core_memory (id, doc) VALUES (1, $1)
                     ON CONFLICT (id) DO UPDATE SET doc = excluded.doc, updated = now()",
                    &[&text],
                )
                .await
                .map_err(&err)?;
        }
        Ok((added, same, conflicts.len(), rows))
    })?;
    report.added = added;
    report.same = same;
    report.replaced = replaced;
    report.rows = rows;
    Ok(report)
}

/// A message of the inbox: its channel and receipt, then chat, sender, text, state and
/// answerer.
type Pending = (String, i64, String, String, String, String, Option<String>);

/// A channel's cursor: its name and the next receipt it waits for.
type Cursor = (String, i64);

fn inbox(db: &Postgres, from: &Path, force: bool) -> Result<StoreReport, ImportError> {
    let mut report = StoreReport {
        store: "inbox",
        unit: "messages",
        file: from.join(INBOX_FILE),
        ..StoreReport::default()
    };
    let Some((path, copied)) = open(from, INBOX_FILE)? else {
        return Ok(report);
    };
    let conn = &copied.conn;
    let read = || -> rusqlite::Result<(Vec<Cursor>, Vec<Pending>)> {
        let cursors = if has_table(conn, "cursors")? {
            conn.prepare("SELECT channel, next FROM cursors ORDER BY channel")?
                .query_map([], |r| r.try_into())?
                .collect::<rusqlite::Result<_>>()?
        } else {
            Vec::new()
        };
        if !has_table(conn, "pending")? {
            return Ok((cursors, Vec::new()));
        }
        let (state, answerer) = if has_column(conn, "pending", "state")? {
            ("state", "answerer")
        } else {
            ("'pending'", "NULL")
        };
        let pending = conn
            .prepare(&format!(
                "SELECT channel, receipt, chat_id, sender, text, {state}, {answerer}
                 FROM pending ORDER BY channel, receipt"
            ))?
            .query_map([], |r| r.try_into())?
            .collect::<rusqlite::Result<_>>()?;
        Ok((cursors, pending))
    };
    let (cursors, pending) = read().map_err(source(&path))?;
    drop(copied);
    report.found = true;
    let doing = "importing the gateway's inbox";
    let err = sql(db, doing);
    let (added, same, replaced, rows) = in_transaction(db, doing, async |tx| {
        let find = tx
            .prepare(
                "SELECT chat_id, sender, text FROM gateway_inbox
                 WHERE channel = $1 AND receipt = $2",
            )
            .await
            .map_err(&err)?;
        let (mut added, mut same, mut replaced, mut conflicts) =
            (Vec::new(), 0, Vec::new(), Vec::new());
        for m in &pending {
            match tx.query_opt(&find, &[&m.0, &m.1]).await.map_err(&err)? {
                None => added.push(m),
                Some(r) => {
                    let held: (String, String, String) = (
                        r.try_get(0).map_err(&err)?,
                        r.try_get(1).map_err(&err)?,
                        r.try_get(2).map_err(&err)?,
                    );
                    if held == (m.2.clone(), m.3.clone(), m.4.clone()) {
                        same += 1;
                    } else {
                        conflicts.push(format!("{} {}", m.0, m.1));
                        replaced.push(m);
                    }
                }
            }
        }
        refuse(force, "inbox", "messages", "messages", &conflicts)?;
        let mut rows = 0;
        for m in &replaced {
            tx.execute(
                "DELETE FROM gateway_inbox WHERE channel = $1 AND receipt = $2",
                &[&m.0, &m.1],
            )
            .await
            .map_err(&err)?;
        }
        for m in added.iter().chain(&replaced) {
            rows += tx
                .execute(
                    "INSERT INTO gateway_inbox (channel, receipt, chat_id, sender, text, state,
                         answerer)
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    &[&m.0, &m.1, &m.2, &m.3, &m.4, &m.5, &m.6],
                )
                .await
                .map_err(&err)?;
        }
        // A cursor never goes back: the larger of the two is kept.
        for (channel, next) in &cursors {
            rows += tx
                .execute(
                    "INSERT INTO gateway_cursors (channel, next) VALUES ($1, $2)
                     ON CONFLICT (channel) DO UPDATE SET next = excluded.next
                     WHERE gateway_cursors.next < excluded.next",
                    &[channel, next],
                )
                .await
                .map_err(&err)?;
        }
        Ok((added.len(), same, replaced.len(), rows))
    })?;
    report.added = added;
    report.same = same;
    report.replaced = replaced;
    report.rows = rows;
    Ok(report)
}
