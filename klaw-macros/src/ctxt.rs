//! Collects every error a macro finds so they are all reported at once.

use quote::ToTokens;
use std::fmt::Display;

/// Errors found so far, each at its own span.
///
/// A `Ctxt` must end in [`Ctxt::check`]: dropping it unchecked would lose the errors, so
/// it panics (serde_derive's rule), unless the thread is already panicking.
pub(crate) struct Ctxt {
    /// `None` once `check` has run.
    errors: Option<Vec<syn::Error>>,
}

impl Ctxt {
    /// An empty context; it must end in [`Ctxt::check`].
    pub(crate) fn new() -> Self {
        Ctxt {
            errors: Some(Vec::new()),
        }
    }

    /// Records an error at the span of `tokens`.
    pub(crate) fn error_spanned_by<T: ToTokens, M: Display>(&mut self, tokens: T, msg: M) {
        self.syn_error(syn::Error::new_spanned(tokens.into_token_stream(), msg));
    }

    /// Records an error at `span`.
    pub(crate) fn error_at<M: Display>(&mut self, span: proc_macro2::Span, msg: M) {
        self.syn_error(syn::Error::new(span, msg));
    }

    /// Records a ready-made error.
    pub(crate) fn syn_error(&mut self, err: syn::Error) {
        if let Some(errors) = &mut self.errors {
            errors.push(err);
        }
    }

    /// All errors combined into one, or `Ok` when there were none.
    pub(crate) fn check(mut self) -> syn::Result<()> {
        let mut iter = self.errors.take().unwrap_or_default().into_iter();
        let Some(mut first) = iter.next() else {
            return Ok(());
        };
        for e in iter {
            first.combine(e);
        }
        Err(first)
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        if self.errors.is_some() && !std::thread::panicking() {
            panic!("forgot to check for errors");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Ctxt;
    use proc_macro2::Span;

    #[test]
    fn check_combines_every_error_in_order() {
        let mut cx = Ctxt::new();
        cx.error_at(Span::call_site(), "first");
        cx.error_at(Span::call_site(), "second");
        let Err(e) = cx.check() else {
            panic!("two errors were recorded");
        };
        let messages: Vec<String> = e.into_iter().map(|e| e.to_string()).collect();
        assert_eq!(messages, ["first", "second"]);
    }

    #[test]
    fn check_without_errors_is_ok() {
        assert!(Ctxt::new().check().is_ok());
    }

    #[test]
    #[should_panic(expected = "forgot to check for errors")]
    fn dropping_an_unchecked_ctxt_panics() {
        let _cx = Ctxt::new();
    }
}
