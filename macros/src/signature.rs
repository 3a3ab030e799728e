//! The signature rules `#[workflow]` and `#[step]` share, one function per rule, each worded
//! for the macro it checks (a [`Macro`]). The rules only one macro has live in its own
//! `check` module (`workflow/check.rs`, `step/check.rs`).

use syn::{
    FnArg, GenericArgument, PatType, PathArguments, PathSegment, ReturnType, Signature, Type,
};

use crate::ctxt::Ctxt;

/// A macro as the shared rules' messages name it.
pub(crate) struct Macro {
    /// The attribute, as messages write it: `` `#[step]` ``.
    pub(crate) attr: &'static str,
    /// The signature the macro takes, as messages show it.
    pub(crate) shape: &'static str,
    /// The context the function takes first: `step` or `turn`.
    pub(crate) context: &'static str,
    /// Why the function cannot be generic.
    pub(crate) why_not_generic: &'static str,
    /// What to do instead of taking `self`.
    pub(crate) instead_of_self: &'static str,
}

/// `async`, and not `const`, `unsafe` or `extern`. The expansion goes on after these.
pub(crate) fn modifiers(cx: &Ctxt, m: &Macro, sig: &Signature) {
    let Macro { attr, shape, .. } = m;
    if sig.asyncness.is_none() {
        cx.error_spanned_by(
            sig.fn_token,
            format!("{attr} needs an `async fn`: add `async` before `fn`, as in {shape}"),
        );
    }
    if let Some(c) = &sig.constness {
        cx.error_spanned_by(c, format!("a {attr} function cannot be `const`"));
    }
    if let syn::Safety::Unsafe(u) = &sig.safety {
        cx.error_spanned_by(u, format!("a {attr} function cannot be `unsafe`"));
    }
    if let Some(abi) = &sig.abi {
        cx.error_spanned_by(abi, format!("a {attr} function cannot have an ABI"));
    }
}

/// No generic parameters: the macro fixes the function's types.
pub(crate) fn not_generic(cx: &Ctxt, m: &Macro, sig: &Signature) -> bool {
    if sig.generics.params.is_empty() && sig.generics.where_clause.is_none() {
        return true;
    }
    cx.error_spanned_by(
        &sig.generics,
        format!(
            "a {} function cannot be generic: {}; name concrete types",
            m.attr, m.why_not_generic
        ),
    );
    false
}

/// A free function: no `self`.
pub(crate) fn not_a_receiver<'a>(cx: &Ctxt, m: &Macro, arg: &'a FnArg) -> Option<&'a PatType> {
    match arg {
        FnArg::Typed(t) => Some(t),
        FnArg::Receiver(r) => {
            cx.error_spanned_by(
                r,
                format!(
                    "a {} function cannot take `self`: {}",
                    m.attr, m.instead_of_self
                ),
            );
            None
        }
    }
}

/// The context (the parameter `t`, at `position`) is the first parameter.
pub(crate) fn context_first(cx: &Ctxt, m: &Macro, t: &PatType, position: usize) -> bool {
    if position == 0 {
        return true;
    }
    cx.error_spanned_by(
        t,
        format!(
            "the {} context must be the first parameter: {}",
            m.context, m.shape
        ),
    );
    false
}

/// A return type is written; `missing` says which, after "missing return type: ".
pub(crate) fn return_type<'a>(cx: &Ctxt, sig: &'a Signature, missing: &str) -> Option<&'a Type> {
    match &sig.output {
        ReturnType::Type(_, ty) => Some(ty),
        ReturnType::Default => {
            cx.error_at(
                sig.paren_token.span.close(),
                format!("missing return type: {missing}"),
            );
            None
        }
    }
}

/// The last segment of a plain path type (no `<T as Trait>::` qualifier).
pub(crate) fn last_segment(ty: &Type) -> Option<&PathSegment> {
    match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last(),
        _ => None,
    }
}

/// Whether `ty` is a reference to the turn context: `&mut Turn`, `&Turn`, `&mut path::Turn<..>`.
pub(crate) fn is_turn(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => last_segment(&r.elem).is_some_and(|s| s.ident == "Turn"),
        _ => false,
    }
}

/// The output and error types of a `Result<T, E>` segment (`E` absent for a one-argument
/// `Result<T>` alias), the output in place so that it can be completed.
pub(crate) fn result_args(seg: &mut PathSegment) -> Option<(&mut Type, Option<Type>)> {
    if seg.ident != "Result" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &mut seg.arguments else {
        return None;
    };
    let mut types = args.args.iter_mut().filter_map(|a| match a {
        GenericArgument::Type(t) => Some(t),
        _ => None,
    });
    let ok = types.next()?;
    let error = types.next().map(|e| e.clone());
    Some((ok, error))
}
