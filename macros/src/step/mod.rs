//! `#[step]`: parse → check → expand.

mod args;

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, GenericArgument, ItemFn, Pat, PathArguments, ReturnType, Type};

use crate::ctxt::Ctxt;
use crate::private;
use crate::private::Private;

#[cfg(test)]
pub(crate) use args::KNOWN as ARGUMENTS;

const SHAPE: &str = "`async fn name(s: StepCtx, arg: Arg, ..) -> Result<Output, TurnError>`";

/// The step's context parameter.
enum StepContext {
    /// `s: StepCtx`.
    Plain,
    /// `s: Resumable<C>`: a typed resume cursor.
    Resumable(Box<Type>),
}

/// A checked `#[step]` function.
struct StepFn {
    original: ItemFn,
    context: Option<StepContext>,
    /// The parameters the generated function takes after the turn context: (name, type).
    params: Vec<(syn::Ident, Type)>,
    output: Type,
    error: Option<Type>,
}

/// Expand `#[step(args)] item`.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let cx = Ctxt::new();
    let args = args::StepArgs::parse(&cx, args);
    let p = Private::new(args.krate.clone());
    let item: ItemFn = match crate::item::parse_fn(item.clone()) {
        Ok(f) => f,
        Err(_) => {
            cx.error_spanned_by(
                crate::first_tokens(&item),
                format!("`#[step]` goes on an `async fn`: {SHAPE}; use it at the top level of a module, not on a method or another item"),
            );
            let errors = cx.check().err().map(syn::Error::into_compile_error);
            return quote!(#item #errors);
        }
    };
    let Some(step) = check(&cx, &item) else {
        // Keep the function as written so that only these errors are reported.
        let errors = cx.check().err().map(syn::Error::into_compile_error);
        return quote!(#item #errors);
    };
    let out = generate(&p, &args, &step);
    match cx.check() {
        Ok(()) => out,
        Err(e) => {
            let errors = e.into_compile_error();
            quote!(#out #errors)
        }
    }
}

fn last_ident(ty: &Type) -> Option<&syn::PathSegment> {
    match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last(),
        _ => None,
    }
}

fn context_of(ty: &Type) -> Option<StepContext> {
    let seg = last_ident(ty)?;
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

fn check(cx: &Ctxt, item: &ItemFn) -> Option<StepFn> {
    let sig = &item.sig;
    let mut fatal = false;
    if sig.asyncness.is_none() {
        cx.error_spanned_by(
            sig.fn_token,
            format!("`#[step]` needs an `async fn`: add `async` before `fn`, as in {SHAPE}"),
        );
    }
    if let Some(c) = &sig.constness {
        cx.error_spanned_by(c, "a `#[step]` function cannot be `const`");
    }
    if let syn::Safety::Unsafe(u) = &sig.safety {
        cx.error_spanned_by(u, "a `#[step]` function cannot be `unsafe`");
    }
    if let Some(abi) = &sig.abi {
        cx.error_spanned_by(abi, "a `#[step]` function cannot have an ABI");
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        cx.error_spanned_by(
            &sig.generics,
            "a `#[step]` function cannot be generic: its output is saved and replayed as one fixed type; name concrete types",
        );
        fatal = true;
    }
    let key = sig.ident.to_string().trim_start_matches("r#").to_owned();
    if let Err(why) = turnwise_rules::check_identifier(&key) {
        cx.error_spanned_by(
            &sig.ident,
            format!("the step's name is its key, and {key:?} breaks the key rules: {why}"),
        );
    }

    let mut context = None;
    let mut params = Vec::new();
    for (i, arg) in sig.inputs.iter().enumerate() {
        let t = match arg {
            FnArg::Receiver(r) => {
                cx.error_spanned_by(
                    r,
                    "a `#[step]` function cannot take `self`: it is a free function called as `name(ctx, args..)`; pass what it needs as arguments",
                );
                fatal = true;
                continue;
            }
            FnArg::Typed(t) => t,
        };
        if let Some(c) = context_of(&t.ty) {
            if i == 0 {
                context = Some(c);
            } else {
                cx.error_spanned_by(
                    t,
                    format!("the step context must be the first parameter: {SHAPE}"),
                );
                fatal = true;
            }
            continue;
        }
        if let Type::Reference(r) = &*t.ty {
            let turn = last_ident(&r.elem).is_some_and(|s| s.ident == "Turn");
            let msg = if turn {
                format!("a step does not take the turn context: the generated function does (call it as `name(ctx, args..)`); take the step context instead, {SHAPE}")
            } else {
                reference_message(r)
            };
            cx.error_spanned_by(r, msg);
            fatal = true;
            continue;
        }
        if matches!(&*t.ty, Type::ImplTrait(_)) {
            cx.error_spanned_by(
                &t.ty,
                "a `#[step]` function cannot be generic: name the argument's type",
            );
            fatal = true;
            continue;
        }
        let name = match &*t.pat {
            Pat::Ident(p) if p.subpat.is_none() && p.by_ref.is_none() => {
                syn::Ident::new(&p.ident.to_string(), p.ident.span())
            }
            _ => format_ident!("arg{}", i, span = Span::mixed_site()),
        };
        params.push((name, (*t.ty).clone()));
    }

    let (output, error) = match &sig.output {
        ReturnType::Type(_, ty) => match result_args(ty) {
            Some(r) => r,
            None => {
                cx.error_spanned_by(
                    ty,
                    "the return type of a `#[step]` function is `Result<Output, TurnError>`",
                );
                return None;
            }
        },
        ReturnType::Default => {
            cx.error_at(
                sig.paren_token.span.close(),
                "missing return type: a `#[step]` function returns `Result<Output, TurnError>`",
            );
            return None;
        }
    };
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

/// `T` and `E` of `Result<T, E>` (or `T` of a one-argument `Result<T>` alias).
fn result_args(ty: &Type) -> Option<(Type, Option<Type>)> {
    let seg = last_ident(ty)?;
    if seg.ident != "Result" {
        return None;
    }
    let PathArguments::AngleBracketed(a) = &seg.arguments else {
        return None;
    };
    let mut types = a.args.iter().filter_map(|g| match g {
        GenericArgument::Type(t) => Some(t.clone()),
        _ => None,
    });
    let ok = types.next()?;
    Some((ok, types.next()))
}

/// Whether any of `tokens` is the identifier `name`.
fn mentions(tokens: TokenStream, name: &str) -> bool {
    tokens.into_iter().any(|t| match t {
        TokenTree::Ident(i) => i == name,
        TokenTree::Group(g) => mentions(g.stream(), name),
        _ => false,
    })
}

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
//     #[doc(hidden)] pub struct crawl {}          // the marker `#[workflow]` reads the output from
//     impl P::StepFn for crawl { type Output = Pages; const KEY: &str = "crawl"; }
fn generate(p: &Private, args: &args::StepArgs, step: &StepFn) -> TokenStream {
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
    let output_schema = quote_spanned!(out_span=> #p::step_schema::<#output>());
    let cursor_check = match &step.context {
        Some(StepContext::Resumable(c)) => {
            quote_spanned!(c.span()=> const _: () = #p::assert_cursor::<#c>();)
        }
        _ => TokenStream::new(),
    };
    let allowed = private::allowed_lints();
    let marker_doc = format!(" The output and key of the `#[step]` function [`{ident}()`].");

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
        #[doc = #marker_doc]
        #[doc(hidden)]
        #allowed
        #vis struct #ident {}

        #(#cfgs)*
        #[doc(hidden)]
        #allowed
        const _: () = {
            #[automatically_derived]
            impl #p::StepFn for #ident {
                type Output = #output;
                const KEY: &'static ::core::primitive::str = #key;
                fn schema() -> #p::JsonValue {
                    #output_schema
                }
            }
            #cursor_check
        };
    }
}

/// The fix for a step argument taken by reference, naming the owned type to take instead.
fn reference_message(r: &syn::TypeReference) -> String {
    let written = type_text(&Type::Reference(r.clone()));
    let owned = owned_type(&r.elem);
    if r.mutability.is_some() {
        format!(
            "step arguments are moved into the step, so a step cannot change its caller's value through `{written}`: take `{owned}` instead and return the changed value in the step's output"
        )
    } else {
        format!("step arguments are moved into the step: take an owned type, `{owned}` instead of `{written}`")
    }
}

/// The owned counterpart of a borrowed type: `String` for `str`, `PathBuf` for `Path` (and
/// `OsString`, `CString`), `Vec<T>` for `[T]`, `Box<dyn Tr>` for `dyn Tr`, `T` otherwise.
fn owned_type(elem: &Type) -> String {
    let known = |name: &str| match name {
        "str" => Some("String"),
        "Path" => Some("PathBuf"),
        "OsStr" => Some("OsString"),
        "CStr" => Some("CString"),
        _ => None,
    };
    match elem {
        Type::Slice(s) => format!("Vec<{}>", type_text(&s.elem)),
        Type::TraitObject(_) => format!("Box<{}>", type_text(elem)),
        Type::Path(p) if p.qself.is_none() => {
            let mut owned = p.clone();
            if let Some(last) = owned.path.segments.last_mut() {
                if let (Some(owned), true) =
                    (known(&last.ident.to_string()), last.arguments.is_none())
                {
                    last.ident = syn::Ident::new(owned, last.ident.span());
                }
            }
            type_text(&Type::Path(owned))
        }
        Type::Paren(p) => owned_type(&p.elem),
        other => type_text(other),
    }
}

/// A type as written, for messages: `Vec<u64>` rather than the token stream's `Vec < u64 >`.
fn type_text(ty: &Type) -> String {
    let mut text = quote::ToTokens::to_token_stream(ty).to_string();
    for (from, to) in [
        (" < ", "<"),
        ("< ", "<"),
        (" <", "<"),
        (" >", ">"),
        (" ::", "::"),
        (":: ", "::"),
        (" ,", ","),
        ("& ", "&"),
        ("[ ", "["),
        (" ]", "]"),
        ("( ", "("),
        (" )", ")"),
        (" ;", ";"),
    ] {
        text = text.replace(from, to);
    }
    text
}
