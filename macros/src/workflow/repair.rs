//! The body as the generated code carries it, with one repair: a durable call with `?` and no
//! `.await` (`ctx.step(..)?`) gets its `.await` back.
//!
//! The body checks already report that call, with the fix; without the repair rustc would add a
//! second error for the same mistake (the `?` operator cannot be applied to a `Step`). Correct
//! code never has the pattern (a durable call's value is a future, never a `Result`), so the
//! repair changes nothing else.

use syn::visit_mut::VisitMut;
use syn::{Block, Expr};

use super::body::{BUILDER_METHODS, DURABLE_METHODS};

/// `block`, with `.await` put back on durable calls that have `?` and no `.await`.
pub(super) fn repair(block: &Block, ctx: &syn::Ident) -> Block {
    let mut block = block.clone();
    Repair { ctx }.visit_block_mut(&mut block);
    block
}

struct Repair<'a> {
    ctx: &'a syn::Ident,
}

impl Repair<'_> {
    /// Whether `e` is a durable call on the context, perhaps with builder calls chained.
    fn is_durable_call(&self, e: &Expr) -> bool {
        match e {
            Expr::Paren(p) => self.is_durable_call(&p.expr),
            Expr::MethodCall(m) => {
                let method = m.method.to_string();
                if DURABLE_METHODS.contains(&method.as_str()) {
                    self.is_ctx(&m.receiver)
                } else {
                    BUILDER_METHODS.contains(&method.as_str()) && self.is_durable_call(&m.receiver)
                }
            }
            _ => false,
        }
    }

    fn is_ctx(&self, e: &Expr) -> bool {
        match e {
            Expr::Path(p) => p.qself.is_none() && p.path.is_ident(self.ctx),
            Expr::Paren(p) => self.is_ctx(&p.expr),
            _ => false,
        }
    }
}

impl VisitMut for Repair<'_> {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        syn::visit_mut::visit_expr_mut(self, e);
        if let Expr::Try(t) = e {
            if self.is_durable_call(&t.expr) {
                let call = (*t.expr).clone();
                let span = syn::spanned::Spanned::span(&call);
                *t.expr = Expr::Await(syn::ExprAwait {
                    attrs: Vec::new(),
                    base: Box::new(call),
                    dot_token: syn::token::Dot(span),
                    await_token: syn::token::Await(span),
                });
            }
        }
    }

    // Items inside the body (nested functions) are not the turn's code.
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}
