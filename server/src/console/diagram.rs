//! A version's replay manifest drawn as a diagram of its durable calls: plain HTML boxes styled
//! by the console's stylesheet (no script, no images). A sequence is a column, the arms of an
//! `if`/`match`, a parallel group's members and a patch's new and old branches sit side by side,
//! a loop is a framed box, and each call shows its kind, key, signal and `file:line`.
//!
//! The same renderer marks a suspended turn's divergence ([`Marks`]): the calls of the saved
//! prefix that replayed, and the call where the code left the saved steps.

use maud::{html, Markup};
use turnwise::manifest::grammar::{call_matches, Saved};
use turnwise::manifest::{Call, Node, Patch};

/// Nesting deeper than this is not drawn (a manifest is data a worker sent).
const MAX_DEPTH: usize = 48;

/// What to mark on a diagram: a suspended turn's replayed prefix and its divergence.
#[derive(Clone, Debug, Default)]
pub(crate) struct Marks {
    /// The saved entries replay accepted (before the divergence).
    pub(crate) replayed: Vec<Saved>,
    /// The saved entry at the divergence, which the code did not make there.
    pub(crate) diverged: Option<Saved>,
    /// What the code called instead.
    pub(crate) found: Option<Saved>,
    /// Where the code made that call, `file:line`.
    pub(crate) at: Option<String>,
}

impl Marks {
    /// The mark of `call` and its words: `diverged` (the call the code made instead, or the
    /// saved step it did not make there), `replayed`, or none.
    fn of(&self, call: &Call) -> Option<(&'static str, &'static str)> {
        let found = self.at.as_deref().is_some_and(|at| at == call.at)
            || self.found.as_ref().is_some_and(|f| call_matches(call, f));
        if found {
            Some(("diverged", "diverged here: the code called this instead"))
        } else if self
            .diverged
            .as_ref()
            .is_some_and(|d| call_matches(call, d))
        {
            Some(("diverged", "diverged here: saved, not made"))
        } else if self.replayed.iter().any(|s| call_matches(call, s)) {
            Some(("replayed", "replayed"))
        } else {
            None
        }
    }
}

/// The diagram of `grammar`, with `marks` (empty: no marks).
pub(crate) fn diagram(grammar: &Node, marks: &Marks) -> Markup {
    html! {
        div.diagram role="group" aria-label="The durable calls of this version" {
            (node(grammar, marks, 0))
            div.d-end { "end of turn" }
        }
    }
}

fn node(n: &Node, marks: &Marks, depth: usize) -> Markup {
    if depth > MAX_DEPTH {
        return html! { div.d-deep { "… nested too deep to draw" } };
    }
    let d = depth + 1;
    match n {
        Node::Seq(parts) => html! {
            @if parts.is_empty() { div.d-empty { "no durable call" } }
            @else { div.d-seq { @for p in parts { (node(p, marks, d)) } } }
        },
        Node::Alt(alt) => html! {
            div.d-alt data-node="alt" {
                div.d-label { "branch: one of " (alt.arms.len()) " arms (if / match)" }
                div.d-arms {
                    @for (i, arm) in alt.arms.iter().enumerate() {
                        div.d-arm { div.d-armlabel { "arm " (i + 1) } (node(arm, marks, d)) }
                    }
                }
            }
        },
        Node::Loop(body) => html! {
            div.d-loop data-node="loop" {
                div.d-label { "↻ loop: zero or more times" }
                (node(body, marks, d))
            }
        },
        Node::Parallel(members) => html! {
            div.d-par data-node="parallel" {
                div.d-label { "parallel: " (members.len()) " members, saved in this order" }
                div.d-arms { @for m in members { div.d-arm { (node(m, marks, d)) } } }
            }
        },
        Node::Patch(p) => patch(p, marks, d),
        Node::Call(c) => call(c, marks),
    }
}

fn patch(p: &Patch, marks: &Marks, depth: usize) -> Markup {
    html! {
        div.d-patch data-node="patch" data-patch=(p.id) {
            div.d-label { "patch " code { (p.id) } @if !p.at.is_empty() { " at " code { (p.at) } } }
            div.d-arms {
                div.d-arm.d-new { div.d-armlabel { "new (patched " (p.id) ")" } (node(&p.new, marks, depth)) }
                div.d-arm.d-old { div.d-armlabel { "old (before " (p.id) ")" } (node(&p.old, marks, depth)) }
            }
        }
    }
}

fn call(c: &Call, marks: &Marks) -> Markup {
    let mark = marks.of(c);
    let class = format!(
        "d-call k-{}{}",
        c.kind,
        mark.map_or(String::new(), |(m, _)| format!(" {m}"))
    );
    html! {
        div class=(class) data-key=(c.key) data-kind=(c.kind.as_str()) data-mark=[mark.map(|(m, _)| m)] {
            span.d-kind { (c.kind.as_str()) }
            " " code.d-key { (c.key) }
            @if let Some(s) = &c.signal { " " span.d-signal { "signal " code { (s) } } }
            @if !c.call.is_empty() { " " span.d-method { "ctx." (c.call) } }
            @if !c.at.is_empty() { " " span.d-at { (c.at) } }
            @if let Some((_, words)) = mark { " " span.d-flag { (words) } }
        }
    }
}
