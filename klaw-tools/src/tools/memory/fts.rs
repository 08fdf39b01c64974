//! Full-text helpers: Snowball stemming (Russian and English) and FTS5 query building.
//!
//! Text is cut into words (runs of alphanumeric characters), lower-cased, and each word is
//! stemmed with the Russian stemmer if it contains a Cyrillic letter, else the English one;
//! the stems are stored in their own FTS5 column, so "кошками" finds "кошка" and
//! "running" finds "runs". A user's query is never passed to FTS5 as syntax: every term is
//! a quoted string, so `"`, `*`, `AND`, `NEAR(`, `-`, `:` and the like are just text.

use rust_stemmers::{Algorithm, Stemmer};
use std::sync::OnceLock;

fn stemmers() -> &'static (Stemmer, Stemmer) {
    static S: OnceLock<(Stemmer, Stemmer)> = OnceLock::new();
    S.get_or_init(|| {
        (
            Stemmer::create(Algorithm::Russian),
            Stemmer::create(Algorithm::English),
        )
    })
}

fn is_cyrillic(c: char) -> bool {
    matches!(c, '\u{0400}'..='\u{04FF}' | '\u{0500}'..='\u{052F}')
}

/// The lower-cased words of `text`: runs of alphanumeric characters.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase().replace('ё', "е"))
}

/// The Snowball stem of one lower-cased word (Russian if it has Cyrillic, else English).
pub fn stem(word: &str) -> String {
    let (ru, en) = stemmers();
    if word.chars().any(is_cyrillic) {
        ru.stem(word).into_owned()
    } else {
        en.stem(word).into_owned()
    }
}

/// The stems of every word of `text`, space-separated: the value of the stem column.
pub fn stem_text(text: &str) -> String {
    words(text).map(|w| stem(&w)).collect::<Vec<_>>().join(" ")
}

fn quote(term: &str) -> String {
    format!("\"{}\"", term.replace('"', "\"\""))
}

/// An FTS5 `MATCH` expression for a user's query, or `None` if it has no words.
///
/// Each word matches as itself or as its stem (`"кошками" OR "кошк"`), and the words are
/// joined with `OR`, so a chunk with more of them ranks higher under bm25 without one
/// missing word hiding it. Every term is quoted.
pub fn match_query(query: &str) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    for w in words(query) {
        let s = stem(&w);
        for t in [w, s] {
            let q = quote(&t);
            if !terms.contains(&q) {
                terms.push(q);
            }
        }
    }
    (!terms.is_empty()).then(|| terms.join(" OR "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn russian_word_forms_share_a_stem() {
        assert_eq!(stem("кошками"), stem("кошка"));
        assert_eq!(stem("собаки"), stem("собакой"));
    }

    #[test]
    fn english_word_forms_share_a_stem() {
        assert_eq!(stem("running"), stem("runs"));
        assert_eq!(stem("connection"), stem("connected"));
    }

    #[test]
    fn stem_text_handles_mixed_text() {
        assert_eq!(
            stem_text("Кошками and cats!"),
            format!("{} and cat", stem("кошками"))
        );
    }

    #[test]
    fn every_term_is_quoted() {
        let q = match_query("a\"b NEAR( c:d -e *").unwrap();
        for part in q.split(" OR ") {
            assert!(part.starts_with('"') && part.ends_with('"'), "{part}");
        }
        assert!(!q.contains("NEAR("));
    }

    #[test]
    fn query_without_words_is_none() {
        assert_eq!(match_query("\"*:-() ^"), None);
        assert_eq!(match_query(""), None);
    }
}
