//! `#[step]`: arguments → ast → checks → codegen.
//!
//! [`args`] reads the attribute's arguments, [`ast`] reads the function into a [`ast::StepFn`]
//! (running the rules shared with `#[workflow]`, in `crate::signature`, and its own [`check`]
//! rules on the way, one function per rule), and [`codegen`] writes the
//! generated function and its compile-time checks.

mod args;
mod ast;
mod check;
mod codegen;

use proc_macro2::TokenStream;
use quote::quote;

use crate::ctxt::Ctxt;
use crate::private::Private;
use crate::signature::Macro;

#[cfg(test)]
pub(crate) use args::KNOWN as ARGUMENTS;

/// The shape every message about the signature shows.
const SHAPE: &str = "`async fn name(s: StepCtx, arg: Arg, ..) -> Result<Output, TurnError>`";

/// `#[step]` as the shared signature rules name it.
const STEP: Macro = Macro {
    attr: "`#[step]`",
    shape: SHAPE,
    context: "step",
    why_not_generic: "its output is saved and replayed as one fixed type",
    instead_of_self:
        "it is a free function called as `name(ctx, args..)`; pass what it needs as arguments",
};

/// Expand `#[step(args)] item`.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let cx = Ctxt::new();
    let args = args::StepArgs::parse(&cx, args);
    let p = Private::new(args.krate.clone());
    let item: syn::ItemFn = match crate::item::parse_fn(item.clone()) {
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
    let Some(step) = ast::StepFn::from_syn(&cx, &item) else {
        // Keep the function as written so that only these errors are reported.
        let errors = cx.check().err().map(syn::Error::into_compile_error);
        return quote!(#item #errors);
    };
    let out = codegen::generate(&p, &args, &step);
    match cx.check() {
        Ok(()) => out,
        Err(e) => {
            let errors = e.into_compile_error();
            quote!(#out #errors)
        }
    }
}
