//! `#[workflow]`: args → ast (the signature's rules: shared with `#[step]` in
//! `crate::signature`, its own in [`check`], one function per rule) → body checks (`body/`, one
//! module per subject, one function per rule) → codegen.

mod args;
mod ast;
mod body;
mod check;
mod codegen;
mod frozen;
mod repair;

use proc_macro2::TokenStream;
use quote::quote;

use crate::ctxt::Ctxt;
use crate::private::Private;
use crate::signature::Macro;

#[cfg(test)]
pub(crate) use args::KNOWN as ARGUMENTS;

/// The shape every message about the signature shows.
const SHAPE: &str =
    "`async fn name(ctx: &mut Turn, state: State, message: Message) -> Result<Done<State, Reply>, TurnError>`";

/// `#[workflow]` as the shared signature rules name it.
const WORKFLOW: Macro = Macro {
    attr: "`#[workflow]`",
    shape: SHAPE,
    context: "turn",
    why_not_generic: "its state, message and reply types are fixed on the wire",
    instead_of_self:
        "it is a free function; pass what it needs as a fourth parameter `deps: &Deps`",
};

/// Expand `#[workflow(args)] item`.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let cx = Ctxt::new();
    let args = args::WorkflowArgs::parse(&cx, args);
    let private = Private::new(args.krate.clone());
    let item: syn::ItemFn = match crate::item::parse_fn(item.clone()) {
        Ok(f) => f,
        Err(_) => {
            cx.error_spanned_by(
                crate::first_tokens(&item),
                format!("`#[workflow]` goes on an `async fn`: {SHAPE}"),
            );
            let errors = cx.check().err().map(syn::Error::into_compile_error);
            return quote!(#item #errors);
        }
    };
    let Some(wf) = ast::WorkflowFn::from_syn(&cx, &item) else {
        // The signature cannot be expanded: keep a stub of the type so that code using it
        // reports no more than this (not inside an `impl`, where no struct can go).
        let stub = item.sig.receiver().is_none().then(|| codegen::stub(&item));
        let errors = cx.check().err().map(syn::Error::into_compile_error);
        return quote!(#stub #errors);
    };
    let settings = body::Settings {
        ctx: &wf.ctx,
        workflow: &item.sig.ident,
        signals: &args.signals,
        allow_nondeterminism: args.allow_nondeterminism,
    };
    let info = body::analyze(&cx, &settings, &item.block);
    let frozen = args.frozen.map(|token| {
        let ident = &item.sig.ident;
        let (name, version) = (args.name_or(ident), args.version_or_default());
        frozen::check(&cx, (&name, &version), &info.grammar, token, ident.span())
    });
    // Body checks do not stop the expansion: the generated code is complete, so only the
    // checks' own errors are reported.
    let mut out = codegen::generate(&private, &args, &wf, &info);
    out.extend(frozen);
    match cx.check() {
        Ok(()) => out,
        Err(e) => {
            let errors = e.into_compile_error();
            quote!(#out #errors)
        }
    }
}
