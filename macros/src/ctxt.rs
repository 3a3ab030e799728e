//! The error accumulator: independent problems are collected and reported together.

use std::cell::RefCell;
use std::fmt::Display;

use proc_macro2::Span;
use quote::ToTokens;

/// Collects errors while a macro input is checked (serde's `Ctxt`).
pub(crate) struct Ctxt {
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Ctxt {
    pub(crate) fn new() -> Self {
        Ctxt {
            errors: RefCell::new(Some(Vec::new())),
        }
    }

    /// An error spanned at `tokens`.
    pub(crate) fn error_spanned_by(&self, tokens: impl ToTokens, msg: impl Display) {
        self.push(syn::Error::new_spanned(tokens.into_token_stream(), msg));
    }

    /// An error at `span`.
    pub(crate) fn error_at(&self, span: Span, msg: impl Display) {
        self.push(syn::Error::new(span, msg));
    }

    /// A parse error.
    pub(crate) fn syn_error(&self, err: syn::Error) {
        self.push(err);
    }

    fn push(&self, err: syn::Error) {
        self.errors
            .borrow_mut()
            .as_mut()
            .expect("Ctxt used after check")
            .push(err);
    }

    /// Whether an error was recorded so far.
    pub(crate) fn has_errors(&self) -> bool {
        self.errors.borrow().as_ref().is_some_and(|e| !e.is_empty())
    }

    /// All recorded errors, combined.
    pub(crate) fn check(self) -> Result<(), syn::Error> {
        let mut errors = self.errors.take().expect("Ctxt checked twice").into_iter();
        let Some(mut combined) = errors.next() else {
            return Ok(());
        };
        for rest in errors {
            combined.combine(rest);
        }
        Err(combined)
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        // A macro bug, not a user error: every Ctxt must be checked.
        if !std::thread::panicking() && self.errors.borrow().is_some() {
            panic!("forgot to check for errors");
        }
    }
}
