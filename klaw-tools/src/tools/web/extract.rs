//! What a fetched body becomes: text decoded by its charset (the `Content-Type` header,
//! else a byte-order mark, else `<meta charset>` in the first bytes of an HTML page, else
//! UTF-8), HTML through readability extraction (`dom_smoothie`: the page's main content,
//! without navigation, ads and scripts) to markdown, JSON pretty-printed, other text as
//! it is. Binary content is refused by its type before its body is read. However deep a
//! page nests its elements, its tree is kept shallow and built in linear time
//! (`parse.rs`).

use encoding_rs::Encoding;

use html5ever::tendril::StrTendril;

use super::parse::{self, Stop, Unparsed};

/// How an HTML page is returned.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, crate::ToolSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Основное содержимое страницы в markdown
    #[schema(description_en = "The page's main content as markdown")]
    Markdown,
    /// Основное содержимое страницы простым текстом
    #[schema(description_en = "The page's main content as plain text")]
    Text,
    /// Основное содержимое страницы в HTML
    #[schema(description_en = "The page's main content as HTML")]
    Html,
}

/// What kind of body a `Content-Type` announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Html,
    Json,
    Text,
    /// Not text: refused.
    Binary,
}

/// The kind of `content_type` (its essence, lower-case); none is sniffed later as text.
pub(crate) fn kind_of(content_type: &str) -> Kind {
    let essence = essence(content_type);
    match essence.as_str() {
        "text/html" | "application/xhtml+xml" => Kind::Html,
        "application/json" | "text/json" => Kind::Json,
        e if e.ends_with("+json") => Kind::Json,
        "" => Kind::Text,
        e if e.starts_with("text/") => Kind::Text,
        "application/xml"
        | "application/javascript"
        | "application/ecmascript"
        | "application/x-javascript"
        | "application/yaml"
        | "application/x-yaml"
        | "application/toml"
        | "application/x-sh"
        | "application/sql"
        | "application/csv" => Kind::Text,
        e if e.ends_with("+xml") => Kind::Text,
        _ => Kind::Binary,
    }
}

/// `text/html` of `Text/HTML; charset=utf-8`.
pub(crate) fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// The `charset` parameter of a `Content-Type`.
fn header_charset(content_type: &str) -> Option<&'static Encoding> {
    content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k.trim().eq_ignore_ascii_case("charset"))
            .then(|| Encoding::for_label(v.trim().trim_matches(['"', '\'']).as_bytes()))
            .flatten()
    })
}

/// The charset an HTML page declares in a `<meta>` within its first 1024 bytes (the
/// HTML standard's prescan, simplified).
fn meta_charset(body: &[u8]) -> Option<&'static Encoding> {
    let head = &body[..body.len().min(1024)];
    let text = String::from_utf8_lossy(head).to_ascii_lowercase();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("<meta") {
        rest = &rest[at + 5..];
        let tag = &rest[..rest.find('>').unwrap_or(rest.len())];
        if let Some(i) = tag.find("charset=") {
            let value = tag[i + 8..].trim_start_matches(['"', '\'', ' ']);
            let end = value
                .find(|c: char| c == '"' || c == '\'' || c == ';' || c == '/' || c.is_whitespace())
                .unwrap_or(value.len());
            if let Some(e) = Encoding::for_label(&value.as_bytes()[..end]) {
                return Some(e);
            }
        }
    }
    None
}

/// `body` as text, by the charset its header, byte-order mark or `<meta>` declares.
/// (UTF-16 declared in a `<meta>` means UTF-8, as browsers read it.)
pub(crate) fn decode(body: &[u8], content_type: &str, kind: Kind) -> String {
    let declared = header_charset(content_type).or_else(|| {
        (kind == Kind::Html)
            .then(|| meta_charset(body))
            .flatten()
            .map(|e| e.output_encoding())
    });
    let encoding = declared.unwrap_or(encoding_rs::UTF_8);
    // A byte-order mark wins over the declaration, as in browsers.
    let (text, _, _) = encoding.decode(body);
    text.into_owned()
}

/// Whether a body without a `Content-Type` looks like binary data.
pub(crate) fn looks_binary(body: &[u8]) -> bool {
    body.iter().take(8192).any(|b| *b == 0)
}

/// An HTML page's title and main content in `format` (`render_js`'s reading of a rendered page).
#[cfg(feature = "render")]
pub(crate) fn html(page: &str, url: &str, format: Format) -> (Option<String>, String) {
    match html_until(page, url, format, &Stop::never()) {
        Ok(found) => found,
        Err(e) => {
            tracing::debug!(target: "klaw::web", "{url} was not extracted: {e:?}");
            (None, String::new())
        }
    }
}

/// An HTML page's title and main content in `format`, or why there is none: the page is
/// parsed into a tree of bounded depth in linear time (`parse.rs`), and the work stops
/// between steps, and between chunks of the page, once `stop` is reached.
pub(crate) fn html_until(
    page: &str,
    url: &str,
    format: Format,
    stop: &Stop,
) -> Result<(Option<String>, String), Unparsed> {
    let mode = match format {
        Format::Markdown => dom_smoothie::TextMode::Markdown,
        Format::Text | Format::Html => dom_smoothie::TextMode::Formatted,
    };
    let config = dom_smoothie::Config {
        text_mode: mode,
        max_elements_to_parse: 200_000,
        ..Default::default()
    };
    let document = parse::document(page, stop)?;
    // Readability changes the tree it reads: the fallback reads a copy.
    let copy = document.clone();
    let ready = |_: &dom_smoothie::ReadabilityError| {
        if stop.reached() {
            Err(Unparsed::Stopped)
        } else {
            Ok(())
        }
    };
    let parsed =
        dom_smoothie::Readability::with_document(document, Some(url), Some(config.clone()))
            .and_then(|mut r| r.parse());
    let parsed = match parsed {
        // Too large for readability: the whole body's text.
        Err(dom_smoothie::ReadabilityError::TooManyElements(..)) => {
            ready(&dom_smoothie::ReadabilityError::GrabFailed)?;
            return Ok(whole(&copy, format));
        }
        // Not an article (a short page, a list): the whole body, with no cleaning.
        Err(e) => {
            ready(&e)?;
            dom_smoothie::Readability::with_document(copy, Some(url), Some(config))
                .and_then(|mut r| r.parse_with_policy(dom_smoothie::ParsePolicy::Raw))
        }
        ok => ok,
    };
    match parsed {
        Ok(article) => {
            let title = Some(article.title.trim().to_owned()).filter(|t| !t.is_empty());
            let content = match format {
                Format::Html => article.content.to_string(),
                Format::Markdown | Format::Text => article.text_content.to_string(),
            };
            Ok((title, content.trim().to_owned()))
        }
        Err(e) => {
            ready(&e)?;
            tracing::debug!(target: "klaw::web", "readability found nothing in {url}: {e}");
            Ok((None, String::new()))
        }
    }
}

/// The title and the whole body of `document` in `format`, without its scripts and styles.
fn whole(document: &dom_query::Document, format: Format) -> (Option<String>, String) {
    let title = document.select("title").text().trim().to_owned();
    document
        .select("script, style, noscript, template, head")
        .remove();
    let body = document.select("body");
    let content = match (format, body.nodes().first()) {
        (_, None) => StrTendril::new(),
        (Format::Markdown, Some(body)) => body.md(None),
        (Format::Text, Some(body)) => body.formatted_text(),
        (Format::Html, Some(body)) => body.inner_html(),
    };
    (
        Some(title).filter(|t| !t.is_empty()),
        content.trim().to_owned(),
    )
}

/// JSON pretty-printed, or the text as it is when it is not JSON.
pub(crate) fn json(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| text.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn kinds_follow_the_content_type() {
        assert_eq!(kind_of("text/html; charset=utf-8"), Kind::Html);
        assert_eq!(kind_of("Application/JSON"), Kind::Json);
        assert_eq!(kind_of("application/ld+json"), Kind::Json);
        assert_eq!(kind_of("text/markdown"), Kind::Text);
        assert_eq!(kind_of("application/rss+xml"), Kind::Text);
        assert_eq!(kind_of(""), Kind::Text);
        for binary in [
            "image/png",
            "application/pdf",
            "application/octet-stream",
            "video/mp4",
        ] {
            assert_eq!(kind_of(binary), Kind::Binary, "{binary}");
        }
    }

    #[test]
    fn charsets_come_from_the_header_then_the_meta_tag() {
        let (cp1251, _, _) = encoding_rs::WINDOWS_1251.encode("Привет, мир");
        assert_eq!(
            decode(&cp1251, "text/plain; charset=windows-1251", Kind::Text),
            "Привет, мир"
        );
        let mut page = b"<html><head><meta charset=\"windows-1251\"></head><body>".to_vec();
        page.extend_from_slice(&cp1251);
        assert!(decode(&page, "text/html", Kind::Html).contains("Привет, мир"));
        let (sjis, _, _) = encoding_rs::SHIFT_JIS.encode("こんにちは");
        let mut page =
            b"<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=Shift_JIS\"></head><body>"
                .to_vec();
        page.extend_from_slice(&sjis);
        assert!(decode(&page, "text/html", Kind::Html).contains("こんにちは"));
        // No declaration: UTF-8, broken bytes replaced rather than refused.
        assert_eq!(decode(b"caf\xc3\xa9 \xff", "", Kind::Text), "café \u{fffd}");
    }

    #[test]
    fn json_is_pretty_printed_and_other_text_kept() {
        assert_eq!(
            json("{\"a\":[1,2]}"),
            "{\n  \"a\": [\n    1,\n    2\n  ]\n}"
        );
        assert_eq!(json("not json"), "not json");
    }
}
