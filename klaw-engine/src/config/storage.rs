//! The `storage` section: where the engine keeps what engines share. Today one key,
//! `storage.url`: unset, everything stays in SQLite files in the data dir; a
//! `postgres://` URL puts the scheduler's jobs, runs and leases, the agent's history
//! and core memory in that PostgreSQL, so that several engines share them
//! (`doc/scaling.md`).

use super::keys::section;

section! {
    /// The `storage` section of `engine.json`: the database engines share. Every key is
    /// optional.
    pub struct StorageSection {
        keys {
            /// A PostgreSQL database (`postgres://user:password@host:5432/db`, a unix
            /// socket as `postgres://user@%2Frun%2Fpostgresql/db` or `?host=/run/postgresql`)
            /// that holds the scheduler's jobs, runs and leases, the agent's history and
            /// core memory, shared by every engine given the same URL; unset, they stay in
            /// the data dir (`schedule.sqlite`, `agent.db`, `core_memory.json`). The
            /// password is never printed (`config` shows `***`).
            url: Option<DatabaseUrl> = None;
                key "url", env "KLAW_DATABASE_URL",
                type "string (`postgres://` URL) or `null`", check postgres_url;
        }
    }
}

fn postgres_url(url: &Option<DatabaseUrl>, _: &StorageSection) -> Result<(), String> {
    url.as_ref().map_or(Ok(()), DatabaseUrl::check)
}

/// A `postgres://` URL from the configuration: read like a string; its password is
/// shown as `***` by `Debug`, `Display` and when serialized (`klaw-engine config`), and
/// [`DatabaseUrl::expose`] gives it whole to the one place that connects.
#[derive(Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    /// The URL `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }

    /// The URL itself, password included, to connect with.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The URL with its password (in the user part or a `password=` parameter) shown as
    /// `***`: what logs and errors may say.
    pub fn redacted(&self) -> String {
        let url = &self.0;
        let mut out = match url.split_once("://") {
            Some((scheme, rest)) => {
                let end = rest.find(['/', '?']).unwrap_or(rest.len());
                let (authority, tail) = rest.split_at(end);
                let authority = match authority.rsplit_once('@') {
                    Some((user, host)) => match user.split_once(':') {
                        Some((name, _)) => format!("{name}:***@{host}"),
                        None => authority.to_owned(),
                    },
                    None => authority.to_owned(),
                };
                format!("{scheme}://{authority}{tail}")
            }
            None => url.clone(),
        };
        if let Some(q) = out.find('?') {
            let (head, query) = out.split_at(q + 1);
            let query = query
                .split('&')
                .map(|kv| {
                    if kv.to_ascii_lowercase().starts_with("password=") {
                        "password=***".to_owned()
                    } else {
                        kv.to_owned()
                    }
                })
                .collect::<Vec<_>>()
                .join("&");
            out = format!("{head}{query}");
        }
        out
    }

    /// Whether it is a PostgreSQL URL the client can read; the error says why not,
    /// without the password.
    pub fn check(&self) -> Result<(), String> {
        let url = self.0.trim();
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(format!(
                "`{}` is not a PostgreSQL URL: it must begin with postgres://",
                self.redacted()
            ));
        }
        url.parse::<tokio_postgres::Config>()
            .map(|_| ())
            .map_err(|e| format!("`{}` is not a valid PostgreSQL URL: {e}", self.redacted()))
    }
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.redacted())
    }
}

impl std::fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl serde::Serialize for DatabaseUrl {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.redacted())
    }
}

impl super::keys::FromEnv for DatabaseUrl {
    const EXPECTED: &'static str = "a `postgres://` URL";
    fn from_env(value: &str) -> Result<Self, String> {
        Ok(Self::new(value.trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_never_shown() {
        for (url, shown) in [
            (
                "postgres://klaw:s3cret@db.example:5432/klaw",
                "postgres://klaw:***@db.example:5432/klaw",
            ),
            (
                "postgres://klaw@%2Ftmp%2Fdir/klaw?password=s3cret&sslmode=disable",
                "postgres://klaw@%2Ftmp%2Fdir/klaw?password=***&sslmode=disable",
            ),
            ("postgresql://u:p%40ss@h/db", "postgresql://u:***@h/db"),
        ] {
            let u = DatabaseUrl::new(url);
            assert_eq!(u.redacted(), shown);
            assert_eq!(u.to_string(), shown);
            assert!(!format!("{u:?}").contains("s3cret"));
            assert_eq!(serde_json::to_string(&u).unwrap(), format!("\"{shown}\""));
            assert!(u.check().is_ok(), "{url}");
        }
        let bad = DatabaseUrl::new("mysql://root:s3cret@h/db")
            .check()
            .unwrap_err();
        assert!(
            bad.contains("not a PostgreSQL URL") && !bad.contains("s3cret"),
            "{bad}"
        );
        let bad = DatabaseUrl::new("postgres://u:s3cret@h:notaport/db")
            .check()
            .unwrap_err();
        assert!(!bad.contains("s3cret"), "{bad}");
    }
}
