//! HTML to a document tree of bounded depth, in time linear in the page's size, stopped
//! between chunks of the page when the call's time is up.
//!
//! A page can nest elements as deep as it likes. html5ever's tree builder scans its stack
//! of open elements for most tags (a deep stack makes every tag slow: quadratic in all),
//! and the readability and markdown steps after it walk the tree, some of them
//! recursively (a few thousand nested `<b>` overflowed a thread's stack). So the tokens
//! pass through [`Shallow`] before the tree builder sees them. It keeps its own stack of
//! the elements the tags opened (with the end tags HTML leaves out: a `<p>` closed by the
//! next block, an `<li>` by the next item, cells, rows, options), and:
//!
//! - drops the start tag of an element that would sit deeper than [`MAX_DEPTH`], a
//!   formatting element (`<b>`, `<i>`, `<font>`, ...) inside [`MAX_FORMATTING`] others,
//!   a list or quote inside [`MAX_INDENT`] others, a table inside [`MAX_TABLES`] others,
//!   and the end tag that matches it; the text inside stays, in the deepest
//!   element kept, so a deep page still reads as its text;
//! - sends the tree builder an explicit end tag for every element its own stack closes
//!   (a misnested `</div>` closes what it encloses; an element with no content of its
//!   own, `<img>` or `<x/>`, is closed at once), so the tree builder's stack never holds
//!   more than this one plus the few elements HTML adds itself (`<tbody>`, `<tr>`,
//!   reconstructed formatting elements).
//!
//! The tree is then checked ([`MAX_TREE_DEPTH`]) without recursion, so nothing later can
//! meet a deeper one.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use dom_query::Document;
use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::tree_builder::{TreeBuilder, TreeBuilderOpts};
use html5ever::{LocalName, TokenizerResult, local_name};

/// The deepest an element of a page is kept: its descendants' tags past it are dropped,
/// their text kept. Browsers flatten past 512 (Chromium); real pages stay far below 100.
pub(crate) const MAX_DEPTH: usize = 256;

/// The most formatting elements (`<b>`, `<i>`, `<font>`, ...) kept open at once. HTML
/// re-opens the formatting elements that a block closed in every later block: a bound on
/// them is a bound on that work too.
pub(crate) const MAX_FORMATTING: usize = 16;

/// The most lists and quotes kept open at once: markdown writes each line inside them
/// after one indent or `> ` per level, so their depth multiplies the text.
pub(crate) const MAX_INDENT: usize = 8;

/// The most tables kept open at once: readability measures each table by all it holds,
/// nested tables included, so their depth multiplies its work.
pub(crate) const MAX_TABLES: usize = 16;

/// The deepest node the tree may hold (the elements kept, the ones HTML adds: a table's
/// `<tbody>`, reconstructed formatting elements; the document's own): past it the page
/// is refused, not walked.
pub(crate) const MAX_TREE_DEPTH: usize = 2 * MAX_DEPTH;

/// How much of the page the tokenizer takes at once, between two looks at the time.
const CHUNK: usize = 16 * 1024;

/// When the work on a page stops: at a deadline, or when the call that wanted it is gone.
#[derive(Debug, Clone)]
pub(crate) struct Stop {
    deadline: Option<Instant>,
    cancelled: Arc<AtomicBool>,
}

impl Stop {
    /// No deadline; only [`Stop::cancel`] stops the work.
    pub(crate) fn never() -> Self {
        Self {
            deadline: None,
            cancelled: Arc::default(),
        }
    }

    /// Stops at `deadline`.
    pub(crate) fn at(deadline: Instant) -> Self {
        Self {
            deadline: Some(deadline),
            ..Self::never()
        }
    }

    /// Stops the work now.
    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    /// Whether the work should stop.
    pub(crate) fn reached(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// A guard that stops the work when it is dropped: held by the call's future, so a
    /// call dropped at its time limit (or cancelled) stops the work it left running.
    pub(crate) fn on_drop(&self) -> CancelOnDrop {
        CancelOnDrop(self.clone())
    }
}

/// Cancels its [`Stop`] when dropped.
#[derive(Debug)]
pub(crate) struct CancelOnDrop(Stop);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Why a page gave no tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unparsed {
    /// The time was up.
    Stopped,
    /// The tree came out deeper than [`MAX_TREE_DEPTH`] (not expected: the bound above
    /// keeps it far shallower).
    TooDeep,
}

/// `page` as a document: its tree no deeper than [`MAX_TREE_DEPTH`], built in time
/// linear in its size, or [`Unparsed::Stopped`] when `stop` is reached first.
pub(crate) fn document(page: &str, stop: &Stop) -> Result<Document, Unparsed> {
    let builder = TreeBuilder::new(
        Document::default(),
        TreeBuilderOpts {
            scripting_enabled: false,
            ..Default::default()
        },
    );
    let tokenizer = Tokenizer::new(Shallow::new(builder), TokenizerOpts::default());
    let input = BufferQueue::default();
    let mut rest = page;
    while !rest.is_empty() {
        if stop.reached() {
            return Err(Unparsed::Stopped);
        }
        let mut at = rest.len().min(CHUNK);
        while !rest.is_char_boundary(at) {
            at += 1;
        }
        let (chunk, next) = rest.split_at(at);
        rest = next;
        input.push_back(StrTendril::from_slice(chunk));
        // A `</script>` (for a browser to run it) or a `<meta charset>` (the page is
        // decoded already) pauses the tokenizer: go on to the end of the chunk.
        while !matches!(tokenizer.feed(&input), TokenizerResult::Done) {}
    }
    tokenizer.end();
    let document = tokenizer.sink.builder.sink;
    if depth(&document) > MAX_TREE_DEPTH {
        return Err(Unparsed::TooDeep);
    }
    Ok(document)
}

/// The depth of the deepest node of `document`, counted without recursion.
fn depth(document: &Document) -> usize {
    let mut deepest = 0;
    let mut todo = vec![(document.root(), 0)];
    while let Some((node, depth)) = todo.pop() {
        deepest = deepest.max(depth);
        todo.extend(node.children_it(false).map(|c| (c, depth + 1)));
    }
    deepest
}

/// The token sink between the tokenizer and the tree builder that keeps the tree
/// shallow (the module's documentation says how).
struct Shallow<S> {
    builder: S,
    state: std::cell::RefCell<Open>,
}

/// What [`Shallow`] knows of the elements open.
#[derive(Default)]
struct Open {
    /// The elements open, outermost first (`html`, `head` and `body` not counted).
    stack: Vec<LocalName>,
    /// How many of them are formatting elements.
    formatting: usize,
    /// How many of them are lists and quotes.
    indent: usize,
    /// How many of them are tables.
    tables: usize,
    /// Start tags dropped, by name, whose end tags are still to come: all of them sit
    /// inside the innermost element of `stack`, so closing it forgets them.
    dropped: HashMap<LocalName, usize>,
}

impl Open {
    /// Counts `name` out, as it leaves the stack.
    fn forget(&mut self, name: &LocalName) {
        if is_formatting(name) {
            self.formatting = self.formatting.saturating_sub(1);
        }
        if is_indenting(name) {
            self.indent = self.indent.saturating_sub(1);
        }
        if *name == local_name!("table") {
            self.tables = self.tables.saturating_sub(1);
        }
    }
}

impl<S: TokenSink> Shallow<S> {
    fn new(builder: S) -> Self {
        Self {
            builder,
            state: std::cell::RefCell::default(),
        }
    }

    /// Sends the tree builder the end tags of the elements above `keep` in the stack,
    /// innermost first, and forgets them.
    fn close_above(&self, open: &mut Open, keep: usize, line: u64) {
        while open.stack.len() > keep {
            let Some(name) = open.stack.pop() else { break };
            open.forget(&name);
            self.end_tag(name, line);
        }
        open.dropped.clear();
    }

    fn end_tag(&self, name: LocalName, line: u64) {
        let tag = Tag {
            kind: TagKind::EndTag,
            name,
            self_closing: false,
            attrs: Vec::new(),
            had_duplicate_attributes: false,
        };
        // An end tag asks nothing of the tokenizer (a script is not run).
        let _ = self.builder.process_token(Token::TagToken(tag), line);
    }

    fn start(&self, tag: Tag, line: u64) -> TokenSinkResult<S::Handle> {
        let mut open = self.state.borrow_mut();
        let name = tag.name.clone();
        if matches!(
            name,
            local_name!("html") | local_name!("head") | local_name!("body")
        ) {
            drop(open);
            return self.builder.process_token(Token::TagToken(tag), line);
        }
        if let Some(keep) = implied_end(&open.stack, &name) {
            self.close_above(&mut open, keep, line);
        }
        // A cell or row straight in a table gets the row and body HTML adds: counted
        // here, and sent explicitly.
        let implied = implied_parents(&open.stack, &name);
        // A raw text element (`<script>`, `<style>`, `<title>`...) is always kept, or
        // its content would be read as markup: it holds text only, so it adds one level.
        let raw = is_raw_text(&name) && !open.stack.last().is_some_and(is_raw_text);
        let too_deep = open.stack.len() + implied.len() >= MAX_DEPTH && !raw;
        let too_bold = is_formatting(&name) && open.formatting >= MAX_FORMATTING;
        let too_indented = is_indenting(&name) && open.indent >= MAX_INDENT;
        let too_tabled = name == local_name!("table") && open.tables >= MAX_TABLES;
        if too_deep || too_bold || too_indented || too_tabled {
            *open.dropped.entry(name).or_default() += 1;
            return TokenSinkResult::Continue;
        }
        for parent in implied {
            open.stack.push(parent.clone());
            let tag = Tag {
                kind: TagKind::StartTag,
                name: parent,
                self_closing: false,
                attrs: Vec::new(),
                had_duplicate_attributes: false,
            };
            let _ = self.builder.process_token(Token::TagToken(tag), line);
        }
        let empty = is_void(&name) || (tag.self_closing && !raw);
        if !empty {
            open.formatting += usize::from(is_formatting(&name));
            open.indent += usize::from(is_indenting(&name));
            open.tables += usize::from(name == local_name!("table"));
            open.stack.push(name.clone());
        }
        drop(open);
        let result = self.builder.process_token(Token::TagToken(tag), line);
        // In SVG or MathML an element of any name (`<link>`, `<g/>`) may stay open:
        // close it here. Elsewhere this end tag is ignored (`</br>` would be a `<br>`).
        if empty && name != local_name!("br") {
            self.end_tag(name, line);
        }
        result
    }

    fn end(&self, tag: Tag, line: u64) -> TokenSinkResult<S::Handle> {
        let mut open = self.state.borrow_mut();
        if let Some(n) = open.dropped.get_mut(&tag.name)
            && *n > 0
        {
            *n -= 1;
            return TokenSinkResult::Continue;
        }
        if let Some(at) = find(&open.stack, |n| *n == tag.name, |n| end_stops(&tag.name, n)) {
            // What it encloses is closed first, explicitly; then the element itself.
            self.close_above(&mut open, at + 1, line);
            if let Some(name) = open.stack.pop() {
                open.forget(&name);
            }
        }
        drop(open);
        self.builder.process_token(Token::TagToken(tag), line)
    }
}

impl<S: TokenSink> TokenSink for Shallow<S> {
    type Handle = S::Handle;

    fn process_token(&self, token: Token, line: u64) -> TokenSinkResult<Self::Handle> {
        match token {
            Token::TagToken(tag) if tag.kind == TagKind::StartTag => self.start(tag, line),
            Token::TagToken(tag) => self.end(tag, line),
            other => self.builder.process_token(other, line),
        }
    }

    fn end(&self) {
        self.builder.end();
    }

    fn adjusted_current_node_present_but_not_in_html_namespace(&self) -> bool {
        self.builder
            .adjusted_current_node_present_but_not_in_html_namespace()
    }
}

/// The index of the innermost element of `stack` that is `wanted`, looking no further
/// out than an element that `stops`.
fn find(
    stack: &[LocalName],
    wanted: impl Fn(&LocalName) -> bool,
    stops: impl Fn(&LocalName) -> bool,
) -> Option<usize> {
    for (i, name) in stack.iter().enumerate().rev() {
        if wanted(name) {
            return Some(i);
        }
        if stops(name) {
            return None;
        }
    }
    None
}

/// How many elements of `stack` stay open when a `name` start tag comes: HTML's left-out
/// end tags (a new paragraph, item, cell, row or option closes the open one; a block
/// closes a paragraph). `None`: all.
fn implied_end(stack: &[LocalName], name: &LocalName) -> Option<usize> {
    let at = match *name {
        local_name!("li") => find(stack, |n| *n == local_name!("li"), is_list_stop),
        local_name!("dd") | local_name!("dt") => find(
            stack,
            |n| matches!(*n, local_name!("dd") | local_name!("dt")),
            is_list_stop,
        ),
        local_name!("td") | local_name!("th") => find(
            stack,
            |n| matches!(*n, local_name!("td") | local_name!("th")),
            is_table_part,
        ),
        // A row closes the open row, its cells with it.
        local_name!("tr") => find(
            stack,
            |n| *n == local_name!("tr"),
            |n| {
                matches!(
                    *n,
                    local_name!("table")
                        | local_name!("tbody")
                        | local_name!("thead")
                        | local_name!("tfoot")
                        | local_name!("caption")
                        | local_name!("template")
                )
            },
        ),
        local_name!("tbody") | local_name!("thead") | local_name!("tfoot") => find(
            stack,
            |n| {
                matches!(
                    *n,
                    local_name!("tbody") | local_name!("thead") | local_name!("tfoot")
                )
            },
            |n| matches!(*n, local_name!("table") | local_name!("template")),
        ),
        // A table directly in a table (not in a cell) closes it.
        local_name!("table") => find(
            stack,
            |n| *n == local_name!("table"),
            |n| {
                matches!(
                    *n,
                    local_name!("td")
                        | local_name!("th")
                        | local_name!("caption")
                        | local_name!("template")
                )
            },
        ),
        local_name!("option") => stack
            .last()
            .filter(|n| **n == local_name!("option"))
            .map(|_| stack.len() - 1),
        local_name!("optgroup") => find(
            stack,
            |n| *n == local_name!("optgroup"),
            |n| *n != local_name!("option"),
        )
        .or_else(|| {
            stack
                .last()
                .filter(|n| **n == local_name!("option"))
                .map(|_| stack.len() - 1)
        }),
        local_name!("rb") | local_name!("rt") | local_name!("rp") | local_name!("rtc") => find(
            stack,
            |n| {
                matches!(
                    *n,
                    local_name!("rb") | local_name!("rt") | local_name!("rp") | local_name!("rtc")
                )
            },
            |n| *n == local_name!("ruby") || is_scope_boundary(n),
        ),
        // These do not nest: a new one closes the open one.
        local_name!("a") | local_name!("nobr") | local_name!("button") | local_name!("select") => {
            find(stack, |n| n == name, is_scope_boundary)
        }
        _ => None,
    };
    // A block start closes a paragraph (the one innermost, if any is open).
    let p = closes_p(name)
        .then(|| {
            find(
                &stack[..at.unwrap_or(stack.len())],
                |n| *n == local_name!("p"),
                |n| is_scope_boundary(n) || *n == local_name!("button"),
            )
        })
        .flatten();
    let mut keep = [at, p].into_iter().flatten().min().unwrap_or(stack.len());
    // A heading closes the heading it would go in.
    if is_heading(name) && keep > 0 && is_heading(&stack[keep - 1]) {
        keep -= 1;
    }
    (keep < stack.len()).then_some(keep)
}

/// The elements HTML opens itself before a `name` start tag, outermost first: a cell
/// straight in a table gets a `<tbody>` and a `<tr>`, a row a `<tbody>`.
fn implied_parents(stack: &[LocalName], name: &LocalName) -> Vec<LocalName> {
    let cell = matches!(*name, local_name!("td") | local_name!("th"));
    if !cell && *name != local_name!("tr") {
        return Vec::new();
    }
    let innermost = stack.iter().rev().find(|n| is_table_part(n));
    match innermost.cloned() {
        Some(local_name!("table")) if cell => vec![local_name!("tbody"), local_name!("tr")],
        Some(local_name!("table")) => vec![local_name!("tbody")],
        Some(local_name!("tbody") | local_name!("thead") | local_name!("tfoot")) if cell => {
            vec![local_name!("tr")]
        }
        _ => Vec::new(),
    }
}

/// Whether an end tag `tag` looks for its element further out than `n`.
fn end_stops(tag: &LocalName, n: &LocalName) -> bool {
    if is_table_part(tag) {
        matches!(*n, local_name!("table") | local_name!("template"))
    } else {
        is_scope_boundary(n)
    }
}

/// HTML's elements that limit the scope of an end tag.
fn is_scope_boundary(n: &LocalName) -> bool {
    matches!(
        *n,
        local_name!("applet")
            | local_name!("caption")
            | local_name!("html")
            | local_name!("table")
            | local_name!("td")
            | local_name!("th")
            | local_name!("marquee")
            | local_name!("object")
            | local_name!("template")
    )
}

fn is_table_part(n: &LocalName) -> bool {
    matches!(
        *n,
        local_name!("table")
            | local_name!("tbody")
            | local_name!("thead")
            | local_name!("tfoot")
            | local_name!("tr")
            | local_name!("td")
            | local_name!("th")
            | local_name!("caption")
            | local_name!("template")
    )
}

/// Where a new list item stops looking for the open one (HTML's special elements, but
/// `address`, `div` and `p`).
fn is_list_stop(n: &LocalName) -> bool {
    is_scope_boundary(n)
        || is_heading(n)
        || matches!(
            *n,
            local_name!("ul")
                | local_name!("ol")
                | local_name!("dl")
                | local_name!("menu")
                | local_name!("dir")
                | local_name!("button")
                | local_name!("article")
                | local_name!("aside")
                | local_name!("blockquote")
                | local_name!("center")
                | local_name!("details")
                | local_name!("dialog")
                | local_name!("fieldset")
                | local_name!("figcaption")
                | local_name!("figure")
                | local_name!("footer")
                | local_name!("form")
                | local_name!("header")
                | local_name!("hgroup")
                | local_name!("main")
                | local_name!("nav")
                | local_name!("section")
                | local_name!("summary")
                | local_name!("pre")
                | local_name!("listing")
                | local_name!("select")
        )
}

fn is_heading(n: &LocalName) -> bool {
    matches!(
        *n,
        local_name!("h1")
            | local_name!("h2")
            | local_name!("h3")
            | local_name!("h4")
            | local_name!("h5")
            | local_name!("h6")
    )
}

/// Start tags that close an open paragraph.
fn closes_p(n: &LocalName) -> bool {
    is_heading(n)
        || matches!(
            *n,
            local_name!("address")
                | local_name!("article")
                | local_name!("aside")
                | local_name!("blockquote")
                | local_name!("center")
                | local_name!("details")
                | local_name!("dialog")
                | local_name!("dir")
                | local_name!("div")
                | local_name!("dl")
                | local_name!("fieldset")
                | local_name!("figcaption")
                | local_name!("figure")
                | local_name!("footer")
                | local_name!("header")
                | local_name!("hgroup")
                | local_name!("main")
                | local_name!("menu")
                | local_name!("nav")
                | local_name!("ol")
                | local_name!("p")
                | local_name!("section")
                | local_name!("summary")
                | local_name!("ul")
                | local_name!("pre")
                | local_name!("listing")
                | local_name!("form")
                | local_name!("li")
                | local_name!("dd")
                | local_name!("dt")
                | local_name!("plaintext")
                | local_name!("table")
                | local_name!("hr")
                | local_name!("xmp")
        )
}

/// HTML's formatting elements: the ones a later block re-opens when left open.
fn is_formatting(n: &LocalName) -> bool {
    matches!(
        *n,
        local_name!("a")
            | local_name!("b")
            | local_name!("big")
            | local_name!("code")
            | local_name!("em")
            | local_name!("font")
            | local_name!("i")
            | local_name!("nobr")
            | local_name!("s")
            | local_name!("small")
            | local_name!("strike")
            | local_name!("strong")
            | local_name!("tt")
            | local_name!("u")
    )
}

/// Lists and quotes: markdown indents what they hold.
fn is_indenting(n: &LocalName) -> bool {
    matches!(
        *n,
        local_name!("ul")
            | local_name!("ol")
            | local_name!("menu")
            | local_name!("dir")
            | local_name!("dl")
            | local_name!("blockquote")
    )
}

/// Elements with no content in HTML.
fn is_void(n: &LocalName) -> bool {
    matches!(
        *n,
        local_name!("area")
            | local_name!("base")
            | local_name!("basefont")
            | local_name!("bgsound")
            | local_name!("br")
            | local_name!("col")
            | local_name!("embed")
            | local_name!("frame")
            | local_name!("hr")
            | local_name!("image")
            | local_name!("img")
            | local_name!("input")
            | local_name!("keygen")
            | local_name!("link")
            | local_name!("meta")
            | local_name!("param")
            | local_name!("source")
            | local_name!("track")
            | local_name!("wbr")
    )
}

/// Elements whose content the tokenizer reads as text.
fn is_raw_text(n: &LocalName) -> bool {
    matches!(
        *n,
        local_name!("script")
            | local_name!("style")
            | local_name!("xmp")
            | local_name!("iframe")
            | local_name!("noembed")
            | local_name!("noframes")
            | local_name!("textarea")
            | local_name!("title")
            | local_name!("plaintext")
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn parsed(page: &str) -> Document {
        document(page, &Stop::never()).unwrap()
    }

    /// Pages nested far past the bound, in every shape: the tree stays within it, and
    /// the text at the bottom is in it.
    #[test]
    fn deep_pages_give_shallow_trees_with_their_text() {
        let shapes: [(&str, &str); 14] = [
            ("<b>", "</b>"),
            ("<b>", ""),
            ("<div>", ""),
            ("<div/>", ""),
            ("<b><div>", "</b></div>"),
            ("<span><i><a href=x><em>", "</em></a></i></span>"),
            ("<table><tr><td>", "</td></tr></table>"),
            ("<table><td>", ""),
            ("<table><caption><table><colgroup><col><div>", ""),
            ("<ul><li>", "</li></ul>"),
            ("<blockquote><dl><dt>", ""),
            ("<svg><g><link><desc><div><math><mi>", ""),
            ("<select><option><optgroup>", ""),
            ("<div><table><tr><td></div>", ""),
        ];
        for (open, close) in shapes {
            let page = format!(
                "<html><body>{}<p>BOTTOM</p>{}",
                open.repeat(20_000),
                close.repeat(20_000)
            );
            let doc = document(&page, &Stop::never()).unwrap_or_else(|e| panic!("{open}: {e:?}"));
            let deepest = depth(&doc);
            assert!(
                deepest <= MAX_DEPTH + MAX_FORMATTING + 8,
                "{open}: {deepest}"
            );
            assert!(doc.root().text().contains("BOTTOM"), "{open}");
        }
        // Formatting elements a block closes are re-opened by the next one: bounded too.
        let reopened: String = (0..20_000)
            .map(|i| format!("<p><b class=k{i}><i id={i}>x</p>"))
            .collect();
        let doc = parsed(&reopened);
        assert!(depth(&doc) <= MAX_DEPTH, "{}", depth(&doc));
        // Each paragraph: itself, its two formatting elements and its text; not all the
        // formatting elements of the paragraphs before it (html5ever alone: quadratic).
        let nodes = doc.root().descendants().len();
        assert!(nodes <= 20_000 * 4 + 3, "{nodes} nodes");
    }

    /// On pages of ordinary depth the tree is the one html5ever builds alone, left-out
    /// end tags, misnesting and all.
    #[test]
    fn ordinary_pages_keep_their_tree() {
        let pages = [
            "<!doctype html><title>t</title><p>one<p>two<ul><li>a<li>b</ul><dl><dt>x<dd>y</dl>",
            "<html><head><meta charset=\"windows-1251\"><title>t</title></head><body><p>text",
            "<table><tr><td>1<td>2<tr><td>3</table><p>after",
            "<table><thead><tr><th>h<tbody><tr><td>c</table>",
            "<select><option>a<option>b<optgroup><option>c</select>",
            "<div><p>text<div>block</div></div><h1>a<h2>b</h2>",
            "<a href=1>one<a href=2>two</a>",
            "<svg><path/><g><rect/></g></svg><p>after<br>line<img src=x>",
            "<ruby>a<rt>b<rt>c</ruby><form><input><form><p>in</form>",
            "<script>if (a < b) { document.write('<p>') }</script><p>x<style>p { }</style>",
            "<article><h1>Title</h1><p>Para <a href='/x'>link</a>.<p>Next<blockquote>q</blockquote></article>",
        ];
        for page in pages {
            let plain = Document::from(page).html().to_string();
            let shallow = parsed(page).html().to_string();
            assert_eq!(shallow, plain, "{page}");
        }
        // Misnested formatting is closed as nested: the text is the same, its style not.
        let page = "<p><b>bold <i>both</b> italic</i> plain";
        assert_eq!(
            parsed(page).root().text(),
            Document::from(page).root().text()
        );
    }

    #[test]
    fn a_stopped_parse_ends_between_chunks() {
        let page = "<div>".repeat(100_000);
        let stop = Stop::never();
        stop.cancel();
        assert_eq!(document(&page, &stop).err(), Some(Unparsed::Stopped));
        let past = Stop::at(Instant::now());
        assert_eq!(document(&page, &past).err(), Some(Unparsed::Stopped));
        {
            let _guard = Stop::never().on_drop();
        }
        let stop = Stop::never();
        drop(stop.on_drop());
        assert!(stop.reached());
    }
}
