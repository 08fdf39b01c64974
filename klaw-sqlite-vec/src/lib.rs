//! Registers [sqlite-vec](https://github.com/asg017/sqlite-vec) with rusqlite's bundled
//! SQLite, so every connection opened afterwards has the `vec0` virtual table.
//!
//! This is the one `unsafe` call of Klaw's memory, kept in its own crate so that
//! `klaw-tools` can `forbid(unsafe_code)`.
//!
//! ```
//! klaw_sqlite_vec::register().unwrap();
//! let conn = rusqlite::Connection::open_in_memory().unwrap();
//! let v: String = conn.query_row("SELECT vec_version()", [], |r| r.get(0)).unwrap();
//! assert!(v.starts_with('v'));
//! ```

use rusqlite::auto_extension::{RawAutoExtension, register_auto_extension};
use std::sync::OnceLock;

/// Registers sqlite-vec as an auto-extension, once per process (later calls return the
/// first call's result). The error is SQLite's message.
pub fn register() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        // SAFETY: `sqlite3_vec_init` is sqlite-vec's extension entry point, with the
        // signature SQLite's auto-extensions have (`RawAutoExtension`:
        // `int(sqlite3*, char**, const sqlite3_api_routines*)`); the sqlite-vec crate
        // declares it as `fn()` only because it is an opaque C symbol, and the transmute
        // restores the real signature. sqlite-vec is compiled against the same bundled
        // SQLite (libsqlite3-sys) it is linked with. The entry point opens no database,
        // closes none and does not touch the auto-extension list, which are
        // `register_auto_extension`'s safety conditions.
        #[allow(unsafe_code)]
        unsafe {
            let init = std::mem::transmute::<*const (), RawAutoExtension>(
                sqlite_vec::sqlite3_vec_init as *const (),
            );
            register_auto_extension(init)
        }
        .map_err(|e| e.to_string())
    })
    .clone()
}

#[cfg(test)]
mod tests {
    #[test]
    fn vec0_is_available_after_register() {
        super::register().unwrap();
        super::register().unwrap();
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE VIRTUAL TABLE v USING vec0(e float[2])")
            .unwrap();
    }
}
