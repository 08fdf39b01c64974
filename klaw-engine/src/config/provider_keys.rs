//! [`ProviderKeys`]: the API keys in the providers' own variables.

use super::{Env, Provider, Secret};

/// The API keys in the providers' usual variables (`OPENAI_API_KEY`,
/// `ANTHROPIC_API_KEY`), read when the configuration is; a client sends one only to its
/// provider's own server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderKeys {
    openai: Option<Secret>,
    anthropic: Option<Secret>,
    brave: Option<Secret>,
    cloudflare_token: Option<Secret>,
    cloudflare_account: Option<String>,
}

impl ProviderKeys {
    /// Reads each provider's variable from `env` (an empty one is none).
    pub fn from_env(env: Env<'_>) -> Self {
        let read = |p: Provider| {
            env(p.key_variable())
                .filter(|k| !k.trim().is_empty())
                .map(Secret::new)
        };
        Self {
            openai: read(Provider::OpenAi),
            anthropic: read(Provider::Anthropic),
            brave: env("BRAVE_API_KEY")
                .filter(|k| !k.trim().is_empty())
                .map(Secret::new),
            cloudflare_token: env("CLOUDFLARE_API_TOKEN")
                .filter(|k| !k.trim().is_empty())
                .map(Secret::new),
            cloudflare_account: env("CLOUDFLARE_ACCOUNT_ID")
                .map(|a| a.trim().to_owned())
                .filter(|a| !a.is_empty()),
        }
    }

    /// The Brave Search key in `BRAVE_API_KEY`.
    pub fn brave(&self) -> Option<&Secret> {
        self.brave.as_ref()
    }

    /// Cloudflare's API token (`CLOUDFLARE_API_TOKEN`) and account
    /// (`CLOUDFLARE_ACCOUNT_ID`), when both are set: `render_js`'s Browser Rendering.
    pub fn cloudflare(&self) -> Option<(&Secret, &str)> {
        Some((
            self.cloudflare_token.as_ref()?,
            self.cloudflare_account.as_deref()?,
        ))
    }

    /// The key in `provider`'s variable.
    pub fn get(&self, provider: Provider) -> Option<&Secret> {
        match provider {
            Provider::OpenAi => self.openai.as_ref(),
            Provider::Anthropic => self.anthropic.as_ref(),
            Provider::McpSampling => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::env;

    #[test]
    fn each_key_is_read_from_its_providers_variable_and_an_empty_one_is_none() {
        let e = env(&[
            ("OPENAI_API_KEY", "sk-o"),
            ("ANTHROPIC_API_KEY", "  "),
            ("BRAVE_API_KEY", "b"),
        ]);
        let keys = ProviderKeys::from_env(&e);
        assert_eq!(keys.get(Provider::OpenAi).map(Secret::expose), Some("sk-o"));
        assert_eq!(keys.get(Provider::Anthropic), None, "blank is none");
        assert_eq!(keys.get(Provider::McpSampling), None, "no key of its own");
        assert_eq!(keys.brave().map(Secret::expose), Some("b"));
        assert_eq!(ProviderKeys::from_env(&env(&[])), ProviderKeys::default());
    }
}
