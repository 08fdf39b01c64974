//! The history in the PostgreSQL of `storage.url` (its tables:
//! `storage/migrations/0002_history.sql`), shared by every engine given the database: a
//! chat written on one engine is read on another. The rows are SQLite's (the same JSON
//! bodies, read by the same decoder); each method is one transaction on a connection of
//! the pool, waited for on the client's runtime. A connection the server ends under a
//! statement (`pg_terminate_backend`, a restart, a failover: it says so, SQLSTATE
//! 57P01 to 57P03, before the statement completed, and rolls its transaction back) is
//! left, and the method runs once more on a fresh connection of the pool: nothing was
//! written, so nothing is written twice. A second such end, or any other failure (a
//! `COMMIT` whose answer was lost is never retried: it may have committed), fails the
//! method with the server's reason; what was committed before stays.

use std::sync::Arc;

use futures_util::future::try_join;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::{HistoryError, HistoryOp, HistoryStore, Loaded, decoded, encode, from_window};
use crate::llm::{Message, Usage};
use crate::storage::{Postgres, StorageError};

const INSERT_MESSAGE: &str = "INSERT INTO history_messages (chat, body) VALUES ($1, $2)";
/// A round's messages in one statement, their ids in the order given.
const INSERT_MESSAGES: &str = "INSERT INTO history_messages (chat, body)
     SELECT $1, body FROM unnest($2::TEXT[]) WITH ORDINALITY AS m(body, n) ORDER BY n";
const INSERT_USAGE: &str = "INSERT INTO history_usage (chat, model, input_tokens, output_tokens)
     VALUES ($1, $2, $3, $4)";
/// An answer and its request's tokens in one statement (one round trip, atomic).
const INSERT_ANSWER: &str = "WITH m AS (
         INSERT INTO history_messages (chat, body) VALUES ($1, $2))
     INSERT INTO history_usage (chat, model, input_tokens, output_tokens)
     VALUES ($1, $3, $4, $5)";
const DELETE_OLD: &str = "DELETE FROM history_messages WHERE chat = $1 AND id <= (
     SELECT id FROM history_messages WHERE chat = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)";
const LOAD: &str = "SELECT body FROM history_messages WHERE chat = $1 ORDER BY id DESC LIMIT $2";
const USAGE: &str = "SELECT COALESCE(SUM(input_tokens), 0)::BIGINT,
     COALESCE(SUM(output_tokens), 0)::BIGINT FROM history_usage WHERE chat = $1";

/// The history in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgHistory {
    db: Arc<Postgres>,
}

impl PgHistory {
    /// The history in `db` (connected and migrated).
    pub fn new(db: Arc<Postgres>) -> Self {
        Self { db }
    }

    /// `op`'s error for a failed statement.
    fn sql(&self, op: HistoryOp) -> impl FnOnce(tokio_postgres::Error) -> HistoryError {
        let target = self.db.target().to_owned();
        move |source| HistoryError::Postgres {
            op,
            source: Box::new(StorageError::Sql {
                target,
                doing: op.doing(),
                source,
            }),
        }
    }

    /// The pool's connection for `op`.
    async fn client(&self, op: HistoryOp) -> Result<deadpool_postgres::Client, HistoryError> {
        self.db.client().await.map_err(|e| HistoryError::Postgres {
            op,
            source: Box::new(e),
        })
    }

    /// Whether `e` may be retried once (`retried`: it was not yet): the server ended the
    /// session before the statement completed.
    fn retry(&self, op: HistoryOp, e: &tokio_postgres::Error, retried: &mut bool) -> bool {
        if *retried || !ended_by_server(e) {
            return false;
        }
        *retried = true;
        tracing::warn!(
            target: "klaw::storage",
            "{} on {}: the server ended the connection ({}); once more on a fresh one",
            op.doing(),
            self.db.target(),
            e.as_db_error().map_or_else(|| e.to_string(), ToString::to_string)
        );
        true
    }

    /// Runs `f` in one transaction on a connection of the pool (committed when it
    /// succeeds, rolled back otherwise); again on a fresh connection, once, when the
    /// server ended the first before `f` was done (never when `COMMIT` failed).
    fn transact<T>(
        &self,
        op: HistoryOp,
        f: impl AsyncFn(&deadpool_postgres::Transaction<'_>) -> Result<T, tokio_postgres::Error>,
    ) -> Result<T, HistoryError> {
        self.db.block_on(async {
            let mut retried = false;
            loop {
                let mut client = self.client(op).await?;
                let tx = match client.transaction().await {
                    Ok(tx) => tx,
                    Err(e) if self.retry(op, &e, &mut retried) => continue,
                    Err(e) => return Err(self.sql(op)(e)),
                };
                let out = match f(&tx).await {
                    Ok(out) => out,
                    Err(e) if self.retry(op, &e, &mut retried) => continue,
                    Err(e) => return Err(self.sql(op)(e)),
                };
                tx.commit().await.map_err(self.sql(op))?;
                return Ok(out);
            }
        })
    }

    /// Runs `f` with a connection of the pool, outside a transaction (one statement,
    /// committed when it completes); again on a fresh connection, once, when the server
    /// ended the first before the statement completed.
    fn with_client<T>(
        &self,
        op: HistoryOp,
        f: impl AsyncFn(&deadpool_postgres::Client) -> Result<T, tokio_postgres::Error>,
    ) -> Result<T, HistoryError> {
        self.db.block_on(async {
            let mut retried = false;
            loop {
                let client = self.client(op).await?;
                match f(&client).await {
                    Ok(out) => return Ok(out),
                    Err(e) if self.retry(op, &e, &mut retried) => {}
                    Err(e) => return Err(self.sql(op)(e)),
                }
            }
        })
    }
}

/// Whether the server said it ended the session (`pg_terminate_backend`, a shutdown or
/// restart, a crash of another backend, a server not accepting connections yet) in
/// answer to a statement: the statement did not complete and its transaction was
/// rolled back. A connection closed without a word is not: a write may have committed.
fn ended_by_server(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        *c == SqlState::ADMIN_SHUTDOWN
            || *c == SqlState::CRASH_SHUTDOWN
            || *c == SqlState::CANNOT_CONNECT_NOW
    })
}

fn int(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn tokens(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The last `limit` messages of `chat` as [`HistoryStore::load`] gives them, read on
/// `client` (a transaction's or the pool's).
async fn load_on(
    client: &impl deadpool_postgres::GenericClient,
    chat: &str,
    limit: usize,
) -> Result<Loaded, tokio_postgres::Error> {
    let st = client.prepare_cached(LOAD).await?;
    let rows = client
        .query(&st, &[&chat, &int(limit.saturating_add(1))])
        .await?;
    let truncated = rows.len() > limit;
    let mut messages = Vec::with_capacity(rows.len().min(limit));
    for row in rows.iter().take(limit).rev() {
        let body: &str = row.try_get(0)?;
        if let Some(m) = decoded(chat, body) {
            messages.push(m);
        }
    }
    Ok(from_window(messages, truncated))
}

impl HistoryStore for PgHistory {
    fn append(&self, chat: &str, message: &Message) -> Result<(), HistoryError> {
        let body = encode(message).to_string();
        self.with_client(HistoryOp::Save, async |c| {
            let st = c.prepare_cached(INSERT_MESSAGE).await?;
            c.execute(&st, &[&chat, &body]).await.map(|_| ())
        })
    }

    fn append_all(&self, chat: &str, messages: &[Message]) -> Result<(), HistoryError> {
        let bodies: Vec<String> = messages.iter().map(|m| encode(m).to_string()).collect();
        self.with_client(HistoryOp::Save, async |c| {
            let st = c.prepare_cached(INSERT_MESSAGES).await?;
            c.execute(&st, &[&chat, &bodies]).await.map(|_| ())
        })
    }

    fn append_answer(
        &self,
        chat: &str,
        answer: &Message,
        model: &str,
        usage: Usage,
    ) -> Result<(), HistoryError> {
        let body = encode(answer).to_string();
        let (i, o) = (tokens(usage.input_tokens), tokens(usage.output_tokens));
        self.with_client(HistoryOp::Save, async |c| {
            let st = c.prepare_cached(INSERT_ANSWER).await?;
            let params: [&(dyn ToSql + Sync); 5] = [&chat, &body, &model, &i, &o];
            c.execute(&st, &params).await.map(|_| ())
        })
    }

    fn begin_turn(
        &self,
        chat: &str,
        message: &Message,
        keep: usize,
        limit: usize,
    ) -> Result<Loaded, HistoryError> {
        let body = encode(message).to_string();
        self.transact(HistoryOp::Save, async |tx| {
            let (insert, delete) = try_join(
                tx.prepare_cached(INSERT_MESSAGE),
                tx.prepare_cached(DELETE_OLD),
            )
            .await?;
            // Sent together, run in order: the delete sees the new row.
            let keep = int(keep);
            try_join(
                tx.execute(&insert, &[&chat, &body]),
                tx.execute(&delete, &[&chat, &keep]),
            )
            .await?;
            load_on(tx, chat, limit).await
        })
    }

    fn record_usage(&self, chat: &str, model: &str, usage: Usage) -> Result<(), HistoryError> {
        let (i, o) = (tokens(usage.input_tokens), tokens(usage.output_tokens));
        self.with_client(HistoryOp::RecordUsage, async |c| {
            let st = c.prepare_cached(INSERT_USAGE).await?;
            let params: [&(dyn ToSql + Sync); 4] = [&chat, &model, &i, &o];
            c.execute(&st, &params).await.map(|_| ())
        })
    }

    fn usage(&self, chat: &str) -> Result<Usage, HistoryError> {
        let (i, o): (i64, i64) = self.with_client(HistoryOp::ReadUsage, async |c| {
            let st = c.prepare_cached(USAGE).await?;
            let row = c.query_one(&st, &[&chat]).await?;
            Ok((row.try_get(0)?, row.try_get(1)?))
        })?;
        Ok(Usage {
            input_tokens: u64::try_from(i).unwrap_or(0),
            output_tokens: u64::try_from(o).unwrap_or(0),
        })
    }

    fn load(&self, chat: &str, limit: usize) -> Result<Loaded, HistoryError> {
        self.with_client(HistoryOp::Load, async |c| load_on(c, chat, limit).await)
    }

    fn prune(&self, chat: &str, keep: usize) -> Result<(), HistoryError> {
        self.with_client(HistoryOp::Prune, async |c| {
            let st = c.prepare_cached(DELETE_OLD).await?;
            c.execute(&st, &[&chat, &int(keep)]).await.map(|_| ())
        })
    }

    fn waits_on_network(&self) -> bool {
        true
    }
}
