//! The `#[workflow]` function, parsed from syn and checked (by the rules shared with `#[step]`,
//! in `crate::signature`, and its own, in [`super::check`]): what the expansion needs, with the
//! user's tokens kept for spans.

use syn::{ItemFn, Pat, PatType, Type};

use super::{check, WORKFLOW};
use crate::ctxt::Ctxt;
use crate::signature::{self, is_turn};

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
    /// Read `item`, reporting every rule it breaks; `None` when the signature cannot be
    /// expanded at all.
    pub(crate) fn from_syn(cx: &Ctxt, item: &ItemFn) -> Option<Self> {
        let sig = &item.sig;
        signature::modifiers(cx, &WORKFLOW, sig);
        check::not_variadic(cx, sig);
        let mut fatal = !signature::not_generic(cx, &WORKFLOW, sig);
        let mut typed: Vec<&PatType> = Vec::new();
        for arg in &sig.inputs {
            match signature::not_a_receiver(cx, &WORKFLOW, arg) {
                Some(t) => typed.push(t),
                None => fatal = true,
            }
        }
        let ctx_at = typed.iter().position(|t| is_turn(&t.ty));
        fatal |= !check::turn_context(cx, sig, &typed, ctx_at);
        fatal |= !check::arity(cx, sig, &typed, ctx_at.is_some());
        let deps = typed.get(3).map(|t| (t, check::deps_borrowed(cx, t)));
        fatal |= deps.is_some_and(|(_, d)| d.is_none());
        for t in typed.iter().skip(1).take(2).filter(|t| !is_turn(&t.ty)) {
            fatal |= !check::passed_by_value(cx, &t.ty);
            fatal |= !check::type_named(cx, &t.ty);
        }
        let ctx = match ctx_at {
            Some(0) => check::turn_context_named(cx, typed[0]),
            _ => None,
        };
        fatal |= ctx.is_none();
        let ret = check::returns_done(cx, sig, typed.get(2).map(|t| &*t.ty));
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
            deps: deps.and_then(|(t, d)| Some((t.pat.clone(), d?.clone()))),
            ret,
            reply,
            error,
        })
    }
}
