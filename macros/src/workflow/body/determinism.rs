//! Replay determinism: outside a step, the body does not read the clock, draw random values,
//! sleep other than durably, spawn tasks, read the environment, touch the file system or
//! iterate over a hash collection (unless the workflow opts out with
//! `#[workflow(allow_nondeterminism)]`).

use std::collections::HashMap;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;
use syn::{Block, Expr, ExprMethodCall, Pat};

use super::Analyzer;

impl Analyzer<'_> {
    /// Report `what` at `at`, naming the alternative, `instead`, unless the workflow opts out.
    fn nondeterministic(&self, at: &dyn quote::ToTokens, what: &str, instead: &str) {
        self.refuse(
            at,
            &format!(
                "{what} in a workflow body makes replays diverge: the turn runs again from the top on every attempt and must take the same path; {instead}"
            ),
        );
    }

    /// Report `message` at `at`, with the opt-out, unless the workflow opts out.
    fn refuse(&self, at: &dyn quote::ToTokens, message: &str) {
        if self.s.allow_nondeterminism {
            return;
        }
        self.cx.error_spanned_by(
            at.to_token_stream(),
            format!("{message} (or opt out with `#[workflow(allow_nondeterminism)]`)"),
        );
    }

    /// A path called or named outside a step does not read the clock, draw a random value,
    /// sleep (`tokio::time::sleep`, `std::thread::sleep`: not durable), spawn a task, read the
    /// environment or touch the file system (the path resolved through the body's `use` items).
    pub(super) fn check_path(&self, path: &syn::Path) {
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
        } else if ends(&["time", "sleep"])
            || ends(&["time", "sleep_until"])
            || ends(&["thread", "sleep"])
        {
            self.refuse(
                span,
                &format!(
                    "{shown} in a workflow body is not a durable sleep: it holds the worker while it waits, is lost if the worker stops, and waits again each time the turn runs from the top; sleep durably, saved with its wake-up time and without holding the worker: `{ctx}.sleep(\"key\", duration).await?`"
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
    pub(super) fn track_hash_local(&mut self, pat: &Pat, init: Option<&Expr>) {
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

    /// The hash collection `e` is, if any: a local known to hold one, or one built in place.
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

    /// A `for` loop does not iterate over a `HashMap` or `HashSet`: its order differs from run
    /// to run.
    pub(super) fn check_hash_iteration(&self, iterated: &Expr) {
        if let Some(kind) = self.hash_of(iterated) {
            self.hash_error(iterated, kind);
        }
    }

    /// No iterating method (`.iter()`, `.keys()`, `.drain()`, ..) is called on a `HashMap` or
    /// `HashSet`: its order differs from run to run.
    pub(super) fn check_hash_method(&self, m: &ExprMethodCall) {
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

    /// Report iterating over a hash collection, at `span`.
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
pub(super) fn body_uses(body: &Block) -> HashMap<String, Vec<String>> {
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
