//! `file_edit`: replace text, or a range of lines, in place and atomically.

use std::io::Read;

use serde::Serialize;

use super::confine::{Confined, blocking, confine};
use super::read::{looks_binary, open_regular};
use super::write::{prepare, replace, too_large};
use crate::{Limits, ToolError, ToolSchema, Workspace, tool};

/// The answer of `file_edit`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileEdited {
    /// Путь, как он был запрошен
    #[schema(description_en = "The path as requested")]
    pub path: String,
    /// Сколько замен сделано (для диапазона строк — сколько строк заменено)
    #[schema(
        description_en = "How many replacements were made (for a line range: how many lines were replaced)"
    )]
    pub changes: u64,
    /// Размер файла после правки, в байтах
    #[schema(description_en = "File size after the edit, in bytes")]
    pub size: u64,
}

/// What to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Edit {
    /// Replace `old` by `new`, everywhere or once.
    Text { old: String, new: String, all: bool },
    /// Replace lines `start..=end` (from 1) by `new`.
    Lines { start: u64, end: u64, new: String },
}

/// Edits a workspace file.
#[tool(
    name = "file_edit",
    title_ru = "Правка файла",
    title_en = "Edit a file",
    description_ru = "Точечно правит текстовый файл рабочей области, атомарно. Два способа: oldText + newText (замена текста; replaceAll = false меняет только первое вхождение) или startLine + endLine + newText (замена строк с startLine по endLine включительно, с 1). Возвращает число изменений. Ошибки: «old_text not found in file», «line range out of bounds», «edit made no changes».",
    description_en = "Makes a targeted change to a workspace text file, atomically. Two ways: oldText + newText (replace text; replaceAll = false changes the first occurrence only) or startLine + endLine + newText (replace lines startLine to endLine inclusive, from 1). Returns the number of changes. Errors: \"old_text not found in file\", \"line range out of bounds\", \"edit made no changes\".",
    destructive,
    rename_all = "camelCase"
)]
#[allow(clippy::too_many_arguments)]
pub async fn file_edit(
    ws: Workspace,
    limits: Limits,
    /// Путь к файлу относительно рабочей области
    #[arg(description_en = "Path of the file, relative to the workspace")]
    path: String,
    /// Новый текст
    #[arg(description_en = "The new text")]
    new_text: String,
    /// Заменяемый текст (точно, с пробелами и переводами строк)
    #[arg(description_en = "The text to replace (exactly, with spaces and line breaks)")]
    old_text: Option<String>,
    /// Заменить все вхождения oldText (true) или только первое (false)
    #[arg(
        default = true,
        description_en = "Replace every occurrence of oldText (true) or only the first (false)"
    )]
    replace_all: bool,
    /// Первая заменяемая строка, с 1 (вместо oldText)
    #[arg(description_en = "First line to replace, from 1 (instead of oldText)")]
    start_line: Option<u64>,
    /// Последняя заменяемая строка, включительно
    #[arg(description_en = "Last line to replace, inclusive")]
    end_line: Option<u64>,
) -> Result<FileEdited, ToolError> {
    let edit = match (old_text, start_line, end_line) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err(ToolError::invalid_arguments(
                "",
                "give either oldText or startLine and endLine, not both",
            ));
        }
        (Some(old), None, None) => {
            if old.is_empty() {
                return Err(ToolError::invalid_arguments(
                    "/oldText",
                    "empty; give the exact text to replace",
                ));
            }
            Edit::Text {
                old,
                new: new_text,
                all: replace_all,
            }
        }
        (None, Some(start), Some(end)) => Edit::Lines {
            start,
            end,
            new: new_text,
        },
        (None, Some(_), None) => {
            return Err(ToolError::invalid_arguments(
                "/endLine",
                "required with startLine",
            ));
        }
        (None, None, Some(_)) => {
            return Err(ToolError::invalid_arguments(
                "/startLine",
                "required with endLine",
            ));
        }
        (None, None, None) => {
            return Err(ToolError::invalid_arguments(
                "",
                "give oldText (text replacement) or startLine and endLine (line replacement)",
            ));
        }
    };
    let c = confine(&ws, &path)?;
    let max = limits.max_file_size_bytes;
    blocking(move || edit_file(&c, &edit, max)).await
}

fn edit_file(c: &Confined, edit: &Edit, max: u64) -> Result<FileEdited, ToolError> {
    let (file, size) = open_regular(c)?;
    if size > max {
        return Err(ToolError::failed(format!(
            "file is {size} bytes, over the limit of {max} bytes (maxFileSizeBytes) that file_edit works on"
        )));
    }
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| c.err(e))?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64, max));
    }
    if looks_binary(&bytes[..bytes.len().min(8192)]) {
        return Err(ToolError::failed(format!(
            "binary file: {}; file_edit changes text only",
            c.shown
        )));
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        ToolError::failed(format!(
            "not UTF-8 text: {}; file_edit changes text only",
            c.shown
        ))
    })?;
    let (edited, changes) = apply(&text, edit)?;
    if edited == text {
        return Err(ToolError::failed("edit made no changes"));
    }
    let new_size = edited.len() as u64;
    if new_size > max {
        return Err(too_large(new_size, max));
    }
    let (target, _) = prepare(c)?;
    replace(&target, edited.as_bytes())?;
    Ok(FileEdited {
        path: c.shown.clone(),
        changes,
        size: new_size,
    })
}

/// Applies `edit` to `text`, returning the new text and the number of changes.
pub(crate) fn apply(text: &str, edit: &Edit) -> Result<(String, u64), ToolError> {
    match edit {
        Edit::Text { old, new, all } => {
            let found = text.matches(old.as_str()).count() as u64;
            if found == 0 {
                return Err(ToolError::failed("old_text not found in file"));
            }
            if *all {
                Ok((text.replace(old.as_str(), new), found))
            } else {
                Ok((text.replacen(old.as_str(), new, 1), 1))
            }
        }
        Edit::Lines { start, end, new } => {
            // Line i (from 1) is text[bounds[i-1]..bounds[i]], with its newline.
            let mut bounds = vec![0_usize];
            bounds.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
            if bounds.last() != Some(&text.len()) {
                bounds.push(text.len());
            }
            let lines = (bounds.len() - 1) as u64;
            if *start == 0 || end < start || *end > lines {
                return Err(ToolError::failed(format!(
                    "line range out of bounds: lines {start}..{end} of a file with {lines} lines"
                )));
            }
            let (Ok(s), Ok(e)) = (usize::try_from(*start), usize::try_from(*end)) else {
                return Err(ToolError::failed("line range out of bounds"));
            };
            let from = bounds[s - 1];
            let to = bounds[e];
            let replaced_had_newline = text[..to].ends_with('\n');
            let mut out = String::with_capacity(text.len() + new.len());
            out.push_str(&text[..from]);
            out.push_str(new);
            if replaced_had_newline && !new.is_empty() && !new.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&text[to..]);
            Ok((out, end - start + 1))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(start: u64, end: u64, new: &str) -> Edit {
        Edit::Lines {
            start,
            end,
            new: new.into(),
        }
    }

    #[test]
    fn text_replacement_counts_occurrences() {
        let e = Edit::Text {
            old: "a".into(),
            new: "b".into(),
            all: true,
        };
        assert_eq!(apply("a-a-a", &e).unwrap(), ("b-b-b".into(), 3));
        let e = Edit::Text {
            old: "a".into(),
            new: "b".into(),
            all: false,
        };
        assert_eq!(apply("a-a-a", &e).unwrap(), ("b-a-a".into(), 1));
        let e = Edit::Text {
            old: "zz".into(),
            new: "b".into(),
            all: true,
        };
        assert_eq!(
            apply("a", &e).unwrap_err().message(),
            "old_text not found in file"
        );
    }

    #[test]
    fn line_ranges_keep_line_endings() {
        let t = "one\ntwo\nthree\n";
        assert_eq!(
            apply(t, &lines(2, 2, "TWO")).unwrap().0,
            "one\nTWO\nthree\n"
        );
        assert_eq!(
            apply(t, &lines(1, 2, "X\n")).unwrap(),
            ("X\nthree\n".into(), 2)
        );
        assert_eq!(apply(t, &lines(2, 3, "")).unwrap().0, "one\n");
        assert_eq!(apply("a\nb", &lines(2, 2, "c")).unwrap().0, "a\nc");
        for (s, e) in [(0, 1), (2, 1), (1, 4), (4, 4)] {
            assert!(
                apply(t, &lines(s, e, "x"))
                    .unwrap_err()
                    .message()
                    .starts_with("line range out of bounds"),
                "{s}..{e}"
            );
        }
        assert!(apply("", &lines(1, 1, "x")).is_err());
    }
}
