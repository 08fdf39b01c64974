//! Opening paths beneath the workspace.
//!
//! Every path a model sends is resolved by the kernel relative to a handle on the
//! workspace root (`cap-std`: `openat2` with `RESOLVE_BENEATH` where the kernel has it,
//! else a component-by-component walk with `O_NOFOLLOW`). No path is ever checked by
//! comparing strings and then opened by name, so `..`, absolute symlinks, symlinks that
//! climb out, and a symlink swapped in between a check and a use all fail the same way:
//! the kernel refuses to leave the root.
//!
//! The only lexical step is turning an absolute path that starts with the workspace root
//! into a relative one; whatever follows the prefix (`..` included) is still resolved by
//! the kernel.

use std::io;
use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};

use crate::{ToolError, Workspace};

/// The message of every refusal to leave the workspace.
pub(crate) const OUTSIDE: &str = "Access denied: path outside workspace";

/// The longest path, in bytes, a tool accepts (the Linux `PATH_MAX`).
const MAX_PATH_BYTES: usize = 4096;

/// A handle on the workspace root and the relative path asked for.
pub(crate) struct Confined {
    /// The workspace root, opened once per call.
    pub(crate) root: Dir,
    /// The path relative to the root (may be empty for the root itself).
    pub(crate) rel: PathBuf,
    /// The path as the model wrote it, for messages.
    pub(crate) shown: String,
}

/// Opens the workspace root and makes `path` relative to it.
///
/// Refuses, before touching the disk: NUL bytes, over-long paths, and absolute paths
/// that do not start with the workspace root.
pub(crate) fn confine(ws: &Workspace, path: &str) -> Result<Confined, ToolError> {
    let (rel, shown) = checked(ws.root(), path)?;
    let root = Dir::open_ambient_dir(ws.root(), ambient_authority()).map_err(|e| {
        ToolError::unavailable("the workspace directory cannot be opened")
            .with_detail(ws.root().display())
            .with_source(e)
    })?;
    Ok(Confined { root, rel, shown })
}

/// Makes `path` relative to `dir` (a handle on the directory at `at`), checked as
/// [`confine`] checks it: what is opened through the result stays beneath `dir`.
pub(crate) fn confine_in(dir: Dir, at: &Path, path: &str) -> Result<Confined, ToolError> {
    let (rel, shown) = checked(at, path)?;
    Ok(Confined {
        root: dir,
        rel,
        shown,
    })
}

/// `path` relative to `root` and as messages show it; refused, before touching the
/// disk, with a NUL byte, over-long, or absolute outside `root`.
fn checked(root: &Path, path: &str) -> Result<(PathBuf, String), ToolError> {
    let shown = shorten(path);
    if path.contains('\0') {
        return Err(ToolError::invalid_arguments("/path", "contains a NUL byte"));
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(ToolError::invalid_arguments(
            "/path",
            format!("too long ({} bytes, at most {MAX_PATH_BYTES})", path.len()),
        ));
    }
    let rel = relative(root, Path::new(path))
        .and_then(|rel| climbs_out(&rel).map(|()| rel))
        .map_err(|e| e.with_detail(format!("refused before any lookup: {shown}")))?;
    Ok((rel, shown))
}

/// `path` relative to the workspace root; absolute paths must start with the root
/// (as configured, or canonicalized).
fn relative(root: &Path, path: &Path) -> Result<PathBuf, ToolError> {
    if !path.has_root() {
        return Ok(path.to_path_buf());
    }
    if let Ok(rest) = path.strip_prefix(root) {
        return Ok(rest.to_path_buf());
    }
    if let Ok(canonical) = std::fs::canonicalize(root)
        && let Ok(rest) = path.strip_prefix(&canonical)
    {
        return Ok(rest.to_path_buf());
    }
    Err(ToolError::access_denied(OUTSIDE))
}

/// Refuses early a path whose `..` climb above its start even read lexically. This
/// only adds refusals (with the same message the kernel's refusal gets, even when a
/// directory on the way does not exist); it never grants anything: whatever passes is
/// still resolved beneath the root by the kernel.
fn climbs_out(rel: &Path) -> Result<(), ToolError> {
    let mut depth: usize = 0;
    for comp in rel.components() {
        match comp {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| ToolError::access_denied(OUTSIDE))?;
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(ToolError::access_denied(OUTSIDE));
            }
        }
    }
    Ok(())
}

impl Confined {
    /// The last component of the path, when it is a plain name (not `.`, `..` or empty).
    pub(crate) fn split_name(&self) -> Option<(PathBuf, std::ffi::OsString)> {
        let mut comps: Vec<Component<'_>> = self.rel.components().collect();
        match comps.pop() {
            Some(Component::Normal(name)) => {
                let parent: PathBuf = comps.iter().collect();
                Some((parent, name.to_os_string()))
            }
            _ => None,
        }
    }

    /// The relative path with `.` for the root.
    pub(crate) fn rel_or_dot(&self) -> &Path {
        if self.rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &self.rel
        }
    }

    /// Opens the directory `rel` beneath the root (the root itself when `rel` is empty).
    pub(crate) fn open_dir(&self, rel: &Path) -> Result<Dir, ToolError> {
        if rel.as_os_str().is_empty() {
            self.root.try_clone()
        } else {
            self.root.open_dir(rel)
        }
        .map_err(|e| self.err(e))
    }

    /// Maps an I/O error on this path to what the model is told.
    pub(crate) fn err(&self, e: io::Error) -> ToolError {
        io_error(e, &self.shown)
    }
}

/// Open options that never block (a FIFO) and never take a controlling terminal.
pub(crate) fn nonblocking(mut opts: OpenOptions) -> OpenOptions {
    let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY;
    opts.custom_flags(i32::try_from(flags.bits()).unwrap_or(0));
    opts
}

/// Maps an I/O error to a [`ToolError`] naming `shown`.
pub(crate) fn io_error(e: io::Error, shown: &str) -> ToolError {
    use rustix::io::Errno;
    let raw = e.raw_os_error();
    let is = |errno: Errno| raw == Some(errno.raw_os_error());
    let err = if is(Errno::XDEV) || (e.kind() == io::ErrorKind::PermissionDenied && raw.is_none()) {
        // cap-std's "a path led outside of the filesystem", or the kernel's EXDEV from
        // RESOLVE_BENEATH.
        ToolError::access_denied(OUTSIDE)
    } else if e.kind() == io::ErrorKind::NotFound {
        ToolError::not_found(format!("not found: {shown}"))
    } else if is(Errno::ACCESS) || is(Errno::PERM) {
        ToolError::access_denied(format!("permission denied: {shown}"))
    } else if is(Errno::NAMETOOLONG) {
        ToolError::invalid_arguments(
            "/path",
            format!("too long (the whole or a name in it): {shown}"),
        )
    } else if is(Errno::LOOP) {
        ToolError::failed(format!("too many levels of symbolic links: {shown}"))
    } else if is(Errno::NOTDIR) {
        ToolError::failed(format!(
            "a component of the path is not a directory: {shown}"
        ))
    } else if is(Errno::ISDIR) {
        ToolError::failed(format!("is a directory: {shown}"))
    } else if is(Errno::NXIO) || is(Errno::OPNOTSUPP) {
        ToolError::failed(format!(
            "not a regular file (a socket, FIFO or device): {shown}"
        ))
    } else if is(Errno::NOSPC) || is(Errno::DQUOT) {
        ToolError::failed("no space left on the device")
    } else if is(Errno::ROFS) {
        ToolError::failed("the workspace is on a read-only file system")
    } else if e.kind() == io::ErrorKind::InvalidInput {
        ToolError::invalid_arguments("/path", format!("not valid: {shown}"))
    } else {
        ToolError::failed(format!("I/O error on {shown}"))
    };
    err.with_detail(shown).with_source(e)
}

/// A path as shown in messages: at most 200 characters.
fn shorten(path: &str) -> String {
    if path.chars().count() <= 200 {
        path.to_owned()
    } else {
        let head: String = path.chars().take(200).collect();
        format!("{head}…")
    }
}

/// What kind of non-regular file `ft` is, for the refusal message.
pub(crate) fn special_kind(ft: cap_std::fs::FileType) -> Option<&'static str> {
    use cap_std::fs::FileTypeExt;
    if ft.is_file() {
        None
    } else if ft.is_dir() {
        Some("a directory")
    } else if ft.is_fifo() {
        Some("a FIFO")
    } else if ft.is_socket() {
        Some("a socket")
    } else if ft.is_block_device() || ft.is_char_device() {
        Some("a device")
    } else if ft.is_symlink() {
        Some("a symbolic link")
    } else {
        Some("not a regular file")
    }
}

/// Refuses anything but a regular file, naming what it is.
pub(crate) fn require_regular(ft: cap_std::fs::FileType, shown: &str) -> Result<(), ToolError> {
    match special_kind(ft) {
        None => Ok(()),
        Some("a directory") => Err(ToolError::failed(format!("is a directory: {shown}"))),
        Some(kind) => Err(ToolError::failed(format!(
            "not a regular file ({kind}): {shown}; only regular files can be read or written"
        ))),
    }
}

/// Runs blocking file work off the async runtime.
pub(crate) async fn blocking<T, F>(f: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
{
    crate::tools::run_blocking("file", f).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_paths_must_start_with_the_root() {
        let root = Path::new("/srv/ws");
        assert_eq!(
            relative(root, Path::new("/srv/ws/a/b")).unwrap(),
            PathBuf::from("a/b")
        );
        assert_eq!(
            relative(root, Path::new("/srv/ws/../x")).unwrap(),
            PathBuf::from("../x"),
            "`..` after the prefix is left for the kernel to refuse"
        );
        assert!(
            relative(root, Path::new("/srv/wsx/a"))
                .unwrap_err()
                .is_access_denied()
        );
        assert!(
            relative(root, Path::new("/etc/passwd"))
                .unwrap_err()
                .is_access_denied()
        );
        assert_eq!(relative(root, Path::new("a")).unwrap(), PathBuf::from("a"));
    }

    #[test]
    fn lexical_climbs_above_the_start_are_refused() {
        for bad in ["..", "../x", "a/../..", "a/./../../b", "./.."] {
            assert!(climbs_out(Path::new(bad)).is_err(), "{bad}");
        }
        for good in ["", ".", "a/..", "a/b/../c", "a/../b/./.."] {
            assert!(climbs_out(Path::new(good)).is_ok(), "{good}");
        }
    }

    #[test]
    fn escape_errors_are_access_denied_and_others_are_not() {
        let esc = io::Error::new(io::ErrorKind::PermissionDenied, "a path led outside");
        let e = io_error(esc, "x");
        assert!(e.is_access_denied());
        assert_eq!(e.message(), OUTSIDE);
        let eacces = io::Error::from_raw_os_error(rustix::io::Errno::ACCESS.raw_os_error());
        assert_eq!(io_error(eacces, "x").message(), "permission denied: x");
        let enoent = io::Error::from_raw_os_error(rustix::io::Errno::NOENT.raw_os_error());
        assert_eq!(io_error(enoent, "x").message(), "not found: x");
    }

    #[test]
    fn long_paths_are_shortened_in_messages() {
        let long = "é".repeat(500);
        assert_eq!(shorten(&long).chars().count(), 201);
    }
}
