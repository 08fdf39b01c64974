//! Collects every error a macro finds so they are all reported at once.

use quote::ToTokens;
use std::fmt::Display;

/// Errors found so far, each at its own span.
#[derive(Default)]
pub(crate) struct Ctxt {
    errors: Vec<syn::Error>,
}

impl Ctxt {
    /// Records an error at the span of `tokens`.
    pub(crate) fn error_spanned_by<T: ToTokens, M: Display>(&mut self, tokens: T, msg: M) {
        self.errors
            .push(syn::Error::new_spanned(tokens.into_token_stream(), msg));
    }

    /// Records an error at `span`.
    pub(crate) fn error_at<M: Display>(&mut self, span: proc_macro2::Span, msg: M) {
        self.errors.push(syn::Error::new(span, msg));
    }

    /// Records a ready-made error.
    pub(crate) fn syn_error(&mut self, err: syn::Error) {
        self.errors.push(err);
    }

    /// All errors combined into one, or `Ok` when there were none.
    pub(crate) fn check(self) -> syn::Result<()> {
        let mut iter = self.errors.into_iter();
        let Some(mut first) = iter.next() else {
            return Ok(());
        };
        for e in iter {
            first.combine(e);
        }
        Err(first)
    }
}
