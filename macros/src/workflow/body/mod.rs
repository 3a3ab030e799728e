//! Checks of a `#[workflow]` body: durable-call keys, the turn budget, steps in flight, accepted
//! signals and calls that make replays nondeterministic.
//!
//! The analysis is syntactic. A *durable call* is `ctx.step(key, ..)`, `ctx.transact(key, ..)`,
//! `ctx.sleep(key, ..)`, `ctx.wait_for_signal::<S>(key, ..)`, `ctx.now(key)`, `ctx.random(key)`,
//! `ctx.call_child(key, ..)`, `ctx.start_child(key, ..)`, `ctx.await_child(key, ..)` or a call
//! whose first argument is the context, `name(ctx, ..)` (a `#[step]` function, key `name` unless
//! a `.key(..)` follows), or a member of a parallel group, `ctx.parallel().step(key, ..)`; a
//! fan-out, `ctx.fan_out(key, items, ..)`, is counted as a loop (its size is only known at run
//! time) and its key checked as the base of its indexed keys. Each sub-tree yields a [`Flow`]:
//! the literal keys it may run and its longest run of durable calls. Statements compose in
//! sequence (a key seen twice is an error); the arms of an `if` or `match` are alternatives (the
//! same key in two arms is fine).
//!
//! This module holds the walker ([`analyze`], `Analyzer`); the rules are methods of the walker,
//! one function per rule, each reporting its own error at the user's token, grouped by subject:
//! [`keys`] (a durable call's key: valid, used once in a turn, not fixed inside a loop),
//! [`budget`] (the turn budget), [`in_flight`] (durable calls awaited where they are made, one at
//! a time), [`parallel`] (parallel groups and fan-outs), [`signals`] (accepted signals) and
//! [`determinism`] (calls that make replays diverge).

mod budget;
mod determinism;
pub(crate) mod grammar;
mod in_flight;
mod keys;
mod parallel;
mod patches;
mod signals;

use std::collections::{HashMap, HashSet};

use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::visit::Visit;
use syn::{Block, Expr, ExprCall, ExprMethodCall, Macro, Pat, Stmt, Token, Type};

use crate::ctxt::Ctxt;
use budget::check_budget;
use determinism::body_uses;
use grammar::{fingerprint, GNode, GSignal};
use keys::loop_hint;

/// A durable call found in the body.
pub(crate) struct DurableCall {
    pub(crate) kind: CallKind,
    /// The key when it is known at compile time.
    pub(crate) key: Option<String>,
}

/// What a durable call is, for the schema.
pub(crate) enum CallKind {
    /// `ctx.step::<T, ..>(..)` (with `T` when given).
    Step(Option<Type>),
    /// `name(ctx, ..)`: a `#[step]` function at this path.
    StepFn(syn::Path),
    Sleep,
    Wait,
    /// `ctx.call_child(key, ..)` or `ctx.await_child(key, ..)`: a signal wait for a child
    /// turn's outcome; `ctx.start_child(key, ..)`: the step that sends to the child.
    Child,
    Now,
    Random,
}

/// What the checks need to know about the workflow.
pub(crate) struct Settings<'a> {
    pub(crate) ctx: &'a syn::Ident,
    pub(crate) workflow: &'a syn::Ident,
    pub(crate) signals: &'a [syn::Path],
    pub(crate) allow_nondeterminism: bool,
}

/// What the checks found.
pub(crate) struct BodyInfo {
    /// The durable calls, in order.
    pub(crate) calls: Vec<DurableCall>,
    /// Signals waited for but not accepted (reported; the expansion accepts them anyway so
    /// that the report is not repeated by the type checker).
    pub(crate) unaccepted: Vec<syn::Path>,
    /// The `async` blocks reported as holding a durable call in flight, by their place among
    /// the body's `async` blocks (see `async_blocks`): the generated code gives each a context
    /// of its own, so that the borrow checker does not report the same mistake again.
    pub(crate) stored_async: Vec<usize>,
    /// The contexts of the durable calls and groups reported as not awaited where they are
    /// made, by their place among the body's expressions: the generated code gives each call
    /// a placeholder context instead, for the same reason.
    pub(crate) in_flight: Vec<usize>,
    /// The grammar of the body's durable calls, for the replay manifest.
    pub(crate) grammar: GNode,
    /// The patch ids the body asks about, in order, with where.
    pub(crate) patches: Vec<(String, Span)>,
}

/// Check `body`; return its durable calls.
pub(crate) fn analyze(cx: &Ctxt, settings: &Settings, body: &Block) -> BodyInfo {
    let mut a = Analyzer {
        cx,
        s: settings,
        loops: Vec::new(),
        has_loop: false,
        hash_vars: HashSet::new(),
        calls: Vec::new(),
        shown: Vec::new(),
        uses: body_uses(body),
        unaccepted: Vec::new(),
        stored_async: Vec::new(),
        in_flight: Vec::new(),
        try_operand: std::ptr::null(),
        patches: Vec::new(),
    };
    let mut flow = a.block(body);
    check_budget(cx, settings, &flow, a.has_loop);
    let places = Places::of(body);
    BodyInfo {
        calls: a.calls,
        unaccepted: a.unaccepted,
        stored_async: places.of_async(&a.stored_async),
        in_flight: places.of_exprs(&a.in_flight),
        grammar: GNode::Seq(std::mem::take(&mut flow.grammar)),
        patches: a.patches,
    }
}

/// `e` without the parentheses around it.
fn strip_parens(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip_parens(&p.expr),
        _ => e,
    }
}

/// The body's expressions and `async` blocks, each in the order `syn`'s visitors meet them
/// (outer before inner), leaving out items declared in the body (not the turn's code): the
/// order in which [`repair`](super::repair) meets them too, so that a place found here names
/// the same node there.
struct Places {
    exprs: Vec<*const Expr>,
    blocks: Vec<*const syn::ExprAsync>,
}

impl Places {
    fn of(body: &Block) -> Self {
        let mut places = Places {
            exprs: Vec::new(),
            blocks: Vec::new(),
        };
        places.visit_block(body);
        places
    }

    fn of_exprs(&self, found: &[*const Expr]) -> Vec<usize> {
        places_of(&self.exprs, found)
    }

    fn of_async(&self, found: &[*const syn::ExprAsync]) -> Vec<usize> {
        places_of(&self.blocks, found)
    }
}

impl<'ast> Visit<'ast> for Places {
    fn visit_expr(&mut self, e: &'ast Expr) {
        self.exprs.push(e);
        syn::visit::visit_expr(self, e);
    }
    fn visit_expr_async(&mut self, b: &'ast syn::ExprAsync) {
        self.blocks.push(b);
        syn::visit::visit_expr_async(self, b);
    }
    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

fn places_of<T>(all: &[*const T], found: &[*const T]) -> Vec<usize> {
    all.iter()
        .enumerate()
        .filter(|(_, p)| found.contains(p))
        .map(|(i, _)| i)
        .collect()
}

/// What a part of the body may do.
#[derive(Default)]
struct Flow {
    /// The literal keys it may use, with where.
    keys: Vec<(String, Span)>,
    /// The durable calls of its longest run, in order (each as `ctx.step` or `name`).
    path: Vec<TokenStream>,
    /// Whether it always leaves the function (`return`, `break`, `continue`).
    diverges: bool,
    /// Its grammar of durable calls, in sequence.
    grammar: Vec<GNode>,
}

/// The walker: it goes through the body once, in order, and runs the rules on the way.
struct Analyzer<'a> {
    cx: &'a Ctxt,
    s: &'a Settings<'a>,
    /// The enclosing loops' index hints (the loop pattern's first identifier).
    loops: Vec<Option<String>>,
    has_loop: bool,
    /// Locals known to hold a `HashMap` or `HashSet`.
    hash_vars: HashSet<String>,
    calls: Vec<DurableCall>,
    /// Each of `calls` as written, e.g. `ctx.step(..)`, for messages.
    shown: Vec<String>,
    /// The names the body's `use` items bring in, with the paths they stand for: `File` →
    /// `std::fs::File`.
    uses: HashMap<String, Vec<String>>,
    unaccepted: Vec<syn::Path>,
    /// The `async` blocks reported as holding a durable call in flight (by address, to find
    /// their place in the body once the walk is done).
    stored_async: Vec<*const syn::ExprAsync>,
    /// The context of each durable call or group reported as not awaited where it is made
    /// (the receiver of `ctx.step(..)`, the first argument of `name(ctx, ..)`), by address.
    in_flight: Vec<*const Expr>,
    /// The operand of the latest `?` met, without parentheses: a durable call there without
    /// `.await` gets its `.await` back from `repair`, so it keeps its context.
    try_operand: *const Expr,
    /// The patch ids met so far (`ctx.patched("id")`), with where.
    patches: Vec<(String, Span)>,
}

/// A durable call and the builder calls chained onto it, e.g. `crawl(ctx, a).key("a")`.
struct Chain<'e> {
    base: Base<'e>,
    /// The outermost `.key(..)` argument.
    key_override: Option<&'e Expr>,
    /// The arguments of the chained builder calls.
    builder_args: Vec<&'e Expr>,
}

enum Base<'e> {
    Method(&'e ExprMethodCall),
    StepFn(&'e ExprCall, &'e syn::Path),
}

pub(super) const DURABLE_METHODS: &[&str] = &[
    "step",
    "transact",
    "sleep",
    "wait_for_signal",
    "now",
    "random",
    "call_child",
    "start_child",
    "await_child",
];
pub(super) const BUILDER_METHODS: &[&str] =
    &["key", "kind", "timeout", "heartbeat_timeout", "options"];

impl Analyzer<'_> {
    fn is_ctx(&self, e: &Expr) -> bool {
        match e {
            Expr::Path(p) => p.qself.is_none() && p.path.is_ident(self.s.ctx),
            Expr::Paren(p) => self.is_ctx(&p.expr),
            Expr::Group(g) => self.is_ctx(&g.expr),
            _ => false,
        }
    }

    fn chain<'e>(&self, e: &'e Expr) -> Option<Chain<'e>> {
        match e {
            Expr::MethodCall(m)
                if self.is_ctx(&m.receiver) && DURABLE_METHODS.iter().any(|d| m.method == d) =>
            {
                Some(Chain {
                    base: Base::Method(m),
                    key_override: None,
                    builder_args: Vec::new(),
                })
            }
            Expr::MethodCall(m) if BUILDER_METHODS.iter().any(|d| m.method == d) => {
                let mut chain = self.chain(&m.receiver)?;
                if m.method == "key" && chain.key_override.is_none() {
                    chain.key_override = m.args.first();
                }
                chain.builder_args.extend(m.args.iter());
                Some(chain)
            }
            Expr::Call(c) => match (&*c.func, c.args.first()) {
                (Expr::Path(p), Some(first)) if p.qself.is_none() && self.is_ctx(first) => {
                    Some(Chain {
                        base: Base::StepFn(c, &p.path),
                        key_override: None,
                        builder_args: Vec::new(),
                    })
                }
                _ => None,
            },
            Expr::Paren(p) => self.chain(&p.expr),
            _ => None,
        }
    }

    // ---- walking -----------------------------------------------------------------------

    fn block(&mut self, block: &Block) -> Flow {
        let mut flow = Flow::default();
        for stmt in &block.stmts {
            let next = self.stmt(stmt);
            self.then(&mut flow, next);
        }
        flow
    }

    fn stmt(&mut self, stmt: &Stmt) -> Flow {
        match stmt {
            Stmt::Local(local) => {
                let mut flow = Flow::default();
                if let Some(init) = &local.init {
                    flow = self.expr(&init.expr, false);
                    if let Some((_, diverge)) = &init.diverge {
                        let arm = self.expr(diverge, false);
                        let none = Flow::default();
                        let cond = fingerprint([&local.pat as &dyn quote::ToTokens]);
                        let alt = Self::either(cond, vec![arm, none]);
                        self.then(&mut flow, alt);
                    }
                    self.track_hash_local(&local.pat, Some(&init.expr));
                    if let Some(signal) = self.check_inferred_signal(&local.pat, &init.expr) {
                        name_inferred_signal(&mut flow.grammar, signal);
                    }
                } else {
                    self.track_hash_local(&local.pat, None);
                }
                flow
            }
            Stmt::Item(_) => Flow::default(),
            Stmt::Expr(e, _) => self.expr(e, false),
            Stmt::Macro(m) => self.mac(&m.mac),
        }
    }

    fn exprs<'e>(&mut self, exprs: impl IntoIterator<Item = &'e Expr>) -> Flow {
        let mut flow = Flow::default();
        for e in exprs {
            let next = self.expr(e, false);
            self.then(&mut flow, next);
        }
        flow
    }

    fn expr(&mut self, e: &Expr, awaited: bool) -> Flow {
        if let Some(group) = self.group(e) {
            return self.parallel(&group, awaited);
        }
        if let Some(chain) = self.chain(e) {
            return self.durable(&chain, e, awaited);
        }
        match e {
            Expr::Await(a) => self.expr(&a.base, true),
            Expr::Paren(p) => self.expr(&p.expr, awaited),
            Expr::Try(t) => {
                self.try_operand = strip_parens(&t.expr);
                self.expr(&t.expr, false)
            }
            Expr::Block(b) => self.block(&b.block),
            Expr::Unsafe(b) => self.block(&b.block),
            Expr::Const(b) => self.block(&b.block),
            Expr::Async(b) => self.async_block(b, awaited),
            Expr::TryBlock(b) => self.block(&b.block),
            Expr::If(i) => self.if_expr(i),
            Expr::Match(m) => self.match_expr(m),
            Expr::ForLoop(f) => {
                let mut flow = self.expr(&f.expr, false);
                self.check_hash_iteration(&f.expr);
                let body = self.in_loop(loop_hint(&f.pat), |a| a.block(&f.body));
                push_loop(&mut flow, body);
                flow
            }
            Expr::While(w) => {
                let body = self.in_loop(None, |a| {
                    let mut cond = a.expr(&w.cond, false);
                    let body = a.block(&w.body);
                    cond.grammar.extend(body.grammar);
                    cond
                });
                let mut flow = Flow::default();
                push_loop(&mut flow, body);
                flow
            }
            Expr::Loop(l) => {
                let body = self.in_loop(None, |a| a.block(&l.body));
                let mut flow = Flow::default();
                push_loop(&mut flow, body);
                flow
            }
            Expr::Return(r) => self.diverging(r.expr.as_deref()),
            Expr::Break(b) => self.diverging(b.expr.as_deref()),
            Expr::Continue(_) => Flow {
                diverges: true,
                ..Flow::default()
            },
            Expr::Closure(c) => self.expr(&c.body, false),
            Expr::Macro(m) => self.mac(&m.mac),
            Expr::Call(c) => self.call(c),
            Expr::Path(p) => {
                self.check_path(&p.path);
                Flow::default()
            }
            Expr::MethodCall(m) => {
                self.check_hash_method(m);
                self.check_patched_placement(m);
                let recv = self.expr(&m.receiver, false);
                let args = self.exprs(&m.args);
                self.seq(recv, args)
            }
            _ => {
                let children = children(e);
                self.exprs(children)
            }
        }
    }

    /// An `async` block (`awaited`: where it is made), reported when stored with a durable call
    /// inside.
    fn async_block(&mut self, b: &syn::ExprAsync, awaited: bool) -> Flow {
        let before = self.calls.len();
        let flow = self.block(&b.block);
        if !awaited && self.check_stored_async(b, before) {
            self.stored_async.push(b);
        }
        flow
    }

    /// `if`: the condition, then one branch or the other.
    fn if_expr(&mut self, i: &syn::ExprIf) -> Flow {
        if let Some(id) = self.patch_condition(&i.cond) {
            return self.patch(i, id);
        }
        let mut flow = self.expr(&i.cond, false);
        let then = self.block(&i.then_branch);
        let other = match &i.else_branch {
            Some((_, e)) => self.expr(e, false),
            None => Flow::default(),
        };
        let cond = fingerprint([&*i.cond as &dyn quote::ToTokens]);
        let alt = Self::either(cond, vec![then, other]);
        self.then(&mut flow, alt);
        flow
    }

    /// `match`: the scrutinee, then one arm (its guard, then its body).
    fn match_expr(&mut self, m: &syn::ExprMatch) -> Flow {
        let mut flow = self.expr(&m.expr, false);
        let mut arms = Vec::new();
        let mut cond: Vec<&dyn quote::ToTokens> = vec![&*m.expr];
        for arm in &m.arms {
            cond.push(&arm.pat);
            let mut f = match &arm.pat {
                Pat::Guard(g) => self.expr(&g.guard, false),
                _ => Flow::default(),
            };
            let body = self.expr(&arm.body, false);
            self.then(&mut f, body);
            arms.push(f);
        }
        let alt = Self::either(fingerprint(cond), arms);
        self.then(&mut flow, alt);
        flow
    }

    /// `return` or `break`, with the value `e` it carries out.
    fn diverging(&mut self, e: Option<&Expr>) -> Flow {
        let mut flow = match e {
            Some(e) => self.expr(e, false),
            None => Flow::default(),
        };
        flow.diverges = true;
        flow
    }

    /// A call that is not a durable one: a function named by a path is checked (determinism);
    /// any other callee runs before the arguments.
    fn call(&mut self, c: &syn::ExprCall) -> Flow {
        if let Expr::Path(p) = &*c.func {
            self.check_path(&p.path);
        } else {
            let f = self.expr(&c.func, false);
            let rest = self.exprs(&c.args);
            return self.seq(f, rest);
        }
        self.exprs(&c.args)
    }

    fn seq(&self, mut a: Flow, b: Flow) -> Flow {
        self.then(&mut a, b);
        a
    }

    fn in_loop(&mut self, hint: Option<String>, f: impl FnOnce(&mut Self) -> Flow) -> Flow {
        self.has_loop = true;
        self.loops.push(hint);
        let flow = f(self);
        self.loops.pop();
        flow
    }

    // ---- macros ------------------------------------------------------------------------

    fn mac(&mut self, mac: &Macro) -> Flow {
        if !self.check_concurrent_macro(mac) {
            return Flow::default();
        }
        // Look inside macros whose arguments are expressions (`println!`, `assert_eq!`, `vec!`).
        let parser = Punctuated::<Expr, Token![,]>::parse_terminated;
        match parser.parse2(mac.tokens.clone()) {
            Ok(args) => self.exprs(&args),
            Err(_) => Flow::default(),
        }
    }
}

/// Close `body`, a loop's body, into `flow` as a loop, when it makes durable calls.
fn push_loop(flow: &mut Flow, body: Flow) {
    if !body.grammar.is_empty() {
        flow.grammar
            .push(GNode::Loop(Box::new(GNode::seq(body.grammar))));
    }
}

/// Give the last signal wait of `grammar` whose signal type is not written in a turbofish the
/// type its binding names, `signal`.
fn name_inferred_signal(grammar: &mut [GNode], signal: syn::Path) {
    if let Some(GNode::Call(call)) = grammar.last_mut() {
        if matches!(call.signal, GSignal::None) && call.call == "wait_for_signal" {
            call.signal = GSignal::Type(signal);
        }
    }
}

/// The first type in a turbofish, e.g. `T` of `::<T, _, _>`.
fn first_type_arg(t: Option<&syn::AngleBracketedGenericArguments>) -> Option<Type> {
    match t?.args.first()? {
        syn::GenericArgument::Type(Type::Infer(_)) => None,
        syn::GenericArgument::Type(ty) => Some(ty.clone()),
        _ => None,
    }
}

/// The direct sub-expressions of `e`, for the kinds the walker does not treat specially.
fn children(e: &Expr) -> Vec<&Expr> {
    struct Children<'e>(Vec<&'e Expr>);
    impl<'e> Visit<'e> for Children<'e> {
        fn visit_expr(&mut self, e: &'e Expr) {
            self.0.push(e);
        }
        fn visit_block(&mut self, _: &'e Block) {}
        fn visit_item(&mut self, _: &'e syn::Item) {}
    }
    let mut c = Children(Vec::new());
    syn::visit::visit_expr(&mut c, e);
    c.0
}
