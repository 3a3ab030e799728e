//! The rules only a `#[workflow]` function's signature keeps, one function per rule (the rules
//! it shares with `#[step]` are in `crate::signature`). Each reports its own error at the
//! user's token and answers whether the item can still be expanded.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{GenericArgument, PatType, PathArguments, Signature, Type};

use super::{SHAPE, WORKFLOW};
use crate::ctxt::Ctxt;
use crate::signature::{self, is_turn};

/// The return type every message about it names.
const EXPECTED_RETURN: &str =
    "the return type of a `#[workflow]` function is `Result<Done<State, Reply>, TurnError>`";

/// Not variadic. The expansion goes on after this.
pub(super) fn not_variadic(cx: &Ctxt, sig: &Signature) {
    if let Some(v) = &sig.variadic {
        cx.error_spanned_by(v, "a `#[workflow]` function cannot be variadic");
    }
}

/// The turn context rules, given where the first parameter of `typed` that is `&mut Turn` is
/// (`ctx_at`): there is one, it is the first parameter, the only one and borrowed mutably.
pub(super) fn turn_context(
    cx: &Ctxt,
    sig: &Signature,
    typed: &[&PatType],
    ctx_at: Option<usize>,
) -> bool {
    let Some(at) = ctx_at else {
        missing_turn_context(cx, sig, typed);
        return false;
    };
    if !signature::context_first(cx, &WORKFLOW, typed[at], at) {
        return false;
    }
    let one = one_turn_context(cx, typed);
    let mutable = turn_context_mutable(cx, typed[0]);
    one && mutable
}

/// A turn context is taken (`typed`: the parameters; none of them is `&mut Turn`). Reported at
/// the first parameter, or at the name when there is none.
fn missing_turn_context(cx: &Ctxt, sig: &Signature, typed: &[&PatType]) {
    let at: Box<dyn ToTokens> = match typed.first() {
        Some(first) => Box::new((*first).clone()),
        None => Box::new(sig.ident.clone()),
    };
    cx.error_spanned_by(
        at,
        format!("missing turn context: a `#[workflow]` function takes `ctx: &mut Turn` first, as in {SHAPE}"),
    );
}

/// One turn context: no parameter after the first is `&mut Turn` too.
fn one_turn_context(cx: &Ctxt, typed: &[&PatType]) -> bool {
    let mut one = true;
    for extra in typed.iter().skip(1).filter(|t| is_turn(&t.ty)) {
        cx.error_spanned_by(extra, "a `#[workflow]` function takes one turn context");
        one = false;
    }
    one
}

/// The turn context `ctx` is borrowed mutably.
fn turn_context_mutable(cx: &Ctxt, ctx: &PatType) -> bool {
    match &*ctx.ty {
        Type::Reference(r) if r.mutability.is_none() => {
            cx.error_spanned_by(
                &ctx.ty,
                "the turn context is borrowed mutably: write `ctx: &mut Turn`",
            );
            false
        }
        _ => true,
    }
}

/// The turn context `ctx` is named by an identifier: calls on that name are durable calls.
pub(super) fn turn_context_named(cx: &Ctxt, ctx: &PatType) -> Option<syn::Ident> {
    match &*ctx.pat {
        syn::Pat::Ident(p) if p.subpat.is_none() => Some(p.ident.clone()),
        _ => {
            cx.error_spanned_by(
                &ctx.pat,
                "name the turn context with an identifier, e.g. `ctx: &mut Turn`",
            );
            None
        }
    }
}

/// Context, state, message and optional dependencies: 3 or 4 parameters (`has_context`:
/// whether one of `typed` is the turn context; without one, too few is reported as missing it).
pub(super) fn arity(cx: &Ctxt, sig: &Signature, typed: &[&PatType], has_context: bool) -> bool {
    match typed.len() {
        0..=2 if has_context => {
            cx.error_spanned_by(
                &sig.inputs,
                format!(
                    "a `#[workflow]` function takes 3 parameters (context, state and message), found {}: {SHAPE}",
                    typed.len()
                ),
            );
            false
        }
        n if n > 4 => {
            cx.error_spanned_by(
                typed[4],
                format!("a `#[workflow]` function takes 3 parameters (context, state and message) and optionally a fourth, `deps: &Deps`; found {n}: {SHAPE}"),
            );
            false
        }
        _ => true,
    }
}

/// The fourth parameter, the dependencies, is a plain shared borrow `&Deps`: `Deps`.
pub(super) fn deps_borrowed<'a>(cx: &Ctxt, deps: &'a PatType) -> Option<&'a Type> {
    match &*deps.ty {
        Type::Reference(r) if r.mutability.is_none() && r.lifetime.is_none() => Some(&r.elem),
        _ => {
            cx.error_spanned_by(
                &deps.ty,
                "the fourth parameter holds the workflow's dependencies and is borrowed from the workflow value: write `deps: &Deps`",
            );
            None
        }
    }
}

/// The state or message (of type `ty`) is passed by value.
pub(super) fn passed_by_value(cx: &Ctxt, ty: &Type) -> bool {
    let Type::Reference(r) = ty else {
        return true;
    };
    cx.error_spanned_by(
        r,
        "the state and message are passed by value: take an owned type, not a reference",
    );
    false
}

/// The state or message type `ty` is named: it is fixed on the wire.
pub(super) fn type_named(cx: &Ctxt, ty: &Type) -> bool {
    if !matches!(ty, Type::ImplTrait(_) | Type::Infer(_)) {
        return true;
    }
    cx.error_spanned_by(
        ty,
        "name the state and message types: they are fixed on the wire",
    );
    false
}

/// The return type is `Result<Done<S, R>, E>`: it, with `Done` completed with the `message`
/// type, the reply type `R` and the error type `E`.
pub(super) fn returns_done(
    cx: &Ctxt,
    sig: &Signature,
    message: Option<&Type>,
) -> Option<(Type, Type, Option<Type>)> {
    let ty = signature::return_type(cx, sig, EXPECTED_RETURN)?;
    let mut ret = ty.clone();
    let result = match &mut ret {
        Type::Path(result) => result.path.segments.last_mut(),
        _ => None,
    };
    let Some((ok, error)) = result.and_then(signature::result_args) else {
        cx.error_spanned_by(ty, EXPECTED_RETURN);
        return None;
    };
    let reply = done_reply(cx, ty, ok, message)?;
    if let Some(e) = &error {
        if !not_workflow_error(cx, e) {
            return None;
        }
    }
    Some((ret, reply, error))
}

/// The output `ok` of the returned `Result` (`ty`) is `Done<State, Reply>`: its reply type,
/// with `Done` completed in place with the `message` type.
fn done_reply(cx: &Ctxt, ty: &Type, ok: &mut Type, message: Option<&Type>) -> Option<Type> {
    let ok_span = ok.span();
    let Type::Path(done) = ok else {
        cx.error_spanned_by(at_span(ok_span), EXPECTED_RETURN);
        return None;
    };
    let Some(done_seg) = done.path.segments.last_mut() else {
        cx.error_spanned_by(ty, EXPECTED_RETURN);
        return None;
    };
    if done_seg.ident != "Done" {
        cx.error_spanned_by(&*done, EXPECTED_RETURN);
        return None;
    }
    let PathArguments::AngleBracketed(done_args) = &mut done_seg.arguments else {
        cx.error_spanned_by(&*done, EXPECTED_RETURN);
        return None;
    };
    let n = done_args.args.len();
    let reply = match done_args.args.iter().nth(1) {
        Some(GenericArgument::Type(r)) if n == 2 || n == 3 => r.clone(),
        _ => {
            cx.error_spanned_by(
                &*done_args,
                "`Done` takes the state and reply types: `Done<State, Reply>`",
            );
            return None;
        }
    };
    if n == 2 {
        if let Some(m) = message {
            done_args.args.push(GenericArgument::Type(m.clone()));
        }
    }
    Some(reply)
}

/// The error type `e` is not `WorkflowError`: a workflow fails for good through `TurnError`.
fn not_workflow_error(cx: &Ctxt, e: &Type) -> bool {
    let workflow_error = matches!(e, Type::Path(p)
        if p.path.segments.last().is_some_and(|s| s.ident == "WorkflowError"));
    if !workflow_error {
        return true;
    }
    cx.error_spanned_by(
        e,
        "a workflow cannot fail with `WorkflowError`: `?` on a step (which fails with `TurnError`) would not compile; return `Result<Done<State, Reply>, TurnError>` and fail for good with `Err(WorkflowError::new(..).into())`",
    );
    false
}

/// A token at `span`, to point an error at the first token of a type.
fn at_span(span: Span) -> TokenStream {
    quote::quote_spanned!(span=> _)
}
