//! Per-chat history: every message as it happens (a stop mid-turn loses nothing), read
//! back bounded (the oldest turns dropped first, and the model told), with token usage
//! per request. Behind one [`HistoryStore`] trait with two backends: [`SqliteHistory`]
//! (`<dataDir>/agent.db`, this file) and [`PgHistory`] (the PostgreSQL of
//! `storage.url`, shared by every engine given it: `history/postgres.rs`). [`History`]
//! is what the agent holds: a store, called where it is cheap (SQLite, on the turn's
//! own thread, as before) or on the blocking pool (PostgreSQL, across the network).
//!
//! Why a synchronous trait, as the scheduler's `JobStore`: SQLite is called in place
//! (its work is microseconds, a hand-over to another thread would cost more), and
//! PostgreSQL's backend waits on its client's runtime off the async threads
//! ([`crate::storage::Postgres::block_on`]); one set of tests runs on both.
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::SyncSender;

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Value, json};

use crate::llm::{Arguments, AssistantMessage, Message, ToolCallRequest, ToolResult, Usage};

mod postgres;

pub use postgres::PgHistory;

/// What the history was doing when its database failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HistoryOp {
    /// Appending a message ([`HistoryStore::append`]).
    Save,
    /// Recording a request's tokens ([`HistoryStore::record_usage`]).
    RecordUsage,
    /// Adding up a chat's tokens ([`HistoryStore::usage`]).
    ReadUsage,
    /// Reading a chat's messages ([`HistoryStore::load`]).
    Load,
    /// Deleting a chat's old messages ([`HistoryStore::prune`]).
    Prune,
}

impl HistoryOp {
    /// What was being done, as the storage's errors say it (`saving the chat history`).
    fn doing(self) -> &'static str {
        match self {
            Self::Save => "saving the chat history",
            Self::RecordUsage => "recording token usage",
            Self::ReadUsage => "reading token usage",
            Self::Load => "reading the chat history",
            Self::Prune => "pruning the chat history",
        }
    }

    /// The start of the error message (`cannot save the chat history`).
    fn failure(self) -> &'static str {
        match self {
            Self::Save => "cannot save the chat history",
            Self::RecordUsage => "cannot record token usage",
            Self::ReadUsage => "cannot read token usage",
            Self::Load => "cannot read the chat history",
            Self::Prune => "cannot prune the chat history",
        }
    }
}

/// Why the chat history could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryError {
    /// The database file could not be opened.
    #[error("cannot open the chat history {}: {source}", path.display())]
    Open {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The database opened, but its settings or tables could not be set up.
    #[error("cannot set up the chat history {}: {source}", path.display())]
    Setup {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// A statement on an open history failed.
    #[error("{}: {source}", op.failure())]
    Query {
        /// What was being done.
        op: HistoryOp,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The PostgreSQL of `storage.url` could not be reached, or a statement failed
    /// there (a dropped connection among them): what was written before is kept.
    #[error("{}: {source}", op.failure())]
    Postgres {
        /// What was being done.
        op: HistoryOp,
        /// Why (the host and database named, never the password).
        source: Box<crate::storage::StorageError>,
    },
    /// The thread that ran the store's work stopped before it answered.
    #[error("{}: the history's worker stopped unexpectedly", op.failure())]
    Stopped {
        /// What was being done.
        op: HistoryOp,
    },
}

impl HistoryError {
    fn query(op: HistoryOp) -> impl FnOnce(rusqlite::Error) -> Self {
        move |source| Self::Query { op, source }
    }

    /// The database file, for a failure to open or set it up.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::Open { path, .. } | Self::Setup { path, .. } => Some(path),
            Self::Query { .. } | Self::Postgres { .. } | Self::Stopped { .. } => None,
        }
    }

    /// What was being done, for a failed statement on an open history.
    pub fn op(&self) -> Option<HistoryOp> {
        match self {
            Self::Query { op, .. } | Self::Postgres { op, .. } | Self::Stopped { op } => Some(*op),
            Self::Open { .. } | Self::Setup { .. } => None,
        }
    }

    /// Whether the database was busy or locked (another process holds it): worth
    /// another try later, not a broken file.
    pub fn is_busy(&self) -> bool {
        let (Self::Open { source, .. } | Self::Setup { source, .. } | Self::Query { source, .. }) =
            self
        else {
            return false;
        };
        matches!(
            source.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        )
    }
}

/// Where the history of every chat is kept: one store, shared by the engine's turns
/// (and, for PostgreSQL, by every engine given the database). Each method is one
/// transaction.
pub trait HistoryStore: Send + Sync {
    /// Appends `message` to `chat`.
    fn append(&self, chat: &str, message: &Message) -> Result<(), HistoryError>;

    /// Appends `messages` to `chat` in one transaction: all of them or none, in order.
    fn append_all(&self, chat: &str, messages: &[Message]) -> Result<(), HistoryError>;

    /// Appends the model's `answer` to `chat` and records the tokens its request used,
    /// in one transaction.
    fn append_answer(
        &self,
        chat: &str,
        answer: &Message,
        model: &str,
        usage: Usage,
    ) -> Result<(), HistoryError>;

    /// A turn's start, in one transaction: appends the user's `message` to `chat`,
    /// deletes all but its newest `keep` messages, and reads back its last `limit` (as
    /// [`load`](Self::load)).
    fn begin_turn(
        &self,
        chat: &str,
        message: &Message,
        keep: usize,
        limit: usize,
    ) -> Result<Loaded, HistoryError>;

    /// Records the tokens one request used.
    fn record_usage(&self, chat: &str, model: &str, usage: Usage) -> Result<(), HistoryError>;

    /// The tokens `chat` used in all.
    fn usage(&self, chat: &str) -> Result<Usage, HistoryError>;

    /// The last `limit` messages of `chat` (fewer, so that they start with a user
    /// message), with every tool call answered: a call left without its result (the
    /// engine stopped mid-turn) gets one saying so. Rows that cannot be read are
    /// skipped with a warning.
    fn load(&self, chat: &str, limit: usize) -> Result<Loaded, HistoryError>;

    /// Deletes all but the newest `keep` messages of `chat` (bounds the database).
    fn prune(&self, chat: &str, keep: usize) -> Result<(), HistoryError>;

    /// Deletes every message of `chat` (a removed job's own history); the tokens it
    /// used stay recorded.
    fn delete(&self, chat: &str) -> Result<(), HistoryError> {
        self.prune(chat, 0)
    }

    /// Whether a call waits on the network (then the agent makes it on the blocking
    /// pool, never on an async thread); `false` for a local file.
    fn waits_on_network(&self) -> bool {
        false
    }
}

/// The history the agent holds: a [`HistoryStore`] (its methods reached through
/// `Deref`), and [`History::run`], which calls it from a turn.
#[derive(Clone)]
pub struct History {
    store: std::sync::Arc<dyn HistoryStore>,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("History")
    }
}

impl std::ops::Deref for History {
    type Target = dyn HistoryStore;

    fn deref(&self) -> &Self::Target {
        &*self.store
    }
}

impl History {
    /// The history in the SQLite file at `path` (opened, created).
    pub fn open(path: &Path) -> Result<Self, HistoryError> {
        SqliteHistory::open(path).map(Self::new)
    }

    /// The history in `store`.
    pub fn new(store: impl HistoryStore + 'static) -> Self {
        Self {
            store: std::sync::Arc::new(store),
        }
    }

    /// The history of `config`: in the PostgreSQL `db` (that of `storage.url`, connected
    /// and migrated), else `<dataDir>/agent.db`.
    pub fn from_config(
        config: &crate::Config,
        db: Option<&std::sync::Arc<crate::storage::Postgres>>,
    ) -> Result<Self, HistoryError> {
        match db {
            Some(db) => Ok(Self::new(PgHistory::new(std::sync::Arc::clone(db)))),
            None => Self::open(&config.data_dir.join("agent.db")),
        }
    }

    /// Runs `f` on the store from an async task: in place for a local file (SQLite:
    /// ready at the first poll, no hand-over), on the blocking pool for a store across
    /// the network. `op` names it if the pool's thread stops.
    pub async fn run<T: Send + 'static>(
        &self,
        op: HistoryOp,
        f: impl FnOnce(&dyn HistoryStore) -> Result<T, HistoryError> + Send + 'static,
    ) -> Result<T, HistoryError> {
        if !self.store.waits_on_network() {
            return f(&*self.store);
        }
        let store = std::sync::Arc::clone(&self.store);
        tokio::task::spawn_blocking(move || f(&*store))
            .await
            .unwrap_or(Err(HistoryError::Stopped { op }))
    }
}

/// The history of every chat in SQLite.
pub struct SqliteHistory {
    conn: Mutex<Connection>,
    /// Commits since a checkpoint was last asked for.
    commits: AtomicU32,
    /// Asks the checkpointer (a thread with its own connection) to copy the WAL into
    /// the database; `None` when it could not start (SQLite then checkpoints in the
    /// writer, its default).
    checkpoint: Option<SyncSender<()>>,
    /// The messages each recent chat was last sent, decoded (locked after `conn`).
    windows: Mutex<Windows>,
}

/// Commits between two checkpoints asked of the checkpointer: a few hundred pages,
/// under SQLite's own threshold (1,000), which stays as the backstop.
const CHECKPOINT_EVERY: u32 = 64;

impl std::fmt::Debug for SqliteHistory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SqliteHistory")
    }
}

/// What [`HistoryStore::load`] gives: the messages and whether older ones were left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Loaded {
    /// The messages, oldest first; always starting with a user message.
    pub messages: Vec<Message>,
    /// Whether older messages exist that are not in `messages`.
    pub truncated: bool,
}

impl SqliteHistory {
    /// Opens (creating) the database at `path`.
    pub fn open(path: &Path) -> Result<Self, HistoryError> {
        let conn = Connection::open(path).map_err(|source| HistoryError::Open {
            path: path.to_owned(),
            source,
        })?;
        // Another engine on the same data dir is waited for, the journal mode included.
        crate::sqlite::set_up(&conn, std::time::Duration::from_secs(5), |conn| {
            conn.execute_batch(
                "PRAGMA journal_mode = WAL;
                 PRAGMA synchronous = NORMAL;
                 CREATE TABLE IF NOT EXISTS messages (
                     id INTEGER PRIMARY KEY,
                     chat TEXT NOT NULL,
                     body TEXT NOT NULL,
                     at TEXT NOT NULL
                 );
                 CREATE INDEX IF NOT EXISTS messages_chat ON messages (chat, id);
                 CREATE TABLE IF NOT EXISTS usage (
                     id INTEGER PRIMARY KEY,
                     chat TEXT NOT NULL,
                     model TEXT NOT NULL,
                     input_tokens INTEGER NOT NULL,
                     output_tokens INTEGER NOT NULL,
                     at TEXT NOT NULL
                 );",
            )
        })
        .map_err(|source| HistoryError::Setup {
            path: path.to_owned(),
            source,
        })?;
        Ok(Self {
            conn: Mutex::new(conn),
            commits: AtomicU32::new(0),
            checkpoint: checkpointer(path),
            windows: Mutex::new(Windows::default()),
        })
    }

    /// Counts a commit; every [`CHECKPOINT_EVERY`] the checkpointer is asked for a
    /// checkpoint. Its two fsyncs, milliseconds, then stall no turn: in the writer they
    /// were the loop's p99 (perf: `walCheckpoint` → `fsync` inside a round's commit).
    fn committed(&self) {
        if self.commits.fetch_add(1, Ordering::Relaxed) % CHECKPOINT_EVERY == CHECKPOINT_EVERY - 1
            && let Some(tx) = &self.checkpoint
        {
            // Full: a checkpoint is pending already.
            let _ = tx.try_send(());
        }
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn windows(&self) -> std::sync::MutexGuard<'_, Windows> {
        self.windows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl HistoryStore for SqliteHistory {
    fn append(&self, chat: &str, message: &Message) -> Result<(), HistoryError> {
        insert_message(&self.conn(), chat, message).map_err(HistoryError::query(HistoryOp::Save))
    }

    /// Appends `messages` to `chat` in one transaction: all of them or none, in order.
    fn append_all(&self, chat: &str, messages: &[Message]) -> Result<(), HistoryError> {
        let mut conn = self.conn();
        let tx = write(&mut conn).map_err(HistoryError::query(HistoryOp::Save))?;
        for m in messages {
            insert_message(&tx, chat, m).map_err(HistoryError::query(HistoryOp::Save))?;
        }
        tx.commit().map_err(HistoryError::query(HistoryOp::Save))?;
        self.committed();
        Ok(())
    }

    /// Appends the model's `answer` to `chat` and records the tokens its request used,
    /// in one transaction. Tokens that cannot be recorded are a warning: the answer is
    /// saved all the same.
    fn append_answer(
        &self,
        chat: &str,
        answer: &Message,
        model: &str,
        usage: Usage,
    ) -> Result<(), HistoryError> {
        let mut conn = self.conn();
        let tx = write(&mut conn).map_err(HistoryError::query(HistoryOp::Save))?;
        insert_message(&tx, chat, answer).map_err(HistoryError::query(HistoryOp::Save))?;
        if let Err(e) = insert_usage(&tx, chat, model, usage) {
            tracing::warn!(target: "klaw::agent", "{}", HistoryError::query(HistoryOp::RecordUsage)(e));
        }
        tx.commit().map_err(HistoryError::query(HistoryOp::Save))?;
        self.committed();
        Ok(())
    }

    /// A turn's start, in one transaction: appends the user's `message` to `chat`,
    /// deletes all but its newest `keep` messages (a failure is a warning, as
    /// [`prune`](Self::prune)'s), and reads back its last `limit` (as
    /// [`load`](Self::load)).
    fn begin_turn(
        &self,
        chat: &str,
        message: &Message,
        keep: usize,
        limit: usize,
    ) -> Result<Loaded, HistoryError> {
        let mut conn = self.conn();
        let tx = write(&mut conn).map_err(HistoryError::query(HistoryOp::Save))?;
        insert_message(&tx, chat, message).map_err(HistoryError::query(HistoryOp::Save))?;
        if let Err(e) = delete_old(&tx, chat, keep) {
            tracing::warn!(target: "klaw::agent", "{}", HistoryError::query(HistoryOp::Prune)(e));
        }
        let mut windows = self.windows();
        let loaded = windows.load(&tx, chat, limit)?;
        if let Err(e) = tx.commit() {
            windows.forget(chat);
            return Err(HistoryError::query(HistoryOp::Save)(e));
        }
        self.committed();
        Ok(loaded)
    }

    /// Records the tokens one request used.
    fn record_usage(&self, chat: &str, model: &str, usage: Usage) -> Result<(), HistoryError> {
        insert_usage(&self.conn(), chat, model, usage)
            .map_err(HistoryError::query(HistoryOp::RecordUsage))
    }

    /// The tokens `chat` used in all.
    fn usage(&self, chat: &str) -> Result<Usage, HistoryError> {
        let row: Option<(i64, i64)> = self
            .conn()
            .query_row(
                "SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0)
                 FROM usage WHERE chat = ?1",
                [chat],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(HistoryError::query(HistoryOp::ReadUsage))?;
        let (i, o) = row.unwrap_or((0, 0));
        Ok(Usage {
            input_tokens: u64::try_from(i).unwrap_or(0),
            output_tokens: u64::try_from(o).unwrap_or(0),
        })
    }

    /// The last `limit` messages of `chat` (fewer, so that they start with a user
    /// message), with every tool call answered: a call left without its result (the
    /// engine stopped mid-turn) gets one saying so. Rows that cannot be read are
    /// skipped with a warning.
    fn load(&self, chat: &str, limit: usize) -> Result<Loaded, HistoryError> {
        load_from(&self.conn(), chat, limit)
    }

    /// Deletes all but the newest `keep` messages of `chat` (bounds the database).
    fn prune(&self, chat: &str, keep: usize) -> Result<(), HistoryError> {
        let conn = self.conn();
        self.windows().forget(chat);
        delete_old(&conn, chat, keep).map_err(HistoryError::query(HistoryOp::Prune))
    }
}

/// A thread that checkpoints the WAL of the database at `path` when asked, on a
/// connection of its own (`PASSIVE`: writers go on meanwhile), until the history is
/// dropped. `None` when it cannot start.
fn checkpointer(path: &Path) -> Option<SyncSender<()>> {
    let conn = Connection::open(path).ok()?;
    conn.busy_timeout(std::time::Duration::from_secs(5)).ok()?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<()>(1);
    std::thread::Builder::new()
        .name("klaw-history-checkpoint".into())
        .spawn(move || {
            while rx.recv().is_ok() {
                if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
                    tracing::debug!(target: "klaw::agent", "history checkpoint: {e}");
                }
            }
        })
        .ok()?;
    Some(tx)
}

// The statements are prepared once per connection (`prepare_cached`): parsing them
// again cost as much as running them.

/// A write transaction, taking the write lock at once (waiting for another engine on
/// the same file up to the busy timeout, not failing later when it would upgrade).
fn write(conn: &mut Connection) -> rusqlite::Result<rusqlite::Transaction<'_>> {
    conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
}

fn insert_message(conn: &Connection, chat: &str, message: &Message) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT INTO messages (chat, body, at) VALUES (?1, ?2, ?3)")?
        .execute(params![chat, encode(message).to_string(), now()])
        .map(|_| ())
}

fn insert_usage(conn: &Connection, chat: &str, model: &str, usage: Usage) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO usage (chat, model, input_tokens, output_tokens, at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        chat,
        model,
        i64::try_from(usage.input_tokens).unwrap_or(i64::MAX),
        i64::try_from(usage.output_tokens).unwrap_or(i64::MAX),
        now()
    ])
    .map(|_| ())
}

fn delete_old(conn: &Connection, chat: &str, keep: usize) -> rusqlite::Result<()> {
    let keep = i64::try_from(keep).unwrap_or(i64::MAX);
    conn.prepare_cached(
        "DELETE FROM messages WHERE chat = ?1 AND id <= (
             SELECT id FROM messages WHERE chat = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)",
    )?
    .execute(params![chat, keep])
    .map(|_| ())
}

fn load_from(conn: &Connection, chat: &str, limit: usize) -> Result<Loaded, HistoryError> {
    let mut stmt = conn
        .prepare_cached("SELECT body FROM messages WHERE chat = ?1 ORDER BY id DESC LIMIT ?2")
        .map_err(HistoryError::query(HistoryOp::Load))?;
    let limit_sql = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
    let rows: Vec<String> = stmt
        .query_map(params![chat, limit_sql], |r| r.get(0))
        .and_then(Iterator::collect)
        .map_err(HistoryError::query(HistoryOp::Load))?;
    let truncated = rows.len() > limit;
    let messages = rows
        .iter()
        .take(limit)
        .rev()
        .filter_map(|body| decoded(chat, body))
        .collect();
    Ok(from_window(messages, truncated))
}

/// The message a row of `chat` holds; `None`, with a warning, when it cannot be read
/// (it is skipped).
fn decoded(chat: &str, body: &str) -> Option<Message> {
    let m = decode(body);
    if m.is_none() {
        tracing::warn!(target: "klaw::agent", chat, "a history row cannot be read; skipped");
    }
    m
}

/// What a load gives for the newest messages of a chat, oldest first: from its first
/// user message on (`truncated` if any went before it), with every call answered.
fn from_window(mut messages: Vec<Message>, mut truncated: bool) -> Loaded {
    let first_user = messages
        .iter()
        .position(|m| matches!(m, Message::User(_)))
        .unwrap_or(messages.len());
    if first_user > 0 {
        messages.drain(..first_user);
        truncated = true;
    }
    Loaded {
        messages: answer_every_call(messages),
        truncated,
    }
}

/// A chat's newest rows, oldest first: their ids and messages (`None`: unreadable).
type Window = Vec<(i64, Option<Message>)>;

/// How many chats keep their decoded window: the chats a serving engine is talking in
/// now; a chat beyond them is read from the database again at its next turn.
const WINDOWS_KEPT: usize = 16;

/// The last window of messages each recent chat was sent, decoded, so that a turn's
/// start reads back only its ids and the rows added since (by this turn's previous
/// rounds) instead of decoding the whole window again (about a quarter of the loop's own time
/// per round, perf).
///
/// The database stays the truth: the ids of the chat's newest rows are read at each
/// turn and a cached message is used only for an id that is still there. What could
/// make a cached row wrong is a row deleted and its id given to a new one (SQLite
/// reuses the largest id once it is deleted), so every window is dropped when another
/// connection has committed anything (`PRAGMA data_version`: another engine on the
/// same file), and a chat's window when this history prunes it outside a turn's start
/// or a turn's start does not commit.
#[derive(Default)]
struct Windows {
    /// `PRAGMA data_version` when the windows were last read.
    data_version: i64,
    /// Most recently used last.
    chats: Vec<(String, Window)>,
}

impl Windows {
    /// As [`load_from`], through the chat's cached window.
    fn load(
        &mut self,
        conn: &Connection,
        chat: &str,
        limit: usize,
    ) -> Result<Loaded, HistoryError> {
        let load = || HistoryError::query(HistoryOp::Load);
        let data_version: i64 = conn
            .prepare_cached("PRAGMA data_version")
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .map_err(load())?;
        if data_version != self.data_version {
            self.chats.clear();
            self.data_version = data_version;
        }
        let limit_sql = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
        let mut ids: Vec<i64> = conn
            .prepare_cached("SELECT id FROM messages WHERE chat = ?1 ORDER BY id DESC LIMIT ?2")
            .and_then(|mut s| {
                s.query_map(params![chat, limit_sql], |r| r.get(0))
                    .and_then(Iterator::collect)
            })
            .map_err(load())?;
        let truncated = ids.len() > limit;
        ids.truncate(limit);
        ids.reverse();
        let mut cached = match self.chats.iter().position(|(c, _)| c == chat) {
            Some(i) => self.chats.remove(i).1,
            None => Vec::new(),
        };
        // Older rows than the cache holds (a load of a longer window): read them all.
        let newest_cached = cached.last().map(|(id, _)| *id);
        let known = |id: i64| cached.binary_search_by_key(&id, |(i, _)| *i).is_ok();
        if ids
            .iter()
            .any(|&id| Some(id) <= newest_cached && !known(id))
        {
            cached.clear();
        }
        let newest_cached = cached.last().map_or(i64::MIN, |(id, _)| *id);
        let oldest = ids.first().copied().unwrap_or(i64::MAX);
        let added: Window = conn
            .prepare_cached(
                "SELECT id, body FROM messages WHERE chat = ?1 AND id > ?2 AND id >= ?3 ORDER BY id",
            )
            .and_then(|mut s| {
                s.query_map(params![chat, newest_cached, oldest], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
                })
                .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>)
            })
            .map_err(load())?
            .into_iter()
            .map(|(id, body)| (id, decoded(chat, &body)))
            .collect();
        // The window: the ids read, in order, each from the cache or the rows just read.
        let mut window: Window = Vec::with_capacity(ids.len());
        let (mut c, mut a) = (cached.into_iter().peekable(), added.into_iter().peekable());
        for id in ids {
            while c.next_if(|(i, _)| *i < id).is_some() {}
            while a.next_if(|(i, _)| *i < id).is_some() {}
            if let Some(entry) = c
                .next_if(|(i, _)| *i == id)
                .or_else(|| a.next_if(|(i, _)| *i == id))
            {
                window.push(entry);
            }
        }
        let messages = window.iter().filter_map(|(_, m)| m.clone()).collect();
        if self.chats.len() >= WINDOWS_KEPT {
            self.chats.remove(0);
        }
        self.chats.push((chat.to_owned(), window));
        Ok(from_window(messages, truncated))
    }

    /// Drops `chat`'s window (rows of it deleted, or the transaction it was read in
    /// rolled back: their ids may be given to other rows).
    fn forget(&mut self, chat: &str) {
        self.chats.retain(|(c, _)| c != chat);
    }
}

/// Adds a result to every tool call that has none.
fn answer_every_call(messages: Vec<Message>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    let mut pending: Vec<ToolCallRequest> = Vec::new();
    let flush = |out: &mut Vec<Message>, pending: &mut Vec<ToolCallRequest>| {
        for c in pending.drain(..) {
            out.push(Message::Tool(ToolResult {
                call_id: c.id,
                name: c.name,
                content: "This call did not finish: the engine stopped while it ran.".into(),
                is_error: true,
            }));
        }
    };
    for m in messages {
        match &m {
            Message::Tool(r) => pending.retain(|c| c.id != r.call_id),
            _ => flush(&mut out, &mut pending),
        }
        if let Message::Assistant(a) = &m {
            pending = a.tool_calls.clone();
        }
        out.push(m);
    }
    flush(&mut out, &mut pending);
    out
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

fn encode(m: &Message) -> Value {
    match m {
        Message::User(text) => json!({"role": "user", "text": text}),
        Message::Assistant(a) => json!({
            "role": "assistant",
            "text": a.text,
            "calls": a.tool_calls.iter().map(|c| match &c.arguments {
                Arguments::Json(v) => json!({"id": c.id, "name": c.name, "arguments": v}),
                Arguments::Malformed { raw, error } =>
                    json!({"id": c.id, "name": c.name, "raw": raw, "error": error}),
            }).collect::<Vec<_>>(),
        }),
        Message::Tool(r) => json!({
            "role": "tool", "id": r.call_id, "name": r.name, "content": r.content, "error": r.is_error,
        }),
    }
}

/// A row as [`encode`] writes it, read without building a JSON tree first.
#[derive(serde::Deserialize)]
struct Row {
    role: String,
    text: Option<String>,
    calls: Option<Vec<CallRow>>,
    id: Option<String>,
    name: Option<String>,
    content: Option<String>,
    error: Option<bool>,
}

#[derive(serde::Deserialize)]
struct CallRow {
    id: String,
    name: String,
    /// Present (`null` included) or not.
    #[serde(default, deserialize_with = "present")]
    arguments: Option<Value>,
    raw: Option<String>,
    error: Option<String>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    serde::Deserialize::deserialize(d).map(Some)
}

/// The message a row holds: read as [`Row`], or (a row of another shape) through a
/// JSON tree, leniently.
fn decode(body: &str) -> Option<Message> {
    let Ok(row) = serde_json::from_str::<Row>(body) else {
        return decode_lenient(body);
    };
    Some(match row.role.as_str() {
        "user" => Message::User(row.text?),
        "assistant" => Message::Assistant(AssistantMessage {
            text: row.text.unwrap_or_default(),
            tool_calls: row
                .calls
                .unwrap_or_default()
                .into_iter()
                .map(|c| ToolCallRequest {
                    id: c.id,
                    name: c.name,
                    arguments: match c.arguments {
                        Some(a) => Arguments::Json(a),
                        None => Arguments::Malformed {
                            raw: c.raw.unwrap_or_default(),
                            error: c.error.unwrap_or_default(),
                        },
                    },
                })
                .collect(),
        }),
        "tool" => Message::Tool(ToolResult {
            call_id: row.id?,
            name: row.name.unwrap_or_default(),
            content: row.content.unwrap_or_default(),
            is_error: row.error.unwrap_or(false),
        }),
        _ => return None,
    })
}

fn decode_lenient(body: &str) -> Option<Message> {
    let v: Value = serde_json::from_str(body).ok()?;
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    Some(match v.get("role")?.as_str()? {
        "user" => Message::User(s("text")?),
        "assistant" => Message::Assistant(AssistantMessage {
            text: s("text").unwrap_or_default(),
            tool_calls: v
                .get("calls")
                .and_then(Value::as_array)
                .map(|calls| {
                    calls
                        .iter()
                        .filter_map(|c| {
                            let get = |k: &str| c.get(k).and_then(Value::as_str).map(str::to_owned);
                            Some(ToolCallRequest {
                                id: get("id")?,
                                name: get("name")?,
                                arguments: match c.get("arguments") {
                                    Some(a) => Arguments::Json(a.clone()),
                                    None => Arguments::Malformed {
                                        raw: get("raw").unwrap_or_default(),
                                        error: get("error").unwrap_or_default(),
                                    },
                                },
                            })
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }),
        "tool" => Message::Tool(ToolResult {
            call_id: s("id")?,
            name: s("name").unwrap_or_default(),
            content: s("content").unwrap_or_default(),
            is_error: v.get("error").and_then(Value::as_bool).unwrap_or(false),
        }),
        _ => return None,
    })
}

/// The tests' PostgreSQL (`crate::pg_harness`).
#[cfg(test)]
use crate::pg_harness;

#[cfg(test)]
mod tests {
    use super::*;

    /// Engines started together on one data dir open the history at the same moment:
    /// each waits for the other's lock instead of failing with "database is locked"
    /// (two `run` processes of the scheduler test hit that).
    #[test]
    fn engines_opening_one_history_at_once_wait_for_each_other() {
        for _ in 0..40 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("agent.db");
            let opened: Vec<_> = (0..6)
                .map(|_| {
                    let path = path.clone();
                    std::thread::spawn(move || History::open(&path).map(|_| ()))
                })
                .collect();
            for t in opened {
                t.join().unwrap().unwrap();
            }
        }
    }

    fn call(id: &str) -> ToolCallRequest {
        ToolCallRequest {
            id: id.into(),
            name: "t".into(),
            arguments: Arguments::Json(json!({"a": 1})),
        }
    }

    fn assistant(calls: &[&str]) -> Message {
        Message::Assistant(AssistantMessage {
            text: "x".into(),
            tool_calls: calls.iter().map(|c| call(c)).collect(),
        })
    }

    fn result(id: &str) -> Message {
        Message::Tool(ToolResult {
            call_id: id.into(),
            name: "t".into(),
            content: "ok".into(),
            is_error: false,
        })
    }

    /// Runs `test` against each backend: SQLite, then PostgreSQL (a server of the
    /// test's own) where it is installed. It is given a maker of stores on one fresh
    /// database: each call another engine's handle (for PostgreSQL, its own pool).
    fn each_backend(test: impl Fn(&dyn Fn() -> History)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.db");
        test(&|| History::open(&path).unwrap());
        let Some(server) = pg_harness::Postgres::start() else {
            return;
        };
        let url = crate::config::DatabaseUrl::new(server.fresh_db());
        test(&|| {
            let db = crate::storage::Postgres::connect(&url).unwrap();
            History::new(PgHistory::new(std::sync::Arc::new(db)))
        });
    }

    #[test]
    fn messages_survive_a_reopen_and_other_chats_stay_apart() {
        each_backend(|open| {
            let h = open();
            let malformed = Message::Assistant(AssistantMessage {
                text: String::new(),
                tool_calls: vec![ToolCallRequest {
                    id: "m".into(),
                    name: "t".into(),
                    arguments: Arguments::Malformed {
                        raw: "{oops".into(),
                        error: "EOF".into(),
                    },
                }],
            });
            let msgs = vec![
                Message::User("hi".into()),
                assistant(&["a"]),
                result("a"),
                malformed,
                result("m"),
            ];
            for m in &msgs {
                h.append("c1", m).unwrap();
            }
            h.append("c2", &Message::User("other".into())).unwrap();
            drop(h);
            // Another engine's store on the same database reads what this one wrote.
            let h = open();
            let loaded = h.load("c1", 100).unwrap();
            assert_eq!(loaded.messages, msgs);
            assert!(!loaded.truncated);
            assert_eq!(h.load("c2", 100).unwrap().messages.len(), 1);
        });
    }

    #[test]
    fn a_bounded_load_starts_at_a_user_message_and_says_so() {
        each_backend(|open| {
            let h = open();
            for m in [
                Message::User("1".into()),
                assistant(&["a"]),
                result("a"),
                Message::User("2".into()),
                assistant(&[]),
            ] {
                h.append("c", &m).unwrap();
            }
            let loaded = h.load("c", 3).unwrap();
            assert!(loaded.truncated);
            assert_eq!(loaded.messages[0], Message::User("2".into()));
            assert_eq!(loaded.messages.len(), 2);
            h.prune("c", 2).unwrap();
            assert_eq!(h.load("c", 100).unwrap().messages.len(), 2);
        });
    }

    #[test]
    fn a_call_without_its_result_gets_one() {
        let fixed = answer_every_call(vec![
            Message::User("q".into()),
            assistant(&["a", "b"]),
            result("a"),
            Message::User("next".into()),
        ]);
        assert_eq!(fixed.len(), 5);
        assert!(matches!(&fixed[3], Message::Tool(r) if r.call_id == "b" && r.is_error));
        assert!(matches!(fixed[4], Message::User(_)));
    }

    #[test]
    fn usage_adds_up() {
        each_backend(|open| {
            let h = open();
            for n in [3, 4] {
                h.record_usage(
                    "c",
                    "m",
                    Usage {
                        input_tokens: n,
                        output_tokens: 1,
                    },
                )
                .unwrap();
            }
            assert_eq!(
                h.usage("c").unwrap(),
                Usage {
                    input_tokens: 7,
                    output_tokens: 2
                }
            );
        });
    }

    #[test]
    fn a_turn_writes_its_rounds_whole_and_in_order() {
        each_backend(|open| {
            let h = open();
            for i in 0..3 {
                h.append("c", &Message::User(format!("old {i}"))).unwrap();
            }
            // The start keeps the newest 2 (the new message among them) and reads them.
            let loaded = h
                .begin_turn("c", &Message::User("now".into()), 2, 10)
                .unwrap();
            assert_eq!(
                loaded.messages,
                vec![Message::User("old 2".into()), Message::User("now".into())]
            );
            let usage = Usage {
                input_tokens: 5,
                output_tokens: 2,
            };
            h.append_answer("c", &assistant(&["a", "b"]), "m", usage)
                .unwrap();
            h.append_all("c", &[result("a"), result("b")]).unwrap();
            assert_eq!(h.usage("c").unwrap(), usage);
            let whole = vec![
                Message::User("old 2".into()),
                Message::User("now".into()),
                assistant(&["a", "b"]),
                result("a"),
                result("b"),
            ];
            assert_eq!(h.load("c", 10).unwrap().messages, whole);
            // Another engine's store reads the same, and its turn's start sees it all.
            let other = open();
            assert_eq!(other.load("c", 10).unwrap().messages, whole);
            let next = other
                .begin_turn("c", &Message::User("again".into()), 100, 3)
                .unwrap();
            assert!(next.truncated);
            assert_eq!(next.messages, vec![Message::User("again".into())]);
        });
        // Rows of another shape than the typed one are still read, leniently.
        assert_eq!(
            decode(r#"{"role": "tool", "id": "x", "error": "yes", "content": "c"}"#),
            Some(Message::Tool(ToolResult {
                call_id: "x".into(),
                name: String::new(),
                content: "c".into(),
                is_error: false,
            }))
        );
    }

    /// The connections of the engine's pool dropped under it (the server ended them:
    /// `pg_terminate_backend`, as a restart or a failover does): each call either
    /// succeeds on a fresh connection or fails with an error that says what it was
    /// doing and why; nothing committed before is lost, and the next turn works. A
    /// statement whose connection is ended under it runs once more on a fresh one and
    /// is written once; ended twice, the call fails clearly, nothing half-written.
    #[test]
    fn a_dropped_connection_loses_nothing_and_the_next_turn_works() {
        let Some(server) = pg_harness::Postgres::start() else {
            return;
        };
        let url = server.fresh_db();
        let db = std::sync::Arc::new(
            crate::storage::Postgres::connect(&crate::config::DatabaseUrl::new(&url)).unwrap(),
        );
        let h = History::new(PgHistory::new(std::sync::Arc::clone(&db)));
        let terminate = || {
            server.psql_url(
                &url,
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                 WHERE application_name = 'klaw-engine'",
            )
        };
        let mut written = Vec::new();
        let mut failures = 0;
        for i in 0..6 {
            let user = Message::User(format!("turn {i}"));
            // Mid-turn: after its start was written, before the answer is.
            match h.begin_turn("c", &user, 1000, 1000) {
                Ok(_) => written.push(user),
                Err(e) => {
                    failures += 1;
                    assert_clear(&e, HistoryOp::Save);
                }
            }
            terminate();
            let answer = assistant(&[]);
            match h.append_answer("c", &answer, "m", Usage::default()) {
                Ok(()) => written.push(answer),
                Err(e) => {
                    failures += 1;
                    assert_clear(&e, HistoryOp::Save);
                }
            }
        }
        eprintln!("{failures} calls failed on a dropped connection");
        // A statement in flight when its connection is ended (it waits on a lock that
        // another session holds): the server says it ended the session, the statement
        // is run once more on a fresh connection (which waits on the lock again), and
        // when that one is ended too, the call fails with a clear error and the message
        // is not half-written.
        let locker = crate::storage::Postgres::connect(&crate::config::DatabaseUrl::new(format!(
            "{url}?application_name=locker"
        )))
        .unwrap();
        let lock = || {
            locker.block_on(async {
                let c = locker.client().await.unwrap();
                c.batch_execute("BEGIN; LOCK TABLE history_messages IN ACCESS EXCLUSIVE MODE")
                    .await
                    .unwrap();
                c
            })
        };
        // The pid of the engine's session waiting on the lock, once there is one other
        // than `not`.
        let waiter = |not: &str| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            loop {
                let pid = server.psql_url(
                    &url,
                    "SELECT pid FROM pg_stat_activity WHERE application_name = 'klaw-engine'
                     AND wait_event_type = 'Lock'",
                );
                if !pid.is_empty() && pid != not {
                    return pid;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "the append never waited"
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        };
        let held = lock();
        let waiting = std::thread::scope(|s| {
            let blocked = s.spawn(|| h.append("c", &Message::User("lost".into())));
            let first = waiter("");
            terminate();
            // Retried on a fresh connection: waiting again, in another session.
            waiter(&first);
            terminate();
            blocked.join().unwrap()
        });
        let e = waiting.unwrap_err();
        assert_clear(&e, HistoryOp::Save);
        assert!(e.to_string().contains("terminating connection"), "{e}");
        eprintln!("{e}");
        locker.block_on(held.batch_execute("ROLLBACK")).unwrap();
        drop(held);
        // Ended once: the retry writes it, once.
        let held = lock();
        let kept = Message::User("kept".into());
        let retried = std::thread::scope(|s| {
            let blocked = s.spawn(|| h.append("c", &kept));
            let first = waiter("");
            terminate();
            waiter(&first);
            locker.block_on(held.batch_execute("ROLLBACK")).unwrap();
            blocked.join().unwrap()
        });
        retried.unwrap();
        written.push(kept);
        drop(held);
        // Every call that said it was written is there, in order; nothing else is.
        let got = h.load("c", 1000).unwrap().messages;
        assert_eq!(got, written);
        // A turn after it works.
        let loaded = h
            .begin_turn("c", &Message::User("after".into()), 1000, 1000)
            .unwrap();
        assert_eq!(loaded.messages.last(), Some(&Message::User("after".into())));
        h.append_answer("c", &assistant(&[]), "m", Usage::default())
            .unwrap();
    }

    fn assert_clear(e: &HistoryError, op: HistoryOp) {
        let text = e.to_string();
        assert_eq!(e.op(), Some(op), "{text}");
        assert!(text.starts_with(op.failure()), "{text}");
        assert!(text.contains("PostgreSQL database `t"), "{text}");
        assert!(!e.is_busy());
    }

    /// A turn's start reads its window through the chat's cache: whatever another
    /// engine on the same file did in between (rows added, pruned, deleted, a row put
    /// back under an old id, an unreadable row), and with more chats than the cache
    /// keeps, it gives exactly what reading the database afresh gives.
    #[test]
    fn a_cached_window_reads_what_the_database_holds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let (ours, other) = (History::open(&path).unwrap(), History::open(&path).unwrap());
        let raw = Connection::open(&path).unwrap();
        raw.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
        // A small linear congruential generator: the same sequence on every machine.
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 33) % n
        };
        let chats: Vec<String> = (0..WINDOWS_KEPT + 3).map(|i| format!("chat {i}")).collect();
        let mut turns_checked = 0;
        for step in 0..1_500 {
            let chat = &chats[usize::try_from(next(if step % 3 == 0 { 19 } else { 3 })).unwrap()];
            let id = format!("call {step}");
            match next(14) {
                0..=4 => {
                    let limit = usize::try_from(2 + next(8)).unwrap();
                    let keep = limit * usize::try_from(1 + next(3)).unwrap();
                    let got = ours
                        .begin_turn(chat, &Message::User(format!("turn {step}")), keep, limit)
                        .unwrap();
                    assert_eq!(got, ours.load(chat, limit).unwrap(), "step {step}");
                    turns_checked += 1;
                }
                5 | 6 => ours
                    .append_answer(chat, &assistant(&[&id]), "m", Usage::default())
                    .unwrap(),
                7 | 8 => ours
                    .append_all(chat, &[result(&id), Message::User("and".into())])
                    .unwrap(),
                9 => ours.prune(chat, usize::try_from(next(6)).unwrap()).unwrap(),
                10 => other
                    .append_all(chat, &[assistant(&[&id]), result(&id)])
                    .unwrap(),
                11 => other
                    .prune(chat, usize::try_from(next(6)).unwrap())
                    .unwrap(),
                12 => {
                    // A row deleted in the middle; another chat's row among this
                    // chat's newest taken over by this chat (an id older than its newest).
                    raw.execute(
                        "DELETE FROM messages WHERE id = (SELECT id FROM messages WHERE chat = ?1
                         ORDER BY id DESC LIMIT 1 OFFSET 2)",
                        [chat],
                    )
                    .unwrap();
                    let taken: Option<i64> = raw
                        .query_row(
                            "SELECT id FROM messages WHERE chat != ?1 AND id < (SELECT MAX(id)
                             FROM messages WHERE chat = ?1) ORDER BY id DESC LIMIT 1",
                            [chat],
                            |r| r.get(0),
                        )
                        .optional()
                        .unwrap();
                    if let Some(taken) = taken {
                        let body = encode(&Message::User(format!("moved {step}"))).to_string();
                        raw.execute(
                            "UPDATE messages SET chat = ?1, body = ?2 WHERE id = ?3",
                            params![chat, body, taken],
                        )
                        .unwrap();
                    }
                }
                _ => {
                    raw.execute(
                        "INSERT INTO messages (chat, body, at) VALUES (?1, 'not json', 'x')",
                        [chat],
                    )
                    .unwrap();
                }
            }
        }
        assert!(turns_checked > 300, "{turns_checked}");
        // A chat pruned to nothing gives its newest id (the table's largest) again.
        for (i, text) in ["first", "second"].into_iter().enumerate() {
            ours.prune("solo", 0).unwrap();
            let got = ours
                .begin_turn("solo", &Message::User(text.into()), 10, 10)
                .unwrap();
            assert_eq!(got.messages, vec![Message::User(text.into())], "{i}");
        }
    }
}
