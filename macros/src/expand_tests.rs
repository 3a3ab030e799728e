//! Expansion snapshots, on stable: every `tests/expand/<name>.rs` goes through the macros'
//! own `expand` functions (no compiler involved), is pretty-printed with `prettyplease`, and is
//! compared with `tests/expand/<name>.expanded.rs`. `TURNWISE_BLESS=1` rewrites the snapshots.

use std::path::{Path, PathBuf};

use proc_macro2::TokenStream;
use quote::quote;

use crate::{signal, step, workflow};

/// Expand the macros of one item, as the compiler would call them.
fn expand_item(mut item: syn::Item) -> TokenStream {
    match &mut item {
        syn::Item::Fn(f) => {
            let Some(at) = f
                .attrs
                .iter()
                .position(|a| a.path().is_ident("workflow") || a.path().is_ident("step"))
            else {
                return quote!(#item);
            };
            let attr = f.attrs.remove(at);
            let args = match &attr.meta {
                syn::Meta::List(list) => list.tokens.clone(),
                _ => TokenStream::new(),
            };
            if attr.path().is_ident("workflow") {
                workflow::expand(args, quote!(#f))
            } else {
                step::expand(args, quote!(#f))
            }
        }
        syn::Item::Struct(_) | syn::Item::Enum(_) => {
            let derives_signal = item_attrs(&item)
                .iter()
                .any(|a| a.path().is_ident("derive") && quote!(#a).to_string().contains("Signal"));
            let generated = if derives_signal {
                signal::expand(quote!(#item))
            } else {
                TokenStream::new()
            };
            quote!(#item #generated)
        }
        _ => quote!(#item),
    }
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Struct(s) => &s.attrs,
        syn::Item::Enum(e) => &e.attrs,
        _ => &[],
    }
}

fn expand_file(source: &str) -> String {
    let file: syn::File = syn::parse_str(source).expect("the input parses");
    let mut out = TokenStream::new();
    for item in file.items {
        out.extend(expand_item(item));
    }
    let file: syn::File = syn::parse2(out).expect("the expansion parses");
    prettyplease::unparse(&file)
}

fn inputs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/expand");
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/expand exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "rs")
                && !p.to_string_lossy().ends_with(".expanded.rs")
        })
        .collect();
    inputs.sort();
    inputs
}

#[test]
fn expansions_match_their_snapshots() {
    let bless = std::env::var_os("TURNWISE_BLESS").is_some();
    let mut stale = Vec::new();
    for input in inputs() {
        let source = std::fs::read_to_string(&input).expect("the input is readable");
        let expanded = expand_file(&source);
        let snapshot = input.with_extension("expanded.rs");
        if bless {
            std::fs::write(&snapshot, &expanded).expect("the snapshot is writable");
            continue;
        }
        let want = std::fs::read_to_string(&snapshot).unwrap_or_default();
        if want != expanded {
            stale.push(snapshot.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "expansions changed (review, then rerun with TURNWISE_BLESS=1): {stale:?}"
    );
}
