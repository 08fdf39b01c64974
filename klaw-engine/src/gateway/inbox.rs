//! What a channel received and has not handled yet, kept in SQLite
//! (`<dataDir>/gateway.db`) so that a restart neither answers a message twice nor loses
//! one.
//!
//! A channel that confirms what it read to its service (Telegram's `getUpdates` offset)
//! first [`accept`](InboxStore::accept)s a batch: in one transaction the messages are
//! kept and the channel's cursor moves past them. Only then does the service hear that
//! they arrived (Telegram: the next poll's offset), so a crash before the commit gets
//! the batch again and a crash after it finds the messages here. Each message is
//! [`done`](InboxStore::done) once it is handled (answered, or dropped as off the
//! whitelist); what a stopped or killed engine had not handled is given again at the
//! next start ([`pending`](InboxStore::pending)). The one window left is an answer sent
//! and the engine killed before its `done`: that message is answered again.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, params};

use super::Incoming;

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
    #[error("cannot {what} in the gateway's inbox: {source}")]
    Query {
        /// What was being done (`keep the received messages`).
        what: &'static str,
        /// SQLite's error.
        source: rusqlite::Error,
    },
}

fn query(what: &'static str) -> impl FnOnce(rusqlite::Error) -> InboxError {
    move |source| InboxError::Query { what, source }
}

/// The received messages not handled yet, and each channel's cursor.
pub struct InboxStore {
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for InboxStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InboxStore")
    }
}

impl InboxStore {
    /// Opens (creating) the inbox at `path`.
    pub fn open(path: &Path) -> Result<Self, InboxError> {
        let open = |source| InboxError::Open {
            path: path.to_owned(),
            source,
        };
        let conn = Connection::open(path).map_err(open)?;
        // Another engine on the same data dir is waited for, the journal mode included.
        crate::sqlite::set_up(&conn, std::time::Duration::from_secs(5), |conn| {
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
                 );",
            )
        })
        .map_err(open)?;
        Ok(Self {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Where `channel` goes on reading (Telegram: the offset of the next `getUpdates`);
    /// 0 the first time.
    pub fn cursor(&self, channel: &str) -> Result<i64, InboxError> {
        self.conn()
            .query_row(
                "SELECT next FROM cursors WHERE channel = ?1",
                [channel],
                |r| r.get(0),
            )
            .optional()
            .map(Option::unwrap_or_default)
            .map_err(query("read the cursor"))
    }

    /// Keeps `messages` (those with a receipt; one already kept stays as it is) and
    /// moves `channel`'s cursor to `next` (never back), in one transaction.
    pub fn accept(
        &self,
        channel: &str,
        messages: &[Incoming],
        next: i64,
    ) -> Result<(), InboxError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(query("keep the received messages"))?;
        for m in messages {
            let Some(receipt) = m.receipt else { continue };
            tx.execute(
                "INSERT OR IGNORE INTO pending (channel, receipt, chat_id, sender, text)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![channel, receipt, m.chat_id, m.from, m.text],
            )
            .map_err(query("keep the received messages"))?;
        }
        tx.execute(
            "INSERT INTO cursors (channel, next) VALUES (?1, ?2)
             ON CONFLICT (channel) DO UPDATE SET next = max(next, excluded.next)",
            params![channel, next],
        )
        .map_err(query("move the cursor"))?;
        tx.commit().map_err(query("keep the received messages"))
    }

    /// `channel`'s messages kept and not handled yet, in the order they arrived.
    pub fn pending(&self, channel: &str) -> Result<Vec<Incoming>, InboxError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT receipt, chat_id, sender, text FROM pending
                 WHERE channel = ?1 ORDER BY receipt",
            )
            .map_err(query("read the unhandled messages"))?;
        stmt.query_map([channel], |r| {
            Ok(Incoming {
                channel: channel.to_owned(),
                receipt: Some(r.get(0)?),
                chat_id: r.get(1)?,
                from: r.get(2)?,
                text: r.get(3)?,
            })
        })
        .and_then(Iterator::collect)
        .map_err(query("read the unhandled messages"))
    }

    /// Forgets the message `receipt` of `channel`: it is handled.
    pub fn done(&self, channel: &str, receipt: i64) -> Result<(), InboxError> {
        self.conn()
            .execute(
                "DELETE FROM pending WHERE channel = ?1 AND receipt = ?2",
                params![channel, receipt],
            )
            .map(|_| ())
            .map_err(query("mark a message handled"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn message(receipt: i64, text: &str) -> Incoming {
        Incoming {
            channel: "telegram".into(),
            chat_id: "42".into(),
            from: "ann".into(),
            text: text.into(),
            receipt: Some(receipt),
        }
    }

    #[test]
    fn what_is_accepted_survives_until_done_and_the_cursor_never_goes_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.db");
        let inbox = InboxStore::open(&path).unwrap();
        assert_eq!(inbox.cursor("telegram").unwrap(), 0);
        inbox
            .accept("telegram", &[message(5, "a"), message(6, "b")], 7)
            .unwrap();
        // The same batch again (a crash before the service heard of the offset): kept once.
        inbox.accept("telegram", &[message(6, "b")], 7).unwrap();
        inbox.accept("telegram", &[], 3).unwrap();
        inbox.done("telegram", 5).unwrap();
        drop(inbox);

        let again = InboxStore::open(&path).unwrap();
        assert_eq!(again.cursor("telegram").unwrap(), 7);
        assert_eq!(again.pending("telegram").unwrap(), [message(6, "b")]);
        assert!(again.pending("console").unwrap().is_empty());
        again.done("telegram", 6).unwrap();
        assert!(again.pending("telegram").unwrap().is_empty());
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
        let e = InboxStore::open(&path).unwrap_err();
        assert!(e.to_string().contains("gateway.db"), "{e}");
    }
}
