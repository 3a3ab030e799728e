//! What `#[step]` generates.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use super::args::StepArgs;
use super::ast::{StepContext, StepFn};
use crate::private;
use crate::private::Private;

// Input:
//
//     #[step(kind = "tool", timeout = "5m")]
//     pub async fn crawl(s: StepCtx, site: Site) -> Result<Pages, TurnError> { .. }
//
// Output (simplified; `P` is `::turnwise::__private`):
//
//     pub fn crawl<'turn, W: P::Workflow>(ctx: &'turn mut P::Turn<W>, site: Site)
//         -> P::Step<'turn, W, Pages, P::BoxStepFn<'turn, Pages>>
//     {
//         async fn crawl(s: StepCtx, site: Site) -> Result<Pages, TurnError> { .. }
//         P::Turn::step(ctx, "crawl", P::box_step(move |s| async move {
//             P::into_turn_result(crawl(From::from(s), site).await)
//         }))
//         .kind(P::OperationKind::Tool)
//         .timeout(P::Duration::from_millis(300000))
//     }
//     const _: fn() -> P::JsonValue = P::step_schema::<Pages>;  // the output has a schema
//
// A `#[workflow]` names the step's output through the function itself (`P::StepCall`).
pub(super) fn generate(p: &Private, args: &StepArgs, step: &StepFn) -> TokenStream {
    let item = &step.original;
    let ident = &item.sig.ident;
    let vis = &item.vis;
    let key = ident.to_string().trim_start_matches("r#").to_owned();
    let (docs, rest): (Vec<_>, Vec<_>) = item
        .attrs
        .iter()
        .partition(|a| a.path().is_ident("doc") || a.path().is_ident("cfg"));
    let cfgs: Vec<_> = item
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("cfg"))
        .collect();
    let output = &step.output;
    let out_span = output.span();

    let param_types = step
        .params
        .iter()
        .map(|(_, t)| quote!(#t))
        .collect::<TokenStream>();
    let w = if mentions(param_types, "W") {
        format_ident!("TurnwiseW")
    } else {
        format_ident!("W")
    };
    let ctx = syn::Ident::new("ctx", Span::mixed_site());
    let s = syn::Ident::new("s", Span::mixed_site());
    let outer_params = step.params.iter().map(|(n, t)| quote!(#n: #t));
    let names: Vec<_> = step.params.iter().map(|(n, _)| n).collect();
    let ctx_arg = step
        .context
        .as_ref()
        .map(|_| quote!(::core::convert::From::from(#s),));

    // The function that keeps the body has the user's signature; the outer one forwards.
    let inner_params = &item.sig.inputs;
    let asyncness = item.sig.asyncness.map_or_else(
        || quote_spanned!(item.sig.fn_token.span=> async),
        |a| quote!(#a),
    );
    let ret = &item.sig.output;
    let block = &item.block;
    let finish = match &step.error {
        Some(e) => quote_spanned!(e.span()=> #p::into_turn_result::<_, #e>),
        None => quote!(#p::into_turn_result),
    };
    let turn_step = quote_spanned!(out_span=> #p::Turn::<#w>::step::<#output, _, _>);
    let kind = args
        .kind
        .iter()
        .map(|k| quote!(.kind(#p::OperationKind::#k)));
    let timeout = args
        .timeout_ms
        .iter()
        .map(|ms| quote!(.timeout(#p::Duration::from_millis(#ms))));
    let heartbeat = args
        .heartbeat_ms
        .iter()
        .map(|(ms, _)| quote!(.heartbeat_timeout(#p::Duration::from_millis(#ms))));
    // Checked here, at the step's output, so that a workflow calling the step does not report
    // it again (its schema probe answers `null` for an output without one).
    let schema_check =
        quote_spanned!(out_span=> const _: fn() -> #p::JsonValue = #p::step_schema::<#output>;);
    let cursor_check = match &step.context {
        Some(StepContext::Resumable(c)) => {
            quote_spanned!(c.span()=> const _: () = #p::assert_cursor::<#c>();)
        }
        _ => TokenStream::new(),
    };
    let allowed = private::allowed_lints();

    quote! {
        #(#docs)*
        #(#rest)*
        #vis fn #ident<'turn, #w: #p::Workflow>(
            #ctx: &'turn mut #p::Turn<#w>,
            #(#outer_params),*
        ) -> #p::Step<'turn, #w, #output, #p::BoxStepFn<'turn, #output>> {
            #[allow(clippy::needless_pass_by_value, clippy::unused_async)]
            #asyncness fn #ident(#inner_params) #ret #block

            #turn_step(#ctx, #key, #p::box_step(move |#s: #p::StepCtx| async move {
                #finish(#ident(#ctx_arg #(#names),*).await)
            }))
            #(#kind)* #(#timeout)* #(#heartbeat)*
        }

        #(#cfgs)*
        #[doc(hidden)]
        #allowed
        const _: () = {
            #schema_check
            #cursor_check
        };
    }
}

/// Whether any of `tokens` is the identifier `name`.
fn mentions(tokens: TokenStream, name: &str) -> bool {
    tokens.into_iter().any(|t| match t {
        TokenTree::Ident(i) => i == name,
        TokenTree::Group(g) => mentions(g.stream(), name),
        _ => false,
    })
}
