//! File tools: `file_read`, `file_write`, `file_edit`, `file_list`, `file_delete`, and the
//! legacy `file`.
//!
//! Every path is resolved beneath the workspace by the kernel (see `confine`): `..`,
//! absolute paths outside the workspace and symlinks that lead out are refused with
//! "Access denied: path outside workspace", and a symlink swapped in during an
//! operation cannot redirect it. Overwrites and edits are atomic (temporary file in the
//! same directory, fsync, rename). Blocking I/O runs on tokio's blocking pool.

mod beneath;
mod confine;
mod delete;
mod edit;
mod legacy;
mod list;
mod read;
mod settings;
mod write;

pub use beneath::{
    dirs_beneath, dirs_in, files_beneath, files_in, links_beneath, read_bytes_beneath,
    read_bytes_in, read_text_beneath, read_text_in,
};
pub use delete::{FileDeleted, file_delete};
pub use edit::{FileEdited, file_edit};
pub use legacy::{Operation, file};
pub use list::{Entry, EntryType, Listing, file_list};
pub use read::{FileRead, file_read};
pub use settings::FilesSettings;
pub use write::{FileWritten, WriteMode, file_write};
