//! Finds the path generated code uses to reach the framework, as the user's
//! Cargo.toml names it.

use proc_macro_crate::{FoundCrate, crate_name};
use proc_macro2::{Span, TokenStream};
use quote::quote;

/// What a crate that depends on none of the framework's crates is told.
pub(crate) const MISSING: &str = "#[tool] and #[derive(ToolSchema)] need `klaw` or `klaw-core` \
     among this crate's dependencies: add `klaw = \"0.1\"` (or `klaw-core = \"0.1\"`) to \
     [dependencies], or name the path with `crate = \"...\"`";

/// `::klaw_core`, `::klaw_tools`, `::klaw`, or the renamed name of any of them (the
/// first of these the crate depends on: each re-exports the core's generated-code
/// paths); an explicit `crate = "..."` wins. [`MISSING`] when the crate depends on none.
pub(crate) fn root(explicit: Option<&syn::Path>) -> Result<TokenStream, &'static str> {
    if let Some(p) = explicit {
        return Ok(quote!(#p));
    }
    for (package, lib) in [
        ("klaw-core", "klaw_core"),
        ("klaw-tools", "klaw_tools"),
        ("klaw", "klaw"),
    ] {
        match crate_name(package) {
            Ok(FoundCrate::Itself) => {
                let id = syn::Ident::new(lib, Span::call_site());
                return Ok(quote!(::#id));
            }
            Ok(FoundCrate::Name(n)) => {
                let id = syn::Ident::new(&n, Span::call_site());
                return Ok(quote!(::#id));
            }
            Err(_) => {}
        }
    }
    Err(MISSING)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crate_without_the_framework_is_told_to_add_klaw_or_klaw_core() {
        // This crate (klaw-macros) depends on neither.
        let missing = root(None).unwrap_err();
        assert!(
            missing.contains("`klaw`") && missing.contains("`klaw-core`"),
            "{missing}"
        );
        let explicit: syn::Path = syn::parse_quote!(::my_klaw);
        assert_eq!(root(Some(&explicit)).unwrap().to_string(), ":: my_klaw");
    }
}
