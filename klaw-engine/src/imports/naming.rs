//! The names imported tools get: `<server>__<tool>`, made to fit the registry's rule
//! (`^[a-zA-Z0-9_-]{1,64}$`) with a short hash of the original when it does not.

use sha2::{Digest, Sha256};

/// The registry's longest tool name.
const MAX_NAME: usize = 64;
/// Hex digits of the hash suffix: 8 (32 bits), enough to tell a server's tools apart.
const HASH_DIGITS: usize = 8;

/// The name `tool` of `server` is imported as: `<server>__<tool>` when that is a valid
/// tool name; otherwise each character outside `[a-zA-Z0-9_-]` becomes `_`, the name is
/// cut to fit 64 characters, and `_` plus 8 hex digits of the SHA-256 of the original
/// `<server>__<tool>` are appended. The same server and tool always give the same name,
/// across restarts; two tools the rule would merge keep apart by their hash.
pub(crate) fn imported_name(server: &str, tool: &str) -> String {
    let full = format!("{server}__{tool}");
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if full.len() <= MAX_NAME && full.chars().all(valid) {
        return full;
    }
    let digest = Sha256::digest(full.as_bytes());
    let hash: String = digest
        .iter()
        .take(HASH_DIGITS / 2)
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut name: String = full
        .chars()
        .map(|c| if valid(c) { c } else { '_' })
        .take(MAX_NAME - HASH_DIGITS - 1)
        .collect();
    name.push('_');
    name.push_str(&hash);
    name
}

/// Whether `name` is in the names the tools of `server` are imported as: the start of
/// `<server>__` (its characters outside `[a-zA-Z0-9_-]` as `_`, cut as
/// [`imported_name`] cuts), so every name [`imported_name`] gives for `server` is in it,
/// whatever the server lists now or later.
pub(crate) fn owned_by(server: &str, name: &str) -> bool {
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let prefix: String = format!("{server}__")
        .chars()
        .map(|c| if valid(c) { c } else { '_' })
        .take(MAX_NAME - HASH_DIGITS - 1)
        .collect();
    name.starts_with(&prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_name_is_kept_as_is() {
        assert_eq!(imported_name("files", "read_file"), "files__read_file");
        let exact = format!("s__{}", "t".repeat(61));
        assert_eq!(imported_name("s", &"t".repeat(61)), exact);
    }

    #[test]
    fn every_imported_name_is_owned_by_its_server() {
        let long_server = "s".repeat(70);
        for (server, tool) in [
            ("files", "read_file"),
            ("files", &*"x".repeat(100)),
            ("my.server", "get weather"),
            (&*long_server, "t"),
            ("s", "погода"),
        ] {
            let name = imported_name(server, tool);
            assert!(owned_by(server, &name), "{server} {tool}: {name}");
        }
        assert!(owned_by("files", "files__anything"));
        assert!(!owned_by("files", "files_read"));
        assert!(!owned_by("files", "filesystem__read"));
        assert!(!owned_by("files", "read_file"));
    }

    #[test]
    fn a_long_or_odd_name_is_shortened_with_a_stable_hash() {
        let long = "x".repeat(100);
        let a = imported_name("everything", &long);
        assert_eq!(a.len(), 64);
        assert_eq!(a, imported_name("everything", &long), "stable");
        assert!(a.starts_with("everything__xxx"));
        let b = imported_name("everything", &format!("{long}y"));
        assert_ne!(a, b, "two long names that share a prefix stay apart");
        let odd = imported_name("s", "get.weather/now");
        assert!(odd.starts_with("s__get_weather_now_"), "{odd}");
        assert_ne!(odd, imported_name("s", "get_weather_now"));
        let cyrillic = imported_name("s", "погода");
        assert!(
            cyrillic
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        );
        assert!(cyrillic.len() <= 64);
    }
}
