//! Where `make setup` puts what Klaw downloads (models, ONNX Runtime): the one place the
//! `KLAW_CACHE` variable is read.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The Klaw cache: `KLAW_CACHE` (a leading `~` is the home directory; relative to the
/// current directory), else `~/.cache/klaw`; `None` when neither it nor `HOME` is set.
/// Variables set to the empty string count as not set.
pub fn cache_dir() -> Option<PathBuf> {
    cache_dir_from(|name| std::env::var_os(name).filter(|v| !v.is_empty()))
}

/// [`cache_dir`] with the environment given as a lookup (for the engine's
/// configuration, which reads a replaceable environment).
pub fn cache_dir_from<S: Into<OsString>>(env: impl Fn(&str) -> Option<S>) -> Option<PathBuf> {
    let home: Option<OsString> = env("HOME").map(Into::into);
    match env("KLAW_CACHE").map(Into::into) {
        Some(c) => {
            let c = Path::new(&c);
            let c = match (c.strip_prefix("~"), &home) {
                (Ok(rest), Some(h)) => PathBuf::from(h).join(rest),
                _ => c.to_path_buf(),
            };
            Some(std::path::absolute(&c).unwrap_or(c))
        }
        None => home.map(|h| PathBuf::from(h).join(".cache").join("klaw")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_then_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(
            cache_dir_from(env(&[("HOME", "/h")])),
            Some(PathBuf::from("/h/.cache/klaw"))
        );
        assert_eq!(
            cache_dir_from(env(&[("HOME", "/h"), ("KLAW_CACHE", "/c")])),
            Some(PathBuf::from("/c"))
        );
        assert_eq!(
            cache_dir_from(env(&[("HOME", "/h"), ("KLAW_CACHE", "~/k")])),
            Some(PathBuf::from("/h/k"))
        );
        let relative = cache_dir_from(env(&[("KLAW_CACHE", "rel")])).unwrap();
        assert!(relative.is_absolute() && relative.ends_with("rel"));
        assert_eq!(cache_dir_from(env(&[])), None);
    }
}
