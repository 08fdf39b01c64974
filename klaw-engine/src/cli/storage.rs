//! `klaw-engine storage import`: the data dir's SQLite stores copied into the PostgreSQL
//! of `storage.url` (`storage/import.rs`), one line per store.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use super::{fail, init_logging, out};
use crate::Config;
use crate::storage::{Postgres, import};

/// A `storage` subcommand.
#[derive(Debug, Subcommand)]
pub enum StorageCommand {
    /// Copy what one engine kept in SQLite files (the scheduler's jobs and runs, the
    /// agent's history, core memory, the gateway's inbox and Telegram offset) into the
    /// PostgreSQL of `storage.url`, each store in one transaction. Run again, it adds
    /// nothing twice; a job, chat, key or message the database holds with other data
    /// refuses that store (exit 1) unless --force. Stop the engine of the data dir first.
    Import {
        /// The data dir to read (default: `dataDir`).
        #[arg(long, value_name = "DIR")]
        from: Option<PathBuf>,
        /// Replace what the database holds under the same keys with the data dir's
        /// (jobs by name, chats whole, core memory keys, inbox messages by receipt).
        #[arg(long)]
        force: bool,
    },
}

/// Runs a `storage` subcommand.
pub(super) fn run(config: &Config, command: StorageCommand) -> ExitCode {
    init_logging(config);
    match command {
        StorageCommand::Import { from, force } => {
            let Some(url) = config.raw.storage.url.as_ref() else {
                return fail(
                    "storage import copies the data dir's stores into the PostgreSQL of \
                     storage.url, and storage.url (KLAW_DATABASE_URL) is not set",
                );
            };
            let from = from.unwrap_or_else(|| config.data_dir.clone());
            if !from.is_dir() {
                return fail(&format!(
                    "storage import: {} is not a directory (--from names the data dir to read)",
                    from.display()
                ));
            }
            let db = match Postgres::connect(url) {
                Ok(db) => db,
                Err(e) => return fail(&e.to_string()),
            };
            out(&format!(
                "importing {} into {}",
                from.display(),
                db.target()
            ));
            let mut failed = false;
            for store in import::import(&db, &from, force) {
                match store {
                    Ok(report) => out(&report.to_string()),
                    Err(e) => {
                        failed = true;
                        let _ = fail(&e.to_string());
                    }
                }
            }
            if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
    }
}
