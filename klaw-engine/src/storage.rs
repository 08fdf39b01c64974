//! The PostgreSQL that `storage.url` names: one pool of connections
//! (`deadpool-postgres` over `tokio-postgres`, without TLS: a unix socket or
//! `sslmode=disable`/`prefer` on a trusted network), driven by a runtime of its own so
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
use tokio_postgres::NoTls;

use crate::config::DatabaseUrl;

/// One migration: its version (ascending, never reused) and its statements.
pub type Migration = (i64, &'static str);

/// Every migration of the shared schema, oldest first, from `storage/migrations/`: the
/// scheduler's tables (`scheduler/store/postgres.rs` uses them) and the gateway's
/// (`gateway/inbox.rs`). A newer engine appends; it never edits one that shipped.
pub const MIGRATIONS: &[Migration] = &[
    (1, include_str!("storage/migrations/0001_scheduler.sql")),
    (4, include_str!("storage/migrations/0004_gateway.sql")),
];

/// The schema version this engine knows: that of its last migration.
pub fn known_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.0)
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
        url.check().map_err(StorageError::Url)?;
        let mut config: tokio_postgres::Config = url
            .expose()
            .trim()
            .parse()
            .map_err(|e| StorageError::Url(format!("{}: {e}", url.redacted())))?;
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
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
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
        for (version, statements) in MIGRATIONS.iter().filter(|m| m.0 > found) {
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
