//! The attribute macros of [turnwise](../turnwise/index.html): `#[workflow]`, `#[step]` and
//! `#[derive(Signal)]`.
//!
//! Use them through `turnwise` (`use turnwise::prelude::*;`), which re-exports them; this crate
//! is an implementation detail pinned to the exact `turnwise` version. What they generate is
//! explained in `docs/macros.md`.

// One job per function: clippy.toml sets the limit at 100 lines; the few longer functions
// say why where they are.
#![warn(clippy::too_many_lines)]
#![doc(test(attr(deny(warnings))))]

use proc_macro::TokenStream;

mod args;
mod ctxt;
mod duration;
mod item;
mod private;
mod signal;
mod signature;
mod step;
mod workflow;

#[cfg(test)]
mod expand_tests;

/// The first token of `tokens`, to point an error at an item it does not apply to.
pub(crate) fn first_tokens(tokens: &proc_macro2::TokenStream) -> proc_macro2::TokenStream {
    tokens.clone().into_iter().take(1).collect()
}

/// Print an expansion when `TURNWISE_MACROS_DEBUG` is set.
fn debug(what: &str, out: &proc_macro2::TokenStream) {
    if std::env::var_os("TURNWISE_MACROS_DEBUG").is_some() {
        eprintln!("{what} expands to:\n{out}");
    }
}

#[doc = include_str!("../docs/workflow.md")]
#[proc_macro_attribute]
pub fn workflow(args: TokenStream, item: TokenStream) -> TokenStream {
    let out = workflow::expand(args.into(), item.into());
    debug("#[workflow]", &out);
    out.into()
}

#[doc = include_str!("../docs/step.md")]
#[proc_macro_attribute]
pub fn step(args: TokenStream, item: TokenStream) -> TokenStream {
    let out = step::expand(args.into(), item.into());
    debug("#[step]", &out);
    out.into()
}

#[doc = include_str!("../docs/signal.md")]
#[proc_macro_derive(Signal, attributes(signal))]
pub fn derive_signal(item: TokenStream) -> TokenStream {
    let out = signal::expand(item.into());
    debug("#[derive(Signal)]", &out);
    out.into()
}

/// The arguments each macro accepts (kept next to the docs that list them).
#[cfg(test)]
#[test]
fn documented_arguments() {
    let docs = [
        (include_str!("../docs/workflow.md"), workflow::ARGUMENTS),
        (include_str!("../docs/step.md"), step::ARGUMENTS),
        (include_str!("../docs/signal.md"), signal::ARGUMENTS),
    ];
    for (doc, args) in docs {
        for arg in args {
            assert!(
                doc.contains(&format!("`{arg}")),
                "`{arg}` is not documented"
            );
        }
    }
}
