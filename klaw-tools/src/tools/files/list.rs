//! `file_list`: the entries of a directory, optionally recursive, never following links.

use std::path::Path;

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};
use std::os::unix::ffi::OsStrExt;

use super::FilesSettings;
use super::confine::{Confined, blocking, confine};
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
    let base = c.root.canonicalize(c.rel_or_dot()).map_err(|e| c.err(e))?;
    let base = if base == Path::new(".") {
        String::new()
    } else {
        base.to_string_lossy().into_owned()
    };
    let mut out = Listing {
        path: c.shown.clone(),
        entries: Vec::new(),
        count: 0,
        truncated: false,
    };
    // Directory entries are read in batches of up to 64 KiB (about 2000 names).
    let mut buf = vec![std::mem::MaybeUninit::<u8>::uninit(); 64 << 10];
    let mut ctx = Walk {
        recursive,
        cap,
        buf: &mut buf,
    };
    walk(&dir, &base, &mut ctx, 0, &mut out).map_err(|e| c.err(e))?;
    out.count = out.entries.len() as u64;
    Ok(out)
}

/// What `file_list` tells of an entry: its name, kind, size and mode bits.
struct Item {
    name: std::ffi::OsString,
    kind: EntryType,
    size: u64,
    mode: u32,
}

/// The entries of `dir`, unsorted: names from large batches of `getdents64` (one
/// buffer for the whole walk), each described by one `statx` that asks only for its
/// type, mode and size, without following a link (`lstat`). Each name is one component
/// read from the directory itself, so nothing can lead outside it. An entry removed
/// meanwhile is skipped.
fn read_items(dir: &Dir, buf: &mut [std::mem::MaybeUninit<u8>]) -> std::io::Result<Vec<Item>> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir, StatxFlags};
    // A descriptor of its own: `dir` may share its read position with another one.
    let fd = rustix::fs::openat(
        dir,
        c".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut items = Vec::new();
    let mut entries = RawDir::new(&fd, buf);
    while let Some(entry) = entries.next() {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let (file_type, mode, size) = match rustix::fs::statx(
            &fd,
            name,
            AtFlags::SYMLINK_NOFOLLOW,
            StatxFlags::TYPE | StatxFlags::MODE | StatxFlags::SIZE,
        ) {
            Ok(st) => (
                FileType::from_raw_mode(st.stx_mode.into()),
                u32::from(st.stx_mode),
                st.stx_size,
            ),
            // No `statx` here (an old kernel, a seccomp profile): `fstatat`.
            Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) => {
                match rustix::fs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => (
                        FileType::from_raw_mode(st.st_mode),
                        st.st_mode,
                        u64::try_from(st.st_size).unwrap_or(0),
                    ),
                    Err(rustix::io::Errno::NOENT) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        let kind = match file_type {
            FileType::RegularFile => EntryType::File,
            FileType::Directory => EntryType::Directory,
            FileType::Symlink => EntryType::Symlink,
            _ => EntryType::Other,
        };
        items.push(Item {
            name: std::ffi::OsStr::from_bytes(name.to_bytes()).to_owned(),
            kind,
            size,
            mode,
        });
    }
    Ok(items)
}

/// Appends the entries of `dir` (shown under `at`, a path relative to the workspace,
/// empty for its root) to `out`, depth first, sorted by name; stops at `cap` entries.
fn walk(
    dir: &Dir,
    at: &str,
    ctx: &mut Walk<'_>,
    depth: usize,
    out: &mut Listing,
) -> std::io::Result<()> {
    let mut items = read_items(dir, ctx.buf)?;
    items.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    out.entries
        .reserve(items.len().min(ctx.cap.saturating_sub(out.entries.len())));
    for Item {
        name,
        kind,
        size,
        mode,
    } in items
    {
        if out.entries.len() >= ctx.cap {
            out.truncated = true;
            return Ok(());
        }
        // `at` joined with the name, as `Path::join` then a lossy conversion would give
        // (a name holds no `/`, so converting each part on its own is the same).
        let shown = name.to_string_lossy();
        let mut path = String::with_capacity(at.len() + 1 + shown.len());
        if !at.is_empty() {
            path.push_str(at);
            path.push('/');
        }
        path.push_str(&shown);
        let descend = ctx.recursive && kind == EntryType::Directory && depth < MAX_DEPTH;
        let sub_at = descend.then(|| path.clone());
        out.entries.push(Entry {
            name: shown.into_owned(),
            path,
            kind,
            size,
            mode: octal_mode(mode),
        });
        if let Some(sub_at) = sub_at {
            // Refuses a symlink swapped in for the directory since the lstat.
            // A directory that cannot be opened is listed without its contents.
            if let Ok(sub) = dir.open_dir_nofollow(&name) {
                walk(&sub, &sub_at, ctx, depth + 1, out)?;
            }
            if out.truncated {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// What stays the same through a walk.
struct Walk<'a> {
    recursive: bool,
    cap: usize,
    /// The buffer directory entries are read into.
    buf: &'a mut [std::mem::MaybeUninit<u8>],
}

/// The permission bits of `mode` as four octal digits (`0644`), as `{:04o}` writes them.
fn octal_mode(mode: u32) -> String {
    let digit = |shift: u32| char::from(b'0' + ((mode >> shift) & 7) as u8);
    [digit(9), digit(6), digit(3), digit(0)]
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_four_octal_digits() {
        for mode in [0, 0o644, 0o755, 0o4755, 0o7777, 0o100644, 0o040700] {
            assert_eq!(octal_mode(mode), format!("{:04o}", mode & 0o7777));
        }
    }
}
