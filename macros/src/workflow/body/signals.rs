//! Signals: a body waits only for the signals its workflow accepts (`#[workflow(signals(..))]`),
//! whether the wait names the type in a turbofish or the binding names it.

use syn::{Expr, ExprMethodCall, Pat, Type};

use super::{first_type_arg, Analyzer};

impl Analyzer<'_> {
    /// `ctx.wait_for_signal::<S>(..)`: `S` must be an accepted signal.
    pub(super) fn check_signal(&mut self, m: &ExprMethodCall) {
        let Some(Type::Path(p)) = first_type_arg(m.turbofish.as_ref()) else {
            return;
        };
        self.check_signal_type(&p.path);
    }

    /// `let s: Option<S> = ctx.wait_for_signal(..).await?;` or `let Some(S { .. }) = ..`:
    /// a wait without a turbofish whose signal type the binding names; `S` must be an accepted
    /// signal (otherwise rustc infers the one accepted signal and reports a type mismatch).
    /// The signal type it names, when it names one.
    pub(super) fn check_inferred_signal(&mut self, pat: &Pat, init: &Expr) -> Option<syn::Path> {
        let mut e = init;
        let mut tried = false;
        loop {
            match e {
                Expr::Try(t) => {
                    tried = true;
                    e = &t.expr;
                }
                Expr::Await(a) => e = &a.base,
                Expr::Paren(p) => e = &p.expr,
                _ => break,
            }
        }
        let Expr::MethodCall(m) = e else {
            return None;
        };
        if m.method != "wait_for_signal" || m.turbofish.is_some() || !self.is_ctx(&m.receiver) {
            return None;
        }
        let signal = match pat {
            Pat::Type(t) => {
                let ty = if tried {
                    Some(&*t.ty)
                } else {
                    generic_arg(&t.ty, "Result")
                };
                ty.and_then(|ty| generic_arg(ty, "Option"))
                    .and_then(|ty| match ty {
                        Type::Path(p) if p.qself.is_none() => Some(p.path.clone()),
                        _ => None,
                    })
            }
            other if tried => some_pattern_type(other),
            _ => None,
        };
        if let Some(path) = &signal {
            self.check_signal_type(path);
        }
        signal
    }

    /// `path` names a signal waited for: it must be an accepted one.
    fn check_signal_type(&mut self, path: &syn::Path) {
        let Some(name) = path.segments.last().map(|s| &s.ident) else {
            return;
        };
        let accepted: Vec<String> = self
            .s
            .signals
            .iter()
            .filter_map(|s| s.segments.last().map(|s| s.ident.to_string()))
            .collect();
        if accepted.iter().any(|a| name == a) {
            return;
        }
        let workflow = self.s.workflow;
        let alternatives = if accepted.is_empty() {
            format!("it accepts no signals; list it: `#[workflow(signals({name}))]`")
        } else {
            format!(
                "it accepts {}; or list it: `#[workflow(signals(.., {name}))]`",
                crate::args::one_of(&accepted.iter().map(String::as_str).collect::<Vec<_>>())
            )
        };
        self.cx.error_spanned_by(
            path,
            format!("workflow `{workflow}` does not accept signal `{name}`: {alternatives}"),
        );
        if !self
            .unaccepted
            .iter()
            .any(|u| u.segments.last().map(|s| &s.ident) == Some(name))
        {
            self.unaccepted.push(path.clone());
        }
    }
}

/// `T` of `Name<T, ..>` when `ty`'s last segment is `Name`.
fn generic_arg<'t>(ty: &'t Type, name: &str) -> Option<&'t Type> {
    let Type::Path(p) = ty else {
        return None;
    };
    let last = p.path.segments.last().filter(|s| s.ident == name)?;
    match &last.arguments {
        syn::PathArguments::AngleBracketed(a) => match a.args.first()? {
            syn::GenericArgument::Type(t) => Some(t),
            _ => None,
        },
        _ => None,
    }
}

/// The type a `Some(S { .. })`, `Some(S(..))` or `Some(S)` pattern names.
fn some_pattern_type(pat: &Pat) -> Option<syn::Path> {
    let Pat::TupleStruct(t) = pat else {
        return None;
    };
    if !t.path.is_ident("Some") || t.elems.len() != 1 {
        return None;
    }
    match t.elems.first()? {
        Pat::Struct(s) if s.qself.is_none() => Some(s.path.clone()),
        Pat::TupleStruct(ts) if ts.qself.is_none() => Some(ts.path.clone()),
        Pat::Path(p) if p.qself.is_none() => Some(p.path.clone()),
        _ => None,
    }
}
