//! Reading the `fn` an attribute is on, so that a mistake inside its body is reported once.

use proc_macro2::{Delimiter, TokenStream};
use syn::parse::{Parse, ParseStream};

/// Parse the function item an attribute macro is on.
///
/// When the item parses except for its body (a typo such as `let x = ;`), the body is kept as
/// the tokens the user wrote, and the signature is expanded as usual: the generated code
/// carries the body back to rustc, whose parser reports the typo once at the user's token, while
/// everything the macro generates (the workflow type, the step function) still exists, so no
/// other error follows from it. This is what `tracing`'s `#[instrument]` does too.
///
/// An item that is not a function at all is an error here.
pub(crate) fn parse_fn(item: TokenStream) -> syn::Result<syn::ItemFn> {
    match syn::parse2::<syn::ItemFn>(item.clone()) {
        Ok(f) => Ok(f),
        Err(e) => syn::parse2::<LooseFn>(item).map(|f| f.0).map_err(|_| e),
    }
}

/// A function whose body is kept as unparsed tokens.
struct LooseFn(syn::ItemFn);

impl Parse for LooseFn {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let attrs = input.call(syn::Attribute::parse_outer)?;
        let vis: syn::Visibility = input.parse()?;
        let sig: syn::Signature = input.parse()?;
        let (body, span) = input.step(|cursor| match cursor.group(Delimiter::Brace) {
            Some((inside, span, rest)) => Ok(((inside.token_stream(), span), rest)),
            None => Err(cursor.error("expected the function's body")),
        })?;
        if !input.is_empty() {
            return Err(input.error("unexpected tokens after the function's body"));
        }
        let block = syn::Block {
            brace_token: syn::token::Brace(span),
            stmts: vec![syn::Stmt::Expr(syn::Expr::Verbatim(body), None)],
        };
        Ok(LooseFn(syn::ItemFn {
            attrs,
            vis,
            modifiers: syn::FnModifiers::default(),
            sig,
            block: Box::new(block),
        }))
    }
}
