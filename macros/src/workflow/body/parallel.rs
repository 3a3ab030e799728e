//! Parallel groups, `ctx.parallel().step(..).step(..)`, and fan-outs, `ctx.fan_out(..)`: their
//! members' keys are checked as any durable call's (see [`super::keys`]), and a group has steps.

use proc_macro2::TokenStream;
use syn::{Expr, ExprMethodCall};

use super::grammar::{fingerprint, GCall, GNode, GSignal};
use super::keys::KeyExpr;
use super::{Analyzer, CallKind, DurableCall, Flow};

/// A parallel group, `ctx.parallel().step(..).step(..)`, or a fan-out, `ctx.fan_out(..)`, with
/// the builder calls chained onto it.
pub(super) struct Group<'e> {
    /// `ctx.parallel()` or `ctx.fan_out(key, items, f)`.
    root: &'e ExprMethodCall,
    /// The members of a parallel group, `.step(key, f)` or `.step_with(key, options, f)`, in
    /// declaration order.
    members: Vec<&'e ExprMethodCall>,
    /// The arguments of the other builder calls (`.limit(n)`, `.timeout(d)`, ...).
    builder_args: Vec<&'e Expr>,
}

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

impl Analyzer<'_> {
    pub(super) fn group<'e>(&self, e: &'e Expr) -> Option<Group<'e>> {
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

    /// A parallel group or a fan-out: each member of a group is a durable call of its own (its
    /// key checked against every other key of the body, and counted against the budget); a
    /// fan-out's steps are counted as a loop's are (not at all), and its key is the base of
    /// their indexed keys.
    pub(super) fn parallel(&mut self, group: &Group, awaited: bool) -> Flow {
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
        if self.check_group_awaited(awaited, fan_out, &head, &call) {
            // The generated code gives the stored group a placeholder context (`repair`).
            self.in_flight.push(&*root.receiver);
        }
        if fan_out {
            let key = root
                .args
                .first()
                .map(KeyExpr::from_expr)
                .unwrap_or_else(|| KeyExpr::Dynamic("*".to_owned()));
            let example = format!("{ctx}.fan_out(format!(\"KEY-{{i}}\"), items, ..)");
            let mut keys = Flow::default();
            self.member_key(&key, &example, &mut keys);
            // Its steps are saved as `<key>.<index>`, as many as there are items.
            let base = match &key {
                KeyExpr::Literal(_) => key.pattern(),
                _ => "*".to_owned(),
            };
            keys.grammar.push(GNode::Loop(Box::new(GNode::Call(GCall {
                kind: turnwise_manifest::CallKind::Step,
                key: format!("{base}.*"),
                call: "fan_out",
                signal: GSignal::None,
                input: fingerprint(root.args.iter().skip(1).map(|a| a as &dyn quote::ToTokens)),
                span: root.method.span(),
            }))));
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
        self.check_group_has_steps(group, &head);
        let mut members = Vec::new();
        for m in &group.members {
            let key = m
                .args
                .first()
                .map(KeyExpr::from_expr)
                .unwrap_or_else(|| KeyExpr::Dynamic("*".to_owned()));
            let example = format!("{ctx}.parallel().step(format!(\"KEY-{{i}}\"), ..)");
            let mut member = Flow::default();
            let literal = self.member_key(&key, &example, &mut member);
            members.push(GNode::Call(GCall {
                kind: turnwise_manifest::CallKind::Step,
                key: key.pattern(),
                call: "parallel",
                signal: GSignal::None,
                input: fingerprint(
                    m.args
                        .iter()
                        .skip(1)
                        .take(usize::from(m.method == "step_with"))
                        .map(|a| a as &dyn quote::ToTokens),
                ),
                span: m.method.span(),
            }));
            let (dot, method) = (&m.dot_token, &m.method);
            member.path.push(quote::quote!(#dot #method));
            self.then(&mut flow, member);
            self.shown.push(format!("{ctx}.parallel().{method}(..)"));
            self.calls.push(DurableCall {
                kind: CallKind::Step(None),
                key: literal,
            });
        }
        if !members.is_empty() {
            flow.grammar.push(GNode::Parallel(members));
        }
        flow
    }

    /// A parallel group has at least one step (`head`: the group's `ctx.parallel`).
    fn check_group_has_steps(&self, group: &Group, head: &TokenStream) {
        if group.members.is_empty() {
            let ctx = self.s.ctx;
            self.cx.error_spanned_by(
                head,
                format!(
                    "this parallel group has no steps: add them with `.step(\"key\", |s| async move {{ .. }})` before `.await`, or use `{ctx}.fan_out(\"key\", items, |s, item| async move {{ .. }})` for a collection"
                ),
            );
        }
    }
}
