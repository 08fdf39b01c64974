//! Importing files into an [`Index`]: what `klaw-engine memory import` does, without the
//! printing. [`Import::new`] lists the files the paths name (directories walked); then
//! [`Import::run`] reads each one, saves its documents in batches and tells an
//! [`ImportProgress`] how far it got and what it left out.
//!
//! What is read: `.md`, `.markdown` and `.txt` files (one document each, dated by the
//! file's modification time); `.jsonl` files with one `{"content", "source"?,
//! "created_at"?}` document or one conversation turn (`conversation::Turn`) per line;
//! chat exports (ChatGPT's `conversations.json`, Telegram Desktop's `result.json`). Each
//! conversation turn is saved with its date and the turn before it
//! ([`conversation::documents`]). A file that cannot be read, or a line that is not a
//! document, is left out and reported; a failure to save (the database, the model) ends
//! the import.

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::conversation::{self, Turn};
use crate::{Document, Index, MemoryError, SaveReport};

/// Documents saved per transaction while importing.
const BATCH_DOCUMENTS: usize = 64;
/// Bytes of text saved per transaction while importing, at most (about).
const BATCH_BYTES: usize = 256 * 1024;
/// Larger files are not imported (split them first).
pub const MAX_IMPORT_FILE: u64 = 64 * 1024 * 1024;

/// The exports' own file names: a walk imports these `.json` files and no others.
const EXPORT_NAMES: [&str; 2] = ["conversations.json", "result.json"];

/// Why an import could not start, or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// A path given cannot be read (or a directory under it cannot be walked).
    #[error("{}: {source}", .path.display())]
    Read {
        /// The path as given.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// A file given is of no kind the import reads.
    #[error(
        "{}: not a .md, .markdown, .txt, .jsonl or .json (chat export) file",
        .path.display()
    )]
    NotImportable {
        /// The file.
        path: PathBuf,
    },
    /// Saving failed (the database, the model): the import stopped.
    #[error(transparent)]
    Save(#[from] MemoryError),
}

/// What an import did so far (and, from [`Import::run`], in all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Files done (read, or left out).
    pub files: usize,
    /// Documents handed to the index (a text file, a `.jsonl` line, a conversation turn).
    pub documents: usize,
    /// What saving them did: chunks, inserted, duplicates.
    pub saved: SaveReport,
    /// `.jsonl` lines left out.
    pub skipped_lines: usize,
    /// Files that could not be read, left out.
    pub unreadable: usize,
    /// Bytes of the files done, and of the lines read of the file being read.
    pub bytes: u64,
}

/// Something an import left out, as one line to show the user.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// A file left out that is no failure (a stray `result.json` a walk found).
    LeftOut {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// A line of a `.jsonl` file that is not a document or a turn.
    BadLine {
        /// The file.
        path: PathBuf,
        /// The line's number, from 1.
        line: usize,
        /// Why.
        why: String,
    },
    /// A file that cannot be read (counted in [`ImportReport::unreadable`]).
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LeftOut { path, why } => write!(f, "note: {}: {why}; left out", path.display()),
            Self::BadLine { path, line, why } => {
                write!(f, "skipped {}:{line}: {why}", path.display())
            }
            Self::Unreadable { path, why } => {
                write!(f, "error: {}: {why}; skipped", path.display())
            }
        }
    }
}

/// Where an import tells what it does: a progress bar, a log, nothing.
pub trait ImportProgress {
    /// A batch was saved; `report` is the import so far.
    fn saved(&mut self, report: &ImportReport);
    /// Something was left out.
    fn notice(&mut self, notice: &Notice);
}

/// An [`ImportProgress`] that shows nothing.
impl ImportProgress for () {
    fn saved(&mut self, _: &ImportReport) {}
    fn notice(&mut self, _: &Notice) {}
}

/// What a path to import is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Jsonl,
    /// A chat export (ChatGPT or Telegram), named by the caller.
    Export,
    /// A file a walk found with an export's name: left out with a note if it is not one.
    FoundExport,
}

fn kind(path: &Path) -> Option<Kind> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "md" | "markdown" | "txt" => Some(Kind::Text),
        "jsonl" => Some(Kind::Jsonl),
        "json" => Some(Kind::Export),
        _ => None,
    }
}

/// The files under `dir` worth importing, sorted; symbolic links are not followed.
fn walk(dir: &Path, out: &mut Vec<(PathBuf, Kind, u64)>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let path = e.path();
        let ty = e.file_type()?;
        if ty.is_dir() {
            walk(&path, out)?;
        } else if ty.is_file()
            && let Some(k) = kind(&path)
            && (k != Kind::Export || EXPORT_NAMES.iter().any(|n| e.file_name() == *n))
        {
            let k = if k == Kind::Export {
                Kind::FoundExport
            } else {
                k
            };
            out.push((path, k, e.metadata()?.len()));
        }
    }
    Ok(())
}

/// The files to import, listed before any is read (so their number and size are known).
#[derive(Debug, Clone)]
pub struct Import {
    files: Vec<(PathBuf, Kind, u64)>,
}

impl Import {
    /// The files `paths` name: files as they are, directories walked recursively for the
    /// kinds the import reads (and the exports by their own names). Fails on a path that
    /// cannot be read or a file of no such kind, before anything is imported.
    pub fn new(paths: &[PathBuf]) -> Result<Self, ImportError> {
        let mut files = Vec::new();
        for p in paths {
            let read = |source| ImportError::Read {
                path: p.clone(),
                source,
            };
            let meta = std::fs::metadata(p).map_err(read)?;
            if meta.is_dir() {
                walk(p, &mut files).map_err(read)?;
            } else {
                let k = kind(p).ok_or_else(|| ImportError::NotImportable { path: p.clone() })?;
                files.push((p.clone(), k, meta.len()));
            }
        }
        Ok(Self { files })
    }

    /// How many files there are.
    pub fn files(&self) -> usize {
        self.files.len()
    }

    /// Their size in bytes, together.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.2).sum()
    }

    /// Reads every file into `index`, in batches, telling `progress`. A file that cannot
    /// be read (or is larger than [`MAX_IMPORT_FILE`]) is reported and left out; a
    /// failure to save ends the import with [`ImportError::Save`].
    pub fn run(
        &self,
        index: &Index,
        progress: &mut dyn ImportProgress,
    ) -> Result<ImportReport, ImportError> {
        let mut imp = Importer {
            index,
            pending: Vec::new(),
            pending_bytes: 0,
            report: ImportReport::default(),
            progress,
        };
        for (path, kind, size) in &self.files {
            let bytes_before = imp.report.bytes;
            if *size > MAX_IMPORT_FILE {
                imp.skip(path, &format!("larger than {MAX_IMPORT_FILE} bytes"));
            } else {
                match kind {
                    Kind::Text => imp.text_file(path)?,
                    Kind::Jsonl => imp.jsonl_file(path)?,
                    Kind::Export => imp.export_file(path, true)?,
                    Kind::FoundExport => imp.export_file(path, false)?,
                }
            }
            imp.report.files += 1;
            imp.report.bytes = bytes_before + size;
        }
        imp.flush()?;
        Ok(imp.report)
    }
}

/// One line of a `.jsonl` import file.
#[derive(Debug, Deserialize)]
struct Line {
    content: String,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    created_at: Option<Value>,
}

/// Saves documents in batches, counting and telling the progress.
struct Importer<'a> {
    index: &'a Index,
    pending: Vec<Document>,
    pending_bytes: usize,
    report: ImportReport,
    progress: &'a mut dyn ImportProgress,
}

impl Importer<'_> {
    fn add(&mut self, doc: Document) -> Result<(), MemoryError> {
        self.pending_bytes += doc.content.len();
        self.pending.push(doc);
        self.report.documents += 1;
        if self.pending.len() >= BATCH_DOCUMENTS || self.pending_bytes >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), MemoryError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let r = self.index.save_all(&self.pending)?;
        self.report.saved.chunks += r.chunks;
        self.report.saved.inserted += r.inserted;
        self.report.saved.duplicates += r.duplicates;
        self.pending.clear();
        self.pending_bytes = 0;
        self.progress.saved(&self.report);
        Ok(())
    }

    fn text_file(&mut self, path: &Path) -> Result<(), MemoryError> {
        let text = match std::fs::read(path).map(String::from_utf8) {
            Ok(Ok(t)) => t,
            Ok(Err(_)) => {
                self.skip(path, "not UTF-8 text");
                return Ok(());
            }
            Err(e) => {
                self.skip(path, &e.to_string());
                return Ok(());
            }
        };
        let created_at = std::fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| jiff::Timestamp::try_from(t).ok())
            .map(|t| t.as_second());
        self.add(Document {
            content: text,
            source: path.display().to_string(),
            created_at,
            context: None,
        })
    }

    fn jsonl_file(&mut self, path: &Path) -> Result<(), MemoryError> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) => {
                self.skip(path, &e.to_string());
                return Ok(());
            }
        };
        // Conversation turns are kept until the file is read: each is saved with the one
        // before it as context.
        let mut turns = Vec::new();
        for (i, line) in BufReader::new(file).lines().enumerate() {
            let n = i + 1;
            let line = match line {
                Ok(l) => l,
                Err(e) => {
                    self.bad_line(path, n, &e.to_string());
                    continue;
                }
            };
            // Within a large file too, the progress moves as lines are read (`\n` included).
            self.report.bytes += line.len() as u64 + 1;
            if line.trim().is_empty() {
                continue;
            }
            let value: Value = match serde_json::from_str(&line) {
                Ok(v) => v,
                Err(e) => {
                    self.bad_line(path, n, &e.to_string());
                    continue;
                }
            };
            if Turn::is_turn(&value) {
                match Turn::from_line(&value, n) {
                    Ok(t) => turns.push(t),
                    Err(why) => self.bad_line(path, n, &why.to_string()),
                }
                continue;
            }
            let parsed: Line = match serde_json::from_value(value) {
                Ok(l) => l,
                Err(e) => {
                    self.bad_line(path, n, &e.to_string());
                    continue;
                }
            };
            let created_at = match conversation::created_at(parsed.created_at.as_ref()) {
                Ok(t) => t,
                Err(why) => {
                    self.bad_line(path, n, &why.to_string());
                    continue;
                }
            };
            if parsed.content.trim().is_empty() {
                self.bad_line(path, n, "content is empty");
                continue;
            }
            let source = parsed
                .source
                .filter(|s| !s.trim().is_empty())
                .unwrap_or_else(|| path.display().to_string());
            self.add(Document {
                content: parsed.content,
                source,
                created_at,
                context: None,
            })?;
        }
        self.turns(path, &turns)
    }

    /// A ChatGPT or Telegram export: its turns, each with the one before it. A file a
    /// walk found (`named` false) that is not an export is left out with a note only.
    fn export_file(&mut self, path: &Path, named: bool) -> Result<(), MemoryError> {
        let parsed = std::fs::read(path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Value>(&b).map_err(|e| e.to_string()));
        let json = match parsed {
            Ok(j) => j,
            Err(why) if named => {
                self.skip(path, &why);
                return Ok(());
            }
            Err(why) => {
                self.note(path, &format!("not read as a chat export ({why})"));
                return Ok(());
            }
        };
        let shape = conversation::export_shape(&json);
        let turns = shape.map(|s| conversation::parse_export(&json, s));
        match turns {
            Some(Ok(turns)) if turns.is_empty() => {
                self.note(path, "a chat export with no text messages");
                Ok(())
            }
            Some(Ok(turns)) => self.turns(path, &turns),
            Some(Err(why)) => {
                self.skip(path, &why.to_string());
                Ok(())
            }
            None if named => {
                self.skip(
                    path,
                    "not a chat export (ChatGPT's conversations.json or Telegram's result.json)",
                );
                Ok(())
            }
            None => {
                self.note(path, "not a chat export");
                Ok(())
            }
        }
    }

    /// Tells about a file left out that is no failure (a walk's stray `result.json`).
    fn note(&mut self, path: &Path, why: &str) {
        self.progress.notice(&Notice::LeftOut {
            path: path.to_owned(),
            why: why.to_owned(),
        });
    }

    /// Saves a file's conversation turns (sources `<path>#<turn id>`).
    fn turns(&mut self, path: &Path, turns: &[Turn]) -> Result<(), MemoryError> {
        for doc in conversation::documents(turns, &path.display().to_string()) {
            self.add(doc)?;
        }
        Ok(())
    }

    fn bad_line(&mut self, path: &Path, line: usize, why: &str) {
        self.report.skipped_lines += 1;
        self.progress.notice(&Notice::BadLine {
            path: path.to_owned(),
            line,
            why: why.to_owned(),
        });
    }

    /// Reports a file that cannot be read; the import goes on without it.
    fn skip(&mut self, path: &Path, why: &str) {
        self.report.unreadable += 1;
        self.progress.notice(&Notice::Unreadable {
            path: path.to_owned(),
            why: why.to_owned(),
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_walk_takes_text_jsonl_and_exports_by_name_sorted() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("sub")).unwrap();
        for f in [
            "b.md",
            "a.TXT",
            "sub/c.jsonl",
            "sub/result.json",
            "other.json",
            "image.png",
            "conversations.json",
        ] {
            std::fs::write(root.join(f), "x").unwrap();
        }
        let import = Import::new(&[root.to_owned()]).unwrap();
        let found: Vec<_> = import
            .files
            .iter()
            .map(|(p, k, _)| (p.strip_prefix(root).unwrap().to_owned(), *k))
            .collect();
        assert_eq!(
            found,
            [
                ("a.TXT", Kind::Text),
                ("b.md", Kind::Text),
                ("conversations.json", Kind::FoundExport),
                ("sub/c.jsonl", Kind::Jsonl),
                ("sub/result.json", Kind::FoundExport),
            ]
            .map(|(p, k)| (PathBuf::from(p), k))
        );
        assert_eq!((import.files(), import.bytes()), (5, 5));
    }

    #[test]
    fn a_named_file_of_no_kind_or_a_missing_path_is_an_error_before_anything_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let png = dir.path().join("image.png");
        std::fs::write(&png, "x").unwrap();
        let e = Import::new(std::slice::from_ref(&png)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: not a .md, .markdown, .txt, .jsonl or .json (chat export) file",
                png.display()
            )
        );
        let missing = dir.path().join("missing.md");
        let e = Import::new(std::slice::from_ref(&missing)).unwrap_err();
        assert!(matches!(e, ImportError::Read { .. }), "{e:?}");
        assert!(
            e.to_string()
                .starts_with(&format!("{}: ", missing.display()))
        );
    }

    #[test]
    fn notices_read_as_the_cli_prints_them() {
        let path = PathBuf::from("a.jsonl");
        let line = Notice::BadLine {
            path: path.clone(),
            line: 3,
            why: "content is empty".into(),
        };
        assert_eq!(line.to_string(), "skipped a.jsonl:3: content is empty");
        let out = Notice::LeftOut {
            path: path.clone(),
            why: "not a chat export".into(),
        };
        assert_eq!(
            out.to_string(),
            "note: a.jsonl: not a chat export; left out"
        );
        let bad = Notice::Unreadable {
            path,
            why: "not UTF-8 text".into(),
        };
        assert_eq!(bad.to_string(), "error: a.jsonl: not UTF-8 text; skipped");
    }
}
