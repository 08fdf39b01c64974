//! The `storage` section: where the engine keeps what engines share, and this engine's
//! name among them (`storage.engineId`). `storage.url`: unset, everything stays in SQLite
//! files in the data dir; a `postgres://` URL puts the scheduler's jobs, runs and leases,
//! the agent's history, the gateway's inbox, core memory and the memory index in that
//! PostgreSQL, so that several engines share them (`doc/scaling.md`).

use std::path::PathBuf;

use super::keys::section;

section! {
    /// The `storage` section of `engine.json`: the database engines share. Every key is
    /// optional.
    pub struct StorageSection {
        keys {
            /// A PostgreSQL database (`postgres://user:password@host:5432/db`, a unix
            /// socket as `postgres://user@%2Frun%2Fpostgresql/db` or `?host=/run/postgresql`)
            /// that holds the scheduler's jobs, runs and leases, the agent's history, the
            /// gateway's inbox, core memory and the memory index (pgvector), shared by
            /// every engine given the same URL; unset, they stay in the data dir
            /// (`schedule.sqlite`, `agent.db`, `gateway.db`, `core_memory.json`,
            /// `memory.sqlite`). The
            /// password is never printed (`config` shows `***`). Over TCP, TLS (rustls)
            /// as libpq's `sslmode` and `sslrootcert` in the URL ask:
            /// `?sslmode=verify-full&sslrootcert=/etc/klaw/db-ca.pem`.
            url: Option<DatabaseUrl> = None;
                key "url", env "KLAW_DATABASE_URL",
                type "string (`postgres://` URL) or `null`", check postgres_url;
            /// This engine's name among the engines that share `storage.url` (`e1`,
            /// `eu-west-2`): letters, digits, `-` and `_`, at most 40. It begins the id
            /// under which the engine holds scheduled runs (`e1-pid123-5f3a9c`, shown by
            /// `schedule list`; the process and a random part keep a restarted engine
            /// apart from the one it replaces) and, set, the id of every MCP session it
            /// serves over HTTP (`e1.<uuid>`), so that a load balancer can send a
            /// session's requests to the engine that holds it (`doc/scaling.md`). Unset,
            /// the host's name begins the lease id and session ids are bare uuids.
            engine_id: Option<String> = None;
                key "engineId", env "KLAW_ENGINE_ID", type "string or `null`",
                check engine_name;
        }
    }
}

fn postgres_url(url: &Option<DatabaseUrl>, _: &StorageSection) -> Result<(), String> {
    url.as_ref().map_or(Ok(()), DatabaseUrl::check)
}

/// The longest `storage.engineId`.
pub(super) const ENGINE_ID_MAX: usize = 40;

fn engine_name(id: &Option<String>, _: &StorageSection) -> Result<(), String> {
    let Some(id) = id else { return Ok(()) };
    if id.is_empty() || id.len() > ENGINE_ID_MAX {
        return Err(format!("`{id}` must have 1 to {ENGINE_ID_MAX} characters"));
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "`{id}` may hold only ASCII letters, digits, `-` and `_` (it begins MCP session ids and lease ids)"
        ));
    }
    Ok(())
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
    pub(crate) fn check(&self) -> Result<(), String> {
        self.settings().map(|_| ())
    }

    /// The client's settings and the TLS the URL asks for. libpq's `sslmode` values are
    /// read (`disable`, `prefer`, `require`, `verify-ca`, `verify-full`) and its
    /// `sslrootcert` (a PEM file of the CA certificates to trust), which the client
    /// itself does not know: they are taken out of the URL it is given.
    pub(crate) fn settings(&self) -> Result<(tokio_postgres::Config, Tls), String> {
        let url = self.0.trim();
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(format!(
                "`{}` is not a PostgreSQL URL: it must begin with postgres://",
                self.redacted()
            ));
        }
        let mut tls = Tls {
            mode: SslMode::Prefer,
            root_cert: None,
        };
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut kept = Vec::new();
        for kv in query.split('&').filter(|kv| !kv.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            match k {
                "sslmode" => {
                    tls.mode = match v {
                        "disable" => SslMode::Disable,
                        "prefer" | "allow" => SslMode::Prefer,
                        "require" => SslMode::Require,
                        "verify-ca" => SslMode::VerifyCa,
                        "verify-full" => SslMode::VerifyFull,
                        other => {
                            return Err(format!(
                                "`{}`: sslmode `{other}` is not one of disable, prefer, require, \
                                 verify-ca, verify-full",
                                self.redacted()
                            ));
                        }
                    };
                }
                "sslrootcert" => tls.root_cert = Some(PathBuf::from(percent_decoded(v))),
                _ => kept.push(kv),
            }
        }
        if matches!(tls.mode, SslMode::VerifyCa | SslMode::VerifyFull) && tls.root_cert.is_none() {
            return Err(format!(
                "`{}`: sslmode={} needs sslrootcert=<a PEM file of the CA certificates to trust>",
                self.redacted(),
                tls.mode.name()
            ));
        }
        // The client's own sslmode: TLS or not (what is verified is the connector's).
        kept.push(match tls.mode {
            SslMode::Disable => "sslmode=disable",
            SslMode::Prefer => "sslmode=prefer",
            _ => "sslmode=require",
        });
        let url = format!("{base}?{}", kept.join("&"));
        let config = url
            .parse::<tokio_postgres::Config>()
            .map_err(|e| format!("`{}` is not a valid PostgreSQL URL: {e}", self.redacted()))?;
        Ok((config, tls))
    }
}

/// `%XX` escapes of a URL's query value decoded (a path such as `%2Fetc%2Fca.pem`).
fn percent_decoded(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// libpq's `sslmode`: whether the connection is encrypted, and what of the server's
/// certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS when the server offers it (TCP), its certificate not checked; plain text
    /// otherwise. The default, as libpq's.
    Prefer,
    /// TLS or no connection; the certificate checked against `sslrootcert` when one is
    /// given (as libpq), else not at all (encrypted, the server not authenticated).
    Require,
    /// TLS, the certificate's chain checked against `sslrootcert`, not its name.
    VerifyCa,
    /// TLS, the certificate's chain checked against `sslrootcert` and its name against
    /// the host connected to.
    VerifyFull,
}

impl SslMode {
    /// Its name in a URL.
    pub fn name(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }
}

/// The TLS a `storage.url` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tls {
    /// `sslmode`.
    pub mode: SslMode,
    /// `sslrootcert`: the CA certificates (PEM) to trust.
    pub root_cert: Option<PathBuf>,
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
    fn an_engine_id_is_a_short_plain_name() {
        let s = StorageSection::default();
        for good in ["e1", "eu-west_2", &"a".repeat(ENGINE_ID_MAX)] {
            assert!(engine_name(&Some(good.to_owned()), &s).is_ok(), "{good}");
        }
        assert!(engine_name(&None, &s).is_ok());
        for bad in ["", "e.1", "e 1", "é", &"a".repeat(ENGINE_ID_MAX + 1)] {
            let e = engine_name(&Some(bad.to_owned()), &s).unwrap_err();
            assert!(e.contains(&format!("`{bad}`")), "{e}");
        }
    }

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
