//! `file_read`: a window of lines of a text file, streamed.

use std::io::Read;

use cap_std::fs::OpenOptions;
use serde::Serialize;

use super::confine::{Confined, blocking, confine, nonblocking, require_regular};
use crate::{Limits, ToolError, ToolSchema, Workspace, tool};

/// How many leading bytes decide whether a file is text.
const SNIFF_BYTES: usize = 8192;
/// Read buffer size.
const CHUNK: usize = 256 * 1024;

/// The answer of `file_read`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileRead {
    /// Путь, как он был запрошен
    #[schema(description_en = "The path as requested")]
    pub path: String,
    /// Текст прочитанных строк
    #[schema(description_en = "The text of the lines read")]
    pub content: String,
    /// Номер первой возвращённой строки (с 1)
    #[schema(description_en = "Number of the first line returned (from 1)")]
    pub start_line: u64,
    /// Номер последней возвращённой строки (0, если строк нет)
    #[schema(description_en = "Number of the last line returned (0 when none)")]
    pub end_line: u64,
    /// Сколько строк в файле
    #[schema(description_en = "How many lines the file has")]
    pub total_lines: u64,
    /// true, если ответ обрезан лимитом байтов (maxReadBytes)
    #[schema(description_en = "True when the byte cap (maxReadBytes) cut the answer short")]
    pub truncated: bool,
    /// С какой строки читать дальше, если файл не дочитан
    #[schema(description_en = "The startLine to continue from, when there is more")]
    pub next_start_line: Option<u64>,
    /// Размер файла в байтах
    #[schema(description_en = "File size in bytes")]
    pub size: u64,
}

/// Reads a window of a workspace text file.
#[tool(
    name = "file_read",
    title_ru = "Чтение файла",
    title_en = "Read a file",
    description_ru = "Читает текстовый файл из рабочей области: весь или окно строк (startLine, maxLines). Ответ ограничен по размеру: если truncated = true, продолжи с nextStartLine. Двоичные и специальные файлы не читаются. Пути — относительно рабочей области; выйти за её пределы нельзя.",
    description_en = "Reads a text file in the workspace: all of it or a window of lines (startLine, maxLines). The answer is capped in size: when truncated is true, continue from nextStartLine. Binary and special files are refused. Paths are relative to the workspace; nothing outside it can be reached.",
    read_only,
    rename_all = "camelCase"
)]
pub async fn file_read(
    ws: Workspace,
    limits: Limits,
    /// Путь к файлу относительно рабочей области
    #[arg(description_en = "Path of the file, relative to the workspace")]
    path: String,
    /// Первая строка для чтения, с 1 (по умолчанию 1)
    #[arg(description_en = "First line to read, from 1 (default 1)")]
    start_line: Option<u64>,
    /// Сколько строк прочитать (по умолчанию — до конца файла или лимита байтов)
    #[arg(
        description_en = "How many lines to read (default: to the end of the file or the byte cap)"
    )]
    max_lines: Option<u64>,
) -> Result<FileRead, ToolError> {
    let start = start_line.unwrap_or(1);
    if start == 0 {
        return Err(ToolError::invalid_arguments(
            "/startLine",
            "lines count from 1",
        ));
    }
    if max_lines == Some(0) {
        return Err(ToolError::invalid_arguments(
            "/maxLines",
            "must be at least 1",
        ));
    }
    let c = confine(&ws, &path)?;
    let cap = limits.max_read_bytes;
    blocking(move || read_window(&c, start, max_lines, cap)).await
}

/// Opens a regular file beneath the root for reading, refusing special files without
/// blocking on them.
pub(crate) fn open_regular(c: &Confined) -> Result<(std::fs::File, u64), ToolError> {
    // A first look, following symlinks beneath the root only, so that a device or FIFO
    // is refused without being opened at all.
    let meta = c.root.metadata(c.rel_or_dot()).map_err(|e| c.err(e))?;
    require_regular(meta.file_type(), &c.shown)?;
    let mut opts = OpenOptions::new();
    opts.read(true);
    let file = c
        .root
        .open_with(c.rel_or_dot(), &nonblocking(opts))
        .map_err(|e| c.err(e))?;
    // The authoritative check: what was actually opened.
    let meta = file.metadata().map_err(|e| c.err(e))?;
    require_regular(meta.file_type(), &c.shown)?;
    Ok((file.into_std(), meta.len()))
}

/// True when `head` (the first bytes of a file) does not look like text: a NUL byte, or
/// bytes that are not UTF-8 (a character cut at the end of `head` is fine).
pub(crate) fn looks_binary(head: &[u8]) -> bool {
    if memchr::memchr(0, head).is_some() {
        return true;
    }
    match std::str::from_utf8(head) {
        Ok(_) => false,
        Err(e) => e.error_len().is_some(),
    }
}

fn binary_error(shown: &str) -> ToolError {
    ToolError::failed(format!("binary file: {shown}; file_read returns text only"))
}

/// Where [`read_window`] is in the file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before line `start`.
    Skip,
    /// Inside the window.
    Collect,
    /// After the window: only counting lines.
    Count,
}

/// Reads lines `start..start + max_lines` of the file, at most `cap` bytes, streaming:
/// memory stays at one buffer plus the window, whatever the file size.
fn read_window(
    c: &Confined,
    start: u64,
    max_lines: Option<u64>,
    cap: u64,
) -> Result<FileRead, ToolError> {
    let (mut file, _) = open_regular(c)?;
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut buf = vec![0_u8; CHUNK];
    let mut phase = if start == 1 {
        Phase::Collect
    } else {
        Phase::Skip
    };
    let mut size: u64 = 0;
    let mut last_byte = None;
    let mut before_newlines: u64 = 0;
    let mut window_newlines: u64 = 0;
    let mut after_newlines: u64 = 0;
    let mut out: Vec<u8> = Vec::new();
    let mut truncated = false;

    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(c.err(e)),
        };
        let chunk = &buf[..n];
        if size == 0 && looks_binary(&chunk[..n.min(SNIFF_BYTES)]) {
            return Err(binary_error(&c.shown));
        }
        size += n as u64;
        last_byte = chunk.last().copied();
        let mut s = chunk;
        while !s.is_empty() {
            match phase {
                Phase::Skip => {
                    let wanted = start - 1 - before_newlines;
                    match memchr::memchr_iter(b'\n', s)
                        .nth(usize::try_from(wanted - 1).unwrap_or(usize::MAX))
                    {
                        Some(i) => {
                            before_newlines += wanted;
                            s = &s[i + 1..];
                            phase = Phase::Collect;
                        }
                        None => {
                            before_newlines += memchr::memchr_iter(b'\n', s).count() as u64;
                            s = &[];
                        }
                    }
                }
                Phase::Collect => {
                    let mut end = s.len();
                    let mut ended = false;
                    if let Some(max) = max_lines {
                        for i in memchr::memchr_iter(b'\n', s) {
                            window_newlines += 1;
                            if window_newlines == max {
                                end = i + 1;
                                ended = true;
                                break;
                            }
                        }
                    }
                    let room = cap.saturating_sub(out.len());
                    if end > room {
                        out.extend_from_slice(&s[..room]);
                        s = &s[room..];
                        truncated = true;
                        phase = Phase::Count;
                        continue;
                    }
                    out.extend_from_slice(&s[..end]);
                    s = &s[end..];
                    if ended {
                        phase = Phase::Count;
                    }
                }
                Phase::Count => {
                    after_newlines += memchr::memchr_iter(b'\n', s).count() as u64;
                    s = &[];
                }
            }
        }
    }

    let in_window = memchr::memchr_iter(b'\n', &out).count() as u64;
    let total_lines = before_newlines
        + in_window
        + after_newlines
        + u64::from(size > 0 && last_byte != Some(b'\n'));
    if start > 1 && start > total_lines {
        return Err(ToolError::invalid_arguments(
            "/startLine",
            format!("{start} is past the end of the file ({total_lines} lines)"),
        ));
    }
    if truncated {
        // Whole lines when the window holds at least one; else cut at a character
        // boundary.
        if let Some(i) = memchr::memrchr(b'\n', &out) {
            out.truncate(i + 1);
        } else {
            let valid = match std::str::from_utf8(&out) {
                Ok(_) => out.len(),
                Err(e) => e.valid_up_to(),
            };
            out.truncate(valid);
        }
    }
    let returned = memchr::memchr_iter(b'\n', &out).count() as u64
        + u64::from(!out.is_empty() && out.last() != Some(&b'\n'));
    let end_line = if returned == 0 {
        0
    } else {
        start + returned - 1
    };
    // After a line cut by the cap, the next call starts at the following line.
    let next = start + returned.max(1);
    Ok(FileRead {
        path: c.shown.clone(),
        content: String::from_utf8_lossy(&out).into_owned(),
        start_line: start,
        end_line,
        total_lines,
        truncated,
        next_start_line: (next <= total_lines).then_some(next),
        size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_binary_are_told_apart() {
        assert!(!looks_binary(b"hello\n"));
        assert!(!looks_binary("привет".as_bytes()));
        // A character cut by the sniff window is still text.
        assert!(!looks_binary(&"привет".as_bytes()[..3]));
        assert!(looks_binary(b"\x7fELF\x02\x01\x01\0\0"));
        assert!(looks_binary(b"abc\xff\xfedef"));
    }
}
