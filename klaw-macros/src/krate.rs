//! Finds the path generated code uses to reach the framework, as the user's
//! Cargo.toml names it.

use proc_macro_crate::{FoundCrate, crate_name};
use proc_macro2::{Span, TokenStream};
use quote::quote;

/// `::klaw_core`, `::klaw_tools`, `::klaw`, or the renamed name of any of them (the
/// first of these the crate depends on: each re-exports the core); an explicit
/// `crate = "..."` wins.
pub(crate) fn root(explicit: Option<&syn::Path>) -> TokenStream {
    if let Some(p) = explicit {
        return quote!(#p);
    }
    for (package, lib) in [
        ("klaw-core", "klaw_core"),
        ("klaw-tools", "klaw_tools"),
        ("klaw", "klaw"),
    ] {
        match crate_name(package) {
            Ok(FoundCrate::Itself) => {
                let id = syn::Ident::new(lib, Span::call_site());
                return quote!(::#id);
            }
            Ok(FoundCrate::Name(n)) => {
                let id = syn::Ident::new(&n, Span::call_site());
                return quote!(::#id);
            }
            Err(_) => {}
        }
    }
    quote!(::klaw)
}
