//! The path generated code uses to reach the runtime's support module.

use proc_macro2::TokenStream;
use quote::{quote, ToTokens};

/// Prints `<crate>::__private`, where `<crate>` is `::turnwise` or the `crate = path` override.
#[derive(Clone)]
pub(crate) struct Private {
    krate: syn::Path,
}

impl Private {
    pub(crate) fn new(krate: Option<syn::Path>) -> Self {
        Private {
            krate: krate.unwrap_or_else(|| syn::parse_quote!(::turnwise)),
        }
    }
}

impl ToTokens for Private {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let krate = &self.krate;
        tokens.extend(quote!(#krate::__private));
    }
}

/// The lints generated helper items allow, in one place (pin-project's list).
pub(crate) fn allowed_lints() -> TokenStream {
    quote! {
        #[allow(
            // The generated struct is named like the user's function.
            non_camel_case_types,
            // Helper items exist for their type checks only.
            dead_code,
            unused_qualifications,
            clippy::used_underscore_binding,
        )]
    }
}

/// Move `tokens` to `span` for error reporting, keeping how their names resolve.
pub(crate) fn respan(tokens: TokenStream, span: proc_macro2::Span) -> TokenStream {
    use proc_macro2::{Group, TokenTree};
    tokens
        .into_iter()
        .map(|mut t| {
            if let TokenTree::Group(g) = &t {
                let mut group = Group::new(g.delimiter(), respan(g.stream(), span));
                group.set_span(g.span().located_at(span));
                t = TokenTree::Group(group);
            } else {
                t.set_span(t.span().located_at(span));
            }
            t
        })
        .collect()
}
