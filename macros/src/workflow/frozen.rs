//! `#[workflow(version = "v2", frozen)]`: the body's shape must be the one of the version's
//! committed replay manifest (`turnwise/manifests/<name>.<version>.json` under the crate's
//! root). A changed shape fails the build, naming the first difference; a change of comments,
//! formatting or locations does not.

use std::path::{Path, PathBuf};

use proc_macro2::{Span, TokenStream};
use quote::quote;
use turnwise_manifest::{grammar, shape_hash, Manifest, Node, DIR};

use super::body::grammar::{location, GNode};
use crate::ctxt::Ctxt;

/// Check the body's `grammar` against the committed manifest of `name` `version`; `frozen` is
/// the argument's token, `item` the function's name (its file locates the crate). Answers the
/// tokens that make the compiler rebuild when the committed file changes.
pub(crate) fn check(
    cx: &Ctxt,
    (name, version): (&str, &str),
    grammar: &GNode,
    frozen: Span,
    item: Span,
) -> TokenStream {
    let path = manifest_path(item).join(format!("{name}.{version}.json"));
    let shown = format!("{DIR}/{name}.{version}.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(_) => {
            cx.error_at(
                frozen,
                format!("frozen version `{version}` of `{name}` has no committed manifest: expected {shown}; write it with a test that calls `turnwise::manifest::files::check` (run it with TURNWISE_MANIFESTS=write), or remove `frozen`"),
            );
            return TokenStream::new();
        }
    };
    // The compiler reads the file too, so that the build reruns when it changes.
    let abs = path.to_string_lossy().into_owned();
    let tracking = quote!(
        const _: &[u8] = ::core::include_bytes!(#abs);
    );
    let committed = match Manifest::from_json(&text) {
        Ok(m) => m,
        Err(e) => {
            cx.error_at(frozen, format!("{shown}: {e}"));
            return tracking;
        }
    };
    let current = grammar.to_node();
    if shape_hash(&current) == committed.shape_hash {
        return tracking;
    }
    let difference = grammar::first_difference(
        &without_signals(&committed.grammar),
        &without_signals(&current),
    );
    let what = difference.map_or_else(
        || "the signal types its waits name changed".to_owned(),
        |d| d.what,
    );
    let at = spans(grammar)
        .into_iter()
        .find(|(_, at)| difference_at(&current, &committed.grammar).as_deref() == Some(at.as_str()))
        .map_or(frozen, |(span, _)| span);
    cx.error_at(
        at,
        format!("the durable calls of frozen version `{version}` of `{name}` changed since {shown} was written: {what}; keep a frozen version's calls as they are and publish the change as a new version (`#[workflow(version = \"..\")]`) or behind `ctx.patched(..)`; if no instance runs this version, rewrite its manifest"),
    );
    tracking
}

/// Where the current grammar differs from the committed one, `file:line`.
fn difference_at(current: &Node, committed: &Node) -> Option<String> {
    grammar::first_difference(&without_signals(committed), &without_signals(current))?.at
}

/// `node` with no signal names: the committed manifest has the signals' wire names, the macro
/// knows the types; the shape hash tells them apart, the comparison names the rest.
fn without_signals(node: &Node) -> Node {
    match node {
        Node::Seq(parts) => Node::Seq(parts.iter().map(without_signals).collect()),
        Node::Parallel(parts) => Node::Parallel(parts.iter().map(without_signals).collect()),
        Node::Alt(alt) => {
            let mut alt = alt.clone();
            alt.arms = alt.arms.iter().map(without_signals).collect();
            Node::Alt(alt)
        }
        Node::Loop(body) => Node::Loop(Box::new(without_signals(body))),
        Node::Patch(p) => {
            let mut p = p.clone();
            p.new = Box::new(without_signals(&p.new));
            p.old = Box::new(without_signals(&p.old));
            Node::Patch(p)
        }
        Node::Call(c) => {
            let mut c = c.clone();
            c.signal = None;
            Node::Call(c)
        }
    }
}

/// Each call's and patch's span with its `file:line`.
fn spans(node: &GNode) -> Vec<(Span, String)> {
    let mut out = Vec::new();
    collect_spans(node, &mut out);
    out
}

fn collect_spans(node: &GNode, out: &mut Vec<(Span, String)>) {
    match node {
        GNode::Seq(parts) | GNode::Parallel(parts) => {
            parts.iter().for_each(|p| collect_spans(p, out));
        }
        GNode::Alt { arms, .. } => arms.iter().for_each(|p| collect_spans(p, out)),
        GNode::Loop(body) => collect_spans(body, out),
        GNode::Patch { new, old, span, .. } => {
            out.push((*span, location(*span)));
            collect_spans(new, out);
            collect_spans(old, out);
        }
        GNode::Call(c) => out.push((c.span, location(c.span))),
    }
}

/// The directory of committed manifests of the crate whose source holds `span`: the nearest
/// directory above the source file with a `Cargo.toml`, else `CARGO_MANIFEST_DIR`.
fn manifest_path(span: Span) -> PathBuf {
    let root = proc_macro::is_available()
        .then(|| span.unwrap().local_file())
        .flatten()
        .and_then(|file| crate_root(&file))
        .or_else(|| std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from))
        .unwrap_or_default();
    root.join(DIR)
}

fn crate_root(file: &Path) -> Option<PathBuf> {
    let file = if file.is_absolute() {
        file.to_owned()
    } else {
        std::env::current_dir().ok()?.join(file)
    };
    file.ancestors()
        .skip(1)
        .find(|dir| dir.join("Cargo.toml").is_file())
        .map(Path::to_owned)
}
