//! The docs index: `docs.sqlite` in the data directory, one chunk set per section, kept in
//! step with the embedded docs.
//!
//! Each section (from a heading to the next heading of any level) is chunked on its own
//! and stored with the source `path#anchor` (text before the first heading: `path`), so a
//! search hit names the section `docs_read` opens. Each chunk begins with a context line,
//! `path: Title › Section › Subsection`, which the search sees and the results leave out.
//!
//! What the index was built from is kept in the store's meta (`docs:files`, a JSON map of
//! path to SHA-256 of the text): [`sync`] re-indexes only new and changed files and
//! removes deleted ones, one transaction per file, recording a file's hash only once
//! its chunks are stored (an interrupted run is finished by the next one).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::Doc;
use crate::ToolContext;
use crate::tools::memory::chunk::{ChunkOptions, chunk};
use crate::tools::memory::store::{self, NewChunk, StoreError, content_hash};
use crate::tools::memory::{Index, Memory, MemoryError};

/// The docs index's file in the data directory.
pub const DOCS_DB: &str = "docs.sqlite";

/// The meta key of the `{path: hash}` map.
const META_KEY: &str = "docs:files";

/// Part of every file's hash: changing how docs are chunked re-indexes them all.
const FORMAT: &str = "klaw-docs-index v1";

/// Chunks embedded per model call.
const EMBED_BATCH: usize = 32;

/// What [`sync`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SyncReport {
    /// Files (re-)indexed: new or changed (or all, when forced).
    pub indexed: usize,
    /// Files already indexed as they are.
    pub unchanged: usize,
    /// Files no longer in the docs, removed from the index.
    pub removed: usize,
    /// Chunks stored for the (re-)indexed files.
    pub chunks: usize,
    /// How long it took.
    pub elapsed: Duration,
}

/// The hash a file is recorded with.
fn file_hash(text: &str) -> String {
    content_hash(&format!("{FORMAT}\n{text}"))
}

/// The chunks of one document as `(source, content)`: each section chunked on its own,
/// each chunk prefixed with the section's context line.
pub fn chunks(path: &str, text: &str) -> Vec<(String, String)> {
    let doc = Doc::new(path, text);
    let opts = ChunkOptions::default();
    let mut out = Vec::new();
    let mut push = |source: String, context: String, body: &str| {
        for c in chunk(body, &opts) {
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
/// changed files, removes deleted ones; `force` re-indexes everything from scratch.
pub fn sync(index: &Index, docs: &[(&str, &str)], force: bool) -> Result<SyncReport, MemoryError> {
    let started = Instant::now();
    let mut report = SyncReport::default();
    let stored = index.store().meta(META_KEY)?;
    let mut known: BTreeMap<String, String> = match stored.as_deref().map(serde_json::from_str) {
        Some(Ok(map)) if !force => map,
        // Forced, never indexed, or a record that cannot be read: start from nothing.
        _ => {
            let mut store = index.store();
            store.remove_source_prefix("")?;
            store.set_meta(META_KEY, "{}")?;
            BTreeMap::new()
        }
    };
    let record = |known: &BTreeMap<String, String>| -> Result<(), MemoryError> {
        let json = serde_json::to_string(known).unwrap_or_else(|_| "{}".into());
        index.store().set_meta(META_KEY, &json)?;
        Ok(())
    };

    for (path, text) in docs {
        let hash = file_hash(text);
        if known.get(*path) == Some(&hash) {
            report.unchanged += 1;
            continue;
        }
        remove_file(index, path)?;
        let mut pieces = chunks(path, text);
        // Batches of similar length: the model pads a batch to its longest text.
        pieces.sort_by_key(|(_, c)| c.len());
        let mut new = Vec::with_capacity(pieces.len());
        for batch in pieces.chunks(EMBED_BATCH) {
            let texts: Vec<&str> = batch.iter().map(|(_, c)| c.as_str()).collect();
            let vectors = index.embedder().embed_passages(&texts)?;
            for ((source, content), vector) in batch.iter().zip(vectors) {
                new.push(NewChunk {
                    content: content.clone(),
                    source: source.clone(),
                    created_at: None,
                    vector,
                });
            }
        }
        if !new.is_empty() {
            index.store().insert(&new)?;
        }
        report.indexed += 1;
        report.chunks += new.len();
        known.insert((*path).to_owned(), hash);
        record(&known)?;
    }

    let gone: Vec<String> = known
        .keys()
        .filter(|k| !docs.iter().any(|(p, _)| p == k))
        .cloned()
        .collect();
    for path in gone {
        remove_file(index, &path)?;
        known.remove(&path);
        record(&known)?;
        report.removed += 1;
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

/// Removes a file's chunks: the text before its first heading and every section.
fn remove_file(index: &Index, path: &str) -> Result<usize, MemoryError> {
    let mut store = index.store();
    Ok(store.remove_source(path)? + store.remove_source_prefix(&format!("{path}#"))?)
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
pub fn inspect(path: &Path, docs: &[(&str, &str)]) -> Result<Option<DocsIndexInfo>, StoreError> {
    let Some(info) = store::inspect(path)? else {
        return Ok(None);
    };
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(2))?;
    let recorded: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = ?1", [META_KEY], |r| {
            r.get(0)
        })
        .optional()?;
    // A record that cannot be read counts as none, as [`sync`] treats it.
    let known: BTreeMap<String, String> = recorded
        .and_then(|json| serde_json::from_str(&json).ok())
        .unwrap_or_default();
    let (stale, removed) = compare(&known, docs);
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
        let r = sync(&index, super::embedded(), force)?;
        *synced = true;
        Ok(r)
    }
}

/// Syncs the docs index of `ctx` with the embedded docs now (`klaw-engine docs index`).
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
