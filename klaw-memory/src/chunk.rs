//! Splits markdown-ish text into chunks for embedding and indexing.
//!
//! The text is cut into blocks: headings (`#` lines), paragraphs (separated by blank
//! lines) and code fences (from a ```` ``` ```` or `~~~` line to the matching closing line,
//! or to the end of the text). Blocks are packed greedily into chunks of at most
//! `max_tokens`; a heading always starts a new chunk, so it stays with the text under it.
//! A paragraph longer than the budget is split by words, consecutive pieces sharing
//! `overlap_tokens`; when a chunk is full, the next one begins with the last
//! `overlap_tokens` of the previous paragraph. A code fence is never split nor used as
//! overlap: a fence longer than the budget becomes one chunk of its own.
//!
//! Tokens are approximated as `ceil(chars / 4)` (Unicode scalar values), which needs no
//! tokenizer and errs on the long side for English.

/// Approximate token count: `ceil(chars / 4)`.
pub(super) fn approx_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// How text is cut into chunks before it is embedded: into blocks (headings, paragraphs,
/// code fences) packed greedily into chunks of at most `max_tokens` (about 4 characters
/// a token), a heading always starting a new chunk, a paragraph too long for one chunk
/// split by words with `overlap_tokens` shared, a code fence never split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkOptions {
    /// The token budget of a chunk (code fences may exceed it).
    pub max_tokens: usize,
    /// Tokens repeated from the end of the previous paragraph; less than `max_tokens / 2`.
    pub overlap_tokens: usize,
}

impl ChunkOptions {
    /// Cuts `text` into chunks with these options (what [`Index::save`] stores); empty
    /// text gives none.
    ///
    /// [`Index::save`]: super::Index::save
    pub fn chunk(&self, text: &str) -> Vec<String> {
        chunk(text, self)
    }
}

impl Default for ChunkOptions {
    fn default() -> Self {
        ChunkOptions {
            max_tokens: 256,
            overlap_tokens: 32,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Heading,
    Paragraph,
    Fence,
}

#[derive(Debug)]
struct Block {
    kind: Kind,
    text: String,
}

fn fence_marker(line: &str) -> Option<&'static str> {
    let t = line.trim_start();
    if t.starts_with("```") {
        Some("```")
    } else if t.starts_with("~~~") {
        Some("~~~")
    } else {
        None
    }
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut para: Vec<&str> = Vec::new();
    let flush = |para: &mut Vec<&str>, out: &mut Vec<Block>| {
        if !para.is_empty() {
            out.push(Block {
                kind: Kind::Paragraph,
                text: para.join("\n"),
            });
            para.clear();
        }
    };
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some(marker) = fence_marker(line) {
            flush(&mut para, &mut out);
            let mut fence = vec![line];
            for l in lines.by_ref() {
                fence.push(l);
                if l.trim_start().starts_with(marker)
                    && l.trim().trim_start_matches(marker).is_empty()
                {
                    break;
                }
            }
            out.push(Block {
                kind: Kind::Fence,
                text: fence.join("\n"),
            });
        } else if line.trim().is_empty() {
            flush(&mut para, &mut out);
        } else if line.trim_start().starts_with('#') {
            flush(&mut para, &mut out);
            out.push(Block {
                kind: Kind::Heading,
                text: line.trim_end().to_string(),
            });
        } else {
            para.push(line.trim_end());
        }
    }
    flush(&mut para, &mut out);
    out
}

/// The words of a text, with prefix sums of their lengths so the approximate token count
/// of any run of words (joined by single spaces) is O(1): no re-joining in the loops.
struct Words<'a> {
    words: Vec<&'a str>,
    /// `chars[i]`: the characters of `words[..i]`.
    chars: Vec<usize>,
}

impl<'a> Words<'a> {
    fn new(text: &'a str) -> Self {
        let words: Vec<&str> = text.split_whitespace().collect();
        let mut chars = Vec::with_capacity(words.len() + 1);
        chars.push(0);
        for w in &words {
            chars.push(chars.last().copied().unwrap_or(0) + w.chars().count());
        }
        Words { words, chars }
    }

    fn len(&self) -> usize {
        self.words.len()
    }

    /// `approx_tokens(&words[a..b].join(" "))`.
    fn tokens(&self, a: usize, b: usize) -> usize {
        if b <= a {
            return 0;
        }
        (self.chars[b] - self.chars[a] + (b - a - 1)).div_ceil(4)
    }

    fn join(&self, a: usize, b: usize) -> String {
        self.words[a..b].join(" ")
    }
}

/// The words at the end of `text` that fit in `tokens`.
fn tail(text: &str, tokens: usize) -> String {
    if tokens == 0 {
        return String::new();
    }
    let w = Words::new(text);
    let n = w.len();
    let mut start = n;
    while start > 0 && w.tokens(start - 1, n) <= tokens {
        start -= 1;
    }
    w.join(start, n)
}

/// Splits a long paragraph into word windows of at most `max` tokens sharing `overlap`.
fn split_paragraph(text: &str, max: usize, overlap: usize) -> Vec<String> {
    let w = Words::new(text);
    let n = w.len();
    let mut out = Vec::new();
    let mut start = 0;
    while start < n {
        let mut end = start + 1;
        while end < n && w.tokens(start, end + 1) <= max {
            end += 1;
        }
        out.push(w.join(start, end));
        if end == n {
            break;
        }
        // Step back by the overlap, but always move forward.
        let mut next = end;
        while next > start + 1 && w.tokens(next - 1, end) <= overlap {
            next -= 1;
        }
        start = next;
    }
    out
}

/// Splits `text` into chunks as described in the module docs. Empty text gives none.
pub(super) fn chunk(text: &str, opts: &ChunkOptions) -> Vec<String> {
    let max = opts.max_tokens.max(1);
    let overlap = opts.overlap_tokens.min(max / 2);
    let mut items: Vec<Block> = Vec::new();
    for b in blocks(text) {
        if b.kind == Kind::Paragraph && approx_tokens(&b.text) > max {
            items.extend(
                split_paragraph(&b.text, max, overlap)
                    .into_iter()
                    .map(|text| Block {
                        kind: Kind::Paragraph,
                        text,
                    }),
            );
        } else {
            items.push(b);
        }
    }

    let mut chunks = Vec::new();
    let mut cur: Vec<String> = Vec::new();
    let mut cur_tokens = 0;
    // Whether `cur` holds something besides headings and carried overlap.
    let mut has_body = false;
    let mut last_para: Option<String> = None;
    for b in items {
        let t = approx_tokens(&b.text);
        let heading_break = b.kind == Kind::Heading && has_body;
        let full = has_body && cur_tokens + t > max;
        if heading_break || full {
            chunks.push(cur.join("\n\n"));
            cur.clear();
            cur_tokens = 0;
            has_body = false;
            if !heading_break
                && b.kind != Kind::Fence
                && let Some(p) = last_para.take()
            {
                let carried = tail(&p, overlap);
                let ct = approx_tokens(&carried);
                if !carried.is_empty() && ct + t <= max && !b.text.starts_with(&carried) {
                    cur.push(carried);
                    cur_tokens = ct;
                }
            }
        }
        last_para = (b.kind == Kind::Paragraph).then(|| b.text.clone());
        has_body |= b.kind != Kind::Heading;
        cur_tokens += t;
        cur.push(b.text);
    }
    if !cur.is_empty() {
        chunks.push(cur.join("\n\n"));
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(max: usize, overlap: usize) -> ChunkOptions {
        ChunkOptions {
            max_tokens: max,
            overlap_tokens: overlap,
        }
    }

    #[test]
    fn span_counts_equal_counting_the_joined_words() {
        let w = Words::new(
            "Съешь же ещё этих мягких  французских булок,\n да выпей чаю. a bb ccc 日本語",
        );
        for a in 0..=w.len() {
            for b in a..=w.len() {
                assert_eq!(w.tokens(a, b), approx_tokens(&w.join(a, b)), "{a}..{b}");
            }
        }
    }

    #[test]
    fn very_long_paragraph_is_split_in_linear_time() {
        // 200k words in one paragraph: re-joining the window on every step was quadratic.
        let text = "слово word ".repeat(100_000);
        let chunks = chunk(&text, &opts(256, 32));
        assert!(chunks.len() > 1000);
        assert!(chunks.iter().all(|c| approx_tokens(c) <= 256));
    }

    #[test]
    fn empty_text_gives_no_chunks() {
        assert!(chunk("", &ChunkOptions::default()).is_empty());
        assert!(chunk("\n\n  \n", &ChunkOptions::default()).is_empty());
    }

    #[test]
    fn short_text_is_one_chunk() {
        let c = chunk(
            "# Заметки\n\nКошка спит на диване.",
            &ChunkOptions::default(),
        );
        assert_eq!(c, vec!["# Заметки\n\nКошка спит на диване."]);
    }

    #[test]
    fn headings_start_new_chunks_and_stay_with_their_text() {
        let md =
            "# Cats\n\nCats sleep a lot.\n\n## Dogs\n\nDogs bark.\n\n# Кошки\n\nКошки мурлыкают.";
        let c = chunk(md, &ChunkOptions::default());
        assert_eq!(
            c,
            vec![
                "# Cats\n\nCats sleep a lot.",
                "## Dogs\n\nDogs bark.",
                "# Кошки\n\nКошки мурлыкают."
            ]
        );
    }

    #[test]
    fn paragraphs_are_packed_within_the_budget() {
        let p = "слово ".repeat(10); // 60 chars => 15 tokens
        let md = format!("{p}\n\n{p}\n\n{p}\n\n{p}");
        for c in chunk(&md, &opts(40, 0)) {
            assert!(approx_tokens(&c) <= 40, "{c:?}");
        }
    }

    #[test]
    fn long_paragraph_is_split_with_overlap() {
        let words: Vec<String> = (0..200).map(|i| format!("w{i:03}")).collect();
        let text = words.join(" ");
        let c = chunk(&text, &opts(50, 10));
        assert!(c.len() > 1);
        for piece in &c {
            assert!(approx_tokens(piece) <= 50, "{piece:?}");
        }
        // Consecutive pieces share words, and every word is kept.
        for pair in c.windows(2) {
            let last = pair[0].split_whitespace().last().unwrap();
            assert!(pair[1].contains(last), "{pair:?}");
        }
        for w in &words {
            assert!(c.iter().any(|p| p.contains(w.as_str())), "{w} lost");
        }
    }

    #[test]
    fn long_russian_paragraph_is_split() {
        let text = "Мама мыла раму, а кошка спала на подоконнике. ".repeat(40);
        let c = chunk(&text, &opts(64, 8));
        assert!(c.len() > 1);
        for piece in &c {
            assert!(approx_tokens(piece) <= 64);
            assert!(!piece.is_empty());
        }
    }

    #[test]
    fn fence_longer_than_the_budget_is_kept_whole() {
        let code: String = (0..100).map(|i| format!("let x{i} = {i};\n")).collect();
        let fence = format!("```rust\n{code}```");
        let md = format!("# Код\n\nВот пример:\n\n{fence}\n\nПосле кода.");
        let c = chunk(&md, &opts(32, 8));
        assert!(c.iter().any(|x| x.contains(&fence)), "{c:#?}");
        // No chunk holds part of the fence without all of it.
        for x in &c {
            if x.contains("let x50") {
                assert!(x.contains(&fence));
            }
        }
    }

    #[test]
    fn blank_lines_inside_a_fence_do_not_split_it() {
        let md = "Text.\n\n```\nfn a() {}\n\n\nfn b() {}\n```\n\nMore.";
        let c = chunk(md, &opts(8, 0));
        assert!(
            c.iter()
                .any(|x| x.contains("```\nfn a() {}\n\n\nfn b() {}\n```")),
            "{c:#?}"
        );
    }

    #[test]
    fn unterminated_fence_runs_to_the_end() {
        let md = "Intro.\n\n```\ncode\n\n# not a heading\n";
        let c = chunk(md, &opts(4, 0));
        assert!(
            c.iter().any(|x| x.contains("```\ncode\n\n# not a heading")),
            "{c:#?}"
        );
    }

    #[test]
    fn english_markdown_document() {
        let md = "# Setup\n\nInstall Rust. Then run make setup.\n\n## Tests\n\nRun make test.\n\n```sh\nmake test\n```\n";
        let c = chunk(md, &ChunkOptions::default());
        assert_eq!(c.len(), 2);
        assert!(c[1].starts_with("## Tests") && c[1].contains("```sh\nmake test\n```"));
    }
}
