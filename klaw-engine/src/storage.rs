//! The PostgreSQL that `storage.url` names: one pool of connections
//! (`deadpool-postgres` over `tokio-postgres`, TLS with rustls as the URL's libpq
//! `sslmode` and `sslrootcert` ask: `storage/tls.rs`), driven by a runtime of its own so
//! that the stores, which are called off the async threads (as SQLite is), can wait on
//! it from any thread; and the versioned migrations every store of the engine brings,
//! run at start under an advisory lock.
//!
//! A database that cannot be reached, a refused password, or a schema newer than this
//! engine knows fail [`Postgres::connect`] with an error that names the host and
//! database (never the password): the engine does not start half-connected, and an older
//! engine never writes into a schema it does not know.

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};

pub mod import;
mod tls;

use crate::config::DatabaseUrl;

#[cfg(feature = "memory")]
mod core_memory;

#[cfg(feature = "memory")]
pub use core_memory::PgCoreMemory;

/// One migration: its version (ascending, never reused) and its statements.
pub type Migration = (i64, &'static str);

/// Every migration of the shared schema, oldest first, from `storage/migrations/`: the
/// scheduler's tables (`scheduler/store/postgres.rs` uses them), the agent's history
/// (`agent/history/postgres.rs`), core memory (`storage/core_memory.rs`), the
/// gateway's (`gateway/inbox.rs`) and a job's own history size. A newer engine appends; it never edits one that
/// shipped.
pub const MIGRATIONS: &[Migration] = &[
    (1, include_str!("storage/migrations/0001_scheduler.sql")),
    (2, include_str!("storage/migrations/0002_history.sql")),
    (3, include_str!("storage/migrations/0003_core_memory.sql")),
    (4, include_str!("storage/migrations/0004_gateway.sql")),
    (5, include_str!("storage/migrations/0005_job_history.sql")),
];

/// The schema version this engine knows: that of its last migration.
pub fn known_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// This engine's id among those sharing the database (the scheduler's run leases, the
/// gateway's poller and chat leases): its name (`storage.engineId`, else its host's), its
/// process and a random part (`host-pid123-5f3a9c`), unique among the engines sharing
/// the database, even after a restart with the same name and pid.
pub(crate) fn engine_id(name: Option<&str>) -> String {
    let host = name.map(str::to_owned).unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "host".into())
    });
    let random = {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(jiff::Timestamp::now().as_nanosecond().unsigned_abs());
        h.finish() & 0xff_ffff
    };
    format!("{host}-pid{}-{random:06x}", std::process::id())
}

/// The advisory lock key under which migrations run (`klaw` in ASCII, then 1).
const MIGRATION_LOCK: i64 = 0x6b6c_6177_0000_0001;

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the database could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The URL could not be read.
    #[error("storage.url: {0}")]
    Url(String),
    /// No connection could be made (unreachable, refused, wrong password).
    #[error(
        "cannot connect to the PostgreSQL database {target} (storage.url): {}",
        chain(source.as_ref())
    )]
    Connect {
        /// The host and database, the password left out.
        target: String,
        /// The client's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A statement failed.
    #[error(
        "the PostgreSQL database {target} failed while {doing}: {}",
        chain(source)
    )]
    Sql {
        /// The host and database.
        target: String,
        /// What was being done.
        doing: &'static str,
        /// The client's error.
        source: tokio_postgres::Error,
    },
    /// The database's schema is newer than this engine: an engine of a newer version
    /// migrated it. Nothing is written.
    #[error(
        "the PostgreSQL database {target} has schema version {found}, newer than this engine \
         knows ({known}): upgrade this engine (engines sharing a database must be of one \
         version or newer)"
    )]
    Newer {
        /// The host and database.
        target: String,
        /// The database's version.
        found: i64,
        /// This engine's.
        known: i64,
    },
    /// The runtime that drives the client could not be started.
    #[error("cannot start the PostgreSQL client's runtime: {0}")]
    Runtime(#[from] std::io::Error),
}

/// `e` and its sources, as one line (the client's own message is a bare `db error`;
/// the server's reason is its source).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        let text = s.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = s.source();
    }
    out
}

/// A connected PostgreSQL: a pool, the runtime its connections run on, and where it is
/// (for errors).
pub struct Postgres {
    pool: Pool,
    runtime: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
    target: String,
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Postgres")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

/// The host(s) and database of `config`, as errors name them.
fn target_of(config: &tokio_postgres::Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    let ports = config.get_ports();
    let port = ports.first().copied().unwrap_or(5432);
    let host = if hosts.is_empty() {
        "localhost".to_owned()
    } else {
        hosts.join(",")
    };
    format!(
        "`{}` at {host} port {port}",
        config.get_dbname().unwrap_or("postgres")
    )
}

impl Postgres {
    /// Connects to `url`, checks the server answers, and brings the schema up to
    /// [`known_version`] (under an advisory lock: engines starting together migrate
    /// once); a schema newer than that is refused.
    pub fn connect(url: &DatabaseUrl) -> Result<Self, StorageError> {
        let me = Self::open(url)?;
        // Off the caller's thread: the caller may be on an async runtime of its own.
        std::thread::scope(|s| s.spawn(|| me.migrate()).join())
            .map_err(|_| StorageError::Url("the migration thread panicked".into()))??;
        Ok(me)
    }

    /// The pool of `url`, its connections made when first needed: nothing is checked or
    /// migrated (`doctor` looks before it touches).
    pub fn open(url: &DatabaseUrl) -> Result<Self, StorageError> {
        let (mut config, tls) = url.settings().map_err(StorageError::Url)?;
        let connector = tls::connector(&tls).map_err(StorageError::Url)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("klaw-engine");
        }
        let target = target_of(&config);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("klaw-postgres")
            .enable_all()
            .build()?;
        let manager = Manager::from_config(
            config,
            connector,
            // A connection is checked with an empty query before it is handed out again:
            // one whose server process was ended (a restart, a failover,
            // `pg_terminate_backend`) is replaced there, not handed to a store whose
            // call would then fail on it (`Fast` only sees a close the client has
            // already read, a race the history's dropped-connection test lost).
            ManagerConfig {
                recycling_method: RecyclingMethod::Verified,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(8)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(30)))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| StorageError::Connect {
                target: target.clone(),
                source: Box::new(e),
            })?;
        Ok(Self {
            pool,
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
            target,
        })
    }

    /// The pool (memory on PostgreSQL shares it).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The runtime the pool's connections run on.
    pub fn handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }

    /// The host and database, as errors name them.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Runs `fut` to its end on the client's runtime, waiting on this thread. Never
    /// call it from an async task (as SQLite, the stores run on the blocking pool).
    pub fn block_on<F: std::future::Future>(&self, fut: F) -> F::Output {
        self.handle.block_on(fut)
    }

    /// A connection of the pool.
    pub async fn client(&self) -> Result<deadpool_postgres::Client, StorageError> {
        self.pool.get().await.map_err(|e| StorageError::Connect {
            target: self.target.clone(),
            source: Box::new(e),
        })
    }

    fn sql(&self, doing: &'static str) -> impl FnOnce(tokio_postgres::Error) -> StorageError {
        let target = self.target.clone();
        move |source| StorageError::Sql {
            target,
            doing,
            source,
        }
    }

    /// The server's version (`server_version`, e.g. `18.3`).
    pub fn server_version(&self) -> Result<String, StorageError> {
        self.block_on(async {
            let client = self.client().await?;
            let row = client
                .query_one("SHOW server_version", &[])
                .await
                .map_err(self.sql("reading the server's version"))?;
            row.try_get::<_, String>(0)
                .map_err(self.sql("reading the server's version"))
        })
    }

    /// The schema's version (0 before the first migration).
    pub fn schema_version(&self) -> Result<i64, StorageError> {
        self.block_on(async {
            let client = self.client().await?;
            let exists = client
                .query_one(
                    "SELECT to_regclass('klaw_schema_migrations') IS NOT NULL",
                    &[],
                )
                .await
                .and_then(|r| r.try_get::<_, bool>(0))
                .map_err(self.sql("reading the schema's version"))?;
            if !exists {
                return Ok(0);
            }
            client
                .query_one(
                    "SELECT COALESCE(MAX(version), 0)::BIGINT FROM klaw_schema_migrations",
                    &[],
                )
                .await
                .and_then(|r| r.try_get::<_, i64>(0))
                .map_err(self.sql("reading the schema's version"))
        })
    }

    /// Applies the migrations the database lacks, each in a transaction with its
    /// version, under a session advisory lock.
    fn migrate(&self) -> Result<(), StorageError> {
        self.block_on(async {
            let mut client = self.client().await?;
            client
                .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
                .await
                .map_err(self.sql("waiting for the migration lock"))?;
            let done = self.migrate_locked(&mut client).await;
            let unlocked = client
                .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
                .await
                .map_err(self.sql("releasing the migration lock"));
            done.and(unlocked.map(|_| ()))
        })
    }

    async fn migrate_locked(
        &self,
        client: &mut deadpool_postgres::Client,
    ) -> Result<(), StorageError> {
        client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS klaw_schema_migrations (
                     version BIGINT PRIMARY KEY,
                     applied TIMESTAMPTZ NOT NULL DEFAULT now()
                 )",
            )
            .await
            .map_err(self.sql("creating the migrations table"))?;
        let found: i64 = client
            .query_one(
                "SELECT COALESCE(MAX(version), 0)::BIGINT FROM klaw_schema_migrations",
                &[],
            )
            .await
            .and_then(|r| r.try_get(0))
            .map_err(self.sql("reading the schema's version"))?;
        let known = known_version();
        if found > known {
            return Err(StorageError::Newer {
                target: self.target.clone(),
                found,
                known,
            });
        }
        // Every migration the database lacks, not only those above its newest: an engine
        // that shipped a later number first never makes the others skip theirs.
        let applied: std::collections::HashSet<i64> = client
            .query("SELECT version FROM klaw_schema_migrations", &[])
            .await
            .map_err(self.sql("reading the schema's version"))?
            .iter()
            .filter_map(|r| r.try_get(0).ok())
            .collect();
        for (version, statements) in MIGRATIONS.iter().filter(|m| !applied.contains(&m.0)) {
            let tx = client
                .transaction()
                .await
                .map_err(self.sql("migrating the schema"))?;
            tx.batch_execute(statements)
                .await
                .map_err(self.sql("migrating the schema"))?;
            tx.execute(
                "INSERT INTO klaw_schema_migrations (version) VALUES ($1)",
                &[version],
            )
            .await
            .map_err(self.sql("migrating the schema"))?;
            tx.commit()
                .await
                .map_err(self.sql("migrating the schema"))?;
            tracing::info!(target: "klaw::storage", version, "migrated {}", self.target);
        }
        Ok(())
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // Dropped on an async thread too: its runtime goes without waiting.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// The tests' PostgreSQL (`crate::pg_harness`).
#[cfg(test)]
use crate::pg_harness;

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the pool's connection is encrypted (the server's own view).
    fn encrypted(db: &Postgres) -> bool {
        db.block_on(async {
            let c = db.client().await.unwrap();
            c.query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .await
            .unwrap()
            .get::<_, bool>(0)
        })
    }

    /// A database that has a later migration but lacks an earlier one (an engine of a
    /// branch that shipped the later number first) gets the missing one at the next
    /// start, and nothing is applied twice.
    #[test]
    fn a_missing_migration_below_the_newest_is_applied() {
        let Some(server) = pg_harness::Postgres::start() else {
            return;
        };
        let url = DatabaseUrl::new(server.fresh_db());
        let db = Postgres::connect(&url).unwrap();
        let last = known_version();
        let first_table = "history_messages";
        assert!(last >= 3, "this test needs a migration below the newest");
        // As if version 2 (the history's tables) had never been applied.
        db.block_on(async {
            let c = db.client().await.unwrap();
            c.batch_execute(&format!(
                "DROP TABLE {first_table} CASCADE; DROP TABLE history_usage CASCADE;
                 DELETE FROM klaw_schema_migrations WHERE version = 2"
            ))
            .await
            .unwrap();
        });
        drop(db);
        let db = Postgres::connect(&url).unwrap();
        let (versions, table): (i64, bool) = db.block_on(async {
            let c = db.client().await.unwrap();
            let n = c
                .query_one("SELECT COUNT(*) FROM klaw_schema_migrations", &[])
                .await
                .unwrap()
                .get(0);
            let t = c
                .query_one(
                    &format!("SELECT to_regclass('{first_table}') IS NOT NULL"),
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            (n, t)
        });
        assert_eq!(versions, i64::try_from(MIGRATIONS.len()).unwrap());
        assert!(table, "the missing migration was applied");
    }

    /// Engines started together on a fresh database migrate it once: each connects
    /// (none fails on a table another is creating), every migration is recorded once,
    /// and every table is there.
    #[test]
    fn engines_starting_together_migrate_once() {
        let Some(server) = pg_harness::Postgres::start() else {
            return;
        };
        let url = DatabaseUrl::new(server.fresh_db());
        let started: Vec<_> = std::thread::scope(|s| {
            let engines: Vec<_> = (0..6)
                .map(|_| s.spawn(|| Postgres::connect(&url).map(|_| ())))
                .collect();
            engines.into_iter().map(|e| e.join().unwrap()).collect()
        });
        for e in started {
            e.unwrap();
        }
        let db = Postgres::open(&url).unwrap();
        assert_eq!(db.schema_version().unwrap(), known_version());
        let (rows, distinct, tables): (i64, i64, i64) = db.block_on(async {
            let c = db.client().await.unwrap();
            let r = c
                .query_one(
                    "SELECT COUNT(*), COUNT(DISTINCT version),
                            (SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public')
                     FROM klaw_schema_migrations",
                    &[],
                )
                .await
                .unwrap();
            (r.get(0), r.get(1), r.get(2))
        });
        assert_eq!(rows, i64::try_from(MIGRATIONS.len()).unwrap());
        assert_eq!(rows, distinct);
        // The migrations' tables (jobs, runs, history x2, core memory, gateway x4) and
        // the migrations' own.
        assert!(tables >= 10, "{tables} tables");
    }

    /// TLS with rustls as libpq's `sslmode` asks, against a real PostgreSQL with
    /// `ssl=on` and a certificate for `localhost` signed by a CA made for the test.
    #[test]
    fn tls_to_postgres_as_sslmode_asks() {
        let Some(server) = pg_harness::Postgres::start_tls() else {
            return;
        };
        let port = server.tcp_port().unwrap();
        let ca = server.dir().join("ca.crt").display().to_string();
        let other = server.dir().join("other-ca.crt").display().to_string();
        let url = |host: &str, query: &str| {
            DatabaseUrl::new(format!(
                "postgres://{}@{host}:{port}/klaw?{query}",
                pg_harness::USER
            ))
        };
        let works = |host: &str, query: &str| {
            let db = Postgres::connect(&url(host, query))
                .unwrap_or_else(|e| panic!("{host} {query}: {e}"));
            encrypted(&db)
        };
        let fails = |host: &str, query: &str| {
            Postgres::connect(&url(host, query))
                .map(|_| ())
                .expect_err(query)
                .to_string()
        };
        // The chain and the name checked.
        assert!(works(
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={ca}")
        ));
        // The chain only: the address is not in the certificate.
        assert!(works(
            "127.0.0.1",
            &format!("sslmode=verify-ca&sslrootcert={ca}")
        ));
        // Encrypted, the server not authenticated (libpq's require without a CA).
        assert!(works("127.0.0.1", "sslmode=require"));
        // require with a CA checks the chain, as libpq.
        assert!(works(
            "127.0.0.1",
            &format!("sslmode=require&sslrootcert={ca}")
        ));
        assert!(works("127.0.0.1", ""), "prefer (the default) encrypts");
        assert!(!works("127.0.0.1", "sslmode=disable"));
        // Refused: a name the certificate lacks, a CA that signed nothing of it.
        let e = fails(
            "127.0.0.1",
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        );
        assert!(
            e.contains("cannot connect") && e.contains("certificate"),
            "{e}"
        );
        let e = fails(
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={other}"),
        );
        assert!(e.contains("certificate"), "{e}");
        let e = fails("localhost", &format!("sslmode=require&sslrootcert={other}"));
        assert!(e.contains("certificate"), "{e}");
        // Bad settings, said before connecting.
        let e = fails("localhost", "sslmode=verify-full");
        assert!(e.contains("needs sslrootcert"), "{e}");
        let e = fails(
            "localhost",
            "sslmode=verify-full&sslrootcert=%2Fno%2Fsuch.pem",
        );
        assert!(e.contains("/no/such.pem"), "{e}");
        let e = fails("localhost", "sslmode=sometimes");
        assert!(e.contains("sslmode `sometimes`"), "{e}");
    }
}
