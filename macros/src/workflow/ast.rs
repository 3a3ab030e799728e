//! The `#[workflow]` function, parsed from syn and checked: what the expansion needs, with the
//! user's tokens kept for spans.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{FnArg, GenericArgument, ItemFn, Pat, PatType, PathArguments, ReturnType, Type};

use crate::ctxt::Ctxt;

/// The shape every message names.
pub(crate) const SHAPE: &str =
    "`async fn name(ctx: &mut Turn, state: State, message: Message) -> Result<Done<State, Reply>, TurnError>`";

/// A checked `#[workflow]` function.
pub(crate) struct WorkflowFn {
    /// The function as written.
    pub(crate) original: ItemFn,
    /// The context parameter's name (calls on it are durable calls).
    pub(crate) ctx: syn::Ident,
    /// The context parameter's pattern, e.g. `ctx` or `mut ctx`.
    pub(crate) ctx_pat: Box<Pat>,
    /// The state parameter.
    pub(crate) state: PatType,
    /// The message parameter.
    pub(crate) message: PatType,
    /// The dependencies parameter `deps: &D`: its pattern and `D`.
    pub(crate) deps: Option<(Box<Pat>, Type)>,
    /// The return type with `Done<S, R>` completed to `Done<S, R, Message>`.
    pub(crate) ret: Type,
    /// The reply type, from `Done<_, R>`.
    pub(crate) reply: Type,
    /// The error type, when the return type names one (`Result<_, E>`).
    pub(crate) error: Option<Type>,
}

impl WorkflowFn {
    /// Check `item`; `None` when the signature cannot be expanded at all.
    pub(crate) fn from_syn(cx: &Ctxt, item: &ItemFn) -> Option<Self> {
        let sig = &item.sig;
        if sig.asyncness.is_none() {
            cx.error_spanned_by(
                sig.fn_token,
                format!(
                    "`#[workflow]` needs an `async fn`: add `async` before `fn`, as in {SHAPE}"
                ),
            );
        }
        if let Some(c) = &sig.constness {
            cx.error_spanned_by(c, "a `#[workflow]` function cannot be `const`");
        }
        if let syn::Safety::Unsafe(u) = &sig.safety {
            cx.error_spanned_by(u, "a `#[workflow]` function cannot be `unsafe`");
        }
        if let Some(abi) = &sig.abi {
            cx.error_spanned_by(abi, "a `#[workflow]` function cannot have an ABI");
        }
        if let Some(v) = &sig.variadic {
            cx.error_spanned_by(v, "a `#[workflow]` function cannot be variadic");
        }
        let mut fatal = false;
        if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
            cx.error_spanned_by(
                &sig.generics,
                "a `#[workflow]` function cannot be generic: its state, message and reply types are fixed on the wire; name concrete types",
            );
            fatal = true;
        }

        let mut typed: Vec<&PatType> = Vec::new();
        for arg in &sig.inputs {
            match arg {
                FnArg::Receiver(r) => {
                    cx.error_spanned_by(
                        r,
                        "a `#[workflow]` function cannot take `self`: it is a free function; pass what it needs as a fourth parameter `deps: &Deps`",
                    );
                    fatal = true;
                }
                FnArg::Typed(t) => typed.push(t),
            }
        }

        // The context: `&mut Turn` first, and nowhere else.
        let ctx_at = typed.iter().position(|t| is_turn(&t.ty));
        match ctx_at {
            Some(0) => {}
            Some(i) => {
                cx.error_spanned_by(
                    typed[i],
                    format!("the turn context must be the first parameter: {SHAPE}"),
                );
                fatal = true;
            }
            None => {
                let at: Box<dyn quote::ToTokens> = match typed.first() {
                    Some(first) => Box::new((*first).clone()),
                    None => Box::new(sig.ident.clone()),
                };
                cx.error_spanned_by(
                    at,
                    format!("missing turn context: a `#[workflow]` function takes `ctx: &mut Turn` first, as in {SHAPE}"),
                );
                fatal = true;
            }
        }
        for extra in typed.iter().skip(1).filter(|t| is_turn(&t.ty)) {
            if ctx_at == Some(0) {
                cx.error_spanned_by(extra, "a `#[workflow]` function takes one turn context");
                fatal = true;
            }
        }
        if let Some(t) = typed.first().filter(|_| ctx_at == Some(0)) {
            if let Type::Reference(r) = &*t.ty {
                if r.mutability.is_none() {
                    cx.error_spanned_by(
                        &t.ty,
                        "the turn context is borrowed mutably: write `ctx: &mut Turn`",
                    );
                    fatal = true;
                }
            }
        }

        // Arity: context, state, message and optional dependencies.
        match typed.len() {
            0..=2 if ctx_at.is_some() => {
                cx.error_spanned_by(
                    &sig.inputs,
                    format!(
                        "a `#[workflow]` function takes 3 parameters (context, state and message), found {}: {SHAPE}",
                        typed.len()
                    ),
                );
                fatal = true;
            }
            3 | 4 => {}
            n if n > 4 => {
                cx.error_spanned_by(
                    typed[4],
                    format!("a `#[workflow]` function takes 3 parameters (context, state and message) and optionally a fourth, `deps: &Deps`; found {n}: {SHAPE}"),
                );
                fatal = true;
            }
            _ => {}
        }

        let deps = match typed.get(3) {
            Some(t) => match &*t.ty {
                Type::Reference(r) if r.mutability.is_none() && r.lifetime.is_none() => {
                    Some((t.pat.clone(), (*r.elem).clone()))
                }
                _ => {
                    cx.error_spanned_by(
                        &t.ty,
                        "the fourth parameter holds the workflow's dependencies and is borrowed from the workflow value: write `deps: &Deps`",
                    );
                    fatal = true;
                    None
                }
            },
            None => None,
        };
        for t in typed.iter().skip(1).take(2).filter(|t| !is_turn(&t.ty)) {
            if let Type::Reference(r) = &*t.ty {
                cx.error_spanned_by(
                    r,
                    "the state and message are passed by value: take an owned type, not a reference",
                );
                fatal = true;
            }
            if matches!(&*t.ty, Type::ImplTrait(_) | Type::Infer(_)) {
                cx.error_spanned_by(
                    &t.ty,
                    "name the state and message types: they are fixed on the wire",
                );
                fatal = true;
            }
        }

        let ctx = typed.first().and_then(|t| match &*t.pat {
            Pat::Ident(p) if p.subpat.is_none() => Some(p.ident.clone()),
            _ => None,
        });
        if ctx.is_none() && ctx_at == Some(0) {
            cx.error_spanned_by(
                &typed[0].pat,
                "name the turn context with an identifier, e.g. `ctx: &mut Turn`",
            );
            fatal = true;
        }

        let ret = parse_return(cx, sig, typed.get(2).map(|t| &*t.ty));
        if fatal {
            return None;
        }
        let (ret, reply, error) = ret?;
        Some(WorkflowFn {
            original: item.clone(),
            ctx: ctx?,
            ctx_pat: typed[0].pat.clone(),
            state: typed[1].clone(),
            message: typed[2].clone(),
            deps,
            ret,
            reply,
            error,
        })
    }
}

/// Whether `ty` is `&mut Turn`, `&Turn` or `&mut path::Turn<..>`.
fn is_turn(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => matches!(&*r.elem, Type::Path(p) if p.qself.is_none()
            && p.path.segments.last().is_some_and(|s| s.ident == "Turn")),
        _ => false,
    }
}

/// Check the return type `Result<Done<S, R>, E>` and complete `Done` with the message type.
fn parse_return(
    cx: &Ctxt,
    sig: &syn::Signature,
    message: Option<&Type>,
) -> Option<(Type, Type, Option<Type>)> {
    let expected =
        "the return type of a `#[workflow]` function is `Result<Done<State, Reply>, TurnError>`";
    let ReturnType::Type(_, ty) = &sig.output else {
        cx.error_at(
            sig.paren_token.span.close(),
            format!("missing return type: {expected}"),
        );
        return None;
    };
    let mut ret = (**ty).clone();
    let fail = |at: &dyn quote::ToTokens| {
        cx.error_spanned_by(at.to_token_stream(), expected);
        None
    };
    let Type::Path(result) = &mut ret else {
        return fail(ty);
    };
    let Some(last) = result.path.segments.last_mut() else {
        return fail(ty);
    };
    if last.ident != "Result" {
        return fail(ty);
    }
    let PathArguments::AngleBracketed(args) = &mut last.arguments else {
        return fail(ty);
    };
    let mut types = args.args.iter_mut().filter_map(|a| match a {
        GenericArgument::Type(t) => Some(t),
        _ => None,
    });
    let Some(ok) = types.next() else {
        return fail(ty);
    };
    let error = types.next().map(|e| e.clone());
    let ok_span = ok.span();
    let Type::Path(done) = ok else {
        return fail(&ok_span_tokens(ok_span));
    };
    let Some(done_seg) = done.path.segments.last_mut() else {
        return fail(ty);
    };
    if done_seg.ident != "Done" {
        return fail(&*done);
    }
    let PathArguments::AngleBracketed(done_args) = &mut done_seg.arguments else {
        return fail(&*done);
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
    if let Some(e) = &error {
        if let Type::Path(p) = e {
            if p.path
                .segments
                .last()
                .is_some_and(|s| s.ident == "WorkflowError")
            {
                cx.error_spanned_by(
                    e,
                    "a workflow cannot fail with `WorkflowError`: `?` on a step (which fails with `TurnError`) would not compile; return `Result<Done<State, Reply>, TurnError>` and fail for good with `Err(WorkflowError::new(..).into())`",
                );
                return None;
            }
        }
    }
    Some((ret, reply, error))
}

fn ok_span_tokens(span: Span) -> proc_macro2::TokenStream {
    quote::quote_spanned!(span=> _)
}
