//! "Did you mean": the one ranking of names by similarity behind every suggestion Klaw
//! prints (an unknown tool, an argument's key, a `docs_read` path, a time zone). Its own
//! module, so the registry and the validator both use it without importing each other.

/// `candidates` with their similarity to `name` (Jaro-Winkler, ignoring case; 1.0 is the
/// same), most similar first. The one ranking behind every "did you mean" Klaw prints:
/// an unknown tool, a `docs_read` path, a time zone, an argument's key. Each caller keeps
/// its own threshold of what is close enough to suggest.
///
/// ```
/// let ranked = klaw_core::by_similarity("file_raed", ["shell_exec", "file_read"].into_iter());
/// assert_eq!(ranked[0].1, "file_read");
/// let suggest: Vec<&str> = ranked
///     .into_iter()
///     .filter(|(score, _)| *score > 0.8)
///     .map(|(_, name)| name)
///     .collect();
/// assert_eq!(suggest, ["file_read"]);
/// ```
pub fn by_similarity<'a>(
    name: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Vec<(f64, &'a str)> {
    let name = name.to_lowercase();
    let mut ranked: Vec<(f64, &str)> = candidates
        .map(|c| (strsim::jaro_winkler(&name, &c.to_lowercase()), c))
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
    ranked
}

/// The closest of `candidates` to `name`, if any is close enough to suggest.
pub(crate) fn closest<'a>(
    name: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    by_similarity(name, candidates)
        .into_iter()
        .find(|(score, _)| *score > 0.8)
        .map(|(_, c)| c)
}
