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
use std::sync::{Arc, OnceLock};

/// Why sqlite-vec could not be registered: SQLite's error, kept as the
/// [`source`](std::error::Error::source).
#[derive(Debug, Clone, thiserror::Error)]
#[error("SQLite refused the extension: {source}")]
pub struct RegisterError {
    /// SQLite's error (shared: every later call returns the first call's result).
    #[source]
    source: Arc<rusqlite::Error>,
}

/// Registers sqlite-vec as an auto-extension, once per process (later calls return the
/// first call's result).
pub fn register() -> Result<(), RegisterError> {
    static DONE: OnceLock<Result<(), RegisterError>> = OnceLock::new();
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
        .map_err(|e| RegisterError {
            source: Arc::new(e),
        })
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

    #[test]
    fn the_error_keeps_sqlites_as_its_source() {
        let e = super::RegisterError {
            source: std::sync::Arc::new(rusqlite::Error::InvalidQuery),
        };
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(source, Some(rusqlite::Error::InvalidQuery.to_string()));
        assert!(
            e.to_string().starts_with("SQLite refused the extension: "),
            "{e}"
        );
    }
}
