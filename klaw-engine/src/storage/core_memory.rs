//! Core memory in the PostgreSQL of `storage.url` (its table:
//! `migrations/0003_core_memory.sql`), shared by every engine given the database: one
//! document, the compact JSON of `core_memory.json`, in one row. A change is one
//! transaction that reads the row `FOR UPDATE` (the writers of every engine queue on
//! its lock), runs the change and its limits on what is stored then, and writes it
//! back: two engines setting one key at once both succeed one after the other, and what
//! is read is one of their values, whole. The table's own check refuses a document over
//! 8192 bytes, whoever writes it.

use std::sync::Arc;

use klaw_tools::ToolError;
use klaw_tools::tools::memory::{CoreMemory, CoreStore};

use super::{Postgres, StorageError};

const READ: &str = "SELECT doc FROM core_memory WHERE id = 1";
const LOCK: &str = "SELECT doc FROM core_memory WHERE id = 1 FOR UPDATE";
const WRITE: &str = "INSERT INTO core_memory (id, doc) VALUES (1, $1)
     ON CONFLICT (id) DO UPDATE SET doc = excluded.doc, updated = now()";

/// Core memory in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgCoreMemory {
    db: Arc<Postgres>,
}

impl PgCoreMemory {
    /// Core memory in `db` (connected and migrated).
    pub fn new(db: Arc<Postgres>) -> Self {
        Self { db }
    }

    fn failed(&self, doing: &'static str) -> impl FnOnce(tokio_postgres::Error) -> ToolError {
        let target = self.db.target().to_owned();
        move |source| {
            unreachable_db(StorageError::Sql {
                target,
                doing,
                source,
            })
        }
    }
}

/// What the model is told when the database failed: that core memory is out of reach
/// now (the operator's log has the server's reason too).
fn unreachable_db(e: StorageError) -> ToolError {
    ToolError::unavailable(format!("core memory cannot be reached: {e}"))
}

/// The document `doc` as core memory; a document that is not is an error, left as it is.
fn parse(doc: Option<String>) -> Result<CoreMemory, ToolError> {
    let Some(doc) = doc.filter(|d| !d.trim().is_empty()) else {
        return Ok(CoreMemory::default());
    };
    serde_json::from_str(&doc).map_err(|e| {
        ToolError::failed(format!(
            "core memory is corrupt: the row of core_memory in the database is not valid core \
             memory ({e}); it was left untouched: fix or delete the row"
        ))
    })
}

impl CoreStore for PgCoreMemory {
    fn read(&self) -> Result<CoreMemory, ToolError> {
        let doc = self.db.block_on(async {
            let client = self.db.client().await.map_err(unreachable_db)?;
            let st = client
                .prepare_cached(READ)
                .await
                .map_err(self.failed("reading core memory"))?;
            let row = client
                .query_opt(&st, &[])
                .await
                .map_err(self.failed("reading core memory"))?;
            row.map(|r| r.try_get::<_, String>(0))
                .transpose()
                .map_err(self.failed("reading core memory"))
        })?;
        parse(doc)
    }

    fn modify(
        &self,
        change: &mut dyn FnMut(&mut CoreMemory) -> Result<(), ToolError>,
    ) -> Result<(), ToolError> {
        let doing = "changing core memory";
        self.db.block_on(async {
            let mut client = self.db.client().await.map_err(unreachable_db)?;
            let tx = client.transaction().await.map_err(self.failed(doing))?;
            let row = tx.query_opt(LOCK, &[]).await.map_err(self.failed(doing))?;
            let doc = row
                .map(|r| r.try_get::<_, String>(0))
                .transpose()
                .map_err(self.failed(doing))?;
            let mut memory = parse(doc)?;
            // On an error the transaction is dropped: rolled back, the lock released.
            change(&mut memory)?;
            let doc = serde_json::to_string(&memory)
                .map_err(|e| ToolError::failed(format!("cannot encode core memory: {e}")))?;
            tx.execute(WRITE, &[&doc])
                .await
                .map_err(self.failed(doing))?;
            tx.commit().await.map_err(self.failed(doing))
        })
    }
}

/// The tests' PostgreSQL (`crate::pg_harness`).
#[cfg(test)]
use crate::pg_harness;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DatabaseUrl;
    use klaw_tools::tools::memory::core_suite as suite;

    /// The maker of stores on one fresh database of `server`: each call another
    /// engine's (a pool of its own).
    fn opener(server: &pg_harness::Postgres) -> impl Fn() -> Arc<dyn CoreStore> + Sync {
        let url = DatabaseUrl::new(server.fresh_db());
        move || {
            let db = Postgres::connect(&url).unwrap();
            Arc::new(PgCoreMemory::new(Arc::new(db))) as Arc<dyn CoreStore>
        }
    }

    /// The core memory suite that `core_memory.json` passes, on PostgreSQL: one key
    /// set by many engines at once, one wins, nothing torn, the 8 KiB limit held.
    #[test]
    fn core_memory_in_postgres_behaves_as_the_file() {
        let Some(server) = pg_harness::Postgres::start() else {
            return;
        };
        suite::round_trip(&*opener(&server)());
        suite::missing_key(&*opener(&server)());
        suite::bounded(&*opener(&server)());
        suite::concurrent_updates(&opener(&server));
    }

    /// The connection dropped inside a change (the row locked, the change made, not
    /// yet written): the change fails with an error that says why, nothing of it is
    /// kept, the lock goes with the session, and the next change works.
    #[test]
    fn a_connection_dropped_mid_change_keeps_the_old_memory() {
        let Some(server) = pg_harness::Postgres::start() else {
            return;
        };
        let url = server.fresh_db();
        let db = Arc::new(Postgres::connect(&DatabaseUrl::new(&url)).unwrap());
        let store = PgCoreMemory::new(Arc::clone(&db));
        store
            .modify(&mut |m| {
                m.user.0.insert("name".into(), "Anna".into());
                Ok(())
            })
            .unwrap();
        let before = store.read().unwrap();
        let e = store
            .modify(&mut |m| {
                m.user.0.insert("name".into(), "Boris".into());
                server.psql_url(
                    &url,
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                     WHERE application_name = 'klaw-engine'",
                );
                Ok(())
            })
            .unwrap_err();
        assert!(
            e.message().starts_with("core memory cannot be reached: ")
                && e.message().contains("changing core memory"),
            "{}",
            e.message()
        );
        assert_eq!(store.read().unwrap(), before);
        store
            .modify(&mut |m| {
                m.agent.0.insert("tone".into(), "brief".into());
                Ok(())
            })
            .unwrap();
        let after = store.read().unwrap();
        assert_eq!(after.user, before.user);
        assert_eq!(after.agent.0["tone"], "brief");
        // The table refuses a document over the limit, whoever writes it.
        let too_big = format!(r#"{{"user":{{"k":"{}"}},"agent":{{}}}}"#, "x".repeat(8192));
        let out = std::panic::catch_unwind(|| {
            server.psql_url(
                &url,
                &format!("UPDATE core_memory SET doc = '{too_big}' WHERE id = 1"),
            )
        });
        assert!(out.is_err(), "the check let {} bytes in", too_big.len());
        assert_eq!(store.read().unwrap(), after);
    }
}
