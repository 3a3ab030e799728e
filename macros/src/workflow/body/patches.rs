//! Patches: `if ctx.patched("id").await? { new } else { old }` lets one version carry the
//! structure of turns saved before a change and after it. Each id is used once in a workflow,
//! is a valid key once prefixed (`patched.<id>`, the marker a turn saves), and `patched` is
//! only asked as the condition of an `if`, where the manifest can see both branches.

use proc_macro2::Span;
use syn::{Expr, ExprIf, ExprMethodCall, Lit};
use turnwise_manifest::Patch;

use super::grammar::GNode;
use super::{strip_parens, Analyzer, Flow};

/// The form every message about a patch shows.
const FORM: &str = "`if ctx.patched(\"id\").await? { new code } else { old code }`";

impl Analyzer<'_> {
    /// `ctx.patched("id")` (awaited, with or without `?`) as a condition: its id and where.
    pub(super) fn patch_condition(&self, cond: &Expr) -> Option<(String, Span)> {
        let mut e = strip_parens(cond);
        loop {
            match e {
                Expr::Try(t) => e = strip_parens(&t.expr),
                Expr::Await(a) => e = strip_parens(&a.base),
                _ => break,
            }
        }
        let Expr::MethodCall(m) = e else {
            return None;
        };
        if m.method != "patched" || !self.is_ctx(&m.receiver) {
            return None;
        }
        match m.args.first() {
            Some(Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            })) if m.args.len() == 1 => Some((s.value(), s.span())),
            _ => {
                self.cx.error_spanned_by(
                    &m.args,
                    format!("`patched` takes the patch id as a string literal: {FORM}"),
                );
                None
            }
        }
    }

    /// `if ctx.patched(id) { new } else { old }`: the two branches as alternatives, the new
    /// one after the patch's marker.
    pub(super) fn patch(&mut self, i: &ExprIf, (id, span): (String, Span)) -> Flow {
        let marker = Patch::marker_key(&id);
        let mut new = Flow::default();
        if self.check_patch_id(&id, &marker, span) {
            new.keys.push((marker, span));
        }
        let then = self.block(&i.then_branch);
        self.then(&mut new, then);
        let mut old = match &i.else_branch {
            Some((_, e)) => self.expr(e, false),
            None => Flow::default(),
        };
        let new_grammar = GNode::seq(std::mem::take(&mut new.grammar));
        let old_grammar = GNode::seq(std::mem::take(&mut old.grammar));
        let mut flow = Self::either(String::new(), vec![new, old]);
        flow.grammar = vec![GNode::Patch {
            id,
            new: Box::new(new_grammar),
            old: Box::new(old_grammar),
            span,
        }];
        flow
    }

    /// A patch id makes a valid marker key and is used once in the workflow.
    fn check_patch_id(&mut self, id: &str, marker: &str, span: Span) -> bool {
        if let Err(why) = turnwise_rules::check_identifier(marker) {
            self.cx.error_at(
                span,
                format!(
                    "invalid patch id {id:?}: its marker key `{marker}` is not a valid key: {why}"
                ),
            );
            return false;
        }
        if let Some((_, first)) = self.patches.iter().find(|(p, _)| p == id) {
            let first = *first;
            self.cx.error_at(
                span,
                format!("patch id `{id}` is used twice in workflow `{}`; give each `ctx.patched(..)` an id of its own, e.g. \"{id}-2\"", self.s.workflow),
            );
            self.cx
                .error_at(first, format!("patch id `{id}` is first used here"));
            return false;
        }
        self.patches.push((id.to_owned(), span));
        true
    }

    /// `ctx.patched(..)` anywhere but the condition of an `if`.
    pub(super) fn check_patched_placement(&self, m: &ExprMethodCall) {
        if m.method == "patched" && self.is_ctx(&m.receiver) {
            self.cx.error_spanned_by(
                &m.method,
                format!("ask `patched` as the whole condition of an `if`, so that the replay manifest sees the old and the new branch: {FORM}"),
            );
        }
    }
}
