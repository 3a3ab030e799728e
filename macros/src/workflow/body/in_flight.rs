//! Steps in flight: a turn runs one durable call at a time (each borrows the context mutably
//! until it finishes), so a durable call, a parallel group or a fan-out is awaited where it is
//! made, and nothing runs durable calls alongside each other.

use proc_macro2::{TokenStream, TokenTree};
use syn::Macro;

use super::Analyzer;

/// The macros that run futures concurrently.
const CONCURRENT_MACROS: &[&str] = &["join", "try_join", "select", "select_biased"];

impl Analyzer<'_> {
    /// A durable call is awaited where it is made (`head`: the call up to its method, `call`:
    /// the call as shown in messages). Whether it reported one.
    pub(super) fn check_awaited(&self, awaited: bool, head: &TokenStream, call: &str) -> bool {
        if !awaited {
            self.cx.error_spanned_by(
                head,
                format!(
                    "this durable call is not awaited where it is made: a turn runs one step, sleep or signal wait at a time (each borrows `{ctx}` mutably until it finishes), so its future cannot be stored or run alongside another; write `{call}.await?` and make the next call after it",
                    ctx = self.s.ctx,
                ),
            );
        }
        !awaited
    }

    /// A parallel group or a fan-out is awaited where it is made (`head`: its `ctx.parallel` or
    /// `ctx.fan_out`, `call`: the call as shown in messages). Whether it reported one.
    pub(super) fn check_group_awaited(
        &self,
        awaited: bool,
        fan_out: bool,
        head: &TokenStream,
        call: &str,
    ) -> bool {
        if !awaited {
            let ctx = self.s.ctx;
            self.cx.error_spanned_by(
                head,
                format!(
                    "this {} is not awaited where it is made: a turn runs its durable calls one at a time (a group borrows `{ctx}` mutably until all its steps are saved), so its future cannot be stored or run alongside another; write `{call}.await?` and make the next call after it",
                    if fan_out { "fan-out" } else { "parallel group" },
                ),
            );
        }
        !awaited
    }

    /// An `async` block not awaited where it is made must not hold a durable call (`before`:
    /// the number of durable calls found before the block): its future would hold the
    /// context's borrow while the turn goes on. Whether it reported one.
    pub(super) fn check_stored_async(&self, b: &syn::ExprAsync, before: usize) -> bool {
        let Some(call) = self.shown.get(before) else {
            return false;
        };
        let (attrs, token, capture) = (&b.attrs, &b.async_token, &b.capture);
        self.cx.error_spanned_by(
            quote::quote!(#(#attrs)* #token #capture),
            format!(
                "this `async` block holds a durable call, `{call}`, and is not awaited where it is made: a turn runs one step, sleep or signal wait at a time (each borrows `{ctx}` mutably until it finishes), so a future holding one cannot be stored or run alongside another; await the durable call itself where the block is made, `{call}.await?`, and make the next call after it",
                ctx = self.s.ctx,
            ),
        );
        true
    }

    /// No `join!`, `select!` or the like over the context: they would run durable calls
    /// alongside each other. Whether the macro's arguments are to be walked.
    pub(super) fn check_concurrent_macro(&self, mac: &Macro) -> bool {
        let name = mac
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        if CONCURRENT_MACROS.contains(&name.as_str()) && mentions(&mac.tokens, self.s.ctx) {
            self.cx.error_spanned_by(
                &mac.path,
                format!(
                    "`{name}!` would run durable calls concurrently, but a turn runs one step, sleep or signal wait at a time (each borrows `{ctx}` mutably); run steps concurrently with `{ctx}.parallel().step(\"a\", ..).step(\"b\", ..).await?` or `{ctx}.fan_out(\"key\", items, ..).await?`, await them one after the other, or do the concurrent work inside one step",
                    ctx = self.s.ctx
                ),
            );
            return false;
        }
        true
    }
}

/// Whether `tokens` mention `ident` anywhere.
fn mentions(tokens: &TokenStream, ident: &syn::Ident) -> bool {
    tokens.clone().into_iter().any(|t| match t {
        TokenTree::Ident(i) => i == *ident,
        TokenTree::Group(g) => mentions(&g.stream(), ident),
        _ => false,
    })
}
