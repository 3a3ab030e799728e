//! The `#[step]` function as the expansion sees it.

use proc_macro2::Span;
use quote::format_ident;
use syn::{GenericArgument, ItemFn, Pat, PathArguments, Type};

use super::{check, STEP};
use crate::ctxt::Ctxt;
use crate::signature::{self, last_segment};

/// The step's context parameter.
pub(super) enum StepContext {
    /// `s: StepCtx`.
    Plain,
    /// `s: Resumable<C>`: a typed resume cursor.
    Resumable(Box<Type>),
}

/// A checked `#[step]` function.
pub(super) struct StepFn {
    pub(super) original: ItemFn,
    pub(super) context: Option<StepContext>,
    /// The parameters the generated function takes after the turn context: (name, type).
    pub(super) params: Vec<(syn::Ident, Type)>,
    pub(super) output: Type,
    pub(super) error: Option<Type>,
}

impl StepFn {
    /// Read `item`, reporting every rule it breaks; `None` when it cannot be expanded.
    pub(super) fn from_syn(cx: &Ctxt, item: &ItemFn) -> Option<StepFn> {
        let sig = &item.sig;
        signature::modifiers(cx, &STEP, sig);
        let mut fatal = !signature::not_generic(cx, &STEP, sig);
        check::name_is_a_key(cx, sig);

        let mut context = None;
        let mut params = Vec::new();
        for (i, arg) in sig.inputs.iter().enumerate() {
            let Some(t) = signature::not_a_receiver(cx, &STEP, arg) else {
                fatal = true;
                continue;
            };
            if let Some(c) = context_of(&t.ty) {
                if signature::context_first(cx, &STEP, t, i) {
                    context = Some(c);
                } else {
                    fatal = true;
                }
                continue;
            }
            if !check::argument_type(cx, &t.ty) {
                fatal = true;
                continue;
            }
            if !check::argument_count(cx, params.len(), t) {
                fatal = true;
                break;
            }
            let name = match &*t.pat {
                Pat::Ident(p) if p.subpat.is_none() && p.by_ref.is_none() => {
                    syn::Ident::new(&p.ident.to_string(), p.ident.span())
                }
                _ => format_ident!("arg{}", i, span = Span::mixed_site()),
            };
            params.push((name, (*t.ty).clone()));
        }

        let (output, error) = check::returns_result(cx, sig)?;
        if fatal {
            return None;
        }
        Some(StepFn {
            original: item.clone(),
            context,
            params,
            output,
            error,
        })
    }
}

/// The step context a parameter's type names, if it names one.
fn context_of(ty: &Type) -> Option<StepContext> {
    let seg = last_segment(ty)?;
    if seg.ident == "StepCtx" {
        return Some(StepContext::Plain);
    }
    if seg.ident == "Resumable" {
        if let PathArguments::AngleBracketed(a) = &seg.arguments {
            if let Some(GenericArgument::Type(c)) = a.args.first() {
                return Some(StepContext::Resumable(Box::new(c.clone())));
            }
        }
    }
    None
}
