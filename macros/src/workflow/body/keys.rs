//! Step keys: each durable call's key keeps the key rules, is used once in a run of a turn
//! (alternatives may share one), and is not fixed inside a loop. The [`Flow`]s of the parts of
//! the body compose here: in sequence ([`Analyzer::then`]) or as alternatives
//! ([`Analyzer::either`]).

use proc_macro2::{Span, TokenStream};
use syn::spanned::Spanned;
use syn::{Expr, ExprMethodCall, Lit, LitStr, Pat};

use super::grammar::{fingerprint, key_pattern, GCall, GNode, GSignal};
use super::{first_type_arg, Analyzer, Base, CallKind, Chain, DurableCall, Flow};

/// A key as written.
pub(super) enum KeyExpr {
    Literal(LitStr),
    /// A `#[step]` function's own name.
    Default(String, Span),
    /// Computed at run time, e.g. `format!("item-{i}")`: its pattern (`item-*`).
    Dynamic(String),
}

impl KeyExpr {
    pub(super) fn from_expr(e: &Expr) -> Self {
        match e {
            Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) => KeyExpr::Literal(s.clone()),
            Expr::Paren(p) => Self::from_expr(&p.expr),
            _ => KeyExpr::Dynamic(key_pattern(e)),
        }
    }

    /// The key, or the pattern of the keys it computes.
    pub(super) fn pattern(&self) -> String {
        match self {
            KeyExpr::Literal(lit) => lit.value(),
            KeyExpr::Default(name, _) => name.clone(),
            KeyExpr::Dynamic(pattern) => pattern.clone(),
        }
    }
}

impl Analyzer<'_> {
    // ---- composition -------------------------------------------------------------------

    /// `next` runs after `acc`: a key in both is used twice.
    pub(super) fn then(&self, acc: &mut Flow, next: Flow) {
        if acc.diverges {
            return;
        }
        for (key, span) in next.keys {
            if self.check_key_once(&acc.keys, &key, span) {
                acc.keys.push((key, span));
            }
        }
        acc.path.extend(next.path);
        acc.grammar.extend(next.grammar);
        acc.diverges |= next.diverges;
    }

    /// Alternatives: at most one of `arms` runs, chosen by a condition whose fingerprint is
    /// `cond`.
    pub(super) fn either(cond: String, mut arms: Vec<Flow>) -> Flow {
        let mut out = Flow {
            diverges: !arms.is_empty() && arms.iter().all(|a| a.diverges),
            ..Flow::default()
        };
        if arms.iter().any(|a| !a.grammar.is_empty()) {
            let arms = arms
                .iter_mut()
                .map(|a| GNode::seq(std::mem::take(&mut a.grammar)))
                .collect();
            out.grammar.push(GNode::Alt { cond, arms });
        }
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

    /// A durable call: record it and check its key, its await and its signal.
    pub(super) fn durable(&mut self, chain: &Chain, e: &Expr, awaited: bool) -> Flow {
        let mut flow = Flow::default();
        // The arguments run first.
        let args = self.exprs(
            call_args(chain)
                .into_iter()
                .chain(chain.builder_args.iter().copied()),
        );
        self.then(&mut flow, args);

        let (head, call) = self.shown(chain);
        let (kind, default_key, example) = match &chain.base {
            Base::Method(m) => self.method_call(m),
            Base::StepFn(_, path) => self.step_fn_call(path, e.span()),
        };
        let key = chain.key_override.map_or(default_key, KeyExpr::from_expr);

        let repaired = std::ptr::eq(e, self.try_operand);
        if self.check_awaited(awaited, &head, &call) && !repaired {
            // The generated code gives the stored call a placeholder context (`repair`); one
            // with `?` gets its `.await` back there instead.
            let ctx: &Expr = match &chain.base {
                Base::Method(m) => &m.receiver,
                Base::StepFn(c, _) => &c.args[0],
            };
            self.in_flight.push(ctx);
        }

        let literal = match &key {
            KeyExpr::Literal(lit) => Some((lit.value(), lit.span())),
            KeyExpr::Default(name, span) => Some((name.clone(), *span)),
            KeyExpr::Dynamic(_) => None,
        };
        if let Some((text, at)) = &literal {
            self.fixed_key(text, *at, &example, &mut flow);
        }
        flow.grammar
            .push(GNode::Call(Self::grammar_call(chain, &kind, &key)));
        flow.path.push(head);
        self.shown.push(call);
        self.calls.push(DurableCall {
            kind,
            key: literal.map(|(k, _)| k),
        });
        flow
    }

    /// The grammar's call for a durable call, `chain`, of `kind`, with `key`.
    fn grammar_call(chain: &Chain, kind: &CallKind, key: &KeyExpr) -> GCall {
        use turnwise_manifest::CallKind as Saves;
        let (method, span) = match &chain.base {
            Base::Method(m) => (m.method.to_string(), m.method.span()),
            Base::StepFn(_, path) => ("step_fn".to_owned(), path.span()),
        };
        let (saves, call, signal) = match (kind, method.as_str()) {
            (CallKind::Sleep, _) => (Saves::Sleep, "sleep", GSignal::None),
            (CallKind::Wait, _) => {
                let signal = match &chain.base {
                    Base::Method(m) => match first_type_arg(m.turbofish.as_ref()) {
                        Some(syn::Type::Path(p)) if p.qself.is_none() => GSignal::Type(p.path),
                        _ => GSignal::None,
                    },
                    Base::StepFn(..) => GSignal::None,
                };
                (Saves::Signal, "wait_for_signal", signal)
            }
            (CallKind::Child, "call_child") => {
                let signal = match key {
                    KeyExpr::Literal(lit) if lit.value().len() <= 122 => GSignal::Name(format!(
                        "{}{}",
                        turnwise_rules::names::CHILD_SIGNAL_PREFIX,
                        lit.value()
                    )),
                    _ => GSignal::None,
                };
                (Saves::Signal, "call_child", signal)
            }
            (CallKind::Child, "await_child") => (Saves::Signal, "await_child", GSignal::None),
            (CallKind::Child, _) => (Saves::Step, "start_child", GSignal::None),
            (CallKind::StepFn(_), _) => (Saves::Step, "step_fn", GSignal::None),
            (CallKind::Now, _) => (Saves::Step, "now", GSignal::None),
            (CallKind::Random, _) => (Saves::Step, "random", GSignal::None),
            (CallKind::Step(_), "transact") => (Saves::Step, "transact", GSignal::None),
            (CallKind::Step(_), _) => (Saves::Step, "step", GSignal::None),
        };
        let input: Vec<&dyn quote::ToTokens> = call_args(chain)
            .into_iter()
            .skip(usize::from(matches!(chain.base, Base::Method(_))))
            .chain(
                chain
                    .builder_args
                    .iter()
                    .copied()
                    .filter(|a| !chain.key_override.is_some_and(|k| std::ptr::eq(k, *a))),
            )
            .map(|a| a as &dyn quote::ToTokens)
            .collect();
        GCall {
            kind: saves,
            key: key.pattern(),
            call,
            signal,
            input: fingerprint(input),
            span,
        }
    }

    /// A durable call as the path of calls shows it (`ctx.step`) and as messages show it
    /// (`ctx.step(..)`, `name(ctx, ..)`).
    fn shown(&self, chain: &Chain) -> (TokenStream, String) {
        match &chain.base {
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
        }
    }

    /// A durable method on the context, `m`: its kind (checking a signal wait's signal), its key
    /// and the call with the key `KEY-{i}`, for messages.
    fn method_call(&mut self, m: &ExprMethodCall) -> (CallKind, KeyExpr, String) {
        let method = &m.method;
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
            .unwrap_or_else(|| KeyExpr::Dynamic("*".to_owned()));
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

    /// A `#[step]` function named by `path` (the call at `span`): its kind, its default key
    /// (its name) and the call with the key `KEY-{i}`, for messages.
    fn step_fn_call(&self, path: &syn::Path, span: Span) -> (CallKind, KeyExpr, String) {
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

    /// A fixed key `text` (at `at`) keeps the key rules and is not fixed inside a loop (the
    /// message shows `example`); then it is one of `flow`'s keys.
    fn fixed_key(&self, text: &str, at: Span, example: &str, flow: &mut Flow) {
        if self.check_key_rules(text, at) && self.check_key_not_fixed_in_loop(text, at, example) {
            flow.keys.push((text.to_owned(), at));
        }
    }

    /// Check a group member's key as a durable call's (valid, not fixed inside a loop) and add
    /// it to `flow`'s keys; the key when it is a literal.
    pub(super) fn member_key(
        &self,
        key: &KeyExpr,
        example: &str,
        flow: &mut Flow,
    ) -> Option<String> {
        let KeyExpr::Literal(lit) = key else {
            return None;
        };
        let text = lit.value();
        self.fixed_key(&text, lit.span(), example, flow);
        Some(text)
    }

    // ---- rules -------------------------------------------------------------------------

    /// A literal key keeps the key rules (`turnwise_rules::check_identifier`).
    fn check_key_rules(&self, text: &str, at: Span) -> bool {
        let Err(why) = turnwise_rules::check_identifier(text) else {
            return true;
        };
        self.cx
            .error_at(at, format!("invalid step key {text:?}: {why}"));
        false
    }

    /// A literal key is not used inside a loop: every iteration would save under it. The
    /// message shows `example` (the call with the key `KEY-{i}`) with this key and the loop's
    /// index.
    fn check_key_not_fixed_in_loop(&self, text: &str, at: Span, example: &str) -> bool {
        let Some(hint) = self.loops.last() else {
            return true;
        };
        let i = hint.as_deref().unwrap_or("i");
        let example = example
            .replace("KEY", text)
            .replace("{i}", &format!("{{{i}}}"));
        self.cx.error_at(
            at,
            format!(
                "fixed step key `{text}` inside a loop: every iteration would save under the same key; use an indexed key, e.g. `{example}`"
            ),
        );
        false
    }

    /// A key is used once in a run of durable calls (`used`: the keys that run before it); the
    /// same key in two arms of one `if` or `match` is fine, as [`Analyzer::either`] keeps one.
    fn check_key_once(&self, used: &[(String, Span)], key: &str, span: Span) -> bool {
        let Some((_, first)) = used.iter().find(|(k, _)| k == key) else {
            return true;
        };
        self.cx.error_at(
            span,
            format!(
                "step key `{key}` is used twice in this turn; give this call a key of its own, e.g. \"{key}-2\" (a `#[step]` function takes it with `.key(\"{key}-2\")`); the same key is only allowed in mutually exclusive arms of one `if` or `match`"
            ),
        );
        self.cx
            .error_at(*first, format!("step key `{key}` is first used here"));
        false
    }
}

/// The arguments of a durable call that run before it: all but its context, and for `step`
/// and `transact` the closure, which runs as the step.
fn call_args<'e>(chain: &Chain<'e>) -> Vec<&'e Expr> {
    match &chain.base {
        Base::Method(m) => {
            let skip_closure = m.method == "step" || m.method == "transact";
            m.args
                .iter()
                .enumerate()
                .filter(|(i, _)| !(skip_closure && *i == 1))
                .map(|(_, a)| a)
                .collect()
        }
        Base::StepFn(c, _) => c.args.iter().skip(1).collect(),
    }
}

/// `a::b::<T>` without generic arguments, to name the step function in the schema.
fn strip_args(path: &syn::Path) -> syn::Path {
    let mut path = path.clone();
    for seg in &mut path.segments {
        seg.arguments = syn::PathArguments::None;
    }
    path
}

/// The loop pattern's identifier, to suggest an indexed key: `i` of `for (i, x) in ..`.
pub(super) fn loop_hint(pat: &Pat) -> Option<String> {
    match pat {
        Pat::Ident(p) => Some(p.ident.to_string()),
        Pat::Tuple(t) => t.elems.first().and_then(loop_hint),
        Pat::Type(t) => loop_hint(&t.pat),
        _ => None,
    }
    .filter(|name| name != "_")
}
