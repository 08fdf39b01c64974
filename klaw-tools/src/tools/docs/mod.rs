//! Docs: the project's own documentation (`doc/**/*.md`), shipped inside the binary and
//! searchable by the model: `docs_search` (hybrid search over an index of its sections),
//! `docs_read` (a file or one section) and `docs_list` (every file with its headings).
//! See `doc/tools/docs.md`.
//!
//! The files are embedded at build time (`build.rs`); `docs_read` and `docs_list` read
//! that embedded copy only and never touch the filesystem. `docs_search` uses its own
//! index, `docs.sqlite` in the data directory, kept in step with the embedded docs by
//! [`sync`].

pub mod index;
pub mod list;
pub mod markdown;
pub mod read;
pub mod search;

pub use index::{DOCS_DB, DocsIndex, DocsIndexInfo, SyncReport, sync, sync_context};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/docs.rs"));
}

use markdown::Heading;

/// The embedded documentation: `(path relative to doc/, text)`, sorted by path.
pub fn embedded() -> &'static [(&'static str, &'static str)] {
    embedded::DOCS
}

/// One document with its headings parsed.
#[derive(Debug, Clone)]
pub struct Doc<'a> {
    /// Path relative to `doc/`, with `/`.
    pub path: &'a str,
    /// The text.
    pub text: &'a str,
    /// Its headings, in order.
    pub headings: Vec<Heading>,
}

impl<'a> Doc<'a> {
    /// Parses one document.
    pub fn new(path: &'a str, text: &'a str) -> Self {
        Self {
            path,
            text,
            headings: markdown::headings(text),
        }
    }

    /// The first `#` heading, else the path.
    pub fn title(&self) -> &str {
        markdown::title(&self.headings).unwrap_or(self.path)
    }

    /// The heading `wanted` names: its anchor (`atomic-writes`), or its text ignoring
    /// case and backticks (`Atomic writes`).
    pub fn heading(&self, wanted: &str) -> Option<usize> {
        let w = wanted.trim();
        let (slug, plain) = (markdown::slug(w), markdown::plain(w));
        self.headings
            .iter()
            .position(|h| h.anchor == w || h.anchor == slug)
            .or_else(|| {
                self.headings
                    .iter()
                    .position(|h| markdown::plain(&h.text) == plain)
            })
    }

    /// The text of the section under heading `i`, heading included, up to the next
    /// heading of the same or a higher level.
    pub fn section(&self, i: usize) -> &'a str {
        let start = self.headings.get(i).map_or(0, |h| h.start);
        let end = markdown::section_end(&self.headings, i, self.text.len());
        self.text.get(start..end).unwrap_or_default()
    }
}

/// Every embedded document, parsed.
pub fn all() -> Vec<Doc<'static>> {
    embedded().iter().map(|(p, t)| Doc::new(p, t)).collect()
}
