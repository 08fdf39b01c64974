//! Opening the engine's SQLite databases when other engines share the data dir.
//!
//! Two engines started together open the same files at the same moment. A busy timeout
//! makes ordinary statements wait for the other's lock, but switching a new database to
//! WAL can answer "database is locked" at once, without the busy handler. So the setup
//! (journal mode, tables) is tried again on a busy or locked answer until `within`.

use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode};

/// Sets a busy timeout of `within` on `conn`, then runs `setup` on it, again while the
/// database is busy or locked (until `within` has passed).
pub(crate) fn set_up(
    conn: &Connection,
    within: Duration,
    setup: impl Fn(&Connection) -> rusqlite::Result<()>,
) -> rusqlite::Result<()> {
    conn.busy_timeout(within)?;
    let deadline = Instant::now() + within;
    loop {
        match setup(conn) {
            Err(e)
                if matches!(
                    e.sqlite_error_code(),
                    Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                ) && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}
