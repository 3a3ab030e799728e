//! The body as the generated code carries it, with three repairs of mistakes the body checks
//! have already reported, so that rustc does not report them a second time:
//!
//! - a durable call with `?` and no `.await` (`ctx.step(..)?`) gets its `.await` back (else:
//!   "the `?` operator cannot be applied to a `Step`"). Correct code never has the pattern (a
//!   durable call's value is a future, never a `Result`);
//! - an `async` block reported as holding a durable call in flight gets a context of its own, a
//!   placeholder that is never reached (else: E0501, the block's borrow of the context against
//!   the next durable call). Only the blocks the checks reported are touched;
//! - a durable call (or parallel group) reported as not awaited where it is made gets the same
//!   placeholder in place of its context (else: E0499, its borrow of the context against the
//!   next durable call). Only the calls the checks reported are touched.

use proc_macro2::TokenStream;
use syn::visit_mut::VisitMut;
use syn::{Block, Expr};

use super::body::{BUILDER_METHODS, DURABLE_METHODS};

/// `block`, with `.await` put back on durable calls that have `?` and no `.await`, the
/// `async` blocks at the places `stored_async` lists (see `BodyInfo::stored_async`) given a
/// context of their own of type `ctx_ty` made by the function `placeholder`, and the contexts
/// at the places `in_flight` lists (`BodyInfo::in_flight`) replaced by one.
pub(super) fn repair(
    block: &Block,
    ctx: &syn::Ident,
    ctx_ty: &TokenStream,
    placeholder: &TokenStream,
    stored_async: &[usize],
    in_flight: &[usize],
) -> Block {
    let mut block = block.clone();
    Repair {
        ctx,
        ctx_ty,
        placeholder,
        stored_async,
        in_flight,
        async_seen: 0,
        exprs_seen: 0,
    }
    .visit_block_mut(&mut block);
    block
}

struct Repair<'a> {
    ctx: &'a syn::Ident,
    ctx_ty: &'a TokenStream,
    placeholder: &'a TokenStream,
    stored_async: &'a [usize],
    in_flight: &'a [usize],
    /// The `async` blocks met so far, in the order the body checks counted them.
    async_seen: usize,
    /// The expressions met so far, likewise.
    exprs_seen: usize,
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
    fn visit_expr_async_mut(&mut self, b: &mut syn::ExprAsync) {
        let place = self.async_seen;
        self.async_seen += 1;
        syn::visit_mut::visit_expr_async_mut(self, b);
        // After the walk inside: the statement added is not the user's code and is not counted.
        if self.stored_async.contains(&place) {
            let (ctx, ty, placeholder) = (self.ctx, self.ctx_ty, self.placeholder);
            let own: syn::Stmt = syn::parse_quote!(let #ctx: #ty = #placeholder(););
            b.block.stmts.insert(0, own);
        }
    }

    fn visit_expr_mut(&mut self, e: &mut Expr) {
        let place = self.exprs_seen;
        self.exprs_seen += 1;
        if self.in_flight.contains(&place) {
            // The context of a stored durable call (a path, perhaps in parentheses): the
            // nodes inside it are counted as the body checks counted them, then it is replaced.
            syn::visit_mut::visit_expr_mut(self, e);
            let (ty, placeholder) = (self.ctx_ty, self.placeholder);
            *e = syn::parse_quote!(#placeholder::<#ty>());
            return;
        }
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
