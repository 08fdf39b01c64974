//! `file_write`, and the atomic replace that `file_edit` shares.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt, PermissionsExt};
use serde::{Deserialize, Serialize};

use super::confine::{Confined, blocking, confine, io_error, nonblocking, require_regular};
use crate::{Limits, ToolError, ToolSchema, Workspace, tool};

/// How `file_write` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToolSchema)]
#[serde(rename_all = "lowercase")]
pub enum WriteMode {
    /// Заменить файл целиком (атомарно)
    #[schema(description_en = "Replace the whole file (atomically)")]
    Overwrite,
    /// Дописать в конец файла
    #[schema(description_en = "Add to the end of the file")]
    Append,
}

/// The answer of `file_write`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileWritten {
    /// Путь, как он был запрошен
    #[schema(description_en = "The path as requested")]
    pub path: String,
    /// Как записано: overwrite или append
    #[schema(description_en = "How it was written: overwrite or append")]
    pub mode: WriteMode,
    /// Сколько байтов записано
    #[schema(description_en = "Bytes written")]
    pub bytes_written: u64,
    /// Размер файла после записи, в байтах
    #[schema(description_en = "File size after the write, in bytes")]
    pub size: u64,
    /// true, если файла раньше не было
    #[schema(description_en = "True when the file did not exist before")]
    pub created: bool,
}

/// Writes a workspace file.
#[tool(
    name = "file_write",
    title_ru = "Запись файла",
    title_en = "Write a file",
    description_ru = "Записывает текст в файл рабочей области: mode = overwrite заменяет файл целиком (атомарно: после сбоя остаётся старый или новый файл, не половина), append дописывает в конец. Родительские папки создаются. Размер файла не больше maxFileSizeBytes. Для точечных правок используй file_edit.",
    description_en = "Writes text to a workspace file: mode = overwrite replaces the whole file (atomically: after a crash the old or the new file remains, never half of one), append adds to the end. Parent directories are created. The file may not exceed maxFileSizeBytes. For small changes use file_edit.",
    destructive,
    rename_all = "camelCase"
)]
pub async fn file_write(
    ws: Workspace,
    limits: Limits,
    /// Путь к файлу относительно рабочей области
    #[arg(description_en = "Path of the file, relative to the workspace")]
    path: String,
    /// Текст для записи
    #[arg(description_en = "The text to write")]
    content: String,
    /// overwrite — заменить файл, append — дописать в конец
    #[arg(
        default = WriteMode::Overwrite,
        description_en = "overwrite replaces the file, append adds to its end"
    )]
    mode: WriteMode,
) -> Result<FileWritten, ToolError> {
    let max = limits.max_file_size_bytes;
    let len = content.len() as u64;
    if len > max {
        return Err(too_large(len, max));
    }
    let c = confine(&ws, &path)?;
    blocking(move || match mode {
        WriteMode::Overwrite => {
            let (target, created) = prepare(&c)?;
            replace(&target, content.as_bytes())?;
            Ok(FileWritten {
                path: c.shown.clone(),
                mode,
                bytes_written: len,
                size: len,
                created,
            })
        }
        WriteMode::Append => append(&c, content.as_bytes(), max),
    })
    .await
}

/// The refusal of a write over the size cap.
pub(crate) fn too_large(size: u64, max: u64) -> ToolError {
    ToolError::invalid_arguments(
        "/content",
        format!(
            "file would be {size} bytes, over the limit of {max} bytes (maxFileSizeBytes); nothing was written"
        ),
    )
}

/// A file to replace: its parent directory (opened beneath the root) and its name.
pub(crate) struct Target {
    pub(crate) dir: Dir,
    pub(crate) name: std::ffi::OsString,
    pub(crate) shown: String,
    /// Permission bits of the file being replaced.
    pub(crate) mode: Option<u32>,
}

/// Resolves the target of a write: creates the parent directories, resolves a symlink
/// at the final name (beneath the root, refusing one that leads out), and opens the
/// parent. Returns whether the file is new.
pub(crate) fn prepare(c: &Confined) -> Result<(Target, bool), ToolError> {
    let (parent, name) = c.split_name().ok_or_else(|| {
        ToolError::invalid_arguments("/path", format!("not a file path: {}", c.shown))
    })?;
    let dir = create_parents(&c.root, &parent, c)?;
    let (dir, name) = match dir.symlink_metadata(&name) {
        Ok(meta) if meta.file_type().is_symlink() => {
            // Write through the link to where it leads, if that is inside.
            let rel: PathBuf = parent.join(&name);
            let resolved = c.root.canonicalize(&rel).map_err(|e| c.err(e))?;
            let (rparent, rname) = split(&resolved).ok_or_else(|| {
                ToolError::failed(format!("the link leads to a directory: {}", c.shown))
            })?;
            (c.open_dir(&rparent)?, rname)
        }
        Ok(_) | Err(_) => (dir, name),
    };
    let (mode, created) = existing(&dir, &name, c)?;
    Ok((
        Target {
            dir,
            name,
            shown: c.shown.clone(),
            mode,
        },
        created,
    ))
}

fn split(p: &Path) -> Option<(PathBuf, std::ffi::OsString)> {
    let name = p.file_name()?.to_os_string();
    let parent = p.parent().map(Path::to_path_buf).unwrap_or_default();
    Some((parent, name))
}

/// Opens `parent` beneath the root, creating what is missing one level at a time. Each
/// prefix is resolved from the root, so a symlinked directory on the way is followed
/// while it stays inside and refused when it leads out.
fn create_parents(root: &Dir, parent: &Path, c: &Confined) -> Result<Dir, ToolError> {
    let mut prefix = PathBuf::new();
    for comp in parent.components() {
        prefix.push(comp);
        if !matches!(comp, std::path::Component::Normal(_)) {
            continue;
        }
        match root.metadata(&prefix) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match root.create_dir(&prefix) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(c.err(e)),
            },
            Err(e) => return Err(c.err(e)),
        }
    }
    c.open_dir(parent)
}

/// The permission bits of an existing regular file at `name`, and whether there is
/// none (a new file). Refuses directories and special files.
fn existing(dir: &Dir, name: &OsStr, c: &Confined) -> Result<(Option<u32>, bool), ToolError> {
    match dir.symlink_metadata(name) {
        Ok(meta) => {
            require_regular(meta.file_type(), &c.shown)?;
            Ok((Some(meta.permissions().mode() & 0o7777), false))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((None, true)),
        Err(e) => Err(c.err(e)),
    }
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Replaces `target` with `bytes` atomically: a temporary file in the same directory,
/// written and fsynced, renamed over the name, then the directory fsynced. A crash at
/// any point leaves the old file or the new one under the name, never a partial file
/// (a stray `.name.klaw-*.tmp` may remain).
pub(crate) fn replace(target: &Target, bytes: &[u8]) -> Result<(), ToolError> {
    let err = |e| io_error(e, &target.shown);
    let tmp = temp_name(&target.name);
    let mut opts = OpenOptions::new();
    opts.write(true).create_new(true);
    opts.mode(target.mode.unwrap_or(0o644));
    let mut file = target.dir.open_with(&tmp, &opts).map_err(err)?;
    let written = (|| {
        file.write_all(bytes)?;
        file.sync_all()?;
        if let Some(mode) = target.mode {
            // create_new applied the umask; restore the old file's bits exactly.
            file.set_permissions(cap_std::fs::Permissions::from_mode(mode))?;
        }
        drop(file);
        target.dir.rename(&tmp, &target.dir, &target.name)
    })();
    if let Err(e) = written {
        let _ = target.dir.remove_file(&tmp);
        return Err(err(e));
    }
    // Make the rename itself durable.
    if let Ok(d) = target.dir.open(".") {
        let _ = d.sync_all();
    }
    Ok(())
}

fn temp_name(name: &OsStr) -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut s = std::ffi::OsString::from(".");
    // Keep the temporary name within NAME_MAX whatever the target's length.
    let bytes = name.as_encoded_bytes();
    let keep = bytes.len().min(200);
    s.push(String::from_utf8_lossy(&bytes[..keep]).as_ref());
    s.push(format!(".klaw-{}-{n}.tmp", std::process::id()));
    PathBuf::from(s)
}

/// Appends `bytes`, refusing when the resulting size would exceed `max`.
fn append(c: &Confined, bytes: &[u8], max: u64) -> Result<FileWritten, ToolError> {
    let (target, created) = prepare(c)?;
    let len = bytes.len() as u64;
    let mut opts = OpenOptions::new();
    opts.append(true).create(true).mode(0o644);
    let mut file = target
        .dir
        .open_with(&target.name, &nonblocking(opts))
        .map_err(|e| c.err(e))?;
    let meta = file.metadata().map_err(|e| c.err(e))?;
    require_regular(meta.file_type(), &c.shown)?;
    let size = meta.len() + len;
    if size > max {
        return Err(too_large(size, max));
    }
    file.write_all(bytes).map_err(|e| c.err(e))?;
    file.sync_data().map_err(|e| c.err(e))?;
    Ok(FileWritten {
        path: c.shown.clone(),
        mode: WriteMode::Append,
        bytes_written: len,
        size,
        created,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_are_hidden_unique_and_short() {
        let a = temp_name(OsStr::new("notes.md"));
        let b = temp_name(OsStr::new("notes.md"));
        assert_ne!(a, b);
        assert!(a.to_string_lossy().starts_with(".notes.md.klaw-"));
        let long = "x".repeat(255);
        assert!(temp_name(OsStr::new(&long)).as_os_str().len() < 255);
    }
}
