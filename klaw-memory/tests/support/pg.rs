//! The PostgreSQL memory of a test or a bench: a pool on a database's URL and the
//! runtime its connections run on (shared by `tests/pg.rs` and `benches/million.rs`,
//! which includes this file by its path).

#![allow(clippy::unwrap_used)] // test code: a panic is a failed test

use std::str::FromStr;

use klaw_memory::PgMemory;

/// A pool of up to four connections to `url` on a runtime of one worker thread, which
/// drives them while the memory's calls block on it: keep the runtime as long as the
/// memory.
pub(crate) fn connect(url: &str) -> (tokio::runtime::Runtime, PgMemory) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let config = tokio_postgres::Config::from_str(url).unwrap();
    let manager = deadpool_postgres::Manager::from_config(
        config,
        tokio_postgres::NoTls,
        deadpool_postgres::ManagerConfig {
            recycling_method: deadpool_postgres::RecyclingMethod::Fast,
        },
    );
    let pool = {
        let _guard = runtime.enter();
        deadpool_postgres::Pool::builder(manager)
            .max_size(4)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .unwrap()
    };
    let memory = PgMemory::new(pool, runtime.handle().clone());
    (runtime, memory)
}
