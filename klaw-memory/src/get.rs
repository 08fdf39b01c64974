//! `memory_get`: a whole document (or conversation) of memory, read back in order and
//! windowed by lines like `file_read`.
//!
//! Memory keeps chunks, not the texts they were cut from, so a document is rebuilt from
//! its chunks in the order they were stored: where a chunk begins with the words the one
//! before it ended with (the overlap `chunk.rs` carries), those words are kept once.
//! What chunking does not keep is not brought back: runs of blank lines come back as
//! one, trailing spaces are gone, and the line breaks inside a paragraph too long for
//! one chunk come back as spaces (and, with `memory.chunkOverlap` 0, its pieces
//! as paragraphs of their own). A chunk whose exact text another source stored first
//! is stored once, under that source, and is missing here.
//!
//! A conversation's turns are stored one source each, `<name>#<turn id>`: the source
//! `<name>` gives them all, in time order, one turn a line.

use serde::Serialize;

use super::index::{Memory, blocking};
use super::store::StoredChunk;
use klaw_core::{Limits, ToolContext, ToolError, ToolSchema, by_similarity, tool};

/// The largest `maxLines` `memory_get` accepts.
pub const MAX_GET_LINES: u64 = 2000;

/// The answer of `memory_get`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryDocument {
    /// Источник документа, как его показывает memory_search
    #[schema(description_en = "The document's source, as memory_search shows it")]
    pub source: String,
    /// Текст возвращённых строк
    #[schema(description_en = "The text of the lines returned")]
    pub content: String,
    /// Номер первой возвращённой строки (с 1)
    #[schema(description_en = "Number of the first line returned (from 1)")]
    pub start_line: u64,
    /// Номер последней возвращённой строки
    #[schema(description_en = "Number of the last line returned")]
    pub end_line: u64,
    /// Сколько строк в документе
    #[schema(description_en = "How many lines the document has")]
    pub total_lines: u64,
    /// true, если ответ обрезан лимитом байтов (maxReadBytes)
    #[schema(description_en = "True when the byte cap (maxReadBytes) cut the answer short")]
    pub truncated: bool,
    /// С какой строки читать дальше, если документ не дочитан
    #[schema(description_en = "The startLine to continue from, when there is more")]
    pub next_start_line: Option<u64>,
    /// Из скольких фрагментов памяти собран документ
    #[schema(description_en = "How many memory chunks the document was rebuilt from")]
    pub chunks: u64,
}

/// Reads a whole document of memory.
#[tool(
    name = "memory_get",
    title_ru = "Документ из памяти",
    title_en = "Get a document from memory",
    description_ru = "Возвращает целиком документ (или беседу) из долговременной памяти, а не отдельные фрагменты, как memory_search: по source (источник из результатов memory_search; имя импортированной беседы даёт все её реплики по порядку) или по chunkId (фрагмент из результатов memory_search: его документ). Читает окно строк (startLine, maxLines); если есть ещё, продолжи с nextStartLine. Документ собран из фрагментов: пустые строки подряд и пробелы в концах строк не сохраняются.",
    description_en = "Returns a whole document (or conversation) from long-term memory rather than the single chunks memory_search gives: by source (a source from memory_search's results; an imported conversation's name gives all its turns in order) or by chunkId (a chunk from memory_search's results: its document). Reads a window of lines (startLine, maxLines); when there is more, continue from nextStartLine. The document is rebuilt from its chunks: runs of blank lines and trailing spaces are not kept.",
    read_only,
    idempotent,
    rename_all = "camelCase"
)]
pub async fn memory_get(
    ctx: ToolContext,
    limits: Limits,
    /// Источник документа, как его показывает memory_search (или имя беседы); либо source, либо chunkId
    #[arg(
        description_en = "The document's source as memory_search shows it (or a conversation's name); give source or chunkId, not both"
    )]
    source: Option<String>,
    /// Номер фрагмента (chunkId из memory_search): вернуть его документ
    #[arg(
        minimum = 1,
        description_en = "A chunk's id (chunkId from memory_search): return its document"
    )]
    chunk_id: Option<u64>,
    /// Первая строка, с 1 (по умолчанию 1)
    #[arg(
        default = 1,
        minimum = 1,
        description_en = "First line to return, from 1"
    )]
    start_line: u64,
    /// Сколько строк вернуть, от 1 до 2000 (по умолчанию 200)
    #[arg(
        default = 200,
        minimum = 1,
        maximum = 2000,
        description_en = "How many lines to return, 1 to 2000"
    )]
    max_lines: u64,
) -> Result<MemoryDocument, ToolError> {
    let source = source.map(|s| s.trim().to_owned());
    let by = match (source, chunk_id) {
        (Some(s), None) if !s.is_empty() => By::Source(s),
        (Some(_), None) => {
            return Err(ToolError::invalid_arguments(
                "/source",
                "empty: give one from memory_search's results",
            ));
        }
        (None, Some(id)) => By::Chunk(i64::try_from(id).unwrap_or(i64::MAX)),
        (None, None) => {
            return Err(ToolError::invalid_arguments(
                "/source",
                "give source or chunkId (from memory_search's results)",
            ));
        }
        (Some(_), Some(_)) => {
            return Err(ToolError::invalid_arguments(
                "/chunkId",
                "give source or chunkId, not both",
            ));
        }
    };
    if start_line == 0 {
        return Err(ToolError::invalid_arguments(
            "/startLine",
            "lines count from 1",
        ));
    }
    if !(1..=MAX_GET_LINES).contains(&max_lines) {
        return Err(ToolError::invalid_arguments(
            "/maxLines",
            format!("must be between 1 and {MAX_GET_LINES}, got {max_lines}"),
        ));
    }
    // Nothing is created: no memory yet is nothing to find.
    if !Memory::exists(&ctx) {
        return Err(ToolError::not_found(
            "memory is empty: nothing was saved yet (memory_save, or `klaw-engine memory import`)",
        ));
    }
    let overlap = Memory::config(&ctx).chunk.overlap_tokens;
    let cap = usize::try_from(limits.max_read_bytes).unwrap_or(usize::MAX);
    let memory = ctx.shared_state::<Memory>();
    blocking(move || {
        let index = memory.memory(&ctx)?;
        let store = index.store();
        let source = match by {
            By::Source(s) => s,
            By::Chunk(id) => store
                .source_of(id)
                .map_err(|e| ToolError::failed(e.to_string()))?
                .ok_or_else(|| {
                    ToolError::not_found(format!(
                        "no chunk {id} in memory: use a chunkId from memory_search's results"
                    ))
                })?,
        };
        let db = |e: super::store::StoreError| ToolError::failed(e.to_string());
        let mut chunks = store.chunks_of(&source, false).map_err(db)?;
        let mut joiner = "\n\n";
        if chunks.is_empty() {
            // a conversation's (or a file's) name: its turns (sections), in time order
            chunks = store.chunks_of(&source, true).map_err(db)?;
            joiner = "\n";
        }
        if chunks.is_empty() {
            let sources = store.sources().map_err(db)?;
            return Err(unknown(&source, &sources));
        }
        drop(store);
        let text = rebuild(&chunks, overlap, joiner);
        window(source, &text, chunks.len(), start_line, max_lines, cap)
    })
    .await
}

/// What `memory_get` was asked for.
enum By {
    Source(String),
    Chunk(i64),
}

/// Not found, with the closest known sources (and conversation names) as suggestions.
fn unknown(source: &str, sources: &[String]) -> ToolError {
    let mut names: Vec<&str> = sources.iter().map(String::as_str).collect();
    names.extend(
        sources
            .iter()
            .filter_map(|s| s.rsplit_once('#').map(|(n, _)| n)),
    );
    names.sort_unstable();
    names.dedup();
    let close: Vec<&str> = by_similarity(source, names.into_iter())
        .into_iter()
        .filter(|(score, _)| *score > 0.8)
        .take(3)
        .map(|(_, n)| n)
        .collect();
    let hint = if close.is_empty() {
        "use a source from memory_search's results".to_owned()
    } else {
        format!("did you mean {}?", close.join(", "))
    };
    ToolError::not_found(format!("no document `{source}` in memory: {hint}"))
}

/// The chunks' texts in order, one document per source: within a source the words a
/// chunk repeats from the end of the one before it (at most `overlap` tokens) are kept
/// once and chunks are otherwise joined by a blank line; sources are joined by `joiner`.
fn rebuild(chunks: &[StoredChunk], overlap: usize, joiner: &str) -> String {
    let mut text = String::new();
    let mut last: Option<&str> = None;
    for c in chunks {
        match last {
            None => text.push_str(&c.content),
            Some(s) if s == c.source => join(&mut text, &c.content, overlap),
            Some(_) => {
                text.push_str(joiner);
                text.push_str(&c.content);
            }
        }
        last = Some(&c.source);
    }
    text
}

/// Appends `next` to `text`, dropping the words `next` begins with that `text` ends
/// with (the longest such run of at most `overlap` tokens); without any, a blank line
/// separates them.
fn join(text: &mut String, next: &str, overlap: usize) {
    let max_chars = overlap.saturating_mul(4);
    // the words `next` begins with, each with where it ends, within the overlap's size
    let mut head: Vec<(&str, usize)> = Vec::new();
    let mut chars = 0;
    for (start, w) in words(next) {
        chars += w.chars().count() + usize::from(!head.is_empty());
        if chars > max_chars {
            break;
        }
        head.push((w, start + w.len()));
    }
    let tail: Vec<&str> = {
        let mut t: Vec<&str> = text.split_whitespace().rev().take(head.len()).collect();
        t.reverse();
        t
    };
    for k in (1..=head.len().min(tail.len())).rev() {
        let ends = &tail[tail.len() - k..];
        if ends.iter().zip(&head[..k]).all(|(a, (b, _))| a == b) {
            let (_, end) = head[k - 1];
            text.push_str(&next[end..]);
            return;
        }
    }
    text.push_str("\n\n");
    text.push_str(next);
}

/// The words of `s` (split at whitespace) with their byte offsets.
fn words(s: &str) -> impl Iterator<Item = (usize, &str)> {
    s.split_whitespace()
        .map(move |w| (w.as_ptr() as usize - s.as_ptr() as usize, w))
}

/// Lines `start..start + max` of `text`, at most `cap` bytes (always at least one line).
fn window(
    source: String,
    text: &str,
    chunks: usize,
    start: u64,
    max: u64,
    cap: usize,
) -> Result<MemoryDocument, ToolError> {
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len() as u64;
    if start > total {
        return Err(ToolError::invalid_arguments(
            "/startLine",
            format!("{start} is past the end: `{source}` has {total} lines"),
        ));
    }
    let first = usize::try_from(start - 1).unwrap_or(usize::MAX);
    let mut content = String::new();
    let mut end = start - 1;
    let mut truncated = false;
    for line in lines
        .iter()
        .skip(first)
        .take(usize::try_from(max).unwrap_or(usize::MAX))
    {
        let more = line.len() + usize::from(!content.is_empty());
        if end >= start && content.len() + more > cap {
            truncated = true;
            break;
        }
        if end >= start {
            content.push('\n');
        }
        content.push_str(line);
        end += 1;
    }
    Ok(MemoryDocument {
        source,
        content,
        start_line: start,
        end_line: end,
        total_lines: total,
        truncated,
        next_start_line: (end < total).then_some(end + 1),
        chunks: chunks as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::super::chunk::ChunkOptions;
    use super::*;

    fn stored(source: &str, texts: Vec<String>) -> Vec<StoredChunk> {
        texts
            .into_iter()
            .enumerate()
            .map(|(i, content)| StoredChunk {
                id: i as i64 + 1,
                content,
                source: source.to_owned(),
            })
            .collect()
    }

    #[test]
    fn chunks_with_overlap_rebuild_the_text() {
        let para = |n: usize| {
            (0..n)
                .map(|i| format!("word{i} слово{i}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let text = format!(
            "# Title\n\nShort intro.\nSecond line.\n\n{}\n\n{}\n\n## Part two\n\n{}\n\n```sh\nmake test\n\n\nmake lint\n```\n\nThe end.",
            para(300),
            para(40),
            para(120)
        );
        for opts in [
            ChunkOptions::default(),
            ChunkOptions {
                max_tokens: 64,
                overlap_tokens: 16,
            },
        ] {
            let chunks = opts.chunk(&text);
            assert!(chunks.len() > 3, "{opts:?}");
            let got = rebuild(&stored("doc", chunks), opts.overlap_tokens, "\n\n");
            assert_eq!(got, text, "{opts:?}");
        }
    }

    #[test]
    fn a_window_counts_lines_and_says_where_to_go_on() {
        let text = "a\nbb\nccc\ndddd";
        let w = window("s".into(), text, 1, 2, 2, 1000).unwrap();
        assert_eq!((w.content.as_str(), w.end_line), ("bb\nccc", 3));
        assert_eq!((w.total_lines, w.next_start_line), (4, Some(4)));
        let w = window("s".into(), text, 1, 1, 10, 5).unwrap();
        assert_eq!((w.content.as_str(), w.truncated), ("a\nbb", true));
        assert_eq!(w.next_start_line, Some(3));
        let e = window("s".into(), text, 1, 5, 10, 1000).unwrap_err();
        assert!(e.message().contains("past the end"), "{}", e.message());
    }
}
