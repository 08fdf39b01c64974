//! What a channel received and has not handled yet, and who serves it: an
//! [`InboxStore`], with two backends that run one logic (this file, written once against
//! the scheduler's [`Tx`]): [`SqliteInbox`] over `<dataDir>/gateway.db` (one engine),
//! and [`PgInbox`] in the PostgreSQL of `storage.url`, shared by every engine given it
//! (its tables: `storage/migrations/0004_gateway.sql`).
//!
//! A channel that confirms what it read to its service (Telegram's `getUpdates` offset)
//! first [`accept`](InboxStore::accept)s a batch: in one transaction the messages are
//! kept and the channel's cursor moves past them (never back). Only then does the
//! service hear that they arrived (Telegram: the next poll's offset), so a crash before
//! the commit gets the batch again and a crash after it finds the messages here.
//!
//! Across engines:
//! - **One poller.** The engine that [holds the poller](InboxStore::hold_poller) (a lease
//!   row it renews) is the one that polls; when it dies its lease runs out and another
//!   takes it. Two pollers for a moment lose nothing and keep nothing twice: the insert
//!   of a message already kept does nothing and the cursor only moves forward.
//! - **One engine per chat.** An engine [claims](InboxStore::claim) chats that have
//!   messages and nobody serving them (or whose server's lease ran out), renews its
//!   claims, and is given its chats' messages in the order they arrived; a chat with
//!   nothing left is let go.
//! - **Each message answered once.** Before an answer goes out, its message turns from
//!   `pending` to `sending` in one statement ([`begin_answer`](InboxStore::begin_answer)),
//!   and only once every earlier message of its chat is gone: of two engines racing
//!   for one message one wins, and answers leave a chat in order. It is
//!   [`done`](InboxStore::done) (deleted) after the send. An engine that took a chat over
//!   finds a `sending` row of the dead one: the answer may have left, so it is not sent
//!   again ([`Claimed::abandoned`], logged). The one window left is the engine killed
//!   between the commit of `sending` and its request leaving the machine (no waiting in
//!   between: microseconds): that message goes unanswered, and is logged so.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::Connection;

use super::Incoming;
use crate::scheduler::store::{Row, StoreError, Tx, Value};
use crate::storage::{Postgres, StorageError};

/// Why the inbox could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InboxError {
    /// The database could not be opened or set up.
    #[error("cannot open the gateway's inbox {}: {source}", path.display())]
    Open {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// A statement on the open inbox failed.
    #[error("the gateway's inbox failed while {what}: {source}")]
    Query {
        /// What was being done (`keeping the received messages`).
        what: &'static str,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// PostgreSQL could not be reached, or a statement failed there.
    #[error("the gateway's inbox in PostgreSQL: {source}")]
    Postgres {
        /// What was being done.
        what: &'static str,
        /// Why (the host named, never the password).
        source: Box<StorageError>,
    },
    /// An answer waited too long for the chat's earlier answers; the message is given
    /// again.
    #[error(
        "the answer to message {receipt} waited too long for the chat's earlier answers; it is tried again"
    )]
    OutOfOrder {
        /// The message.
        receipt: i64,
    },
    /// The thread that reached the inbox stopped.
    #[error("the gateway's inbox could not be reached: its thread stopped")]
    Stopped,
    /// A row that does not read as the inbox writes it.
    #[error("the gateway's inbox failed while {what}: a row of an unexpected shape")]
    Shape {
        /// What was being done.
        what: &'static str,
    },
}

impl From<StoreError> for InboxError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Sql { doing, source } => Self::Query {
                what: doing,
                source,
            },
            StoreError::Postgres { doing, source } => Self::Postgres {
                what: doing,
                source,
            },
            StoreError::Open { path, source } => Self::Open { path, source },
            _ => Self::Shape {
                what: "reading or writing",
            },
        }
    }
}

/// What [`InboxStore::claim`] gives an engine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claimed {
    /// The messages not answered yet of the chats this engine serves, in the order they
    /// arrived.
    pub messages: Vec<Incoming>,
    /// Messages of chats taken over from an engine that died while sending their answer:
    /// they may have been answered, so they are not answered again; they are forgotten
    /// and given here to be logged.
    pub abandoned: Vec<Incoming>,
}

/// Whether an engine may send the answer to a message ([`InboxStore::begin_answer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begin {
    /// Yes: the message is now `sending`, this engine's. Send, then
    /// [`done`](InboxStore::done).
    Go,
    /// Not yet: an earlier message of the chat is not done.
    Wait,
    /// No: another engine answers it, or it is done.
    Gone,
}

/// The received messages not handled yet, each channel's cursor, its poller and who
/// serves each chat.
pub trait InboxStore: Send + Sync + std::fmt::Debug {
    /// Where `channel` goes on reading (Telegram: the offset of the next `getUpdates`);
    /// 0 the first time.
    fn cursor(&self, channel: &str) -> Result<i64, InboxError>;
    /// Keeps `messages` (those with a receipt; one already kept stays as it is) and
    /// moves `channel`'s cursor to `next` (never back), in one transaction.
    fn accept(&self, channel: &str, messages: &[Incoming], next: i64) -> Result<(), InboxError>;
    /// `channel`'s messages kept and not handled yet, in the order they arrived.
    fn pending(&self, channel: &str) -> Result<Vec<Incoming>, InboxError>;
    /// Forgets the message `receipt` of `channel`: it is handled by `engine` (dropped
    /// while `pending`, or answered by `engine`; another engine's `sending` is left).
    fn done(&self, channel: &str, receipt: i64, engine: &str) -> Result<(), InboxError>;
    /// Takes or renews `channel`'s poller for `engine` until `lease` from now: whether
    /// `engine` holds it (another engine's lease that has not run out is left alone).
    fn hold_poller(&self, channel: &str, engine: &str, lease: Duration)
    -> Result<bool, InboxError>;
    /// The engine holding `channel`'s poller, if its lease has not run out.
    fn poller(&self, channel: &str) -> Result<Option<String>, InboxError>;
    /// Renews `engine`'s chats of `channel`, takes up to `take` more that have messages
    /// and nobody serving them (or whose lease ran out), lets go of those with nothing
    /// left; what they hold not yet answered.
    fn claim(
        &self,
        channel: &str,
        engine: &str,
        lease: Duration,
        take: usize,
    ) -> Result<Claimed, InboxError>;
    /// Turns the message `receipt` from `pending` to `sending` for `engine`, once every
    /// earlier message of its chat is done.
    fn begin_answer(&self, channel: &str, receipt: i64, engine: &str) -> Result<Begin, InboxError>;
    /// Lets go of `engine`'s poller and chats of `channel` (a clean stop).
    fn release(&self, channel: &str, engine: &str) -> Result<(), InboxError>;
}

/// A backend: runs a closure in one transaction, with its tables' names.
trait Run {
    fn run(
        &self,
        doing: &'static str,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), InboxError>;
    /// `sql` with the backend's table names for `{cursors}`, `{inbox}`, `{chats}`,
    /// `{pollers}`.
    fn sql(&self, sql: &str) -> String;
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn int(r: &Row, i: usize, what: &'static str) -> Result<i64, InboxError> {
    match r.get(i) {
        Some(Value::Int(v)) => Ok(*v),
        _ => Err(InboxError::Shape { what }),
    }
}

fn text(r: &Row, i: usize, what: &'static str) -> Result<String, InboxError> {
    match r.get(i) {
        Some(Value::Text(v)) => Ok(v.clone()),
        _ => Err(InboxError::Shape { what }),
    }
}

/// A message of `channel` from a row `receipt, chat_id, sender, text`.
fn message(channel: &str, r: &Row, what: &'static str) -> Result<Incoming, InboxError> {
    Ok(Incoming {
        channel: channel.to_owned(),
        receipt: Some(int(r, 0, what)?),
        chat_id: text(r, 1, what)?,
        from: text(r, 2, what)?,
        text: text(r, 3, what)?,
    })
}

/// Runs `f` in one transaction; its rows kept out of the closure.
fn rows(
    b: &dyn Run,
    doing: &'static str,
    sql: &str,
    params: &[Value],
) -> Result<Vec<Row>, InboxError> {
    let sql = b.sql(sql);
    let mut out = Vec::new();
    b.run(doing, &mut |tx| {
        out = tx.query(doing, &sql, params)?;
        Ok(())
    })?;
    Ok(out)
}

fn cursor(b: &dyn Run, channel: &str) -> Result<i64, InboxError> {
    let what = "reading the cursor";
    let found = rows(
        b,
        what,
        "SELECT next FROM {cursors} WHERE channel = ?1",
        &[channel.into()],
    )?;
    found.first().map_or(Ok(0), |r| int(r, 0, what))
}

fn accept(b: &dyn Run, channel: &str, messages: &[Incoming], next: i64) -> Result<(), InboxError> {
    let insert = b.sql(
        "INSERT INTO {inbox} (channel, receipt, chat_id, sender, text) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (channel, receipt) DO NOTHING",
    );
    let cursor = b.sql(
        "INSERT INTO {cursors} (channel, next) VALUES (?1, ?2)
         ON CONFLICT (channel) DO UPDATE SET next = CASE WHEN excluded.next > {cursors}.next
             THEN excluded.next ELSE {cursors}.next END",
    );
    b.run("keeping the received messages", &mut |tx| {
        for m in messages {
            let Some(receipt) = m.receipt else { continue };
            tx.execute(
                "keeping the received messages",
                &insert,
                &[
                    channel.into(),
                    receipt.into(),
                    (&m.chat_id).into(),
                    (&m.from).into(),
                    (&m.text).into(),
                ],
            )?;
        }
        tx.execute("moving the cursor", &cursor, &[channel.into(), next.into()])?;
        Ok(())
    })
}

fn pending(b: &dyn Run, channel: &str) -> Result<Vec<Incoming>, InboxError> {
    let what = "reading the unhandled messages";
    rows(
        b,
        what,
        "SELECT receipt, chat_id, sender, text FROM {inbox} WHERE channel = ?1 ORDER BY receipt",
        &[channel.into()],
    )?
    .iter()
    .map(|r| message(channel, r, what))
    .collect()
}

fn done(b: &dyn Run, channel: &str, receipt: i64, engine: &str) -> Result<(), InboxError> {
    let sql = b.sql(
        "DELETE FROM {inbox} WHERE channel = ?1 AND receipt = ?2
             AND (state = 'pending' OR answerer = ?3)",
    );
    b.run("marking a message handled", &mut |tx| {
        tx.execute(
            "marking a message handled",
            &sql,
            &[channel.into(), receipt.into(), engine.into()],
        )
        .map(|_| ())
    })
}

fn hold_poller(
    b: &dyn Run,
    channel: &str,
    engine: &str,
    lease: Duration,
) -> Result<bool, InboxError> {
    let now = now_ms();
    let held = rows(
        b,
        "holding the poller",
        "INSERT INTO {pollers} (channel, owner, lease_until) VALUES (?1, ?2, ?3)
         ON CONFLICT (channel) DO UPDATE SET owner = excluded.owner,
             lease_until = excluded.lease_until
         WHERE {pollers}.owner = excluded.owner OR {pollers}.lease_until < ?4
         RETURNING owner",
        &[
            channel.into(),
            engine.into(),
            now.saturating_add(ms(lease)).into(),
            now.into(),
        ],
    )?;
    Ok(!held.is_empty())
}

fn poller(b: &dyn Run, channel: &str) -> Result<Option<String>, InboxError> {
    let what = "reading who polls";
    rows(
        b,
        what,
        "SELECT owner FROM {pollers} WHERE channel = ?1 AND lease_until >= ?2",
        &[channel.into(), now_ms().into()],
    )?
    .first()
    .map(|r| text(r, 0, what))
    .transpose()
}

fn claim(
    b: &dyn Run,
    channel: &str,
    engine: &str,
    lease: Duration,
    take: usize,
) -> Result<Claimed, InboxError> {
    let what = "claiming chats";
    let now = now_ms();
    let until = now.saturating_add(ms(lease));
    let take = i64::try_from(take).unwrap_or(i64::MAX);
    let renew = b.sql("UPDATE {chats} SET lease_until = ?3 WHERE channel = ?1 AND owner = ?2");
    let free = b.sql(
        "SELECT i.chat_id FROM {inbox} i LEFT JOIN {chats} c
             ON c.channel = i.channel AND c.chat_id = i.chat_id
         WHERE i.channel = ?1 AND (c.chat_id IS NULL OR c.lease_until < ?2)
         GROUP BY i.chat_id ORDER BY MIN(i.receipt) LIMIT ?3",
    );
    let take_one = b.sql(
        "INSERT INTO {chats} (channel, chat_id, owner, lease_until) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (channel, chat_id) DO UPDATE SET owner = excluded.owner,
             lease_until = excluded.lease_until
         WHERE {chats}.lease_until < ?5",
    );
    let abandoned = b.sql(
        "SELECT i.receipt, i.chat_id, i.sender, i.text FROM {inbox} i JOIN {chats} c
             ON c.channel = i.channel AND c.chat_id = i.chat_id
         WHERE i.channel = ?1 AND c.owner = ?2 AND i.state = 'sending' AND i.answerer <> ?2
         ORDER BY i.receipt",
    );
    let forget = b.sql("DELETE FROM {inbox} WHERE channel = ?1 AND receipt = ?2");
    let let_go = b.sql(
        "DELETE FROM {chats} WHERE channel = ?1 AND owner = ?2 AND NOT EXISTS
             (SELECT 1 FROM {inbox} i WHERE i.channel = {chats}.channel
                  AND i.chat_id = {chats}.chat_id)",
    );
    let mine = b.sql(
        "SELECT i.receipt, i.chat_id, i.sender, i.text FROM {inbox} i JOIN {chats} c
             ON c.channel = i.channel AND c.chat_id = i.chat_id
         WHERE i.channel = ?1 AND c.owner = ?2 AND i.state = 'pending'
         ORDER BY i.receipt",
    );
    let mut out = Claimed::default();
    let mut bad = false;
    b.run(what, &mut |tx| {
        out = Claimed::default();
        tx.execute(what, &renew, &[channel.into(), engine.into(), until.into()])?;
        for r in tx.query(what, &free, &[channel.into(), now.into(), take.into()])? {
            let Some(Value::Text(chat)) = r.first() else {
                bad = true;
                continue;
            };
            tx.execute(
                what,
                &take_one,
                &[
                    channel.into(),
                    chat.into(),
                    engine.into(),
                    until.into(),
                    now.into(),
                ],
            )?;
        }
        for r in tx.query(what, &abandoned, &[channel.into(), engine.into()])? {
            match message(channel, &r, what) {
                Ok(m) => {
                    tx.execute(
                        what,
                        &forget,
                        &[channel.into(), m.receipt.unwrap_or_default().into()],
                    )?;
                    out.abandoned.push(m);
                }
                Err(_) => bad = true,
            }
        }
        tx.execute(what, &let_go, &[channel.into(), engine.into()])?;
        for r in tx.query(what, &mine, &[channel.into(), engine.into()])? {
            match message(channel, &r, what) {
                Ok(m) => out.messages.push(m),
                Err(_) => bad = true,
            }
        }
        Ok(())
    })?;
    if bad {
        return Err(InboxError::Shape { what });
    }
    Ok(out)
}

fn begin_answer(
    b: &dyn Run,
    channel: &str,
    receipt: i64,
    engine: &str,
) -> Result<Begin, InboxError> {
    let what = "marking an answer as being sent";
    let flip = b.sql(
        "UPDATE {inbox} SET state = 'sending', answerer = ?3
         WHERE channel = ?1 AND receipt = ?2 AND state = 'pending' AND NOT EXISTS
             (SELECT 1 FROM {inbox} e WHERE e.channel = ?1 AND e.receipt < ?2
                  AND e.chat_id = {inbox}.chat_id)",
    );
    let still = b.sql("SELECT state FROM {inbox} WHERE channel = ?1 AND receipt = ?2");
    let mut begin = Begin::Gone;
    b.run(what, &mut |tx| {
        let flipped = tx.execute(
            what,
            &flip,
            &[channel.into(), receipt.into(), engine.into()],
        )?;
        begin = if flipped == 1 {
            Begin::Go
        } else {
            let state = tx.query(what, &still, &[channel.into(), receipt.into()])?;
            match state.first().and_then(|r| r.first()) {
                Some(Value::Text(s)) if s == "pending" => Begin::Wait,
                _ => Begin::Gone,
            }
        };
        Ok(())
    })?;
    Ok(begin)
}

fn release(b: &dyn Run, channel: &str, engine: &str) -> Result<(), InboxError> {
    let pollers = b.sql("DELETE FROM {pollers} WHERE channel = ?1 AND owner = ?2");
    let chats = b.sql("DELETE FROM {chats} WHERE channel = ?1 AND owner = ?2");
    b.run("letting go of the poller and the chats", &mut |tx| {
        tx.execute(
            "letting go of the poller",
            &pollers,
            &[channel.into(), engine.into()],
        )?;
        tx.execute(
            "letting go of the chats",
            &chats,
            &[channel.into(), engine.into()],
        )?;
        Ok(())
    })
}

/// The [`InboxStore`] of a backend: the logic above, once.
macro_rules! inbox_store {
    ($t:ty) => {
        impl InboxStore for $t {
            fn cursor(&self, channel: &str) -> Result<i64, InboxError> {
                cursor(self, channel)
            }
            fn accept(
                &self,
                channel: &str,
                messages: &[Incoming],
                next: i64,
            ) -> Result<(), InboxError> {
                accept(self, channel, messages, next)
            }
            fn pending(&self, channel: &str) -> Result<Vec<Incoming>, InboxError> {
                pending(self, channel)
            }
            fn done(&self, channel: &str, receipt: i64, engine: &str) -> Result<(), InboxError> {
                done(self, channel, receipt, engine)
            }
            fn hold_poller(
                &self,
                channel: &str,
                engine: &str,
                lease: Duration,
            ) -> Result<bool, InboxError> {
                hold_poller(self, channel, engine, lease)
            }
            fn poller(&self, channel: &str) -> Result<Option<String>, InboxError> {
                poller(self, channel)
            }
            fn claim(
                &self,
                channel: &str,
                engine: &str,
                lease: Duration,
                take: usize,
            ) -> Result<Claimed, InboxError> {
                claim(self, channel, engine, lease, take)
            }
            fn begin_answer(
                &self,
                channel: &str,
                receipt: i64,
                engine: &str,
            ) -> Result<Begin, InboxError> {
                begin_answer(self, channel, receipt, engine)
            }
            fn release(&self, channel: &str, engine: &str) -> Result<(), InboxError> {
                release(self, channel, engine)
            }
        }
    };
}

inbox_store!(SqliteInbox);
inbox_store!(PgInbox);

/// The inbox in SQLite, `<dataDir>/gateway.db`: the tables `cursors` and `pending` of
/// the engines before (kept as they were, `pending` given the columns `state` and
/// `answerer`), `chats` and `pollers`; times in milliseconds since the epoch.
pub struct SqliteInbox {
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for SqliteInbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SqliteInbox")
    }
}

impl SqliteInbox {
    /// Opens (creating) the inbox at `path`.
    pub fn open(path: &Path) -> Result<Self, InboxError> {
        let open = |source| InboxError::Open {
            path: path.to_owned(),
            source,
        };
        let conn = Connection::open(path).map_err(open)?;
        // Another engine on the same data dir is waited for, the journal mode included.
        crate::sqlite::set_up(&conn, Duration::from_secs(5), |conn| {
            conn.execute_batch(
                "PRAGMA journal_mode = WAL;
                 PRAGMA synchronous = FULL;
                 CREATE TABLE IF NOT EXISTS cursors (
                     channel TEXT PRIMARY KEY,
                     next INTEGER NOT NULL
                 );
                 CREATE TABLE IF NOT EXISTS pending (
                     channel TEXT NOT NULL,
                     receipt INTEGER NOT NULL,
                     chat_id TEXT NOT NULL,
                     sender TEXT NOT NULL,
                     text TEXT NOT NULL,
                     PRIMARY KEY (channel, receipt)
                 );
                 CREATE TABLE IF NOT EXISTS chats (
                     channel TEXT NOT NULL,
                     chat_id TEXT NOT NULL,
                     owner TEXT NOT NULL,
                     lease_until INTEGER NOT NULL,
                     PRIMARY KEY (channel, chat_id)
                 );
                 CREATE TABLE IF NOT EXISTS pollers (
                     channel TEXT PRIMARY KEY,
                     owner TEXT NOT NULL,
                     lease_until INTEGER NOT NULL
                 );",
            )?;
            // The columns an inbox of an older engine lacks.
            let has_state = conn
                .prepare("SELECT 1 FROM pragma_table_info('pending') WHERE name = 'state'")?
                .exists([])?;
            if !has_state {
                conn.execute_batch(
                    "ALTER TABLE pending ADD COLUMN state TEXT NOT NULL DEFAULT 'pending';
                     ALTER TABLE pending ADD COLUMN answerer TEXT;",
                )?;
            }
            Ok(())
        })
        .map_err(open)?;
        Ok(Self {
            conn: Mutex::new(conn),
        })
    }
}

impl Run for SqliteInbox {
    fn run(
        &self,
        doing: &'static str,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), InboxError> {
        let mut conn = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|source| InboxError::Query {
                what: doing,
                source,
            })?;
        f(&mut tx)?;
        tx.commit().map_err(|source| InboxError::Query {
            what: doing,
            source,
        })
    }

    fn sql(&self, sql: &str) -> String {
        sql.replace("{cursors}", "cursors")
            .replace("{inbox}", "pending")
            .replace("{chats}", "chats")
            .replace("{pollers}", "pollers")
    }
}

/// The inbox in the PostgreSQL of `storage.url`, shared by every engine given it: the
/// tables `gateway_cursors`, `gateway_inbox`, `gateway_chats`, `gateway_pollers`; times
/// in milliseconds since the epoch of each engine's clock (as the scheduler's leases:
/// the engines' clocks agree to well within a lease).
#[derive(Debug, Clone)]
pub struct PgInbox {
    db: Arc<Postgres>,
}

impl PgInbox {
    /// The inbox in `db` (connected and migrated).
    pub fn new(db: Arc<Postgres>) -> Self {
        Self { db }
    }
}

impl Run for PgInbox {
    fn run(
        &self,
        doing: &'static str,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), InboxError> {
        crate::scheduler::store::in_transaction(&self.db, doing, f).map_err(InboxError::from)
    }

    fn sql(&self, sql: &str) -> String {
        sql.replace("{cursors}", "gateway_cursors")
            .replace("{inbox}", "gateway_inbox")
            .replace("{chats}", "gateway_chats")
            .replace("{pollers}", "gateway_pollers")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    use crate::pg_harness;

    fn message(receipt: i64, chat: &str, text: &str) -> Incoming {
        Incoming {
            channel: "telegram".into(),
            chat_id: chat.into(),
            from: "ann".into(),
            text: text.into(),
            receipt: Some(receipt),
        }
    }

    type Open = Box<dyn Fn() -> Arc<dyn InboxStore>>;

    /// Runs `test` against each backend: SQLite, then PostgreSQL (a server of the
    /// test's own, a database per call) where it is installed; it is given how to open
    /// the inbox (again: another engine's, or after a restart).
    fn each_backend(test: impl Fn(Open)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.db");
        test(Box::new(move || {
            Arc::new(SqliteInbox::open(&path).unwrap())
        }));
        let Some(server) = pg_harness::Postgres::start() else {
            return;
        };
        let url = crate::config::DatabaseUrl::new(server.fresh_db());
        test(Box::new(move || {
            let db = Postgres::connect(&url).unwrap();
            Arc::new(PgInbox::new(Arc::new(db)))
        }));
    }

    #[test]
    fn what_is_accepted_survives_until_done_and_the_cursor_never_goes_back() {
        each_backend(|open| {
            let inbox = open();
            assert_eq!(inbox.cursor("telegram").unwrap(), 0);
            inbox
                .accept(
                    "telegram",
                    &[message(5, "42", "a"), message(6, "42", "b")],
                    7,
                )
                .unwrap();
            // The same batch again (a crash before the service heard of the offset):
            // kept once.
            inbox
                .accept("telegram", &[message(6, "42", "b")], 7)
                .unwrap();
            inbox.accept("telegram", &[], 3).unwrap();
            inbox.done("telegram", 5, "a").unwrap();
            drop(inbox);

            let again = open();
            assert_eq!(again.cursor("telegram").unwrap(), 7);
            assert_eq!(again.pending("telegram").unwrap(), [message(6, "42", "b")]);
            assert!(again.pending("console").unwrap().is_empty());
            again.done("telegram", 6, "a").unwrap();
            assert!(again.pending("telegram").unwrap().is_empty());
        });
    }

    #[test]
    fn one_engine_polls_until_its_lease_runs_out() {
        each_backend(|open| {
            let (a, b) = (open(), open());
            let lease = Duration::from_millis(400);
            assert!(a.hold_poller("telegram", "a", lease).unwrap());
            assert!(!b.hold_poller("telegram", "b", lease).unwrap());
            assert!(a.hold_poller("telegram", "a", lease).unwrap());
            assert_eq!(b.poller("telegram").unwrap().as_deref(), Some("a"));
            std::thread::sleep(Duration::from_millis(500));
            // a died: its lease ran out, b takes over and a cannot come back.
            assert_eq!(b.poller("telegram").unwrap(), None);
            assert!(b.hold_poller("telegram", "b", lease).unwrap());
            assert!(!a.hold_poller("telegram", "a", lease).unwrap());
            // A clean stop lets go at once.
            b.release("telegram", "b").unwrap();
            assert!(a.hold_poller("telegram", "a", lease).unwrap());
        });
    }

    #[test]
    fn each_chat_is_served_by_one_engine_and_its_answers_go_in_order() {
        each_backend(|open| {
            let (a, b) = (open(), open());
            let lease = Duration::from_secs(30);
            a.accept(
                "telegram",
                &[
                    message(1, "7", "7a"),
                    message(2, "8", "8a"),
                    message(3, "7", "7b"),
                ],
                4,
            )
            .unwrap();
            // a takes one chat, b the other; neither sees the other's.
            let got_a = a.claim("telegram", "a", lease, 1).unwrap();
            assert_eq!(
                got_a.messages,
                [message(1, "7", "7a"), message(3, "7", "7b")]
            );
            let got_b = b.claim("telegram", "b", lease, 5).unwrap();
            assert_eq!(got_b.messages, [message(2, "8", "8a")]);
            assert!(got_a.abandoned.is_empty() && got_b.abandoned.is_empty());
            // In order: 3 waits for 1; 1 once, whoever asks.
            assert_eq!(a.begin_answer("telegram", 3, "a").unwrap(), Begin::Wait);
            assert_eq!(a.begin_answer("telegram", 1, "a").unwrap(), Begin::Go);
            assert_eq!(b.begin_answer("telegram", 1, "b").unwrap(), Begin::Gone);
            assert_eq!(a.begin_answer("telegram", 3, "a").unwrap(), Begin::Wait);
            a.done("telegram", 1, "a").unwrap();
            assert_eq!(a.begin_answer("telegram", 3, "a").unwrap(), Begin::Go);
            a.done("telegram", 3, "a").unwrap();
            assert_eq!(a.begin_answer("telegram", 3, "a").unwrap(), Begin::Gone);
            // A chat with nothing left is let go; a new message of it goes to whoever
            // claims first.
            assert!(
                a.claim("telegram", "a", lease, 0)
                    .unwrap()
                    .messages
                    .is_empty()
            );
            a.accept("telegram", &[message(9, "7", "7c")], 10).unwrap();
            assert_eq!(
                b.claim("telegram", "b", lease, 5).unwrap().messages,
                [message(2, "8", "8a"), message(9, "7", "7c")]
            );
            assert!(
                a.claim("telegram", "a", lease, 5)
                    .unwrap()
                    .messages
                    .is_empty()
            );
        });
    }

    #[test]
    fn a_dead_engines_chats_are_taken_over_and_what_it_was_sending_is_not_sent_again() {
        each_backend(|open| {
            let (a, b) = (open(), open());
            a.accept(
                "telegram",
                &[message(1, "7", "one"), message(2, "7", "two")],
                3,
            )
            .unwrap();
            let short = Duration::from_millis(300);
            assert_eq!(
                a.claim("telegram", "a", short, 5).unwrap().messages.len(),
                2
            );
            // a began sending "one", then died.
            assert_eq!(a.begin_answer("telegram", 1, "a").unwrap(), Begin::Go);
            let long = Duration::from_secs(30);
            assert!(
                b.claim("telegram", "b", long, 5)
                    .unwrap()
                    .messages
                    .is_empty()
            );
            std::thread::sleep(Duration::from_millis(400));
            let got = b.claim("telegram", "b", long, 5).unwrap();
            assert_eq!(got.abandoned, [message(1, "7", "one")]);
            assert_eq!(got.messages, [message(2, "7", "two")]);
            assert_eq!(b.begin_answer("telegram", 2, "b").unwrap(), Begin::Go);
            // a, back late, can no longer answer what b took.
            assert_eq!(a.begin_answer("telegram", 2, "a").unwrap(), Begin::Gone);
            assert!(
                a.claim("telegram", "a", short, 5)
                    .unwrap()
                    .messages
                    .is_empty()
            );
        });
    }

    #[test]
    fn an_inbox_of_an_older_engine_keeps_its_messages() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.db");
        {
            let old = Connection::open(&path).unwrap();
            old.execute_batch(
                "CREATE TABLE cursors (channel TEXT PRIMARY KEY, next INTEGER NOT NULL);
                 CREATE TABLE pending (channel TEXT NOT NULL, receipt INTEGER NOT NULL,
                     chat_id TEXT NOT NULL, sender TEXT NOT NULL, text TEXT NOT NULL,
                     PRIMARY KEY (channel, receipt));
                 INSERT INTO cursors VALUES ('telegram', 12);
                 INSERT INTO pending VALUES ('telegram', 11, '42', 'ann', 'left over');",
            )
            .unwrap();
        }
        let inbox = SqliteInbox::open(&path).unwrap();
        assert_eq!(inbox.cursor("telegram").unwrap(), 12);
        let got = inbox
            .claim("telegram", "a", Duration::from_secs(5), 5)
            .unwrap();
        assert_eq!(got.messages, [message(11, "42", "left over")]);
    }

    #[test]
    fn a_file_that_is_no_database_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.db");
        std::fs::write(
            &path,
            "not sqlite, just text that is long enough to be a header",
        )
        .unwrap();
        let e = SqliteInbox::open(&path).unwrap_err();
        assert!(e.to_string().contains("gateway.db"), "{e}");
    }
}
