//! The HTTP clients the web tools share (`web_fetch`, `web_search`, `render_js`'s
//! guard), one set per context.

use std::sync::{Arc, OnceLock};

use super::guard::{Guard, GuardedResolver, redirect_policy};
use super::settings::WebSettings;
use crate::ToolError;

/// The HTTP clients of a context, built on first use from its [`WebSettings`]: one for
/// pages (behind the [`Guard`]), one for the configured search providers.
#[derive(Default)]
pub(crate) struct Clients {
    built: OnceLock<Result<Built, String>>,
}

struct Built {
    guard: Arc<Guard>,
    pages: reqwest::Client,
    search: reqwest::Client,
}

impl Clients {
    fn build(settings: &WebSettings) -> Result<Built, String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let guard = Arc::new(Guard::new(settings));
        // Both: no proxy from the environment, one user agent, a connect time limit.
        let base = || {
            reqwest::Client::builder()
                .no_proxy()
                .user_agent(concat!("Klaw/", env!("CARGO_PKG_VERSION"), " (web_fetch)"))
                .connect_timeout(std::time::Duration::from_secs(10))
        };
        let pages = base()
            .dns_resolver(Arc::new(GuardedResolver(Arc::clone(&guard))))
            .redirect(redirect_policy(Arc::clone(&guard)))
            .build()
            .map_err(|e| e.to_string())?;
        let search = base()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Built {
            guard,
            pages,
            search,
        })
    }

    fn built(&self, settings: &WebSettings) -> Result<&Built, ToolError> {
        self.built
            .get_or_init(|| Self::build(settings))
            .as_ref()
            .map_err(|e| ToolError::unavailable(format!("cannot start the HTTP client: {e}")))
    }

    /// The guard and the client for pages.
    pub(crate) fn get(
        &self,
        settings: &WebSettings,
    ) -> Result<(&Guard, &reqwest::Client), ToolError> {
        self.built(settings).map(|b| (b.guard.as_ref(), &b.pages))
    }

    /// The guard of the pages' client (which `render_js`'s browser goes through too).
    #[cfg(feature = "render")]
    pub(crate) fn guard(&self, settings: &WebSettings) -> Result<Arc<Guard>, ToolError> {
        Ok(Arc::clone(&self.built(settings)?.guard))
    }

    /// The client for the search providers (configured by the operator: not guarded).
    pub(crate) fn search(&self, settings: &WebSettings) -> Result<&reqwest::Client, ToolError> {
        self.built(settings).map(|b| &b.search)
    }
}
