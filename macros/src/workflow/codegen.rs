//! Token generation for `#[workflow]`; no validation here.
//!
//! Input:
//!
//! ```text
//! #[workflow(name = "counter", signals(Approval))]
//! pub async fn counter(ctx: &mut Turn, state: Count, msg: Add) -> Result<Done<Count, u64>, TurnError> { .. }
//! ```
//!
//! Output (simplified; `P` is `::turnwise::__private`):
//!
//! ```text
//! #[derive(Clone, Copy, Debug, Default)]
//! pub struct counter;                       // `pub struct crawler(pub Deps);` with a 4th parameter
//! const _: () = {
//!     impl P::Workflow for counter {
//!         type State = Count; type Message = Add; type Reply = u64;
//!         const NAME: &str = "counter"; const VERSION: &str = "v1";
//!         const SIGNALS: &[&str] = &[<Approval as P::Signal>::NAME];
//!         async fn run(&self, turn: &mut P::Turn<Self>, state: Count, message: Add) -> P::TurnResult<Self> {
//!             async fn counter(ctx: &mut P::Turn<counter>, state: Count, msg: Add)
//!                 -> Result<Done<Count, u64, Add>, TurnError> { .. }
//!             P::into_turn_result(counter(turn, state, message).await)
//!         }
//!         fn schema(&self) -> Option<P::WorkflowSchema> { Some(counter::schema(self)) }
//!     }
//!     impl P::Accepts<Approval> for counter {}
//!     impl counter { pub fn schema(&self) -> P::WorkflowSchema { .. } }
//! };
//! ```

use std::collections::BTreeSet;

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, Type};

use super::args::WorkflowArgs;
use super::ast::WorkflowFn;
use super::body::{BodyInfo, CallKind, DurableCall};
use crate::private::{allowed_lints, respan, Private};

/// The attributes of the user's function, split by where they go.
struct Attrs<'a> {
    /// `///` docs: on the generated struct.
    docs: Vec<&'a syn::Attribute>,
    /// `#[cfg]`: on everything generated.
    cfgs: Vec<&'a syn::Attribute>,
    /// The rest: on the function that keeps the body.
    rest: Vec<&'a syn::Attribute>,
}

fn split_attrs(item: &ItemFn) -> Attrs<'_> {
    let mut out = Attrs {
        docs: Vec::new(),
        cfgs: Vec::new(),
        rest: Vec::new(),
    };
    for attr in &item.attrs {
        if attr.path().is_ident("doc") {
            out.docs.push(attr);
        } else if attr.path().is_ident("cfg") {
            out.cfgs.push(attr);
        } else {
            out.rest.push(attr);
        }
    }
    out
}

/// The type the user names: a unit struct, or a tuple struct over the dependencies.
fn struct_item(item: &ItemFn, deps: Option<&Type>) -> TokenStream {
    let attrs = split_attrs(item);
    let (docs, cfgs) = (&attrs.docs, &attrs.cfgs);
    let vis = &item.vis;
    let ident = &item.sig.ident;
    match deps {
        Some(deps) => quote! {
            #(#docs)*
            #(#cfgs)*
            #[allow(non_camel_case_types)]
            #vis struct #ident(
                /// The workflow's dependencies, lent to every turn.
                #vis #deps,
            );
        },
        None => quote! {
            #(#docs)*
            #(#cfgs)*
            #[allow(non_camel_case_types)]
            #[derive(
                ::core::clone::Clone,
                ::core::marker::Copy,
                ::core::fmt::Debug,
                ::core::default::Default,
            )]
            #vis struct #ident;
        },
    }
}

/// The output when the signature cannot be expanded: the type alone.
pub(crate) fn stub(item: &ItemFn) -> TokenStream {
    let deps = item.sig.inputs.iter().nth(3).and_then(|a| match a {
        FnArg::Typed(t) => match &*t.ty {
            Type::Reference(r) => Some((*r.elem).clone()),
            _ => None,
        },
        FnArg::Receiver(_) => None,
    });
    struct_item(item, deps.as_ref())
}

/// The full expansion.
pub(crate) fn generate(
    p: &Private,
    args: &WorkflowArgs,
    wf: &WorkflowFn,
    info: &BodyInfo,
) -> TokenStream {
    let item = &wf.original;
    let cfgs = &split_attrs(item).cfgs;
    let ident = &item.sig.ident;
    let deps_ty = wf.deps.as_ref().map(|(_, ty)| ty);
    let the_struct = struct_item(item, deps_ty);

    let name = args.name_or(ident);
    let version = args.version_or_default();

    let signals = &args.signals;
    let accepts = accepts(p, ident, signals.iter().chain(&info.unaccepted));
    let distinct_names = distinct_signal_names(p, ident, signals);
    let signal_names = signals
        .iter()
        .map(|s| respan(quote!(<#s as #p::Signal>::NAME), s.span()));
    let assoc_types = assoc_types(p, args, wf);
    let options = options(p, args);
    let eq_fns = eq_fns(p, wf);
    let run = run_fn(p, wf, info);
    let deps_impls = deps_ty.map(|deps| deps_impls(p, ident, deps));
    let schema_impl = schema_impl(p, wf, &name, &version, signals, info);
    let allowed = allowed_lints();

    quote! {
        #the_struct

        #(#cfgs)*
        #[doc(hidden)]
        #allowed
        const _: () = {
            #[automatically_derived]
            impl #p::Workflow for #ident {
                #assoc_types
                const NAME: &'static ::core::primitive::str = #name;
                const VERSION: &'static ::core::primitive::str = #version;
                const SIGNALS: &'static [&'static ::core::primitive::str] = &[#(#signal_names),*];

                #options

                fn schema(&self) -> #p::Option<#p::WorkflowSchema> {
                    #p::Option::Some(#ident::schema(self))
                }

                fn manifest(&self) -> #p::Option<#p::manifest::Manifest> {
                    #p::Option::Some(#ident::manifest(self))
                }

                #eq_fns

                #run
            }

            #(#accepts)*
            #distinct_names
            #deps_impls
            #schema_impl
        };
    }
}

/// `impl Accepts<S>` for each of `signals`, spanned at the signal.
fn accepts<'a>(
    p: &'a Private,
    ident: &'a syn::Ident,
    signals: impl Iterator<Item = &'a syn::Path> + 'a,
) -> impl Iterator<Item = TokenStream> + 'a {
    signals.map(move |s| {
        let span = s.span();
        respan(
            quote! {
                #[automatically_derived]
                impl #p::Accepts<#s> for #ident {}
            },
            span,
        )
    })
}

/// The associated types of `impl Workflow`: state, message, reply and codec, each spanned at
/// the user's type.
fn assoc_types(p: &Private, args: &WorkflowArgs, wf: &WorkflowFn) -> TokenStream {
    let (state_ty, message_ty, reply_ty) = (&wf.state.ty, &wf.message.ty, &wf.reply);
    let state = quote_spanned!(state_ty.span()=> type State = #state_ty;);
    let message = quote_spanned!(message_ty.span()=> type Message = #message_ty;);
    let reply = quote_spanned!(reply_ty.span()=> type Reply = #reply_ty;);
    let codec = match &args.codec {
        Some(c) => quote_spanned!(c.span()=> type Codec = #c;),
        None => quote!(type Codec = #p::JsonCodec;),
    };
    quote!(#state #message #reply #codec)
}

/// `state_eq`, `reply_eq` and `message_eq`: `PartialEq` of each type when it has one.
fn eq_fns(p: &Private, wf: &WorkflowFn) -> TokenStream {
    let eq_fn = |name: &str, ty: &dyn quote::ToTokens| {
        let name = syn::Ident::new(name, Span::call_site());
        quote! {
            fn #name() -> #p::Option<#p::EqFn<#ty>> {
                #[allow(unused_imports)]
                use #p::{NoPartialEq as _, ViaPartialEq as _};
                (&&#p::EqProbe::<#ty>::NEW).eq_fn()
            }
        }
    };
    let state = eq_fn("state_eq", &wf.state.ty);
    let reply = eq_fn("reply_eq", &wf.reply);
    let message = eq_fn("message_eq", &wf.message.ty);
    quote!(#state #reply #message)
}

/// `Workflow::run`: the user's function, with its body repaired, inside it, called on the turn.
fn run_fn(p: &Private, wf: &WorkflowFn, info: &BodyInfo) -> TokenStream {
    let item = &wf.original;
    let rest = &split_attrs(item).rest;
    let ident = &item.sig.ident;
    let (state_ty, state_pat) = (&wf.state.ty, &wf.state.pat);
    let (message_ty, message_pat) = (&wf.message.ty, &wf.message.pat);
    let ctx_pat = &wf.ctx_pat;
    let ret = &wf.ret;
    let ctx_ty = quote!(&mut #p::Turn<#ident>);
    let placeholder = quote!(#p::in_flight_placeholder);
    // A body whose context a repair replaced has been reported and never compiles: a context
    // left unused by the repair is no news to the user.
    let repaired = (!info.stored_async.is_empty() || !info.in_flight.is_empty())
        .then(|| quote!(#[allow(unused_variables, unused_mut)]));
    let block = &super::repair::repair(
        &item.block,
        &wf.ctx,
        &ctx_ty,
        &placeholder,
        &info.stored_async,
        &info.in_flight,
    );
    let asyncness = item.sig.asyncness.map_or_else(
        || quote_spanned!(item.sig.fn_token.span=> async),
        |a| quote!(#a),
    );
    let fn_token = &item.sig.fn_token;

    // Internal names, hygienic so that they never meet the user's.
    let turn = syn::Ident::new("turn", Span::mixed_site());
    let state = syn::Ident::new("state", Span::mixed_site());
    let message = syn::Ident::new("message", Span::mixed_site());

    let (deps_param, deps_arg) = match &wf.deps {
        Some((pat, ty)) => (quote!(, #pat: &#ty), quote!(, &self.0)),
        None => (TokenStream::new(), TokenStream::new()),
    };
    let ret_span = ret.span();
    let finish = match &wf.error {
        Some(e) => quote_spanned!(ret_span=> #p::into_turn_result::<_, #e>),
        None => quote_spanned!(ret_span=> #p::into_turn_result),
    };
    // A `run` future that is not `Send` is reported at the user's function.
    let run_head = respan(
        quote! {
            async fn run(
                &self,
                #turn: &mut #p::Turn<Self>,
                #state: #state_ty,
                #message: #message_ty,
            ) -> #p::TurnResult<Self>
        },
        ident.span(),
    );
    quote! {
        #run_head {
            #(#rest)*
            #repaired
            #[allow(clippy::needless_pass_by_value, clippy::unused_async)]
            #asyncness #fn_token #ident(
                #ctx_pat: &mut #p::Turn<#ident>,
                #state_pat: #state_ty,
                #message_pat: #message_ty
                #deps_param
            ) -> #ret #block

            #finish(#ident(#turn, #state, #message #deps_arg).await)
        }
    }
}

/// What a workflow over dependencies `deps` adds: the check that `deps` can be a workflow's
/// dependencies, and `Clone` and `Debug` for the struct (`Debug` whatever `deps` is).
fn deps_impls(p: &Private, ident: &syn::Ident, deps: &Type) -> TokenStream {
    let assert = quote_spanned!(deps.span()=> #p::assert_deps::<#deps>());
    quote! {
        const _: () = #assert;
        #[automatically_derived]
        impl ::core::clone::Clone for #ident {
            fn clone(&self) -> Self {
                Self(::core::clone::Clone::clone(&self.0))
            }
        }
        #[automatically_derived]
        impl ::core::fmt::Debug for #ident {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.debug_tuple(::core::stringify!(#ident)).finish_non_exhaustive()
            }
        }
    }
}

/// `impl Name { pub fn schema(&self) -> WorkflowSchema }`, with the function's visibility.
fn schema_impl(
    p: &Private,
    wf: &WorkflowFn,
    name: &str,
    version: &str,
    signals: &[syn::Path],
    info: &BodyInfo,
) -> TokenStream {
    let ident = &wf.original.sig.ident;
    let vis = &wf.original.vis;
    let schema = schema(p, wf, name, version, signals, &info.calls);
    let schema_doc = format!(
        " The JSON Schemas of the `{name}` workflow: its message, state and reply, each accepted signal by name and each step output known at compile time, by key."
    );
    let manifest_doc = format!(
        " The replay manifest of `{name}` `{version}`: the grammar of its durable calls, its shape hash and its schemas."
    );
    let shape_hash = turnwise_manifest::shape_hash(&info.grammar.to_node());
    let grammar = info.grammar.to_tokens(p);
    let patches = info.patches.iter().map(|(id, _)| id);
    quote! {
        impl #ident {
            #[doc = #schema_doc]
            #[must_use]
            #vis fn schema(&self) -> #p::WorkflowSchema {
                #schema
            }

            #[doc = #manifest_doc]
            #[must_use]
            #vis fn manifest(&self) -> #p::manifest::Manifest {
                #p::workflow_manifest(
                    #ident::schema(self),
                    #shape_hash,
                    #grammar,
                    [#(#patches),*],
                )
            }
        }
    }
}

fn options(p: &Private, args: &WorkflowArgs) -> TokenStream {
    if args.max_attempts.is_none() && args.lease_ms.is_none() && args.on_exhausted.is_none() {
        return TokenStream::new();
    }
    let max = args.max_attempts.iter().map(|n| quote!(.max_attempts(#n)));
    let lease = args
        .lease_ms
        .iter()
        .map(|(ms, _)| quote!(.lease(#p::Duration::from_millis(#ms))));
    let exhausted = args
        .on_exhausted
        .iter()
        .map(|v| quote!(.on_exhausted(#p::OnExhausted::#v)));
    quote! {
        fn options(&self) -> #p::WorkflowOptions {
            <#p::WorkflowOptions as ::core::default::Default>::default()
                #(#max)* #(#lease)* #(#exhausted)*
        }
    }
}

/// Two accepted signals must not share a name on the wire.
fn distinct_signal_names(p: &Private, ident: &syn::Ident, signals: &[syn::Path]) -> TokenStream {
    let mut out = TokenStream::new();
    let message = format!("two signals accepted by workflow `{ident}` have the same name; give each its own `#[signal(name = \"..\")]`");
    for (i, b) in signals.iter().enumerate() {
        for a in &signals[..i] {
            out.extend(quote_spanned! {b.span()=>
                const _: () = ::core::assert!(
                    !#p::str_eq(<#a as #p::Signal>::NAME, <#b as #p::Signal>::NAME),
                    #message
                );
            });
        }
    }
    out
}

/// The body of `schema()`; its calls are also the checks that every type can cross the wire.
fn schema(
    p: &Private,
    wf: &WorkflowFn,
    name: &str,
    version: &str,
    signals: &[syn::Path],
    calls: &[DurableCall],
) -> TokenStream {
    let state_ty = &wf.state.ty;
    let message_ty = &wf.message.ty;
    let reply_ty = &wf.reply;
    let message = quote_spanned!(message_ty.span()=> #p::message_schema::<#message_ty>());
    let state = quote_spanned!(state_ty.span()=> #p::state_schema::<#state_ty>());
    let reply = quote_spanned!(reply_ty.span()=> #p::reply_schema::<#reply_ty>());
    let signals = signals.iter().map(|s| {
        respan(
            quote!((<#s as #p::Signal>::NAME, #p::signal_schema::<#s>())),
            s.span(),
        )
    });
    let mut seen = BTreeSet::new();
    let steps = calls.iter().filter_map(|call| {
        let key = call.key.as_ref()?;
        let schema = match &call.kind {
            CallKind::Step(Some(t)) => quote_spanned!(t.span()=> #p::step_schema::<#t>()),
            // The callee is named as a value, where a helper function also lives, so that a
            // helper called with the bare context gets `StepCall`'s message. The step function's
            // own expansion checks its output (the probe gives `null` when that check fails).
            CallKind::StepFn(path) => {
                let probe =
                    quote_spanned!(path.span()=> #p::step_output_of::<Self, _, _, _>(&#path));
                quote!({
                    #[allow(unused_imports)]
                    use #p::{OutputSchemaKnown as _, OutputSchemaUnknown as _};
                    (&&#probe).output_schema()
                })
            }
            CallKind::Now => quote!(#p::step_schema::<#p::Millis>()),
            CallKind::Random => quote!(#p::step_schema::<::core::primitive::u64>()),
            CallKind::Step(None) | CallKind::Sleep | CallKind::Wait | CallKind::Child => {
                return None
            }
        };
        if !seen.insert(key.clone()) {
            return None;
        }
        Some(quote!((#key, #schema)))
    });
    quote! {
        #p::workflow_schema(
            #name,
            #version,
            #message,
            #state,
            #reply,
            [#(#signals),*],
            [#(#steps),*],
        )
    }
}
