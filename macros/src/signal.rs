//! `#[derive(Signal)]`: a signal type and its name on the wire.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};

use crate::args::{self, Seen};
use crate::ctxt::Ctxt;
use crate::private::{allowed_lints, Private};

/// Every `#[signal]` argument, for messages.
pub(crate) const ARGUMENTS: &[&str] = &["name", "crate"];

// Input:
//
//     #[derive(Signal)]
//     #[signal(name = "approval")]
//     struct Approval { approved: bool }
//
// Output (simplified; `P` is `::turnwise::__private`):
//
//     const _: () = {
//         impl P::Signal for Approval { const NAME: &str = "approval"; }
//         const _: () = P::assert_signal_data::<Approval>();
//     };
pub(crate) fn expand(input: TokenStream) -> TokenStream {
    let cx = Ctxt::new();
    let item: syn::Item = match syn::parse2(input.clone()) {
        Ok(item) => item,
        Err(e) => return e.into_compile_error(),
    };
    let (ident, generics, attrs) = match &item {
        syn::Item::Struct(s) => (&s.ident, &s.generics, &s.attrs),
        syn::Item::Enum(e) => (&e.ident, &e.generics, &e.attrs),
        _ => {
            cx.error_spanned_by(
                crate::first_tokens(&input),
                "`#[derive(Signal)]` goes on a struct or an enum",
            );
            return cx
                .check()
                .err()
                .map(syn::Error::into_compile_error)
                .unwrap_or_default();
        }
    };
    if !generics.params.is_empty() || generics.where_clause.is_some() {
        cx.error_spanned_by(
            generics,
            "a signal cannot be generic: it has one fixed name and shape on the wire",
        );
        return cx
            .check()
            .err()
            .map(syn::Error::into_compile_error)
            .unwrap_or_default();
    }

    let (name, krate) = signal_args(&cx, attrs);
    let wire_name = wire_name(&cx, ident, name.as_ref());
    let p = Private::new(krate);
    let check = quote_spanned!(ident.span()=> #p::assert_signal_data::<#ident>());
    let allowed = allowed_lints();
    let out = quote! {
        #[doc(hidden)]
        #allowed
        const _: () = {
            #[automatically_derived]
            impl #p::Signal for #ident {
                const NAME: &'static ::core::primitive::str = #wire_name;
            }
            const _: () = #check;
        };
    };
    match cx.check() {
        Ok(()) => out,
        Err(e) => {
            let errors = e.into_compile_error();
            quote!(#out #errors)
        }
    }
}

/// The `#[signal(..)]` arguments: the name and the crate path.
fn signal_args(cx: &Ctxt, attrs: &[syn::Attribute]) -> (Option<syn::LitStr>, Option<syn::Path>) {
    let mut name: Option<syn::LitStr> = None;
    let mut krate = None;
    let mut seen = Seen::new("#[signal]", ARGUMENTS);
    for attr in attrs.iter().filter(|a| a.path().is_ident("signal")) {
        let mut handle = |meta: syn::meta::ParseNestedMeta| {
            if !seen.admit(cx, &meta) {
                return Ok(());
            }
            if meta.path.is_ident("name") {
                name = args::string(cx, &meta, "name = \"approval\"");
            } else {
                krate = args::krate(cx, &meta);
            }
            Ok(())
        };
        let parsed = match &attr.meta {
            syn::Meta::List(list) => {
                let tokens =
                    args::positional(cx, list.tokens.clone(), "#[signal]", |lit| match lit {
                        syn::Lit::Str(_) => format!("write `name = {}`", args::lit_text(lit)),
                        _ => format!("supported arguments are {}", args::one_of(ARGUMENTS)),
                    });
                syn::parse::Parser::parse2(syn::meta::parser(&mut handle), tokens)
            }
            _ => attr.parse_nested_meta(&mut handle),
        };
        if let Err(e) = parsed {
            cx.syn_error(e);
        }
    }
    (name, krate)
}

/// The signal's name on the wire: `name`, checked against the identifier rules; without one,
/// the type's name, and an error suggesting one (unless another error came first).
fn wire_name(cx: &Ctxt, ident: &syn::Ident, name: Option<&syn::LitStr>) -> String {
    match name {
        Some(lit) => {
            if let Err(why) = turnwise_rules::check_identifier(&lit.value()) {
                cx.error_spanned_by(lit, format!("invalid signal name {:?}: {why}", lit.value()));
            }
            lit.value()
        }
        None => {
            if !cx.has_errors() {
                let suggestion = snake(&ident.to_string());
                cx.error_spanned_by(
                    ident,
                    format!("a signal needs its name on the wire: add `#[signal(name = \"{suggestion}\")]`"),
                );
            }
            ident.to_string()
        }
    }
}

/// `ApprovalGiven` → `approval_given`, for the suggested name.
fn snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.extend(c.to_lowercase());
    }
    out
}
