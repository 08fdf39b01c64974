//! The little markdown the docs tools need: ATX headings (outside code fences), their
//! GitHub-style anchors, and the sections they open.

/// A heading of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heading {
    /// 1 for `#`, 2 for `##`, ... 6.
    pub level: u8,
    /// The heading's text as written (without the `#`s).
    pub text: String,
    /// The GitHub-style anchor (`## Atomic writes` → `atomic-writes`), unique in the
    /// document (repeats get `-1`, `-2`, ...).
    pub anchor: String,
    /// Byte offset of the heading's line.
    pub start: usize,
}

/// The GitHub anchor slug of a heading's text: lower case, every character that is not
/// a letter, digit, `_`, `-` or space dropped, spaces turned into `-`.
pub fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A heading's text for comparison: lower case, no backticks, single spaces.
pub fn plain(text: &str) -> String {
    text.replace('`', "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The ATX heading on `line`, as `(level, text)`: up to three spaces, 1 to 6 `#`, then a
/// space or the end of the line; a closing run of `#` is dropped.
fn atx(line: &str) -> Option<(u8, String)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let hashes = rest.len() - rest.trim_start_matches('#').len();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let after = &rest[hashes..];
    if !(after.is_empty() || after.starts_with([' ', '\t'])) {
        return None;
    }
    let mut text = after.trim();
    let closed = text.trim_end_matches('#');
    if closed.is_empty() || closed.ends_with([' ', '\t']) {
        text = closed.trim_end();
    }
    Some((u8::try_from(hashes).unwrap_or(6), text.to_owned()))
}

/// Every heading of `text` outside code fences, in order, with unique anchors.
pub fn headings(text: &str) -> Vec<Heading> {
    let mut out: Vec<Heading> = Vec::new();
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut fence: Option<&str> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let trimmed = line.trim_start();
        if let Some(marker) = fence {
            if trimmed.starts_with(marker) && trimmed.trim().trim_start_matches(marker).is_empty() {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") {
            fence = Some("```");
            continue;
        }
        if trimmed.starts_with("~~~") {
            fence = Some("~~~");
            continue;
        }
        let Some((level, text)) = atx(line.trim_end_matches(['\n', '\r'])) else {
            continue;
        };
        let base = slug(&text);
        let n = seen.entry(base.clone()).or_insert(0);
        let anchor = if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        *n += 1;
        out.push(Heading {
            level,
            text,
            anchor,
            start,
        });
    }
    out
}

/// Where the section of `headings[i]` ends in a text of `len` bytes: at the next heading
/// of the same or a higher level (fewer `#`), or at the end.
pub fn section_end(headings: &[Heading], i: usize, len: usize) -> usize {
    let Some(h) = headings.get(i) else {
        return len;
    };
    headings[i + 1..]
        .iter()
        .find(|n| n.level <= h.level)
        .map_or(len, |n| n.start)
}

/// The document's title: its first `#` heading, if any.
pub fn title(headings: &[Heading]) -> Option<&str> {
    headings
        .iter()
        .find(|h| h.level == 1)
        .map(|h| h.text.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_githubs() {
        assert_eq!(slug("Atomic writes"), "atomic-writes");
        assert_eq!(slug("`file_read`"), "file_read");
        assert_eq!(slug("Tools in Klaw: overview"), "tools-in-klaw-overview");
        assert_eq!(slug("`#[tool(...)]` keys"), "tool-keys");
        assert_eq!(slug("Память и поиск"), "память-и-поиск");
    }

    #[test]
    fn headings_skip_fences_and_number_repeats() {
        let text = "# Title\n\nintro\n\n## Parameters\n\n```sh\n# not a heading\n```\n\n## Parameters\n###No\n### Deep ##\n";
        let h = headings(text);
        let got: Vec<(u8, &str, &str)> = h
            .iter()
            .map(|h| (h.level, h.text.as_str(), h.anchor.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (1, "Title", "title"),
                (2, "Parameters", "parameters"),
                (2, "Parameters", "parameters-1"),
                (3, "Deep", "deep"),
            ]
        );
        assert_eq!(&text[h[1].start..h[1].start + 13], "## Parameters");
        assert_eq!(section_end(&h, 1, text.len()), h[2].start);
        assert_eq!(section_end(&h, 2, text.len()), text.len());
        assert_eq!(section_end(&h, 0, text.len()), text.len());
        assert_eq!(title(&h), Some("Title"));
    }
}
