//! The docs index: `docs.sqlite` in the data directory, one chunk set per section, kept in
//! step with the embedded docs.
//!
//! Each section (from a heading to the next heading of any level) is chunked on its own
//! and stored with the source `path#anchor` (text before the first heading: `path`), so a
//! search hit names the section `docs_read` opens. Each chunk begins with a context line,
//! `path: Title › Section › Subsection`, which the search sees and the results leave out.
//!
//! Each file is one document of [`Index::sync`], its version the SHA-256 of its text (and
//! of this chunking's format): [`sync`] re-indexes only new and changed files and removes
//! deleted ones, recording a file's hash only once its chunks are stored (an interrupted
//! run is finished by the next one).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use sha2::{Digest, Sha256};

use super::Doc;
use crate::ToolContext;
pub use crate::tools::memory::SyncReport;
use crate::tools::memory::{Chunk, ChunkOptions, Index, Memory, MemoryError, SyncDoc};

/// The docs index's file in the data directory.
pub const DOCS_DB: &str = "docs.sqlite";

/// Part of every file's hash: changing how docs are chunked re-indexes them all.
const FORMAT: &str = "klaw-docs-index v1";

/// The hash a file is recorded with: SHA-256, hex.
fn file_hash(text: &str) -> String {
    Sha256::digest(format!("{FORMAT}\n{text}").as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The chunks of one document as `(source, content)`: each section chunked on its own,
/// each chunk prefixed with the section's context line.
pub fn chunks(path: &str, text: &str) -> Vec<(String, String)> {
    let doc = Doc::new(path, text);
    let opts = ChunkOptions::default();
    let mut out = Vec::new();
    let mut push = |source: String, context: String, body: &str| {
        for c in opts.chunk(body) {
            out.push((source.clone(), format!("{context}\n\n{c}")));
        }
    };
    let first = doc.headings.first().map_or(text.len(), |h| h.start);
    push(
        path.to_owned(),
        format!("{path}: {}", doc.title()),
        text.get(..first).unwrap_or_default(),
    );
    // The headings above the current one, by level.
    let mut trail: Vec<(u8, &str)> = Vec::new();
    for (i, h) in doc.headings.iter().enumerate() {
        trail.retain(|(level, _)| *level < h.level);
        trail.push((h.level, &h.text));
        let end = doc.headings.get(i + 1).map_or(text.len(), |n| n.start);
        let names: Vec<&str> = trail.iter().map(|(_, t)| *t).collect();
        push(
            format!("{path}#{}", h.anchor),
            format!("{path}: {}", names.join(" › ")),
            text.get(h.start..end).unwrap_or_default(),
        );
    }
    out
}

/// A stored chunk's text without its context line.
pub fn body(content: &str) -> &str {
    content.split_once("\n\n").map_or(content, |(_, b)| b)
}

/// Brings `index` in step with `docs` (`(path, text)` pairs): (re-)indexes new and
/// changed files, removes deleted ones; `force` re-indexes everything from scratch. The
/// report counts files.
pub fn sync(index: &Index, docs: &[(&str, &str)], force: bool) -> Result<SyncReport, MemoryError> {
    sync_reporting(index, docs, force, &crate::Progress::default())
}

/// [`sync`], reporting each file it indexes to `progress`.
pub fn sync_reporting(
    index: &Index,
    docs: &[(&str, &str)],
    force: bool,
    progress: &crate::Progress,
) -> Result<SyncReport, MemoryError> {
    let docs: Vec<SyncDoc> = docs
        .iter()
        .map(|(path, text)| SyncDoc {
            key: (*path).to_owned(),
            version: file_hash(text),
            chunks: chunks(path, text)
                .into_iter()
                .map(|(source, content)| Chunk { source, content })
                .collect(),
        })
        .collect();
    index.sync_reporting(&docs, force, &|done, total, key| {
        progress.report(done as u64, Some(total as u64), format!("indexing {key}"));
    })
}

/// What [`inspect`] finds in a docs index, compared with the docs it would be synced to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocsIndexInfo {
    /// Chunks stored.
    pub chunks: usize,
    /// Files of the docs.
    pub files: usize,
    /// Files of the docs not indexed, or indexed from other text.
    pub stale: usize,
    /// Files indexed that are no longer among the docs.
    pub removed: usize,
}

impl DocsIndexInfo {
    /// True when a [`sync`] would change nothing.
    pub fn is_up_to_date(&self) -> bool {
        self.stale == 0 && self.removed == 0
    }
}

/// Looks into the docs index at `path` read-only (no model, nothing written) and compares
/// what it was built from with `docs` (`(path, text)` pairs, e.g. [`super::embedded`]):
/// `None` when the file does not exist.
pub fn inspect(path: &Path, docs: &[(&str, &str)]) -> Result<Option<DocsIndexInfo>, MemoryError> {
    let Some(info) = Index::inspect(path)? else {
        return Ok(None);
    };
    let (stale, removed) = compare(&info.synced, docs);
    Ok(Some(DocsIndexInfo {
        chunks: info.chunks,
        files: docs.len(),
        stale,
        removed,
    }))
}

/// How the recorded `{path: hash}` map differs from `docs`: files to (re-)index, files
/// to remove.
fn compare(known: &BTreeMap<String, String>, docs: &[(&str, &str)]) -> (usize, usize) {
    let stale = docs
        .iter()
        .filter(|(p, text)| known.get(*p) != Some(&file_hash(text)))
        .count();
    let removed = known
        .keys()
        .filter(|k| !docs.iter().any(|(p, _)| p == k))
        .count();
    (stale, removed)
}

/// The docs index of one [`ToolContext`], synced with the embedded docs on first use.
/// Tools reach it with `ctx.shared_state::<DocsIndex>()`.
#[derive(Debug, Default)]
pub struct DocsIndex {
    synced: Mutex<bool>,
}

impl DocsIndex {
    /// The index, brought in step with the embedded docs if this is its first use here.
    /// Blocks (the model, SQLite); concurrent first calls wait for one sync.
    pub fn ready(&self, ctx: &ToolContext) -> Result<Arc<Index>, MemoryError> {
        let mut synced = self.synced.lock().unwrap_or_else(PoisonError::into_inner);
        let index = ctx.shared_state::<Memory>().index(ctx, DOCS_DB)?;
        if !*synced {
            let r = sync(&index, super::embedded(), false)?;
            tracing::info!(
                indexed = r.indexed,
                unchanged = r.unchanged,
                removed = r.removed,
                chunks = r.chunks,
                "docs index in step"
            );
            *synced = true;
        }
        Ok(index)
    }

    /// Syncs now (`force`: re-indexes everything), whether or not it was synced before.
    pub fn sync(&self, ctx: &ToolContext, force: bool) -> Result<SyncReport, MemoryError> {
        let mut synced = self.synced.lock().unwrap_or_else(PoisonError::into_inner);
        let index = ctx.shared_state::<Memory>().index(ctx, DOCS_DB)?;
        let r = sync_reporting(&index, super::embedded(), force, &ctx.progress())?;
        *synced = true;
        Ok(r)
    }
}

/// Syncs the docs index of `ctx` with the embedded docs now (`klaw-engine docs index`),
/// reporting each file it indexes to the context's progress sink.
pub fn sync_context(ctx: &ToolContext, force: bool) -> Result<SyncReport, MemoryError> {
    ctx.shared_state::<DocsIndex>().sync(ctx, force)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_section_is_its_own_source_with_a_context_line() {
        let text = "# Files\n\nIntro.\n\n## Paths\n\nRelative.\n\n### Symlinks\n\nFollowed beneath.\n\n## Limits\n\nSmall.\n";
        let got = chunks("tools/files.md", text);
        let sources: Vec<&str> = got.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(
            sources,
            [
                "tools/files.md#files",
                "tools/files.md#paths",
                "tools/files.md#symlinks",
                "tools/files.md#limits"
            ]
        );
        assert_eq!(
            got[2].1,
            "tools/files.md: Files › Paths › Symlinks\n\n### Symlinks\n\nFollowed beneath."
        );
        assert_eq!(
            got[3].1.lines().next(),
            Some("tools/files.md: Files › Limits")
        );
        assert_eq!(body(&got[2].1), "### Symlinks\n\nFollowed beneath.");
    }

    #[test]
    fn compare_counts_new_changed_and_removed_files() {
        let docs = [("a.md", "A"), ("b.md", "B"), ("c.md", "C")];
        let known: BTreeMap<String, String> = [
            ("a.md", file_hash("A")),
            ("b.md", file_hash("B, before an edit")),
            ("gone.md", file_hash("G")),
        ]
        .into_iter()
        .map(|(p, h)| (p.to_owned(), h))
        .collect();
        // b.md changed and c.md is new: two to index; gone.md to remove.
        assert_eq!(compare(&known, &docs), (2, 1));
        let all: BTreeMap<String, String> = docs
            .iter()
            .map(|(p, t)| ((*p).to_owned(), file_hash(t)))
            .collect();
        assert_eq!(compare(&all, &docs), (0, 0));
        assert_eq!(compare(&BTreeMap::new(), &docs), (3, 0));
    }

    #[test]
    fn text_before_the_first_heading_has_the_file_as_source() {
        let got = chunks("a.md", "Preface.\n\n# A\n\nBody.\n");
        assert_eq!(got[0], ("a.md".into(), "a.md: A\n\nPreface.".into()));
        assert_eq!(got[1].0, "a.md#a");
    }
}
