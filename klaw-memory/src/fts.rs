//! Full-text helpers: Snowball stemming (Russian and English) and FTS5 query building.
//!
//! Text is cut into words (runs of alphanumeric characters), lower-cased, and each word is
//! stemmed with the Russian stemmer if it contains a Cyrillic letter, else the English one;
//! the stems are stored in their own FTS5 column, so "кошками" finds "кошка" and
//! "running" finds "runs". A user's query is never passed to FTS5 as syntax: every term is
//! a quoted string, so `"`, `*`, `AND`, `NEAR(`, `-`, `:` and the like are just text.
//!
//! Stop words ("the", "what", "на", "какой", ...) are dropped from a query (not from the
//! stored text) unless the query has nothing else. Otherwise a question whose real words
//! are not in any chunk (a Russian question about an English note) still fills the text
//! ranking with chunks that share only "на" or "the" (with the rank fusion hybrid search
//! used before issue 30 they pushed the vector side's answer down). Hybrid search weighs
//! the words a chunk holds by their rarity in the index ([`idf_coverage`]).

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
pub(super) fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase().replace('ё', "е"))
}

/// English stop words: Snowball's list, plus the pieces our word splitting makes of
/// contractions (`don't` gives `don` and `t`).
#[rustfmt::skip]
const STOP_EN: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any",
    "are", "as", "at", "be", "because", "been", "before", "being", "below", "between",
    "both", "but", "by", "could", "d", "did", "do", "does", "doing", "don", "down",
    "during", "each", "few", "for", "from", "further", "had", "has", "have", "having",
    "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if",
    "in", "into", "is", "it", "its", "itself", "ll", "m", "me", "more", "most", "my",
    "myself", "nor", "of", "off", "on", "once", "only", "or", "other", "ought", "our",
    "ours", "ourselves", "out", "over", "own", "re", "s", "same", "she", "should", "so",
    "some", "such", "t", "than", "that", "the", "their", "theirs", "them", "themselves",
    "then", "there", "these", "they", "this", "those", "through", "to", "too", "under",
    "until", "up", "ve", "very", "was", "we", "were", "what", "when", "where", "which",
    "while", "who", "whom", "why", "with", "would", "you", "your", "yours", "yourself",
    "yourselves",
];

/// Russian stop words: Snowball's list without the words that carry meaning in a note
/// (`нельзя`, `можно`, `надо`, `никогда`, numbers, ...), plus the forms of `какой`,
/// `который` and `сколько`. Lower case, `ё` written `е`.
#[rustfmt::skip]
const STOP_RU: &[&str] = &[
    "а", "без", "бы", "был", "была", "были", "было", "быть", "в", "вам", "вас", "ведь",
    "во", "вот", "все", "всего", "всех", "вы", "где", "да", "даже", "для", "до", "его",
    "ее", "ей", "ему", "если", "есть", "еще", "же", "за", "здесь", "и", "из", "или",
    "им", "их", "к", "как", "какая", "какие", "каким", "каких", "какое", "какой",
    "каком", "какую", "когда", "которая", "которые", "который", "которых", "кто",
    "куда", "ли", "меня", "мне", "мной", "мы", "на", "над", "нас", "него", "нее", "ней",
    "нибудь", "ним", "них", "но", "ну", "о", "об", "он", "она", "они", "оно", "от",
    "по", "под", "при", "про", "с", "сколько", "со", "так", "там", "те", "тем", "то",
    "того", "тоже", "той", "только", "том", "ты", "у", "уж", "уже", "чего", "чем",
    "что", "чтоб", "чтобы", "эта", "эти", "это", "этого", "этой", "этом", "этот", "эту",
    "я",
];

fn is_stop_word(word: &str) -> bool {
    STOP_EN.binary_search(&word).is_ok() || STOP_RU.binary_search(&word).is_ok()
}

/// The Snowball stem of one lower-cased word (Russian if it has Cyrillic, else English).
pub(super) fn stem(word: &str) -> String {
    let (ru, en) = stemmers();
    if word.chars().any(is_cyrillic) {
        ru.stem(word).into_owned()
    } else {
        en.stem(word).into_owned()
    }
}

/// The stems of every word of `text`, space-separated: the value of the stem column.
pub(super) fn stem_text(text: &str) -> String {
    words(text).map(|w| stem(&w)).collect::<Vec<_>>().join(" ")
}

fn quote(term: &str) -> String {
    format!("\"{}\"", term.replace('"', "\"\""))
}

/// An FTS5 `MATCH` expression for a user's query, or `None` if it has no words.
///
/// Each word matches as itself or as its stem (`"кошками" OR "кошк"`), and the words are
/// joined with `OR`, so a chunk with more of them ranks higher under bm25 without one
/// missing word hiding it. Stop words are left out unless every word is one. Every term
/// is quoted.
pub(super) fn match_query(query: &str) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    for (w, s) in query_terms(query) {
        for t in [w, s] {
            let q = quote(&t);
            if !terms.contains(&q) {
                terms.push(q);
            }
        }
    }
    (!terms.is_empty()).then(|| terms.join(" OR "))
}

/// The words a query is searched by, each with its stem: its words without the stop
/// words (all of them if every word is one), without repeats.
pub(super) fn query_terms(query: &str) -> Vec<(String, String)> {
    let all: Vec<String> = words(query).collect();
    let content: Vec<String> = all.iter().filter(|w| !is_stop_word(w)).cloned().collect();
    let mut chosen = if content.is_empty() { all } else { content };
    let mut seen = std::collections::HashSet::new();
    chosen.retain(|w| seen.insert(w.clone()));
    chosen
        .into_iter()
        .map(|w| {
            let s = stem(&w);
            (w, s)
        })
        .collect()
}

/// [`min_should_match`] builds its expression for at most this many query words
/// (C(6, 4) = 15 groups); longer queries get `None`. Every group's phrases are scanned
/// for bm25, so the expression must stay small.
pub(super) const MAX_MIN_SHOULD_MATCH_TERMS: usize = 6;

/// An FTS5 `MATCH` expression for the chunks that contain **more than half** of `terms`
/// (from [`query_terms`]; each as its word or its stem), or one of its [codes](is_code):
/// "minimum should match", the rule of [`coverage`] written for the index, so the
/// index finds exactly those chunks instead of ranking every chunk with any one word.
///
/// The expression is an `OR` of one `AND` group per way to pick the required number of
/// words. bm25 counts a word's hits once for each group that matches the chunk, so
/// among the chunks found, those with more of the words rank higher still. `None` when
/// there are no terms or more than [`MAX_MIN_SHOULD_MATCH_TERMS`] (the caller filters
/// with [`coverage`] instead).
pub(super) fn min_should_match(terms: &[(String, String)]) -> Option<String> {
    let n = terms.len();
    if n == 0 || n > MAX_MIN_SHOULD_MATCH_TERMS {
        return None;
    }
    let term = |(w, s): &(String, String)| {
        if w == s {
            quote(w)
        } else {
            format!("({} OR {})", quote(w), quote(s))
        }
    };
    let need = n / 2 + 1;
    let mut groups = Vec::new();
    let mut pick: Vec<usize> = (0..need).collect();
    loop {
        let group: Vec<String> = pick.iter().map(|&i| term(&terms[i])).collect();
        groups.push(if need == 1 {
            group.concat()
        } else {
            format!("({})", group.join(" AND "))
        });
        // the next combination in lexicographic order
        let Some(i) = (0..need).rev().find(|&i| pick[i] < n - need + i) else {
            break;
        };
        pick[i] += 1;
        for j in i + 1..need {
            pick[j] = pick[j - 1] + 1;
        }
    }
    groups.extend(
        terms
            .iter()
            .filter(|(w, _)| is_code(w))
            .map(|(w, _)| quote(w)),
    );
    Some(groups.join(" OR "))
}

/// Whether a word looks like a code: letters and digits mixed, at least 4 characters
/// (`qx7l9m`, `tp1271`, `inv2093`). Such words are what a text index finds and a
/// sentence model does not see.
pub(super) fn is_code(word: &str) -> bool {
    word.chars().count() >= 4
        && word.chars().any(|c| c.is_numeric())
        && word.chars().any(|c| c.is_alphabetic())
}

/// How well `text` matches `terms` (from [`query_terms`]): the share of the terms it
/// contains, as the word or its stem (1.0 when it has them all, or when there are no
/// terms), and whether one of those is a [code](is_code).
pub(super) fn coverage(terms: &[(String, String)], text: &str) -> (f64, bool) {
    if terms.is_empty() {
        return (1.0, false);
    }
    let mut have = std::collections::HashSet::new();
    for w in words(text) {
        have.insert(stem(&w));
        have.insert(w);
    }
    let found: Vec<&String> = terms
        .iter()
        .filter(|(w, s)| have.contains(w) || have.contains(s))
        .map(|(w, _)| w)
        .collect();
    let code = found.iter().any(|w| is_code(w));
    (found.len() as f64 / terms.len() as f64, code)
}

/// The share of the query's information `text` holds: the [IDF](idf) of each of
/// `terms` it contains (as the word or its stem) over the IDF of them all; `idf[i]` is
/// the weight of `terms[i]`. 0 when there are no terms or no weight.
pub(super) fn idf_coverage(terms: &[(String, String)], idf: &[f64], text: &str) -> f64 {
    let total: f64 = idf.iter().take(terms.len()).sum();
    if terms.is_empty() || total.is_nan() || total <= 0.0 {
        return 0.0;
    }
    // Only a word that begins like a term can be it or share its stem (stemming keeps a
    // word's first letters): the others are not stemmed, which is most of the cost.
    let prefix = |t: &str| t.chars().take(3).collect::<String>();
    let starts: std::collections::HashSet<String> = terms
        .iter()
        .flat_map(|(w, s)| [prefix(w), prefix(s)])
        .collect();
    let mut have = std::collections::HashSet::new();
    for w in words(text) {
        if starts.contains(&prefix(&w)) {
            have.insert(stem(&w));
            have.insert(w);
        }
    }
    let found: f64 = terms
        .iter()
        .zip(idf)
        .filter(|((w, s), _)| have.contains(w) || have.contains(s))
        .map(|(_, x)| x)
        .sum();
    (found / total).clamp(0.0, 1.0)
}

/// Whether most of `text`'s letters are Cyrillic (`Some(true)`), or not; `None` without
/// letters.
pub(super) fn mostly_cyrillic(text: &str) -> Option<bool> {
    let (mut cyr, mut other) = (0_usize, 0_usize);
    for c in text.chars().filter(|c| c.is_alphabetic()) {
        if is_cyrillic(c) {
            cyr += 1;
        } else {
            other += 1;
        }
    }
    (cyr + other > 0).then_some(cyr > other)
}

/// bm25's inverse document frequency of a term found in `df` of `n` chunks:
/// `ln(1 + (n - df + 0.5) / (df + 0.5))`, always above 0.
pub(super) fn idf(df: u64, n: u64) -> f64 {
    let (df, n) = (df as f64, n.max(df) as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_counts_query_words_found_as_words_or_stems() {
        let t = query_terms("Where does Alex's wife work?");
        assert_eq!(t.len(), 3, "{t:?}"); // alex, wife, work (where/does/s are stop words)
        assert_eq!(coverage(&t, "Alex likes chess."), (1.0 / 3.0, false));
        assert_eq!(coverage(&t, "Alex's wife works at a clinic."), (1.0, false));
        assert_eq!(
            coverage(&query_terms("кошками"), "Кошка спит."),
            (1.0, false)
        );
        assert_eq!(coverage(&[], "anything"), (1.0, false));
        let t = query_terms("Бронь QX7L9M — какой рейс?");
        assert_eq!(coverage(&t, "Booking code QX7L9M."), (1.0 / 3.0, true));
        assert!(is_code("tp1271") && !is_code("2024") && !is_code("a1") && !is_code("рейс"));
    }

    #[test]
    fn idf_coverage_weighs_rare_words() {
        let terms = query_terms("какой кофе любит пользователь");
        assert_eq!(terms.len(), 3);
        // "пользователь" in 40 of 44 chunks, "кофе" in 1, "любит" in 2
        let w = [idf(1, 44), idf(2, 44), idf(40, 44)];
        let weights: Vec<f64> = terms
            .iter()
            .map(|(t, _)| match t.as_str() {
                "кофе" => w[0],
                "любит" => w[1],
                _ => w[2],
            })
            .collect();
        let common = idf_coverage(&terms, &weights, "Пользователь живёт на девятом этаже");
        let rare = idf_coverage(&terms, &weights, "Кофе — только без сахара");
        assert!(common < 0.1 && rare > 0.5, "{common} {rare}");
        assert!((idf_coverage(&terms, &weights, "пользователь любит кофе") - 1.0).abs() < 1e-9);
        // word forms count, as the stems the index keeps
        let forms = query_terms("happy running");
        assert_eq!(idf_coverage(&forms, &[1.0, 1.0], "Happiness runs"), 1.0);
        assert_eq!(idf_coverage(&forms, &[1.0, 1.0], "a happy dog"), 0.5);
        assert_eq!(idf_coverage(&[], &[], "x"), 0.0);
        assert_eq!(idf_coverage(&terms, &[0.0, 0.0, 0.0], "кофе"), 0.0);
        assert!(idf(0, 0) > 0.0 && idf(5, 3) > 0.0);
    }

    #[test]
    fn min_should_match_needs_more_than_half_of_the_words() {
        let t = |q: &str| query_terms(q);
        assert_eq!(min_should_match(&t("")), None);
        assert_eq!(
            min_should_match(&t("garage")).unwrap(),
            r#"("garage" OR "garag")"#
        );
        // two words: both; three words: two of them
        assert_eq!(
            min_should_match(&t("garage key")).unwrap(),
            r#"(("garage" OR "garag") AND "key")"#
        );
        assert_eq!(
            min_should_match(&t("key cat dog")).unwrap(),
            r#"("key" AND "cat") OR ("key" AND "dog") OR ("cat" AND "dog")"#
        );
        // a code is enough on its own, as the word or its stem
        assert_eq!(
            min_should_match(&t("QX7L9M flight booking")).unwrap(),
            r#"("qx7l9m" AND "flight") OR ("qx7l9m" AND ("booking" OR "book")) OR ("flight" AND ("booking" OR "book")) OR "qx7l9m""#
        );
        let many = t("one two three four five six seven");
        assert_eq!(many.len(), 7);
        assert_eq!(min_should_match(&many), None);
        let six = min_should_match(&many[..6]).unwrap();
        assert_eq!(six.split(" OR (").count(), 15); // C(6, 4)
    }

    #[test]
    fn min_should_match_quotes_every_term() {
        let q = min_should_match(&query_terms("a\"b NEAR( c:d -e *")).unwrap();
        assert!(!q.contains("NEAR("), "{q}");
        for t in q.split(['(', ')', ' ']).filter(|t| !t.is_empty()) {
            assert!(
                ["AND", "OR"].contains(&t) || (t.starts_with('"') && t.ends_with('"')),
                "{t} in {q}"
            );
        }
    }

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
    fn stop_words_are_left_out_of_a_query() {
        assert_eq!(
            match_query("Where is the garage key?").unwrap(),
            r#""garage" OR "garag" OR "key""#
        );
        assert_eq!(
            match_query("На какое число?").unwrap(),
            format!(r#""число" OR "{}""#, stem("число"))
        );
    }

    #[test]
    fn a_query_of_stop_words_only_keeps_them() {
        assert_eq!(
            match_query("What is it").unwrap(),
            r#""what" OR "is" OR "it""#
        );
    }

    #[test]
    fn stop_word_lists_are_lower_case_and_sorted() {
        for list in [STOP_EN, STOP_RU] {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "{list:?}");
            for w in list {
                assert_eq!(*w, w.to_lowercase().replace('ё', "е"));
            }
        }
    }

    #[test]
    fn query_without_words_is_none() {
        assert_eq!(match_query("\"*:-() ^"), None);
        assert_eq!(match_query(""), None);
    }
}
