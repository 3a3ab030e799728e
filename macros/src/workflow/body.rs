//! Checks of a `#[workflow]` body: durable-call keys, the turn budget, steps in flight, accepted
//! signals and calls that make replays nondeterministic.
//!
//! The analysis is syntactic. A *durable call* is `ctx.step(key, ..)`, `ctx.transact(key, ..)`,
//! `ctx.sleep(key, ..)`,
//! `ctx.wait_for_signal::<S>(key, ..)`, `ctx.now(key)`, `ctx.random(key)`,
//! `ctx.call_child(key, ..)`, `ctx.start_child(key, ..)`, `ctx.await_child(key, ..)` or a call
//! whose first
//! argument is the context, `name(ctx, ..)` (a `#[step]` function, key `name` unless a
//! `.key(..)` follows), or a member of a parallel group, `ctx.parallel().step(key, ..)`; a
//! fan-out, `ctx.fan_out(key, items, ..)`, is counted as a loop (its size is only known at run
//! time) and its key checked as the base of its indexed keys. Each sub-tree yields a [`Flow`]: the literal keys it may run and its
//! longest run of durable calls. Statements compose in sequence (a key seen twice is an
//! error); the arms of an `if` or `match` are alternatives (the same key in two arms is fine).

use std::collections::{HashMap, HashSet};

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{Block, Expr, ExprCall, ExprMethodCall, Lit, LitStr, Macro, Pat, Stmt, Token, Type};

use crate::ctxt::Ctxt;

/// The most durable calls a turn holds by default: the protocol's step limit, which the
/// engine's `Limits::default` and the runtime's `turnwise::context::MAX_STEPS` also read.
pub(crate) const TURN_BUDGET: usize = turnwise_rules::limits::STEPS_PER_TURN;

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
    };
    let flow = a.block(body);
    check_budget(cx, settings, &flow, a.has_loop);
    BodyInfo {
        calls: a.calls,
        unaccepted: a.unaccepted,
    }
}

/// The turn budget: the longest run of durable calls must fit in [`TURN_BUDGET`].
///
/// The calls inside a loop are not counted (the loop may run any number of times, none
/// included), so in a body with loops the run is a lower bound: it is rejected when the calls
/// outside the loops alone exceed the budget.
fn check_budget(cx: &Ctxt, settings: &Settings, flow: &Flow, has_loop: bool) {
    let Some(over) = flow.path.get(TURN_BUDGET) else {
        return;
    };
    let counted = if has_loop {
        " (not counting the calls inside loops)"
    } else {
        ""
    };
    cx.error_spanned_by(
        over,
        format!(
            "this is durable call {} of this turn{counted}, over the turn budget of {TURN_BUDGET} steps, sleeps and signal waits; end the turn with `{}.continue_(state, message)` and do the rest in the next turn",
            TURN_BUDGET + 1,
            settings.ctx
        ),
    );
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
}

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
}

/// A durable call and the builder calls chained onto it, e.g. `crawl(ctx, a).key("a")`.
struct Chain<'e> {
    base: Base<'e>,
    /// The outermost `.key(..)` argument.
    key_override: Option<&'e Expr>,
    /// The arguments of the chained builder calls.
    builder_args: Vec<&'e Expr>,
}

/// A parallel group, `ctx.parallel().step(..).step(..)`, or a fan-out, `ctx.fan_out(..)`, with
/// the builder calls chained onto it.
struct Group<'e> {
    /// `ctx.parallel()` or `ctx.fan_out(key, items, f)`.
    root: &'e ExprMethodCall,
    /// The members of a parallel group, `.step(key, f)` or `.step_with(key, options, f)`, in
    /// declaration order.
    members: Vec<&'e ExprMethodCall>,
    /// The arguments of the other builder calls (`.limit(n)`, `.timeout(d)`, ...).
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
/// The builder calls of a parallel group (`ctx.parallel()`) or a fan-out (`ctx.fan_out(..)`).
const GROUP_METHODS: &[&str] = &[
    "step",
    "step_with",
    "limit",
    "kind",
    "timeout",
    "heartbeat_timeout",
    "options",
];
const CONCURRENT_MACROS: &[&str] = &["join", "try_join", "select", "select_biased"];

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

    fn group<'e>(&self, e: &'e Expr) -> Option<Group<'e>> {
        match e {
            Expr::MethodCall(m)
                if self.is_ctx(&m.receiver)
                    && (m.method == "parallel" || m.method == "fan_out") =>
            {
                Some(Group {
                    root: m,
                    members: Vec::new(),
                    builder_args: Vec::new(),
                })
            }
            Expr::MethodCall(m) if GROUP_METHODS.iter().any(|g| m.method == g) => {
                let mut group = self.group(&m.receiver)?;
                if m.method == "step" || m.method == "step_with" {
                    if group.root.method != "parallel" {
                        return None;
                    }
                    group.members.push(m);
                } else {
                    group.builder_args.extend(m.args.iter());
                }
                Some(group)
            }
            Expr::Paren(p) => self.group(&p.expr),
            _ => None,
        }
    }

    // ---- composition -------------------------------------------------------------------

    /// `next` runs after `acc`: a key in both is used twice.
    fn then(&self, acc: &mut Flow, next: Flow) {
        if acc.diverges {
            return;
        }
        for (key, span) in next.keys {
            if let Some((_, first)) = acc.keys.iter().find(|(k, _)| *k == key) {
                self.cx.error_at(
                    span,
                    format!(
                        "step key `{key}` is used twice in this turn; give this call a key of its own, e.g. \"{key}-2\" (a `#[step]` function takes it with `.key(\"{key}-2\")`); the same key is only allowed in mutually exclusive arms of one `if` or `match`"
                    ),
                );
                self.cx
                    .error_at(*first, format!("step key `{key}` is first used here"));
                continue;
            }
            acc.keys.push((key, span));
        }
        acc.path.extend(next.path);
        acc.diverges |= next.diverges;
    }

    /// Alternatives: at most one of `arms` runs.
    fn either(arms: Vec<Flow>) -> Flow {
        let mut out = Flow {
            diverges: !arms.is_empty() && arms.iter().all(|a| a.diverges),
            ..Flow::default()
        };
        for arm in arms {
            if arm.path.len() > out.path.len() {
                out.path.clone_from(&arm.path);
            }
            if arm.diverges {
                continue;
            }
            for (key, span) in arm.keys {
                if !out.keys.iter().any(|(k, _)| *k == key) {
                    out.keys.push((key, span));
                }
            }
        }
        out
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
                        let alt = Self::either(vec![arm, none]);
                        self.then(&mut flow, alt);
                    }
                    self.track_hash_local(&local.pat, Some(&init.expr));
                    self.check_inferred_signal(&local.pat, &init.expr);
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
            Expr::Try(t) => self.expr(&t.expr, false),
            Expr::Block(b) => self.block(&b.block),
            Expr::Unsafe(b) => self.block(&b.block),
            Expr::Const(b) => self.block(&b.block),
            Expr::Async(b) => {
                let before = self.calls.len();
                let flow = self.block(&b.block);
                if !awaited {
                    self.check_stored_async(b, before);
                }
                flow
            }
            Expr::TryBlock(b) => self.block(&b.block),
            Expr::If(i) => {
                let mut flow = self.expr(&i.cond, false);
                let then = self.block(&i.then_branch);
                let other = match &i.else_branch {
                    Some((_, e)) => self.expr(e, false),
                    None => Flow::default(),
                };
                let alt = Self::either(vec![then, other]);
                self.then(&mut flow, alt);
                flow
            }
            Expr::Match(m) => {
                let mut flow = self.expr(&m.expr, false);
                let mut arms = Vec::new();
                for arm in &m.arms {
                    let mut f = match &arm.pat {
                        Pat::Guard(g) => self.expr(&g.guard, false),
                        _ => Flow::default(),
                    };
                    let body = self.expr(&arm.body, false);
                    self.then(&mut f, body);
                    arms.push(f);
                }
                let alt = Self::either(arms);
                self.then(&mut flow, alt);
                flow
            }
            Expr::ForLoop(f) => {
                let flow = self.expr(&f.expr, false);
                self.check_hash_iteration(&f.expr);
                self.in_loop(loop_hint(&f.pat), |a| a.block(&f.body));
                flow
            }
            Expr::While(w) => {
                self.in_loop(None, |a| {
                    a.expr(&w.cond, false);
                    a.block(&w.body);
                });
                Flow::default()
            }
            Expr::Loop(l) => {
                self.in_loop(None, |a| a.block(&l.body));
                Flow::default()
            }
            Expr::Return(r) => {
                let mut flow = match &r.expr {
                    Some(e) => self.expr(e, false),
                    None => Flow::default(),
                };
                flow.diverges = true;
                flow
            }
            Expr::Break(b) => {
                let mut flow = match &b.expr {
                    Some(e) => self.expr(e, false),
                    None => Flow::default(),
                };
                flow.diverges = true;
                flow
            }
            Expr::Continue(_) => Flow {
                diverges: true,
                ..Flow::default()
            },
            Expr::Closure(c) => self.expr(&c.body, false),
            Expr::Macro(m) => self.mac(&m.mac),
            Expr::Call(c) => {
                if let Expr::Path(p) = &*c.func {
                    self.check_path(&p.path);
                } else {
                    let f = self.expr(&c.func, false);
                    let rest = self.exprs(&c.args);
                    return self.seq(f, rest);
                }
                self.exprs(&c.args)
            }
            Expr::Path(p) => {
                self.check_path(&p.path);
                Flow::default()
            }
            Expr::MethodCall(m) => {
                self.check_hash_method(m);
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

    fn seq(&self, mut a: Flow, b: Flow) -> Flow {
        self.then(&mut a, b);
        a
    }

    fn in_loop<R>(&mut self, hint: Option<String>, f: impl FnOnce(&mut Self) -> R) {
        self.has_loop = true;
        self.loops.push(hint);
        f(self);
        self.loops.pop();
    }

    /// A durable call: record it and check its key, its await and its signal.
    fn durable(&mut self, chain: &Chain, e: &Expr, awaited: bool) -> Flow {
        let mut flow = Flow::default();
        // The arguments run first.
        let (method, args): (Option<&syn::Ident>, Vec<&Expr>) = match &chain.base {
            Base::Method(m) => {
                let skip_closure = m.method == "step" || m.method == "transact";
                let args = m
                    .args
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !(skip_closure && *i == 1))
                    .map(|(_, a)| a)
                    .collect();
                (Some(&m.method), args)
            }
            Base::StepFn(c, _) => (None, c.args.iter().skip(1).collect()),
        };
        let args = self.exprs(args.into_iter().chain(chain.builder_args.iter().copied()));
        self.then(&mut flow, args);

        let (head, call) = match &chain.base {
            Base::Method(m) => {
                let (recv, dot, method) = (&m.receiver, &m.dot_token, &m.method);
                (
                    quote::quote!(#recv #dot #method),
                    format!("{}.{method}(..)", self.s.ctx),
                )
            }
            Base::StepFn(_, path) => {
                let name = path
                    .segments
                    .last()
                    .map(|s| s.ident.to_string())
                    .unwrap_or_default();
                (quote::quote!(#path), format!("{name}({}, ..)", self.s.ctx))
            }
        };
        let span = e.span();
        let (kind, default_key, example) = match (&chain.base, method) {
            (Base::Method(m), Some(method)) => {
                let kind = match method.to_string().as_str() {
                    "step" | "transact" => CallKind::Step(first_type_arg(m.turbofish.as_ref())),
                    "sleep" => CallKind::Sleep,
                    "wait_for_signal" => {
                        self.check_signal(m);
                        CallKind::Wait
                    }
                    "now" => CallKind::Now,
                    "call_child" | "start_child" | "await_child" => CallKind::Child,
                    _ => CallKind::Random,
                };
                let key = m
                    .args
                    .first()
                    .map(KeyExpr::from_expr)
                    .unwrap_or(KeyExpr::Dynamic);
                let ctx = self.s.ctx;
                let example = match method.to_string().as_str() {
                    "step" => format!("{ctx}.step(format!(\"KEY-{{i}}\"), ..)"),
                    "transact" => format!("{ctx}.transact(format!(\"KEY-{{i}}\"), ..)"),
                    "sleep" => format!("{ctx}.sleep(format!(\"KEY-{{i}}\"), ..)"),
                    "wait_for_signal" => {
                        format!("{ctx}.wait_for_signal(format!(\"KEY-{{i}}\"), ..)")
                    }
                    "call_child" | "start_child" | "await_child" => {
                        format!("{ctx}.{method}(format!(\"KEY-{{i}}\"), ..)")
                    }
                    other => format!("{ctx}.{other}(format!(\"KEY-{{i}}\"))"),
                };
                (kind, key, example)
            }
            (Base::StepFn(_, path), _) => {
                let name = path
                    .segments
                    .last()
                    .map(|s| s.ident.to_string().trim_start_matches("r#").to_owned())
                    .unwrap_or_default();
                let fn_span = path.segments.last().map_or(span, |s| s.ident.span());
                let example = format!("{name}({}, ..).key(format!(\"KEY-{{i}}\"))", self.s.ctx);
                (
                    CallKind::StepFn(strip_args(path)),
                    KeyExpr::Default(name, fn_span),
                    example,
                )
            }
            (Base::Method(_), None) => unreachable!("a method call has a method"),
        };
        let key = match chain.key_override {
            Some(k) => KeyExpr::from_expr(k),
            None => default_key,
        };

        if !awaited {
            self.cx.error_spanned_by(
                &head,
                format!(
                    "this durable call is not awaited where it is made: a turn runs one step, sleep or signal wait at a time (each borrows `{ctx}` mutably until it finishes), so its future cannot be stored or run alongside another; write `{call}.await?` and make the next call after it",
                    ctx = self.s.ctx,
                ),
            );
        }

        let literal = match &key {
            KeyExpr::Literal(lit) => Some((lit.value(), lit.span())),
            KeyExpr::Default(name, span) => Some((name.clone(), *span)),
            KeyExpr::Dynamic => None,
        };
        if let Some((text, at)) = &literal {
            if let Err(why) = turnwise_rules::check_identifier(text) {
                self.cx
                    .error_at(*at, format!("invalid step key {text:?}: {why}"));
            } else if let Some(hint) = self.loops.last() {
                let i = hint.as_deref().unwrap_or("i");
                let example = example
                    .replace("KEY", text)
                    .replace("{i}", &format!("{{{i}}}"));
                self.cx.error_at(
                    *at,
                    format!(
                        "fixed step key `{text}` inside a loop: every iteration would save under the same key; use an indexed key, e.g. `{example}`"
                    ),
                );
            } else {
                flow.keys.push((text.clone(), *at));
            }
        }
        flow.path.push(head);
        self.shown.push(call);
        self.calls.push(DurableCall {
            kind,
            key: literal.map(|(k, _)| k),
        });
        flow
    }

    /// A parallel group or a fan-out: each member of a group is a durable call of its own (its
    /// key checked against every other key of the body, and counted against the budget); a
    /// fan-out's steps are counted as a loop's are (not at all), and its key is the base of
    /// their indexed keys.
    fn parallel(&mut self, group: &Group, awaited: bool) -> Flow {
        let ctx = self.s.ctx;
        let root = group.root;
        let fan_out = root.method == "fan_out";
        // The arguments run first: the items of a fan-out, the options of the members, the
        // builders' arguments. The members' bodies are steps, which may do anything.
        let mut args: Vec<&Expr> = Vec::new();
        if fan_out {
            args.extend(root.args.iter().skip(1).take(1));
        }
        for m in &group.members {
            if m.method == "step_with" {
                args.extend(m.args.iter().skip(1).take(1));
            }
        }
        args.extend(group.builder_args.iter().copied());
        let mut flow = self.exprs(args);

        let (recv, dot, method) = (&root.receiver, &root.dot_token, &root.method);
        let head = quote::quote!(#recv #dot #method);
        let call = if fan_out {
            format!("{ctx}.fan_out(..)")
        } else {
            format!("{ctx}.parallel().step(..)")
        };
        if !awaited {
            self.cx.error_spanned_by(
                &head,
                format!(
                    "this {} is not awaited where it is made: a turn runs its durable calls one at a time (a group borrows `{ctx}` mutably until all its steps are saved), so its future cannot be stored or run alongside another; write `{call}.await?` and make the next call after it",
                    if fan_out { "fan-out" } else { "parallel group" },
                ),
            );
        }
        if fan_out {
            let key = root
                .args
                .first()
                .map(KeyExpr::from_expr)
                .unwrap_or(KeyExpr::Dynamic);
            let example = format!("{ctx}.fan_out(format!(\"KEY-{{i}}\"), items, ..)");
            let mut keys = Flow::default();
            self.member_key(&key, &example, &mut keys);
            self.then(&mut flow, keys);
            // As in a loop: the number of steps is only known at run time.
            self.has_loop = true;
            self.shown.push(call);
            self.calls.push(DurableCall {
                kind: CallKind::Step(None),
                key: None,
            });
            return flow;
        }
        if group.members.is_empty() {
            self.cx.error_spanned_by(
                &head,
                format!(
                    "this parallel group has no steps: add them with `.step(\"key\", |s| async move {{ .. }})` before `.await`, or use `{ctx}.fan_out(\"key\", items, |s, item| async move {{ .. }})` for a collection"
                ),
            );
        }
        for m in &group.members {
            let key = m
                .args
                .first()
                .map(KeyExpr::from_expr)
                .unwrap_or(KeyExpr::Dynamic);
            let example = format!("{ctx}.parallel().step(format!(\"KEY-{{i}}\"), ..)");
            let mut member = Flow::default();
            let literal = self.member_key(&key, &example, &mut member);
            let (dot, method) = (&m.dot_token, &m.method);
            member.path.push(quote::quote!(#dot #method));
            self.then(&mut flow, member);
            self.shown.push(format!("{ctx}.parallel().{method}(..)"));
            self.calls.push(DurableCall {
                kind: CallKind::Step(None),
                key: literal,
            });
        }
        flow
    }

    /// Check a group member's key as a durable call's (valid, not fixed inside a loop) and add
    /// it to `flow`'s keys; the key when it is a literal.
    fn member_key(&self, key: &KeyExpr, example: &str, flow: &mut Flow) -> Option<String> {
        let KeyExpr::Literal(lit) = key else {
            return None;
        };
        let (text, at) = (lit.value(), lit.span());
        if let Err(why) = turnwise_rules::check_identifier(&text) {
            self.cx
                .error_at(at, format!("invalid step key {text:?}: {why}"));
        } else if let Some(hint) = self.loops.last() {
            let i = hint.as_deref().unwrap_or("i");
            let example = example
                .replace("KEY", &text)
                .replace("{i}", &format!("{{{i}}}"));
            self.cx.error_at(
                at,
                format!(
                    "fixed step key `{text}` inside a loop: every iteration would save under the same key; use an indexed key, e.g. `{example}`"
                ),
            );
        } else {
            flow.keys.push((text.clone(), at));
        }
        Some(text)
    }

    /// An `async` block not awaited where it is made must not hold a durable call (`before`:
    /// the number of durable calls found before the block): its future would hold the
    /// context's borrow while the turn goes on.
    fn check_stored_async(&self, b: &syn::ExprAsync, before: usize) {
        let Some(call) = self.shown.get(before) else {
            return;
        };
        let (attrs, token, capture) = (&b.attrs, &b.async_token, &b.capture);
        self.cx.error_spanned_by(
            quote::quote!(#(#attrs)* #token #capture),
            format!(
                "this `async` block holds a durable call, `{call}`, and is not awaited where it is made: a turn runs one step, sleep or signal wait at a time (each borrows `{ctx}` mutably until it finishes), so a future holding one cannot be stored or run alongside another; await the durable call itself where the block is made, `{call}.await?`, and make the next call after it",
                ctx = self.s.ctx,
            ),
        );
    }

    /// `ctx.wait_for_signal::<S>(..)`: `S` must be an accepted signal.
    fn check_signal(&mut self, m: &ExprMethodCall) {
        let Some(Type::Path(p)) = first_type_arg(m.turbofish.as_ref()) else {
            return;
        };
        self.check_signal_type(&p.path);
    }

    /// `let s: Option<S> = ctx.wait_for_signal(..).await?;` or `let Some(S { .. }) = ..`:
    /// a wait without a turbofish whose signal type the binding names; `S` must be an accepted
    /// signal (otherwise rustc infers the one accepted signal and reports a type mismatch).
    fn check_inferred_signal(&mut self, pat: &Pat, init: &Expr) {
        let mut e = init;
        let mut tried = false;
        loop {
            match e {
                Expr::Try(t) => {
                    tried = true;
                    e = &t.expr;
                }
                Expr::Await(a) => e = &a.base,
                Expr::Paren(p) => e = &p.expr,
                _ => break,
            }
        }
        let Expr::MethodCall(m) = e else {
            return;
        };
        if m.method != "wait_for_signal" || m.turbofish.is_some() || !self.is_ctx(&m.receiver) {
            return;
        }
        let signal = match pat {
            Pat::Type(t) => {
                let ty = if tried {
                    Some(&*t.ty)
                } else {
                    generic_arg(&t.ty, "Result")
                };
                ty.and_then(|ty| generic_arg(ty, "Option"))
                    .and_then(|ty| match ty {
                        Type::Path(p) if p.qself.is_none() => Some(p.path.clone()),
                        _ => None,
                    })
            }
            other if tried => some_pattern_type(other),
            _ => None,
        };
        if let Some(path) = signal {
            self.check_signal_type(&path);
        }
    }

    /// `path` names a signal waited for: it must be an accepted one.
    fn check_signal_type(&mut self, path: &syn::Path) {
        let Some(name) = path.segments.last().map(|s| &s.ident) else {
            return;
        };
        let accepted: Vec<String> = self
            .s
            .signals
            .iter()
            .filter_map(|s| s.segments.last().map(|s| s.ident.to_string()))
            .collect();
        if accepted.iter().any(|a| name == a) {
            return;
        }
        let workflow = self.s.workflow;
        let alternatives = if accepted.is_empty() {
            format!("it accepts no signals; list it: `#[workflow(signals({name}))]`")
        } else {
            format!(
                "it accepts {}; or list it: `#[workflow(signals(.., {name}))]`",
                crate::args::one_of(&accepted.iter().map(String::as_str).collect::<Vec<_>>())
            )
        };
        self.cx.error_spanned_by(
            path,
            format!("workflow `{workflow}` does not accept signal `{name}`: {alternatives}"),
        );
        if !self
            .unaccepted
            .iter()
            .any(|u| u.segments.last().map(|s| &s.ident) == Some(name))
        {
            self.unaccepted.push(path.clone());
        }
    }

    // ---- macros ------------------------------------------------------------------------

    fn mac(&mut self, mac: &Macro) -> Flow {
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
            return Flow::default();
        }
        // Look inside macros whose arguments are expressions (`println!`, `assert_eq!`, `vec!`).
        let parser = Punctuated::<Expr, Token![,]>::parse_terminated;
        match parser.parse2(mac.tokens.clone()) {
            Ok(args) => self.exprs(&args),
            Err(_) => Flow::default(),
        }
    }

    // ---- nondeterminism ----------------------------------------------------------------

    fn nondeterministic(&self, at: &dyn quote::ToTokens, what: &str, instead: &str) {
        if self.s.allow_nondeterminism {
            return;
        }
        self.cx.error_spanned_by(
            at.to_token_stream(),
            format!(
                "{what} in a workflow body makes replays diverge: the turn runs again from the top on every attempt and must take the same path; {instead} (or opt out with `#[workflow(allow_nondeterminism)]`)"
            ),
        );
    }

    fn check_path(&self, path: &syn::Path) {
        let written: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        // Resolve the first segment through the body's `use` items.
        let segs: Vec<String> = match written.first().and_then(|f| self.uses.get(f)) {
            Some(full) if path.leading_colon.is_none() => {
                full.iter().chain(&written[1..]).cloned().collect()
            }
            _ => written.clone(),
        };
        let seg = |s: &str| segs.iter().any(|x| x == s);
        let ends =
            |tail: &[&str]| segs.len() >= tail.len() && segs[segs.len() - tail.len()..] == *tail;
        let shown = if segs == written {
            format!("`{}`", written.join("::"))
        } else {
            format!("`{}` (`{}`)", written.join("::"), segs.join("::"))
        };
        let ctx = self.s.ctx;
        let span = path;
        if ends(&["SystemTime", "now"])
            || ends(&["Instant", "now"])
            || ends(&["Utc", "now"])
            || ends(&["Local", "now"])
            || ends(&["OffsetDateTime", "now_utc"])
            || ends(&["OffsetDateTime", "now_local"])
            || ends(&["Timestamp", "now"])
            || ends(&["Zoned", "now"])
        {
            self.nondeterministic(
                span,
                &shown,
                &format!(
                    "read the time as a step, saved and replayed: `{ctx}.now(\"key\").await?`"
                ),
            );
        } else if segs
            .first()
            .is_some_and(|s| matches!(s.as_str(), "rand" | "fastrand" | "getrandom"))
            || ends(&["thread_rng"])
            || ends(&["RandomState", "new"])
            || (segs.len() >= 2
                && segs[segs.len() - 2] == "Uuid"
                && UUID_UNREPEATABLE.contains(&segs[segs.len() - 1].as_str()))
            || ends(&["Ulid", "new"])
        {
            self.nondeterministic(
                span,
                &shown,
                &format!("draw the random value as a step, saved and replayed: `{ctx}.random(\"key\").await?`"),
            );
        } else if segs.len() >= 2 && {
            let last = segs[segs.len() - 1].as_str();
            let owner = segs[segs.len() - 2].as_str();
            (last.starts_with("spawn")
                && (seg("tokio") || seg("task") || seg("thread") || seg("runtime")))
                || matches!(owner, "JoinSet" | "LocalSet")
                || (owner == "Builder" && seg("thread"))
                || (owner == "thread" && last == "scope")
                || (owner == "task" && last == "block_in_place")
        } {
            self.nondeterministic(
                span,
                &shown,
                &format!("a spawned task is not replayed; run steps concurrently with `{ctx}.parallel()` or `{ctx}.fan_out(..)`, or do concurrent work inside a step: `{ctx}.step(\"key\", |s| async move {{ .. }})`"),
            );
        } else if segs.len() >= 2 && segs[..segs.len() - 1].iter().any(|s| s == "env") {
            self.nondeterministic(
                span,
                &format!("reading the environment with {shown}"),
                &format!("read it inside a step so the value is saved: `{ctx}.step(\"key\", |_| async move {{ Ok(std::env::var(..).ok()) }})`, or pass it in the workflow's dependencies"),
            );
        } else if (segs.len() >= 2 && segs[..segs.len() - 1].iter().any(|s| s == "fs"))
            || ends(&["File", "open"])
            || ends(&["File", "create"])
            || ends(&["File", "create_new"])
            || ends(&["File", "options"])
            || ends(&["OpenOptions", "new"])
        {
            self.nondeterministic(
                span,
                &format!("file-system access with {shown}"),
                &format!("do file I/O inside a step so its result is saved: `{ctx}.step(\"key\", |_| async move {{ .. }})`"),
            );
        }
    }

    /// Remember `let x = HashMap::new()`, `let x: HashSet<_> = ..` and the like.
    fn track_hash_local(&mut self, pat: &Pat, init: Option<&Expr>) {
        let (ident, ty) = match pat {
            Pat::Ident(p) => (&p.ident, None),
            Pat::Type(t) => match &*t.pat {
                Pat::Ident(p) => (&p.ident, Some(&*t.ty)),
                _ => return,
            },
            _ => return,
        };
        let by_type = ty.is_some_and(|t| hash_type(&quote::quote!(#t)).is_some());
        let by_init = init.is_some_and(|e| hash_expr(e).is_some());
        if by_type || by_init {
            self.hash_vars.insert(ident.to_string());
        } else {
            self.hash_vars.remove(&ident.to_string());
        }
    }

    fn hash_of(&self, e: &Expr) -> Option<&'static str> {
        match e {
            Expr::Reference(r) => self.hash_of(&r.expr),
            Expr::Paren(p) => self.hash_of(&p.expr),
            Expr::Path(p) => {
                let ident = p.path.get_ident()?.to_string();
                if !self.hash_vars.contains(&ident) {
                    return None;
                }
                Some("HashMap` or `HashSet")
            }
            other => hash_expr(other),
        }
    }

    fn check_hash_iteration(&self, iterated: &Expr) {
        if let Some(kind) = self.hash_of(iterated) {
            self.hash_error(iterated, kind);
        }
    }

    fn check_hash_method(&self, m: &ExprMethodCall) {
        const ITERATING: &[&str] = &[
            "iter",
            "iter_mut",
            "into_iter",
            "keys",
            "values",
            "values_mut",
            "into_keys",
            "into_values",
            "drain",
        ];
        if !ITERATING.iter().any(|i| m.method == i) {
            return;
        }
        if let Some(kind) = self.hash_of(&m.receiver) {
            let (recv, dot, method) = (&m.receiver, &m.dot_token, &m.method);
            self.hash_error(&quote::quote!(#recv #dot #method), kind);
        }
    }

    fn hash_error(&self, span: &dyn quote::ToTokens, kind: &str) {
        self.nondeterministic(
            span,
            &format!("iterating over a `{kind}`"),
            "its order differs from run to run; use a `BTreeMap` or `BTreeSet`, or sort the entries first",
        );
    }
}

/// The `Uuid` constructors that read the clock or draw random bits.
const UUID_UNREPEATABLE: &[&str] = &["new_v4", "now_v1", "now_v6", "now_v7", "new_v7"];

/// The names the `use` items anywhere in `body` bring in, each with the path it stands for
/// (`use std::fs::{self, File as F}` gives `fs` → `std::fs` and `F` → `std::fs::File`). Glob
/// imports are not followed.
fn body_uses(body: &Block) -> HashMap<String, Vec<String>> {
    struct Uses(HashMap<String, Vec<String>>);
    impl Uses {
        fn tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
            match tree {
                syn::UseTree::Path(p) => {
                    prefix.push(p.ident.to_string());
                    self.tree(prefix, &p.tree);
                    prefix.pop();
                }
                syn::UseTree::Name(n) => self.bind(prefix, &n.ident, &n.ident),
                syn::UseTree::Rename(r) => self.bind(prefix, &r.ident, &r.rename),
                syn::UseTree::Group(g) => {
                    for item in &g.items {
                        self.tree(prefix, item);
                    }
                }
                syn::UseTree::Glob(_) => {}
            }
        }
        fn bind(&mut self, prefix: &[String], ident: &syn::Ident, alias: &syn::Ident) {
            let mut full = prefix.to_vec();
            if ident != "self" {
                full.push(ident.to_string());
            }
            let alias = if alias == "self" {
                full.last().cloned()
            } else {
                Some(alias.to_string())
            };
            if let Some(alias) = alias.filter(|a| a != "_") {
                self.0.insert(alias, full);
            }
        }
    }
    impl<'e> Visit<'e> for Uses {
        fn visit_item_use(&mut self, u: &'e syn::ItemUse) {
            self.tree(&mut Vec::new(), &u.tree);
        }
    }
    let mut uses = Uses(HashMap::new());
    uses.visit_block(body);
    uses.0
}

/// A key as written.
enum KeyExpr {
    Literal(LitStr),
    /// A `#[step]` function's own name.
    Default(String, Span),
    /// Computed at run time, e.g. `format!("item-{i}")`.
    Dynamic,
}

impl KeyExpr {
    fn from_expr(e: &Expr) -> Self {
        match e {
            Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) => KeyExpr::Literal(s.clone()),
            Expr::Paren(p) => Self::from_expr(&p.expr),
            _ => KeyExpr::Dynamic,
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

/// `T` of `Name<T, ..>` when `ty`'s last segment is `Name`.
fn generic_arg<'t>(ty: &'t Type, name: &str) -> Option<&'t Type> {
    let Type::Path(p) = ty else {
        return None;
    };
    let last = p.path.segments.last().filter(|s| s.ident == name)?;
    match &last.arguments {
        syn::PathArguments::AngleBracketed(a) => match a.args.first()? {
            syn::GenericArgument::Type(t) => Some(t),
            _ => None,
        },
        _ => None,
    }
}

/// The type a `Some(S { .. })`, `Some(S(..))` or `Some(S)` pattern names.
fn some_pattern_type(pat: &Pat) -> Option<syn::Path> {
    let Pat::TupleStruct(t) = pat else {
        return None;
    };
    if !t.path.is_ident("Some") || t.elems.len() != 1 {
        return None;
    }
    match t.elems.first()? {
        Pat::Struct(s) if s.qself.is_none() => Some(s.path.clone()),
        Pat::TupleStruct(ts) if ts.qself.is_none() => Some(ts.path.clone()),
        Pat::Path(p) if p.qself.is_none() => Some(p.path.clone()),
        _ => None,
    }
}

/// `a::b::<T>` without generic arguments, to name the step's marker type.
fn strip_args(path: &syn::Path) -> syn::Path {
    let mut path = path.clone();
    for seg in &mut path.segments {
        seg.arguments = syn::PathArguments::None;
    }
    path
}

/// The loop pattern's identifier, to suggest an indexed key: `i` of `for (i, x) in ..`.
fn loop_hint(pat: &Pat) -> Option<String> {
    match pat {
        Pat::Ident(p) => Some(p.ident.to_string()),
        Pat::Tuple(t) => t.elems.first().and_then(loop_hint),
        Pat::Type(t) => loop_hint(&t.pat),
        _ => None,
    }
    .filter(|name| name != "_")
}

/// Whether `tokens` mention `ident` anywhere.
fn mentions(tokens: &TokenStream, ident: &syn::Ident) -> bool {
    tokens.clone().into_iter().any(|t| match t {
        TokenTree::Ident(i) => i == *ident,
        TokenTree::Group(g) => mentions(&g.stream(), ident),
        _ => false,
    })
}

/// The hash type a type names, if any.
fn hash_type(tokens: &TokenStream) -> Option<&'static str> {
    tokens.clone().into_iter().find_map(|t| match t {
        TokenTree::Ident(i) if i == "HashMap" => Some("HashMap"),
        TokenTree::Ident(i) if i == "HashSet" => Some("HashSet"),
        TokenTree::Group(g) => hash_type(&g.stream()),
        _ => None,
    })
}

/// The hash type an expression builds directly: `HashMap::new()`, `.collect::<HashSet<_>>()`.
fn hash_expr(e: &Expr) -> Option<&'static str> {
    match e {
        Expr::Call(c) => match &*c.func {
            Expr::Path(p) => {
                let segs: Vec<String> = p
                    .path
                    .segments
                    .iter()
                    .map(|s| s.ident.to_string())
                    .collect();
                segs.iter().rev().nth(1).and_then(|s| match s.as_str() {
                    "HashMap" => Some("HashMap"),
                    "HashSet" => Some("HashSet"),
                    _ => None,
                })
            }
            _ => None,
        },
        Expr::MethodCall(m) if m.method == "collect" => {
            let t = m.turbofish.as_ref()?;
            hash_type(&quote::quote!(#t))
        }
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
