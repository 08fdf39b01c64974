//! The SQLite backend: `<dataDir>/schedule.sqlite`, shared by the engines of one data
//! dir; a write transaction is `BEGIN IMMEDIATE` (SQLite's one writer at a time).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, TransactionBehavior};

use super::{Row, StoreError, Transact, Tx, Value};

fn sql(doing: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |source| StoreError::Sql { doing, source }
}

/// The SQLite store, opened on first use.
pub struct SqliteStore {
    path: PathBuf,
    max_catch_up: u32,
    conn: Mutex<Option<Connection>>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    name TEXT PRIMARY KEY,
    cron TEXT NOT NULL,
    timezone TEXT NOT NULL,
    message TEXT NOT NULL,
    model TEXT,
    inject_into TEXT,
    misfire TEXT NOT NULL DEFAULT 'once',
    created INTEGER NOT NULL,
    next_run INTEGER,
    last_run INTEGER,
    last_status TEXT,
    last_error TEXT,
    origin TEXT,
    history_messages INTEGER
);
CREATE INDEX IF NOT EXISTS jobs_next_run ON jobs(next_run);
CREATE TABLE IF NOT EXISTS runs (
    job TEXT NOT NULL,
    scheduled INTEGER NOT NULL,
    owner TEXT NOT NULL,
    lease_until INTEGER NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    attempts INTEGER NOT NULL DEFAULT 1,
    started INTEGER,
    finished INTEGER,
    PRIMARY KEY (job, scheduled)
);
CREATE INDEX IF NOT EXISTS runs_running ON runs(status, lease_until);
";

/// Brings a schedule written by an older engine up to [`SCHEMA`]: the columns added
/// since (a column that exists is left alone).
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let has_origin = conn
        .prepare("SELECT 1 FROM pragma_table_info('jobs') WHERE name = 'origin'")?
        .exists([])?;
    if !has_origin {
        conn.execute_batch("ALTER TABLE jobs ADD COLUMN origin TEXT")?;
    }
    let has_history = conn
        .prepare("SELECT 1 FROM pragma_table_info('jobs') WHERE name = 'history_messages'")?
        .exists([])?;
    if !has_history {
        conn.execute_batch("ALTER TABLE jobs ADD COLUMN history_messages INTEGER")?;
    }
    Ok(())
}

impl SqliteStore {
    /// The store at `path` (created on first use); a job with misfire `all` catches up
    /// at most `max_catch_up` runs.
    pub fn new(path: impl Into<PathBuf>, max_catch_up: u32) -> Self {
        Self {
            path: path.into(),
            max_catch_up: max_catch_up.max(1),
            conn: Mutex::new(None),
        }
    }

    /// The database's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn open(path: &Path) -> Result<Connection, StoreError> {
        let open = |source| StoreError::Open {
            path: path.to_owned(),
            source,
        };
        let conn = Connection::open(path).map_err(open)?;
        // Engines started together on one data dir wait for each other here too.
        crate::sqlite::set_up(&conn, Duration::from_secs(10), |conn| {
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            conn.execute_batch(SCHEMA)?;
            migrate(conn)
        })
        .map_err(open)?;
        Ok(conn)
    }

    /// Runs `f` on the connection, opening it first when needed.
    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut guard = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if guard.is_none() {
            *guard = Some(Self::open(&self.path)?);
        }
        match guard.as_mut() {
            Some(conn) => f(conn),
            None => Err(StoreError::Sql {
                doing: "opening",
                source: rusqlite::Error::InvalidQuery,
            }),
        }
    }
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(match self {
            Self::Null => rusqlite::types::ToSqlOutput::Owned(rusqlite::types::Value::Null),
            Self::Int(v) => {
                rusqlite::types::ToSqlOutput::Owned(rusqlite::types::Value::Integer(*v))
            }
            Self::Text(v) => rusqlite::types::ToSqlOutput::Borrowed(ValueRef::Text(v.as_bytes())),
        })
    }
}

impl Tx for rusqlite::Transaction<'_> {
    fn execute(
        &mut self,
        doing: &'static str,
        statement: &str,
        params: &[Value],
    ) -> Result<u64, StoreError> {
        let n = rusqlite::Connection::execute(self, statement, rusqlite::params_from_iter(params))
            .map_err(sql(doing))?;
        Ok(u64::try_from(n).unwrap_or(u64::MAX))
    }

    fn query(
        &mut self,
        doing: &'static str,
        statement: &str,
        params: &[Value],
    ) -> Result<Vec<Row>, StoreError> {
        let mut stmt = self.prepare_cached(statement).map_err(sql(doing))?;
        let columns = stmt.column_count();
        stmt.query_map(rusqlite::params_from_iter(params), |r| {
            (0..columns)
                .map(|i| {
                    Ok(match r.get_ref(i)? {
                        ValueRef::Integer(v) => Value::Int(v),
                        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                        ValueRef::Null | ValueRef::Real(_) | ValueRef::Blob(_) => Value::Null,
                    })
                })
                .collect::<rusqlite::Result<Row>>()
        })
        .map_err(sql(doing))?
        .collect::<Result<_, _>>()
        .map_err(sql(doing))
    }
}

impl Transact for SqliteStore {
    fn transact(
        &self,
        write: bool,
        doing: &'static str,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.with(|conn| {
            let behavior = if write {
                TransactionBehavior::Immediate
            } else {
                TransactionBehavior::Deferred
            };
            let mut tx = conn
                .transaction_with_behavior(behavior)
                .map_err(sql(doing))?;
            f(&mut tx)?;
            tx.commit().map_err(sql(doing))
        })
    }

    fn max_catch_up(&self) -> u32 {
        self.max_catch_up
    }
}
