//! [`Secret`]: a token or key of the configuration, never printed.

use super::keys::FromEnv;

/// A token or key from the configuration: read like a string, but shown as `***` by
/// `Debug` and when serialized (`klaw-engine config`); [`Secret::expose`] gives it to the
/// one place that sends it.
#[derive(Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// A secret holding `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, to send where it belongs.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"***\"")
    }
}

impl serde::Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("***")
    }
}

impl FromEnv for Secret {
    const EXPECTED: &'static str = "text";
    fn from_env(value: &str) -> Result<Self, String> {
        Ok(Secret::new(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{env, resolve_defaults};
    use crate::config::{Config, ConfigSource, parse};
    use std::path::Path;

    #[test]
    fn api_keys_are_never_printed() {
        let raw = parse(
            Path::new("e.json"),
            r#"{"llm": {"apiKey": "sk-file-secret", "models": {"b": {"model": "m", "apiKey": "sk-named"}}}, "gateway": {"telegramToken": "sk-bot"}}"#,
        )
        .unwrap();
        let c = Config::resolve(
            raw,
            ConfigSource::File(Path::new("e.json").into()),
            &env(&[("HOME", "/h")]),
        )
        .unwrap();
        let shown = c.effective().to_string();
        assert!(!shown.contains("sk-"), "{shown}");
        assert_eq!(c.effective()["llm"]["apiKey"], "***");
        assert_eq!(c.effective()["llm"]["models"]["b"]["apiKey"], "***");
        assert_eq!(c.effective()["gateway"]["telegramToken"], "***");
        let c = resolve_defaults(&env(&[("HOME", "/h"), ("KLAW_LLM_API_KEY", "sk-env")])).unwrap();
        assert_eq!(
            c.raw.llm.api_key.as_ref().map(Secret::expose),
            Some("sk-env")
        );
        assert!(!format!("{c:?}").contains("sk-"), "Debug shows no secret");
        assert_eq!(c.effective()["llm"]["apiKey"], "***");
    }
}
