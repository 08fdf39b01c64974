//! The PostgreSQL backend: the schedule in the database of `storage.url`, shared by
//! every engine given it (its tables: `storage/migrations/0001_scheduler.sql`). The statements are the SQLite backend's (written once in
//! `store.rs`), their `?N` parameters read as `$N`; a write transaction first takes
//! `pg_advisory_xact_lock(SCHEDULE_LOCK)`, so that the claims, the `maxJobs` count and
//! the lease take-overs of all engines are made one transaction at a time, as SQLite's
//! `BEGIN IMMEDIATE` makes them on one machine; the lock goes with the transaction, so
//! an engine killed inside one holds nothing (PostgreSQL ends its session and rolls back).

use std::sync::Arc;

use bytes::BytesMut;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use super::{Row, StoreError, Transact, Tx, Value};
use crate::storage::{Postgres, StorageError};

/// The advisory lock every write transaction of the schedule takes (`klaw` in ASCII,
/// then 2).
const SCHEDULE_LOCK: i64 = 0x6b6c_6177_0000_0002;

/// The schedule in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgStore {
    db: Arc<Postgres>,
    max_catch_up: u32,
}

impl PgStore {
    /// The schedule in `db` (connected and migrated); a job with misfire `all` catches
    /// up at most `max_catch_up` runs.
    pub fn new(db: Arc<Postgres>, max_catch_up: u32) -> Self {
        Self {
            db,
            max_catch_up: max_catch_up.max(1),
        }
    }

    /// The database.
    pub fn database(&self) -> &Arc<Postgres> {
        &self.db
    }
}

fn pg(doing: &'static str, target: &str) -> impl FnOnce(tokio_postgres::Error) -> StoreError {
    let target = target.to_owned();
    move |source| StoreError::Postgres {
        doing,
        source: Box::new(StorageError::Sql {
            target,
            doing,
            source,
        }),
    }
}

/// `?N` parameters as PostgreSQL's `$N`.
fn dollars(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

impl ToSql for Value {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Self::Null => Ok(IsNull::Yes),
            Self::Int(v) if *ty == Type::INT4 => i32::try_from(*v)?.to_sql(ty, out),
            Self::Int(v) => v.to_sql(ty, out),
            Self::Text(v) => v.as_str().to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        matches!(
            *ty,
            Type::INT8 | Type::INT4 | Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME
        )
    }

    to_sql_checked!();
}

fn row_values(row: &tokio_postgres::Row) -> Result<Row, tokio_postgres::Error> {
    (0..row.len())
        .map(|i| {
            let ty = row.columns().get(i).map(|c| c.type_().clone());
            Ok(match ty {
                Some(Type::INT8) => row
                    .try_get::<_, Option<i64>>(i)?
                    .map_or(Value::Null, Value::Int),
                Some(Type::INT4) => row
                    .try_get::<_, Option<i32>>(i)?
                    .map_or(Value::Null, |v| Value::Int(i64::from(v))),
                _ => row
                    .try_get::<_, Option<String>>(i)?
                    .map_or(Value::Null, Value::Text),
            })
        })
        .collect()
}

/// One transaction on a connection of the pool, each statement waited for on the
/// client's runtime.
struct PgTx<'a, 'c> {
    db: &'a Postgres,
    tx: &'a deadpool_postgres::Transaction<'c>,
}

impl PgTx<'_, '_> {
    /// `statement` prepared once per connection (deadpool's cache): one round trip a
    /// statement after the first.
    async fn prepared(
        &self,
        statement: &str,
    ) -> Result<tokio_postgres::Statement, tokio_postgres::Error> {
        self.tx.prepare_cached(&dollars(statement)).await
    }
}

impl Tx for PgTx<'_, '_> {
    fn execute(
        &mut self,
        doing: &'static str,
        statement: &str,
        params: &[Value],
    ) -> Result<u64, StoreError> {
        let params: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as _).collect();
        self.db
            .block_on(async {
                let st = self.prepared(statement).await?;
                self.tx.execute(&st, &params).await
            })
            .map_err(pg(doing, self.db.target()))
    }

    fn query(
        &mut self,
        doing: &'static str,
        statement: &str,
        params: &[Value],
    ) -> Result<Vec<Row>, StoreError> {
        let params: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as _).collect();
        let rows = self
            .db
            .block_on(async {
                let st = self.prepared(statement).await?;
                self.tx.query(&st, &params).await
            })
            .map_err(pg(doing, self.db.target()))?;
        rows.iter()
            .map(row_values)
            .collect::<Result<_, _>>()
            .map_err(pg(doing, self.db.target()))
    }
}

/// Runs `f` in one transaction of `db`, without the schedule's lock: for another store
/// whose statements are written against [`Tx`] (the gateway's inbox), each of them
/// atomic by its own rows.
pub(crate) fn in_transaction(
    db: &Postgres,
    doing: &'static str,
    f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let mut client = db.block_on(db.client()).map_err(|e| StoreError::Postgres {
        doing,
        source: Box::new(e),
    })?;
    let tx = db
        .block_on(client.transaction())
        .map_err(pg(doing, db.target()))?;
    f(&mut PgTx { db, tx: &tx })?;
    db.block_on(tx.commit()).map_err(pg(doing, db.target()))
}

impl Transact for PgStore {
    fn transact(
        &self,
        write: bool,
        doing: &'static str,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let db = &*self.db;
        let mut client = db.block_on(db.client()).map_err(|e| StoreError::Postgres {
            doing,
            source: Box::new(e),
        })?;
        let tx = db
            .block_on(client.transaction())
            .map_err(pg(doing, db.target()))?;
        if write {
            db.block_on(tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEDULE_LOCK]))
                .map_err(pg(doing, db.target()))?;
        }
        f(&mut PgTx { db, tx: &tx })?;
        db.block_on(tx.commit()).map_err(pg(doing, db.target()))
    }

    fn max_catch_up(&self) -> u32 {
        self.max_catch_up
    }
}
