//! Reading beneath a root, for the groups that keep their own files in the workspace or
//! the data dir (a skill's `SKILL.md`, a runtime tool's `tool.yaml`): the file tools'
//! kernel-confined opening ([`confine`](super::confine)) as a narrow public API, so that
//! no group writes a second one. Blocking: call it off the async threads.

use std::io::Read;
use std::path::Path;

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use super::confine::{Confined, confine, confine_in, io_error};
use super::read::{looks_binary, open_regular};
use crate::ToolError;

/// Reads the text file `path` beneath `root`, whole, when it is at most `max_bytes`.
///
/// `path` is resolved by the kernel beneath `root`, as the file tools resolve theirs:
/// `..` above the root, an absolute path elsewhere and a symbolic link that leads out
/// are refused (`access_denied`), and so is a swap made while it is opened. Only a
/// regular file is read (a FIFO or a device is refused without blocking on it), and
/// only text (UTF-8 without NUL bytes).
pub fn read_text_beneath(root: &Path, path: &str, max_bytes: u64) -> Result<String, ToolError> {
    let (bytes, shown) = read_beneath(root, path, max_bytes)?;
    as_text(bytes, &shown)
}

/// `bytes` as text, or why not.
fn as_text(bytes: Vec<u8>, shown: &str) -> Result<String, ToolError> {
    let not_text = || ToolError::failed(format!("{shown} is not text (UTF-8 without NUL bytes)"));
    if looks_binary(&bytes) {
        return Err(not_text());
    }
    String::from_utf8(bytes).map_err(|_| not_text())
}

/// Reads the file `path` beneath `root`, whole, when it is at most `max_bytes`, as
/// bytes (text or not); resolved and refused like [`read_text_beneath`].
pub fn read_bytes_beneath(root: &Path, path: &str, max_bytes: u64) -> Result<Vec<u8>, ToolError> {
    read_beneath(root, path, max_bytes).map(|(bytes, _)| bytes)
}

/// Reads the text file `path` beneath the folder `folder` of `root`, whole, when it is
/// at most `max_bytes`: [`read_text_beneath`] with the folder as the root.
///
/// `folder` (a relative path of plain names, `skills/pdf`) is opened one name at a
/// time, each resolved by the kernel beneath the one before it, so a symbolic link
/// among them may lead to a sibling but never out of its parent; then `path` is
/// resolved beneath the folder: `..`, an absolute link, and a link that leaves the
/// folder (to the rest of `root` or anywhere else) are refused (`access_denied`); a
/// link that stays inside the folder is followed.
pub fn read_text_in(
    root: &Path,
    folder: &str,
    path: &str,
    max_bytes: u64,
) -> Result<String, ToolError> {
    let c = confine_in_folder(root, folder, path)?;
    let (bytes, shown) = read_confined(&c, max_bytes)?;
    as_text(bytes, &shown)
}

/// Reads the file `path` beneath the folder `folder` of `root`, as bytes (text or
/// not); resolved and refused like [`read_text_in`].
pub fn read_bytes_in(
    root: &Path,
    folder: &str,
    path: &str,
    max_bytes: u64,
) -> Result<Vec<u8>, ToolError> {
    let c = confine_in_folder(root, folder, path)?;
    read_confined(&c, max_bytes).map(|(bytes, _)| bytes)
}

/// The names of the regular files directly in `path` beneath the folder `folder` of
/// `root` (`""` for the folder itself), sorted; resolved like [`read_text_in`].
pub fn files_in(root: &Path, folder: &str, path: &str) -> Result<Vec<String>, ToolError> {
    names_in(
        confine_in_folder(root, folder, path)?,
        cap_std::fs::FileType::is_file,
    )
}

/// The names of the directories directly in `path` beneath the folder `folder` of
/// `root` (`""` for the folder itself), sorted, links left out; resolved like
/// [`read_text_in`].
pub fn dirs_in(root: &Path, folder: &str, path: &str) -> Result<Vec<String>, ToolError> {
    names_in(
        confine_in_folder(root, folder, path)?,
        cap_std::fs::FileType::is_dir,
    )
}

/// `path` made relative to the folder `folder` of `root`, the folder opened one name
/// at a time beneath the one before.
fn confine_in_folder(root: &Path, folder: &str, path: &str) -> Result<Confined, ToolError> {
    let mut dir = Dir::open_ambient_dir(root, ambient_authority()).map_err(|e| {
        ToolError::unavailable("the folder cannot be opened")
            .with_detail(root.display())
            .with_source(e)
    })?;
    let mut at = root.to_path_buf();
    for name in folder.split('/').filter(|n| !n.is_empty() && *n != ".") {
        if name == ".." || name.contains('\0') {
            return Err(
                ToolError::access_denied(super::confine::OUTSIDE).with_detail(format!(
                    "the folder {folder:?} is not a path of plain names"
                )),
            );
        }
        at.push(name);
        dir = dir.open_dir(name).map_err(|e| io_error(e, folder))?;
    }
    confine_in(dir, &at, path)
}

/// The bytes of `path` beneath `root` and the path as messages show it.
fn read_beneath(root: &Path, path: &str, max_bytes: u64) -> Result<(Vec<u8>, String), ToolError> {
    let c = confine(&crate::__private::workspace_at(root), path)?;
    read_confined(&c, max_bytes)
}

/// The bytes of the confined file, when it is at most `max_bytes`.
fn read_confined(c: &Confined, max_bytes: u64) -> Result<(Vec<u8>, String), ToolError> {
    let (file, size) = open_regular(c)?;
    if size > max_bytes {
        return Err(ToolError::failed(format!(
            "{} is {size} bytes, more than the {max_bytes} read here",
            c.shown
        )));
    }
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| c.err(e))?;
    if bytes.len() as u64 > max_bytes {
        return Err(ToolError::failed(format!(
            "{} grew past the {max_bytes} bytes read here",
            c.shown
        )));
    }
    Ok((bytes, c.shown.to_string()))
}

/// The names of the directories directly in `path` beneath `root` (`""` or `"."` for
/// `root` itself), sorted; resolved like [`read_text_beneath`]. A symbolic link is not a
/// directory here, even one that points to a directory beneath the root, and a name that
/// is not UTF-8 is left out.
pub fn dirs_beneath(root: &Path, path: &str) -> Result<Vec<String>, ToolError> {
    names_beneath(root, path, cap_std::fs::FileType::is_dir)
}

/// The names of the regular files directly in `path` beneath `root`, sorted; resolved
/// like [`read_text_beneath`]. A symbolic link is not a regular file here, and a name
/// that is not UTF-8 is left out.
pub fn files_beneath(root: &Path, path: &str) -> Result<Vec<String>, ToolError> {
    names_beneath(root, path, cap_std::fs::FileType::is_file)
}

/// The names of the symbolic links directly in `path` beneath `root`, sorted, never
/// followed; resolved like [`read_text_beneath`]. Whoever reads through one does so with
/// [`read_text_beneath`], which refuses a link that leads out of `root`.
pub fn links_beneath(root: &Path, path: &str) -> Result<Vec<String>, ToolError> {
    names_beneath(root, path, cap_std::fs::FileType::is_symlink)
}

fn names_beneath(
    root: &Path,
    path: &str,
    keep: fn(&cap_std::fs::FileType) -> bool,
) -> Result<Vec<String>, ToolError> {
    names_in(confine(&crate::__private::workspace_at(root), path)?, keep)
}

fn names_in(
    c: Confined,
    keep: fn(&cap_std::fs::FileType) -> bool,
) -> Result<Vec<String>, ToolError> {
    let dir = c.open_dir(&c.rel)?;
    let mut names = Vec::new();
    for entry in dir.entries().map_err(|e| c.err(e))? {
        let entry = entry.map_err(|e| c.err(e))?;
        if entry.file_type().is_ok_and(|t| keep(&t))
            && let Ok(name) = entry.file_name().into_string()
        {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_text_beneath_the_root_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("skills/a/scripts")).unwrap();
        std::fs::create_dir_all(root.join("skills/b")).unwrap();
        std::fs::write(root.join("skills/a/SKILL.md"), "---\nname: a\n---\n").unwrap();
        std::fs::write(dir.path().join("secret"), "outside").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), root.join("skills/out")).unwrap();
        std::os::unix::fs::symlink(root.join("skills/b"), root.join("skills/c")).unwrap();
        std::fs::write(root.join("skills/bin"), b"a\0b").unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.join("skills/fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
            0,
        )
        .unwrap();

        assert_eq!(
            read_text_beneath(&root, "skills/a/SKILL.md", 1024).unwrap(),
            "---\nname: a\n---\n"
        );
        for outside in [
            "../secret",
            "skills/out",
            "/etc/passwd",
            "skills/../../secret",
        ] {
            let e = read_text_beneath(&root, outside, 1024).unwrap_err();
            assert!(e.is_access_denied(), "{outside}: {e:?}");
        }
        assert!(read_text_beneath(&root, "skills/a/SKILL.md", 4).is_err());
        assert!(read_text_beneath(&root, "skills/bin", 1024).is_err());
        assert!(read_text_beneath(&root, "skills/fifo", 1024).is_err());
        assert!(
            read_text_beneath(&root, "skills/none", 1024)
                .unwrap_err()
                .is_not_found()
        );

        assert_eq!(dirs_beneath(&root, "skills").unwrap(), ["a", "b"]);
        assert_eq!(dirs_beneath(&root, "").unwrap(), ["skills"]);
        assert_eq!(files_beneath(&root, "skills").unwrap(), ["bin"]);
        assert_eq!(files_beneath(&root, "skills/a").unwrap(), ["SKILL.md"]);
        assert!(files_beneath(&root, "..").unwrap_err().is_access_denied());
        assert_eq!(links_beneath(&root, "skills").unwrap(), ["c", "out"]);
        assert!(dirs_beneath(&root, "..").unwrap_err().is_access_denied());
    }

    #[test]
    fn reads_in_a_folder_stay_in_that_folder() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let pdf = root.join("skills/pdf");
        std::fs::create_dir_all(pdf.join("ref")).unwrap();
        std::fs::create_dir_all(root.join("skills/other")).unwrap();
        std::fs::write(pdf.join("ref/guide.md"), "guide").unwrap();
        std::fs::write(root.join("memory.sqlite"), "the data dir's").unwrap();
        std::fs::write(root.join("skills/other/notes.md"), "another skill's").unwrap();
        let link = |to: &str, at: &str| std::os::unix::fs::symlink(to, pdf.join(at)).unwrap();
        link("ref/guide.md", "alias.md");
        link("../../memory.sqlite", "db");
        link("../other/notes.md", "sibling");
        link("/etc/passwd", "passwd");
        link(pdf.join("ref/guide.md").to_str().unwrap(), "absolute");
        std::os::unix::fs::symlink("..", root.join("skills/up")).unwrap();
        std::os::unix::fs::symlink("pdf", root.join("skills/alias")).unwrap();

        assert_eq!(
            read_text_in(&root, "skills/pdf", "ref/guide.md", 99).unwrap(),
            "guide"
        );
        assert_eq!(
            read_text_in(&root, "skills/pdf", "alias.md", 99).unwrap(),
            "guide"
        );
        // Beneath the root, but not beneath the folder: refused by the kernel.
        for out in [
            "db",
            "sibling",
            "passwd",
            "absolute",
            "../other/notes.md",
            "/etc/passwd",
        ] {
            let e = read_bytes_in(&root, "skills/pdf", out, 99).unwrap_err();
            assert!(e.is_access_denied(), "{out}: {e:?}");
        }
        assert!(
            read_text_beneath(&root, "skills/pdf/db", 99).is_ok(),
            "the root's rule"
        );
        // The folder itself: a link to a sibling is followed, one out of its parent not.
        assert_eq!(
            read_text_in(&root, "skills/alias", "ref/guide.md", 99).unwrap(),
            "guide"
        );
        let e = read_text_in(&root, "skills/up", "memory.sqlite", 99).unwrap_err();
        assert!(e.is_access_denied(), "{e:?}");
        assert!(
            read_text_in(&root, "skills/..", "memory.sqlite", 99)
                .unwrap_err()
                .is_access_denied()
        );
        assert_eq!(files_in(&root, "skills/pdf", "ref").unwrap(), ["guide.md"]);
        assert_eq!(dirs_in(&root, "skills/pdf", "").unwrap(), ["ref"]);
        assert!(
            files_in(&root, "skills/up", "")
                .unwrap_err()
                .is_access_denied()
        );
    }
}
