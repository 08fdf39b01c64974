//! `docs_read`: one embedded document, or one section of it. Looks the path up in the
//! embedded docs only, so no path can reach the filesystem.

use serde::Serialize;

use super::Doc;
use crate::by_similarity;
use crate::{Limits, ToolError, ToolSchema, tool};

/// Longest part of a requested path quoted back in an error.
const QUOTE_CHARS: usize = 120;

/// The answer of `docs_read`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct DocsRead {
    /// Что прочитано: файл (`tools/files.md`) или раздел (`tools/files.md#file_read`)
    #[schema(
        description_en = "What was read: a file (`tools/files.md`) or a section (`tools/files.md#file_read`)"
    )]
    pub path: String,
    /// Заголовок документа
    #[schema(description_en = "The document's title")]
    pub title: String,
    /// Заголовок раздела, если прочитан раздел
    #[schema(description_en = "The section's heading, when a section was read")]
    pub heading: Option<String>,
    /// Текст (markdown)
    #[schema(description_en = "The text (markdown)")]
    pub content: String,
    /// true, если текст обрезан лимитом (maxReadBytes); тогда читай по разделам
    #[schema(
        description_en = "True when the cap (maxReadBytes) cut the text; read it section by section then"
    )]
    pub truncated: bool,
    /// Полный размер файла или раздела в байтах
    #[schema(description_en = "Full size of the file or section in bytes")]
    pub size: u64,
    /// Подсказка, если текст обрезан
    #[schema(description_en = "A hint, when the text was cut")]
    pub note: Option<String>,
}

/// Reads an embedded document or one of its sections.
#[tool(
    name = "docs_read",
    title_ru = "Чтение документации",
    title_en = "Read the docs",
    description_ru = "Читает документацию Klaw: файл целиком (tools/files.md) или один раздел (tools/files.md#file_read — по якорю или тексту заголовка). Пути — как в docs_list и docs_search.",
    description_en = "Reads Klaw's documentation: a whole file (tools/files.md) or one section (tools/files.md#file_read, by anchor or heading text). Paths as docs_list and docs_search give them.",
    read_only,
    idempotent
)]
pub async fn docs_read(
    limits: Limits,
    /// Файл документации или раздел: tools/files.md, tools/files.md#заголовок
    #[arg(description_en = "A docs file or a section: tools/files.md, tools/files.md#heading")]
    path: String,
) -> Result<DocsRead, ToolError> {
    read(super::embedded(), &path, limits.max_read_bytes)
}

/// `docs_read` over `docs`, at most `cap` bytes of text.
pub fn read(docs: &[(&str, &str)], requested: &str, cap: u64) -> Result<DocsRead, ToolError> {
    if requested.chars().any(char::is_control) {
        return Err(ToolError::invalid_arguments(
            "/path",
            "contains control characters; give a docs path such as tools/files.md",
        ));
    }
    let (file, fragment) = match requested.split_once('#') {
        Some((f, h)) => (f, Some(h)),
        None => (requested, None),
    };
    let doc = find(docs, file).ok_or_else(|| not_found(docs, requested, file))?;
    let doc = Doc::new(doc.0, doc.1);
    let (path, heading, text) = match fragment.map(str::trim).filter(|h| !h.is_empty()) {
        None => (doc.path.to_owned(), None, doc.text),
        Some(wanted) => {
            let i = doc
                .heading(wanted)
                .ok_or_else(|| no_heading(&doc, wanted))?;
            let h = &doc.headings[i];
            (
                format!("{}#{}", doc.path, h.anchor),
                Some(h.text.clone()),
                doc.section(i),
            )
        }
    };
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let (content, truncated) = cut(text, cap);
    let note = truncated.then(|| {
        format!(
            "the text is longer than maxReadBytes ({cap} bytes) and was cut; read one section at a time (docs_list shows them), e.g. {}#{}",
            doc.path,
            doc.headings
                .iter()
                .find(|h| h.level == 2)
                .map_or("heading", |h| h.anchor.as_str())
        )
    });
    Ok(DocsRead {
        path,
        title: doc.title().to_owned(),
        heading,
        content: content.to_owned(),
        truncated,
        size: text.len() as u64,
        note,
    })
}

/// The document `file` names: as listed (`tools/files.md`), under `doc/` or `./`, with
/// or without `.md`.
fn find<'a>(docs: &[(&'a str, &'a str)], file: &str) -> Option<(&'a str, &'a str)> {
    let mut f = file.trim();
    loop {
        let before = f;
        f = f.strip_prefix("./").unwrap_or(f);
        f = f.strip_prefix("doc/").unwrap_or(f);
        if f == before {
            break;
        }
    }
    let with_md = format!("{f}.md");
    docs.iter()
        .find(|(p, _)| *p == f)
        .or_else(|| docs.iter().find(|(p, _)| *p == with_md))
        .copied()
}

/// At most `cap` bytes of `text`, cut at the last line break that fits (else at a
/// character boundary); whether it was cut.
fn cut(text: &str, cap: usize) -> (&str, bool) {
    if text.len() <= cap {
        return (text, false);
    }
    let mut end = cap;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let head = &text[..end];
    (head.rfind('\n').map_or(head, |i| &head[..=i]), true)
}

/// The start of `s`, at most [`QUOTE_CHARS`] characters, for an error message.
fn quote(s: &str) -> String {
    if s.chars().count() <= QUOTE_CHARS {
        s.to_owned()
    } else {
        s.chars().take(QUOTE_CHARS).chain(['…']).collect()
    }
}

/// Up to three of `candidates` close to `wanted` (compared on its first
/// [`QUOTE_CHARS`] characters).
fn close<'a>(wanted: &str, candidates: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let wanted: String = wanted.chars().take(QUOTE_CHARS).collect();
    by_similarity(&wanted, candidates)
        .into_iter()
        .filter(|(score, _)| *score > 0.7)
        .take(3)
        .map(|(_, c)| c)
        .collect()
}

fn backticked(items: &[&str]) -> String {
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn not_found(docs: &[(&str, &str)], requested: &str, file: &str) -> ToolError {
    let paths = || docs.iter().map(|(p, _)| *p);
    let near = close(
        file.trim_start_matches("./").trim_start_matches("doc/"),
        paths(),
    );
    let hint = if near.is_empty() {
        format!(
            "; the docs are: {}",
            backticked(&paths().collect::<Vec<_>>())
        )
    } else {
        format!("; did you mean {}?", backticked(&near))
    };
    ToolError::not_found(format!(
        "no such doc `{}`{hint} (paths are relative to doc/, as docs_list shows them)",
        quote(requested)
    ))
}

fn no_heading(doc: &Doc<'_>, wanted: &str) -> ToolError {
    let mut names: Vec<&str> = Vec::new();
    for h in &doc.headings {
        names.push(&h.anchor);
        names.push(&h.text);
    }
    let near = close(wanted, names.into_iter());
    let hint = if near.is_empty() {
        let top: Vec<&str> = doc
            .headings
            .iter()
            .filter(|h| h.level <= 2)
            .map(|h| h.anchor.as_str())
            .collect();
        format!("; its sections: {}", backticked(&top))
    } else {
        format!("; did you mean {}?", backticked(&near))
    };
    ToolError::not_found(format!(
        "no heading `{}` in {}{hint}",
        quote(wanted),
        doc.path
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCS: &[(&str, &str)] = &[
        (
            "a.md",
            "# A\n\nOne.\n\n## Atomic writes\n\nTwo.\n\n### Детали\n\nТри.\n\n## Next\n\nFour.\n",
        ),
        ("tools/files.md", "# Files\n"),
    ];

    #[test]
    fn path_forms() {
        for p in ["a.md", "doc/a.md", "./a.md", "./doc/a.md", " a.md ", "a"] {
            let r = read(DOCS, p, 1 << 20).unwrap();
            assert_eq!((r.path.as_str(), r.truncated), ("a.md", false), "{p}");
            assert_eq!(r.content, DOCS[0].1);
        }
    }

    #[test]
    fn sections_by_anchor_or_text() {
        for p in [
            "a.md#atomic-writes",
            "a.md#Atomic writes",
            "a.md#ATOMIC WRITES",
        ] {
            let r = read(DOCS, p, 1 << 20).unwrap();
            assert_eq!(r.path, "a.md#atomic-writes");
            assert_eq!(r.heading.as_deref(), Some("Atomic writes"));
            assert_eq!(
                r.content,
                "## Atomic writes\n\nTwo.\n\n### Детали\n\nТри.\n\n"
            );
        }
        let r = read(DOCS, "a.md#детали", 1 << 20).unwrap();
        assert_eq!(r.content, "### Детали\n\nТри.\n\n");
        let e = read(DOCS, "a.md#atomic-write", 1 << 20).unwrap_err();
        assert!(e.is_not_found());
        assert!(
            e.message().contains("did you mean `atomic-writes`"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn the_cap_cuts_at_a_line_and_says_so() {
        let r = read(DOCS, "a.md", 20).unwrap();
        assert!(r.truncated);
        assert_eq!(r.content, "# A\n\nOne.\n\n");
        assert_eq!(r.size, DOCS[0].1.len() as u64);
        assert!(r.note.unwrap().contains("a.md#atomic-writes"));
    }
}
