//! [`Lang`]: the language of descriptions and messages, a module of its own so that the
//! context (its settings) and the tool specs (their texts) both use it without using
//! each other.

/// The language of descriptions.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    /// Russian, the default.
    #[default]
    Ru,
    /// English (falls back to Russian where a text has no English version).
    En,
}

impl std::str::FromStr for Lang {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ru" => Ok(Lang::Ru),
            "en" => Ok(Lang::En),
            other => Err(format!("unknown language `{other}`: expected `ru` or `en`")),
        }
    }
}
