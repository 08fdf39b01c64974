//! Reading beneath a root, for the groups that keep their own files in the workspace or
//! the data dir (a skill's `SKILL.md`, a runtime tool's `tool.yaml`): the file tools'
//! kernel-confined opening ([`confine`](super::confine)) as a narrow public API, so that
//! no group writes a second one. Blocking: call it off the async threads.

use std::io::Read;
use std::path::Path;

use super::confine::confine;
use super::read::{looks_binary, open_regular};
use crate::{ToolError, Workspace};

/// Reads the text file `path` beneath `root`, whole, when it is at most `max_bytes`.
///
/// `path` is resolved by the kernel beneath `root`, as the file tools resolve theirs:
/// `..` above the root, an absolute path elsewhere and a symbolic link that leads out
/// are refused (`access_denied`), and so is a swap made while it is opened. Only a
/// regular file is read (a FIFO or a device is refused without blocking on it), and
/// only text (UTF-8 without NUL bytes).
pub fn read_text_beneath(root: &Path, path: &str, max_bytes: u64) -> Result<String, ToolError> {
    let (bytes, shown) = read_beneath(root, path, max_bytes)?;
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

/// The bytes of `path` beneath `root` and the path as messages show it.
fn read_beneath(root: &Path, path: &str, max_bytes: u64) -> Result<(Vec<u8>, String), ToolError> {
    let c = confine(&Workspace::at(root), path)?;
    let (file, size) = open_regular(&c)?;
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
    let c = confine(&Workspace::at(root), path)?;
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
}
