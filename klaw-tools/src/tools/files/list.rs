//! `file_list`: the entries of a directory, optionally recursive, never following links.

use std::path::{Path, PathBuf};

use cap_fs_ext::DirExt;
use cap_std::fs::{Dir, PermissionsExt};
use serde::{Deserialize, Serialize};

use super::FilesSettings;
use super::confine::{Confined, blocking, confine, special_kind};
use crate::{ToolError, ToolSchema, Workspace, tool};

/// Deepest recursion `file_list` descends to.
const MAX_DEPTH: usize = 64;

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToolSchema)]
#[serde(rename_all = "lowercase")]
pub enum EntryType {
    /// Обычный файл
    #[schema(description_en = "A regular file")]
    File,
    /// Папка
    #[schema(description_en = "A folder")]
    Directory,
    /// Символическая ссылка (не раскрывается)
    #[schema(description_en = "A symbolic link (not followed)")]
    Symlink,
    /// Другое: FIFO, сокет, устройство
    #[schema(description_en = "Something else: a FIFO, a socket, a device")]
    Other,
}

/// One entry of a listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Имя
    #[schema(description_en = "Name")]
    pub name: String,
    /// Путь относительно рабочей области
    #[schema(description_en = "Path relative to the workspace")]
    pub path: String,
    /// Тип: file, directory, symlink или other
    #[serde(rename = "type")]
    #[schema(description_en = "Type: file, directory, symlink or other")]
    pub kind: EntryType,
    /// Размер в байтах (для ссылки — длина её цели)
    #[schema(description_en = "Size in bytes (for a link: the length of its target)")]
    pub size: u64,
    /// Права доступа, восьмерично, например 0644
    #[schema(description_en = "Permission bits in octal, e.g. 0644")]
    pub mode: String,
}

/// The answer of `file_list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct Listing {
    /// Путь папки, как он был запрошен
    #[schema(description_en = "The directory path as requested")]
    pub path: String,
    /// Записи, по именам; при рекурсии — папка, затем её содержимое
    #[schema(description_en = "Entries by name; when recursive, a directory then its contents")]
    pub entries: Vec<Entry>,
    /// Сколько записей возвращено
    #[schema(description_en = "How many entries were returned")]
    pub count: u64,
    /// true, если список обрезан лимитом maxListEntries
    #[schema(description_en = "True when the list was cut at maxListEntries")]
    pub truncated: bool,
}

/// Lists a workspace directory.
#[tool(
    name = "file_list",
    title_ru = "Список файлов",
    title_en = "List files",
    description_ru = "Показывает содержимое папки рабочей области: имя, путь, тип (file, directory, symlink, other), размер и права каждой записи. recursive = true обходит вложенные папки. Символические ссылки показываются, но не раскрываются. Число записей ограничено (truncated = true, если список обрезан). Вызывай перед file_read, если не уверен в пути.",
    description_en = "Lists a workspace directory: name, path, type (file, directory, symlink, other), size and mode of each entry. recursive = true walks subdirectories. Symbolic links are shown, never followed. The number of entries is capped (truncated = true when the list was cut). Call it before file_read when unsure of a path.",
    read_only,
    rename_all = "camelCase"
)]
pub async fn file_list(
    ws: Workspace,
    #[ctx] files: FilesSettings,
    /// Путь папки относительно рабочей области («.» — корень)
    #[arg(description_en = "Path of the directory, relative to the workspace (\".\" is the root)")]
    path: String,
    /// Обходить вложенные папки
    #[arg(default = false, description_en = "Walk subdirectories")]
    recursive: bool,
) -> Result<Listing, ToolError> {
    let c = confine(&ws, &path)?;
    let cap = files.max_list_entries;
    blocking(move || list(&c, recursive, cap)).await
}

fn list(c: &Confined, recursive: bool, cap: usize) -> Result<Listing, ToolError> {
    // The directory named by the path: symlinks on the way are followed only while they
    // stay beneath the root.
    let meta = c.root.metadata(c.rel_or_dot()).map_err(|e| c.err(e))?;
    if !meta.is_dir() {
        return Err(ToolError::failed(format!("not a directory: {}", c.shown)));
    }
    let dir = c.open_dir(&c.rel)?;
    // Entry paths are shown relative to the workspace, in its own normal form.
    let mut base = c.root.canonicalize(c.rel_or_dot()).map_err(|e| c.err(e))?;
    if base == Path::new(".") {
        base = PathBuf::new();
    }
    let mut out = Listing {
        path: c.shown.clone(),
        entries: Vec::new(),
        count: 0,
        truncated: false,
    };
    walk(&dir, &base, recursive, cap, 0, &mut out).map_err(|e| c.err(e))?;
    out.count = out.entries.len() as u64;
    Ok(out)
}

/// Appends the entries of `dir` (shown under `at`) to `out`, depth first, sorted by
/// name; stops at `cap` entries.
fn walk(
    dir: &Dir,
    at: &Path,
    recursive: bool,
    cap: usize,
    depth: usize,
    out: &mut Listing,
) -> std::io::Result<()> {
    let mut items: Vec<(std::ffi::OsString, cap_std::fs::Metadata)> = Vec::new();
    for entry in dir.entries()? {
        let entry = entry?;
        let name = entry.file_name();
        // lstat: a symlink is described, never followed. An entry removed meanwhile is
        // skipped.
        match entry.metadata() {
            Ok(meta) => items.push((name, meta)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    items.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    for (name, meta) in items {
        if out.entries.len() >= cap {
            out.truncated = true;
            return Ok(());
        }
        let ft = meta.file_type();
        let kind = if ft.is_symlink() {
            EntryType::Symlink
        } else {
            match special_kind(ft) {
                None => EntryType::File,
                Some("a directory") => EntryType::Directory,
                Some(_) => EntryType::Other,
            }
        };
        let path: PathBuf = at.join(&name);
        out.entries.push(Entry {
            name: name.to_string_lossy().into_owned(),
            path: path.to_string_lossy().into_owned(),
            kind,
            size: meta.len(),
            mode: format!("{:04o}", meta.permissions().mode() & 0o7777),
        });
        if recursive && kind == EntryType::Directory && depth < MAX_DEPTH {
            // Refuses a symlink swapped in for the directory since the lstat.
            // A directory that cannot be opened is listed without its contents.
            if let Ok(sub) = dir.open_dir_nofollow(&name) {
                walk(&sub, &path, recursive, cap, depth + 1, out)?;
            }
            if out.truncated {
                return Ok(());
            }
        }
    }
    Ok(())
}
