//! The guard every web request goes through: the first URL and each redirect hop are
//! checked (scheme, IP-literal host, allowed private hosts), every address a name
//! resolves to is checked before a connection is made, and the connection goes to the
//! addresses that were checked (they are what the resolver hands the HTTP client), so a
//! name that answers differently the second time (DNS rebinding) gains nothing.
//!
//! Hosts are read as the WHATWG URL standard reads them (the `url` crate): `2130706433`,
//! `0x7f.1`, `0177.0.0.1`, `127.1`, fullwidth digits, percent-encoding and a trailing dot
//! all become the IP address they spell, and an IP-literal host is checked here because
//! the HTTP client never asks the resolver about it.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use url::{Host, Url};

use super::address::refusal;
use super::settings::WebSettings;

/// Most redirects followed.
pub const MAX_REDIRECTS: usize = 5;

/// Why a request was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// Not http or https.
    #[error("only http and https URLs are allowed, not `{scheme}:`")]
    Scheme {
        /// The URL's scheme.
        scheme: String,
    },
    /// The URL has no host.
    #[error("the URL has no host")]
    NoHost,
    /// The host is, or resolves to, an address the web tools may not reach.
    #[error(
        "access to private and internal addresses is not allowed: `{host}` is {ip}, {why} \
         (web.allowedPrivateHosts lists the private services that may be reached)"
    )]
    Private {
        /// The host as written in the URL (normalised).
        host: String,
        /// The address.
        ip: IpAddr,
        /// Which special range it is in.
        why: &'static str,
    },
    /// A private service on the allow-list, asked on a port it is not allowed on.
    #[error(
        "access to private and internal addresses is not allowed: `{host}` may be reached \
         on port {allowed} only (web.allowedPrivateHosts), not on {port}"
    )]
    OtherPort {
        /// The host.
        host: String,
        /// The port asked.
        port: u16,
        /// The port allowed (the first, when several are).
        allowed: u16,
    },
    /// A name that resolves to nothing.
    #[error("`{host}` resolves to no address")]
    NoAddress {
        /// The name.
        host: String,
    },
    /// The name could not be resolved.
    #[error("cannot resolve `{host}`: {detail}")]
    Dns {
        /// The name.
        host: String,
        /// The resolver's error.
        detail: String,
    },
    /// Too many redirects.
    #[error("more than {MAX_REDIRECTS} redirects")]
    TooManyRedirects,
}

/// The checks, built from the settings.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    /// Allowed private `(host, port)` pairs, hosts lower-case and normalised.
    allowed: Vec<(String, u16)>,
    /// Names answered without DNS.
    hosts: HashMap<String, Vec<IpAddr>>,
}

impl Guard {
    /// The guard for `settings`. An allowed host that is not `host:port` is skipped with
    /// a warning (the engine checks the key when it reads it).
    pub fn new(settings: &WebSettings) -> Self {
        let allowed = settings
            .allowed_private_hosts
            .iter()
            .filter_map(|entry| match parse_host_port(entry) {
                Some(pair) => Some(pair),
                None => {
                    tracing::warn!(target: "klaw::web", "web.allowedPrivateHosts: `{entry}` is not host:port; skipped");
                    None
                }
            })
            .collect();
        Self {
            allowed,
            hosts: settings.hosts.clone(),
        }
    }

    fn is_allowed(&self, host: &str, port: u16) -> bool {
        self.allowed.iter().any(|(h, p)| h == host && *p == port)
    }

    fn allows_name(&self, name: &str) -> bool {
        self.allowed.iter().any(|(h, _)| h == name)
    }

    /// Checks `url` before a request or a redirect to it: the scheme, and an IP-literal
    /// host's address (a name's addresses are checked when it is resolved).
    pub fn check_url(&self, url: &Url) -> Result<(), Refused> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Refused::Scheme {
                scheme: url.scheme().to_owned(),
            });
        }
        let port = url.port_or_known_default().unwrap_or(0);
        let ip = match url.host() {
            None => return Err(Refused::NoHost),
            Some(Host::Domain(_)) => return Ok(()),
            Some(Host::Ipv4(v4)) => IpAddr::V4(v4),
            Some(Host::Ipv6(v6)) => IpAddr::V6(v6),
        };
        let host = url.host_str().unwrap_or_default();
        if self.is_allowed(host, port) {
            return Ok(());
        }
        match refusal(ip) {
            Some(why) => Err(Refused::Private {
                host: host.to_owned(),
                ip,
                why,
            }),
            None => Ok(()),
        }
    }

    /// The addresses of `name`, every one checked: all of them, or the refusal of the
    /// first that may not be reached.
    pub async fn resolve(&self, name: &str) -> Result<Vec<IpAddr>, Refused> {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let ips: Vec<IpAddr> = match self.hosts.get(&name) {
            Some(ips) => ips.clone(),
            None => tokio::net::lookup_host((name.as_str(), 0))
                .await
                .map_err(|e| Refused::Dns {
                    host: name.clone(),
                    detail: e.to_string(),
                })?
                .map(|a| a.ip())
                .collect(),
        };
        if ips.is_empty() {
            return Err(Refused::NoAddress { host: name });
        }
        // Private addresses of a name on the allow-list are fine (its port is checked
        // with the URL); otherwise one refused address refuses the name.
        if !self.allows_name(&name)
            && let Some((ip, why)) = ips.iter().find_map(|ip| refusal(*ip).map(|w| (*ip, w)))
        {
            return Err(Refused::Private {
                host: name,
                ip,
                why,
            });
        }
        Ok(ips)
    }

    /// Checks the port of a name on the allow-list: only the allowed port may be asked.
    pub fn check_allowed_port(&self, url: &Url) -> Result<(), Refused> {
        let Some(Host::Domain(name)) = url.host() else {
            return Ok(());
        };
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let port = url.port_or_known_default().unwrap_or(0);
        if self.allows_name(&name) && !self.is_allowed(&name, port) {
            // Resolved as a name on the allow-list, its addresses are not checked: so
            // only its allowed port may be reached.
            let allowed = self
                .allowed
                .iter()
                .find(|(h, _)| *h == name)
                .map_or(0, |(_, p)| *p);
            return Err(Refused::OtherPort {
                host: name,
                port,
                allowed,
            });
        }
        Ok(())
    }

    /// Both URL checks.
    pub fn check(&self, url: &Url) -> Result<(), Refused> {
        self.check_url(url)?;
        self.check_allowed_port(url)
    }
}

/// `host:port` (or `[v6]:port`), the host normalised as a URL would have it.
fn parse_host_port(entry: &str) -> Option<(String, u16)> {
    let url = Url::parse(&format!("http://{}/", entry.trim())).ok()?;
    let port = url.port()?;
    let host = url.host_str()?.trim_end_matches('.').to_ascii_lowercase();
    Some((host, port))
}

/// The resolver the HTTP client uses: [`Guard::resolve`].
pub(crate) struct GuardedResolver(pub(crate) Arc<Guard>);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = Arc::clone(&self.0);
        Box::pin(async move {
            let ips = guard.resolve(name.as_str()).await?;
            let addrs: reqwest::dns::Addrs =
                Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

/// The redirect policy: at most [`MAX_REDIRECTS`] hops, each checked again.
pub(crate) fn redirect_policy(guard: Arc<Guard>) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(Refused::TooManyRedirects);
        }
        match guard.check(attempt.url()) {
            Ok(()) => attempt.follow(),
            Err(e) => attempt.error(e),
        }
    })
}

/// The refusal somewhere in `error`'s chain of causes.
pub(crate) fn refusal_in(error: &(dyn std::error::Error + 'static)) -> Option<Refused> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(r) = e.downcast_ref::<Refused>() {
            return Some(r.clone());
        }
        cause = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn guard() -> Guard {
        Guard::new(
            &WebSettings::default()
                .allow_private("127.0.0.1:8080")
                .allow_private("intranet.local:8443"),
        )
    }

    #[test]
    fn every_spelling_of_a_private_address_is_refused() {
        let g = guard();
        for url in [
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://0x7f000001/",
            "http://017700000001/",
            "http://127.0.0.1./",
            "http://%31%32%37.0.0.1/",
            "http://１２７.０.０.１/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://[::1]/",
            "http://[0:0:0:0:0:0:0:1]/",
            "http://0/",
            "http://0.0.0.0:8765/mcp",
            "http://169.254.169.254/latest/meta-data/",
            "http://[fd00:ec2::254]/",
            "http://100.100.100.200/",
            "http://127.0.0.1:8765/mcp",
            "https://10.1.2.3/",
            "http://user:pw@127.0.0.1/",
            "http://127.0.0.1:8081/", // allowed on 8080 only
        ] {
            let u = Url::parse(url).unwrap();
            assert!(
                matches!(g.check(&u), Err(Refused::Private { .. })),
                "{url} passed"
            );
        }
    }

    #[test]
    fn other_schemes_are_refused() {
        let g = guard();
        for url in [
            "file:///etc/passwd",
            "ftp://example.com/",
            "gopher://127.0.0.1:25/",
        ] {
            assert!(
                matches!(
                    g.check(&Url::parse(url).unwrap()),
                    Err(Refused::Scheme { .. })
                ),
                "{url}"
            );
        }
    }

    #[test]
    fn public_and_allowed_hosts_pass() {
        let g = guard();
        for url in [
            "https://example.com/",
            "http://93.184.215.14/",
            "http://127.0.0.1:8080/x",
            "https://intranet.local:8443/",
        ] {
            assert_eq!(g.check(&Url::parse(url).unwrap()), Ok(()), "{url}");
        }
        assert!(
            g.check(&Url::parse("https://intranet.local/").unwrap())
                .is_err()
        );
    }

    #[tokio::test]
    async fn names_are_refused_when_any_address_is_private() {
        let g = Guard::new(
            &WebSettings::default()
                .resolve(
                    "evil.test",
                    vec![
                        "93.184.215.14".parse().unwrap(),
                        "127.0.0.1".parse().unwrap(),
                    ],
                )
                .resolve("good.test", vec!["93.184.215.14".parse().unwrap()])
                .resolve("empty.test", vec![]),
        );
        assert!(matches!(
            g.resolve("evil.test").await,
            Err(Refused::Private { .. })
        ));
        assert!(matches!(
            g.resolve("EVIL.test.").await,
            Err(Refused::Private { .. })
        ));
        assert!(matches!(
            g.resolve("localhost").await,
            Err(Refused::Private { .. })
        ));
        assert!(matches!(
            g.resolve("empty.test").await,
            Err(Refused::NoAddress { .. })
        ));
        assert_eq!(g.resolve("good.test").await.unwrap().len(), 1);
    }
}
