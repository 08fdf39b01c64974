//! One declaration per key of `engine.json`: `section!` turns a list of keys (field,
//! type, default, name, variable, checks, and the doc comment as its one-line meaning)
//! into the section's struct (serde reads it), its `Default`, its environment overrides,
//! its checks, and the rows of the documentation's table ([`KeyDoc`]). Nested sections
//! (`memory`, `memory.weights`) are sections themselves.

use std::path::PathBuf;

use super::{ConfigError, Env};

/// One key as documented: the rows of `doc/config/engine-json.md` and of
/// `klaw-engine config --keys` come from these.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyDoc {
    /// The key's path in `engine.json`, e.g. `memory.weights.text`.
    pub key: String,
    /// The environment variable that overrides it, if any.
    pub env: Option<&'static str>,
    /// Its type and range, as the documentation says it.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// What a variable must hold (`a whole number`, ...), when there is a variable.
    pub env_value: &'static str,
    /// Its default, as the documentation shows it (Markdown).
    pub default: String,
    /// What it does: the doc comment of its declaration.
    pub meaning: String,
}

/// The Markdown tables of `doc/config/engine-json.md` that come from the declarations,
/// by the name of their marker (`<!-- generated: keys NAME -->` ... `<!-- end -->`):
/// `top` (the top-level keys), one per section that has keys (`memory`, `mcp`, ...,
/// `telemetry`), `env` (the variables).
#[cfg(test)]
pub(crate) fn doc_tables(keys: &[KeyDoc]) -> Vec<(String, String)> {
    let table = |rows: Vec<&KeyDoc>| {
        let mut t = String::from(
            "| key | type | default | environment variable | meaning |\n|---|---|---|---|---|\n",
        );
        for k in rows {
            let env = k.env.map(|v| format!("`{v}`")).unwrap_or_default();
            t.push_str(&format!(
                "| `{}` | {} | {} | {env} | {} |\n",
                k.key, k.kind, k.default, k.meaning
            ));
        }
        t
    };
    let top = keys.iter().filter(|k| !k.key.contains('.')).collect();
    let section = |name: &str| {
        let prefix = format!("{name}.");
        keys.iter().filter(|k| k.key.starts_with(&prefix)).collect()
    };
    let mut env = String::from("| variable | effect |\n|---|---|\n");
    for k in keys {
        if let Some(var) = k.env {
            env.push_str(&format!(
                "| `{var}` | Overrides `{}`: {}. |\n",
                k.key, k.env_value
            ));
        }
    }
    let mut tables = vec![("top".to_owned(), table(top))];
    // Every section that has keys gets its table: one added later cannot go undocumented.
    let mut sections: Vec<&str> = Vec::new();
    for k in keys {
        if let Some((name, _)) = k.key.split_once('.')
            && !sections.contains(&name)
        {
            sections.push(name);
        }
    }
    for name in sections {
        tables.push((name.to_owned(), table(section(name))));
    }
    tables.push(("env".to_owned(), env));
    tables
}

/// `doc` with each generated table replaced by `tables` (see [`doc_tables`]).
#[cfg(test)]
pub(crate) fn with_tables(doc: &str, tables: &[(String, String)]) -> String {
    let mut out = doc.to_owned();
    for (name, table) in tables {
        let start = format!("<!-- generated: keys {name} -->\n");
        let Some(from) = out.find(&start).map(|i| i + start.len()) else {
            continue;
        };
        let Some(len) = out[from..].find("<!-- end -->") else {
            continue;
        };
        out.replace_range(from..from + len, table);
    }
    out
}

/// A section of `engine.json` declared with [`section!`].
pub(crate) trait Section: Default {
    /// Appends the documentation of every key (and nested section) under `prefix`.
    fn keys(prefix: &str, out: &mut Vec<KeyDoc>);
    /// Applies the environment variables of every key.
    fn apply_env(&mut self, env: Env<'_>) -> Result<(), ConfigError>;
    /// Checks every key; an error names the key (under `prefix`) and, when a variable
    /// set it, the variable.
    fn check(&self, prefix: &str, env: Env<'_>) -> Result<(), ConfigError>;
}

/// A value an environment variable can hold.
pub(crate) trait FromEnv: Sized {
    /// What the variable must hold, for messages and the documentation.
    const EXPECTED: &'static str;
    /// Reads the variable's value.
    fn from_env(value: &str) -> Result<Self, String>;
}

macro_rules! from_env_by_parse {
    ($($t:ty => $expected:literal),* $(,)?) => {$(
        impl FromEnv for $t {
            const EXPECTED: &'static str = $expected;
            fn from_env(value: &str) -> Result<Self, String> {
                value.trim().parse().map_err(|_| format!("expected {}", $expected))
            }
        }
    )*};
}

from_env_by_parse!(u32 => "a whole number", u64 => "a whole number", usize => "a whole number", f64 => "a number");

impl FromEnv for bool {
    const EXPECTED: &'static str = "`true` or `false` (also `1`/`0`, `yes`/`no`)";
    fn from_env(value: &str) -> Result<Self, String> {
        match value {
            "1" | "true" | "yes" => Ok(true),
            "0" | "false" | "no" => Ok(false),
            _ => Err("expected true or false".into()),
        }
    }
}

impl FromEnv for String {
    const EXPECTED: &'static str = "text";
    fn from_env(value: &str) -> Result<Self, String> {
        Ok(value.to_owned())
    }
}

impl FromEnv for PathBuf {
    const EXPECTED: &'static str = "a path (relative to the current directory)";
    fn from_env(value: &str) -> Result<Self, String> {
        Ok(value.into())
    }
}

impl FromEnv for Vec<String> {
    const EXPECTED: &'static str = "comma-separated values";
    fn from_env(value: &str) -> Result<Self, String> {
        Ok(value
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .collect())
    }
}

impl<T: FromEnv> FromEnv for Option<T> {
    const EXPECTED: &'static str = T::EXPECTED;
    fn from_env(value: &str) -> Result<Self, String> {
        T::from_env(value).map(Some)
    }
}

impl FromEnv for klaw_tools::Lang {
    const EXPECTED: &'static str = "exactly `ru` or `en`";
    fn from_env(value: &str) -> Result<Self, String> {
        value.parse()
    }
}

impl FromEnv for klaw_tools::tools::shell::SandboxMode {
    const EXPECTED: &'static str = "`auto`, `bwrap`, `landlock` or `off`";
    fn from_env(value: &str) -> Result<Self, String> {
        value.parse()
    }
}

impl FromEnv for super::Provider {
    const EXPECTED: &'static str = "`openai` or `anthropic`";
    fn from_env(value: &str) -> Result<Self, String> {
        value.parse()
    }
}

impl FromEnv for super::Approval {
    const EXPECTED: &'static str = "`never`, `destructive` or `always`";
    fn from_env(value: &str) -> Result<Self, String> {
        value.parse()
    }
}

impl FromEnv for super::Protocol {
    const EXPECTED: &'static str = "`native`, `text` or `json`";
    fn from_env(value: &str) -> Result<Self, String> {
        value.parse()
    }
}

/// A value's default as the documentation shows it: its JSON in backticks.
pub(crate) fn shown<T: serde::Serialize>(value: &T) -> String {
    let json = serde_json::to_string(value).unwrap_or_default();
    format!("`{json}`")
}

/// A doc comment's lines as one line.
pub(crate) fn one_line(lines: &[&str]) -> String {
    lines
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The check "at least `min`".
pub(crate) fn at_least<T: PartialOrd + std::fmt::Display, S>(
    min: T,
) -> impl Fn(&T, &S) -> Result<(), String> {
    move |v, _| {
        if *v >= min {
            Ok(())
        } else {
            Err(format!("must be at least {min}"))
        }
    }
}

/// The check "from `min` to `max`", both included.
pub(crate) fn between<T: PartialOrd + std::fmt::Display, S>(
    min: T,
    max: T,
) -> impl Fn(&T, &S) -> Result<(), String> {
    move |v, _| {
        if *v >= min && *v <= max {
            Ok(())
        } else {
            Err(format!("must be between {min} and {max}"))
        }
    }
}

/// The check "at least `min`", for an optional value (`null` passes).
pub(crate) fn at_least_if_set<T: PartialOrd + std::fmt::Display + Clone, S>(
    min: T,
) -> impl Fn(&Option<T>, &S) -> Result<(), String> {
    let check = at_least::<T, S>(min);
    move |v, s| v.as_ref().map_or(Ok(()), |v| check(v, s))
}

/// An `http://` or `https://` URL (the checks of the URL keys share it).
pub(crate) fn http_or_https(url: &str) -> Result<(), String> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(format!("{url:?} is not an http:// or https:// URL"))
    }
}

/// Declares a section of `engine.json`; see the module docs. Each key is
///
/// ```text
/// /// Its meaning (the documentation's column and the field's rustdoc).
/// field: Type = default;
///     key "camelName", env "KLAW_VAR", type "integer ≥ 1", shown "`1` (one)", check f;
/// ```
///
/// where `env`, `shown` (the default as the documentation shows it, when not its JSON)
/// and `check` (`Fn(&Type, &Section) -> Result<(), String>`; the section is there for
/// checks across keys) are optional. Nested sections follow under `sections { ... }`.
macro_rules! section {
    (@opt) => { None };
    (@opt $v:literal) => { Some($v) };
    (@expected $ty:ty,) => { "" };
    (@expected $ty:ty, $env:literal) => { <$ty as $crate::config::keys::FromEnv>::EXPECTED };
    (@shown $v:expr,) => { $crate::config::keys::shown(&$v) };
    (@shown $v:expr, $shown:literal) => { String::from($shown) };
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            keys {
                $(
                    $(#[doc = $doc:literal])*
                    $field:ident: $ty:ty = $default:expr;
                        key $key:literal
                        $(, env $env:literal)?
                        , type $kind:literal
                        $(, shown $shown:literal)?
                        $(, check $check:expr)?
                        ;
                )*
            }
            $(sections {
                $(
                    $(#[doc = $sdoc:literal])*
                    $sfield:ident: $sty:ty; key $skey:literal;
                )*
            })?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct $name {
            $(
                $(#[doc = $doc])*
                #[serde(rename = $key)]
                pub $field: $ty,
            )*
            $($(
                $(#[doc = $sdoc])*
                #[serde(rename = $skey)]
                pub $sfield: $sty,
            )*)?
        }

        impl Default for $name {
            fn default() -> Self {
                Self {
                    $($field: $default,)*
                    $($($sfield: <$sty>::default(),)*)?
                }
            }
        }

        impl $crate::config::keys::Section for $name {
            fn keys(prefix: &str, out: &mut Vec<$crate::config::keys::KeyDoc>) {
                let defaults = Self::default();
                $(
                    out.push($crate::config::keys::KeyDoc {
                        key: format!("{prefix}{}", $key),
                        env: section!(@opt $($env)?),
                        kind: $kind,
                        env_value: section!(@expected $ty, $($env)?),
                        default: section!(@shown defaults.$field, $($shown)?),
                        meaning: $crate::config::keys::one_line(&[$($doc),*]),
                    });
                )*
                let _ = defaults;
                $($(
                    out.push($crate::config::keys::KeyDoc {
                        key: format!("{prefix}{}", $skey),
                        env: None,
                        kind: "object, the keys below",
                        env_value: "",
                        default: "all defaults".into(),
                        meaning: $crate::config::keys::one_line(&[$($sdoc),*]),
                    });
                    <$sty as $crate::config::keys::Section>::keys(
                        &format!("{prefix}{}.", $skey),
                        out,
                    );
                )*)?
            }

            fn apply_env(
                &mut self,
                env: $crate::config::Env<'_>,
            ) -> Result<(), $crate::config::ConfigError> {
                $($(
                    if let Some(value) = env($env) {
                        self.$field = $crate::config::keys::FromEnv::from_env(&value)
                            .map_err(|message| $crate::config::ConfigError::Env {
                                var: $env,
                                value: value.clone(),
                                message,
                            })?;
                    }
                )?)*
                $($(
                    $crate::config::keys::Section::apply_env(&mut self.$sfield, env)?;
                )*)?
                Ok(())
            }

            fn check(
                &self,
                prefix: &str,
                env: $crate::config::Env<'_>,
            ) -> Result<(), $crate::config::ConfigError> {
                let _ = (prefix, env);
                $({
                    let var: Option<&'static str> = section!(@opt $($env)?);
                    $(
                        if let Err(message) = ($check)(&self.$field, self) {
                            return Err($crate::config::ConfigError::Invalid {
                                key: format!("{prefix}{}", $key),
                                var: var.filter(|v| env(v).is_some()),
                                message,
                            });
                        }
                    )?
                    let _ = var;
                })*
                $($(
                    $crate::config::keys::Section::check(
                        &self.$sfield,
                        &format!("{prefix}{}.", $skey),
                        env,
                    )?;
                )*)?
                Ok(())
            }
        }
    };
}

pub(crate) use section;
