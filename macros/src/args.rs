//! Helpers shared by the attribute-argument parsers.

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::meta::ParseNestedMeta;
use syn::parse::ParseStream;
use syn::{Expr, Lit, LitStr, Token};

use crate::ctxt::Ctxt;
use crate::duration;
use turnwise_rules::Bounds;

/// The arguments of one attribute seen so far: reports an unknown argument, and a repeated
/// one at its second use.
pub(crate) struct Seen {
    /// The attribute, e.g. `#[step]`.
    what: &'static str,
    known: &'static [&'static str],
    names: Vec<String>,
}

impl Seen {
    pub(crate) fn new(what: &'static str, known: &'static [&'static str]) -> Self {
        Self {
            what,
            known,
            names: Vec::new(),
        }
    }

    /// Whether `meta` is a known argument given for the first time. Otherwise it is reported,
    /// its value skipped, and the caller goes on to the next argument.
    pub(crate) fn admit(&mut self, cx: &Ctxt, meta: &ParseNestedMeta) -> bool {
        let what = self.what;
        if !self.known.iter().any(|k| meta.path.is_ident(k)) {
            unknown(cx, meta, what, self.known);
            return false;
        }
        let name = path_name(&meta.path);
        if self.names.contains(&name) {
            cx.error_spanned_by(
                &meta.path,
                format!("duplicate `{what}` argument `{name}`; give it once"),
            );
            skip_value(meta.input);
            return false;
        }
        self.names.push(name);
        true
    }
}

/// The text of an argument's path, e.g. `name`.
pub(crate) fn path_name(path: &syn::Path) -> String {
    path.segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect::<Vec<_>>()
        .join("::")
}

/// The list of arguments for an "unknown argument" message: `` `a`, `b` and `c` ``.
pub(crate) fn one_of(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => quoted.join(""),
    }
}

/// Report an unknown argument, with the nearest known one when it looks like a misspelling,
/// and skip its value.
pub(crate) fn unknown(cx: &Ctxt, meta: &ParseNestedMeta, what: &str, known: &[&str]) {
    let name = path_name(&meta.path);
    let hint = nearest(&name, known)
        .map(|n| format!("did you mean `{n}`? "))
        .unwrap_or_default();
    cx.error_spanned_by(
        &meta.path,
        format!(
            "unknown `{what}` argument `{name}`; {hint}supported arguments are {}",
            one_of(known)
        ),
    );
    skip_value(meta.input);
}

/// The known name closest to `name`, if it is close enough to be a misspelling of it: at most
/// one edit in three characters (an edit inserts, removes or replaces a character, or swaps two
/// neighbours).
pub(crate) fn nearest<'k>(name: &str, known: &[&'k str]) -> Option<&'k str> {
    let allowed = (name.chars().count() / 3).max(1);
    known
        .iter()
        .map(|k| (edit_distance(name, k), *k))
        .filter(|(d, _)| *d <= allowed)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// The edit distance of `a` and `b`, counting a swap of neighbouring characters as one edit
/// (the optimal string alignment distance).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // d[i][j]: the distance of a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// Remove the positional arguments (a bare literal, e.g. `#[workflow("counter")]`) from an
/// attribute's arguments, reporting each with the fix `named` gives for it, e.g.
/// "write `name = "counter"`". The named arguments are left to parse as usual.
pub(crate) fn positional(
    cx: &Ctxt,
    tokens: TokenStream,
    what: &str,
    named: impl Fn(&Lit) -> String,
) -> TokenStream {
    let mut out = TokenStream::new();
    let mut segment: Vec<TokenTree> = Vec::new();
    let mut flush = |segment: &mut Vec<TokenTree>, comma: Option<TokenTree>| {
        let literal = match segment.as_slice() {
            [TokenTree::Literal(l)] => Some(Lit::new(l.clone())),
            [TokenTree::Punct(p), TokenTree::Literal(l)] if p.as_char() == '-' => {
                Some(Lit::new(l.clone()))
            }
            _ => None,
        };
        match literal {
            Some(lit) => cx.error_spanned_by(
                segment.iter().cloned().collect::<TokenStream>(),
                format!(
                    "`{what}` takes named arguments, not a bare value: {}",
                    named(&lit)
                ),
            ),
            None => {
                out.extend(segment.drain(..));
                out.extend(comma);
            }
        }
        segment.clear();
    };
    for tree in tokens {
        match tree {
            TokenTree::Punct(p) if p.as_char() == ',' => {
                flush(&mut segment, Some(TokenTree::Punct(p)));
            }
            other => segment.push(other),
        }
    }
    flush(&mut segment, None);
    out
}

/// The source text of a literal, for messages: `"counter"` or `3`.
pub(crate) fn lit_text(lit: &Lit) -> String {
    quote::ToTokens::to_token_stream(lit).to_string()
}

/// Skip `= value` or `(...)` after an argument's name.
pub(crate) fn skip_value(input: ParseStream) {
    if input.peek(Token![=]) {
        let _ = input.parse::<Token![=]>();
        let _ = input.parse::<Expr>();
    } else if input.peek(syn::token::Paren) {
        let _ = input.parse::<proc_macro2::Group>();
    }
}

/// Parse `= <expr>` after an argument's name, reporting a missing `=`.
pub(crate) fn value(cx: &Ctxt, meta: &ParseNestedMeta, example: &str) -> Option<Expr> {
    if !meta.input.peek(Token![=]) {
        cx.error_spanned_by(
            &meta.path,
            format!("`{}` takes a value: `{example}`", path_name(&meta.path)),
        );
        skip_value(meta.input);
        return None;
    }
    let _ = meta.input.parse::<Token![=]>();
    match meta.input.parse::<Expr>() {
        Ok(e) => Some(e),
        Err(e) => {
            cx.syn_error(e);
            None
        }
    }
}

/// A string literal value.
pub(crate) fn string(cx: &Ctxt, meta: &ParseNestedMeta, example: &str) -> Option<LitStr> {
    let expr = value(cx, meta, example)?;
    if let Expr::Lit(syn::ExprLit {
        lit: Lit::Str(s), ..
    }) = &expr
    {
        return Some(s.clone());
    }
    cx.error_spanned_by(
        &expr,
        format!(
            "`{}` takes a string literal: `{example}`",
            path_name(&meta.path)
        ),
    );
    None
}

/// A duration literal, in milliseconds, within `min..=max`.
pub(crate) fn duration(
    cx: &Ctxt,
    meta: &ParseNestedMeta,
    example: &str,
    bounds: Bounds,
) -> Option<(u64, Span)> {
    let lit = string(cx, meta, example)?;
    let name = path_name(&meta.path);
    match duration::parse_ms(&lit.value()) {
        Ok(ms) if bounds.contains(ms) => Some((ms, lit.span())),
        Ok(ms) => {
            cx.error_spanned_by(
                &lit,
                format!(
                    "`{name}` of {} is out of range: use {} to {}",
                    duration::show(ms),
                    duration::show(bounds.min),
                    duration::show(bounds.max)
                ),
            );
            None
        }
        Err(why) => {
            cx.error_spanned_by(
                &lit,
                format!(
                    "invalid duration {:?} for `{name}`: {why}; write a number and a unit (`ms`, `s`, `m` or `h`), e.g. {example:?}",
                    lit.value()
                ),
            );
            None
        }
    }
}

/// A `crate = path` (or `crate = "path"`) value.
pub(crate) fn krate(cx: &Ctxt, meta: &ParseNestedMeta) -> Option<syn::Path> {
    let expr = value(cx, meta, "crate = ::turnwise")?;
    match &expr {
        Expr::Path(p) if p.qself.is_none() => Some(p.path.clone()),
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(s), ..
        }) => match s.parse::<syn::Path>() {
            Ok(p) => Some(p),
            Err(_) => {
                cx.error_spanned_by(s, "`crate` takes a path, e.g. `crate = ::turnwise`");
                None
            }
        },
        _ => {
            cx.error_spanned_by(&expr, "`crate` takes a path, e.g. `crate = ::turnwise`");
            None
        }
    }
}

/// A flag with no value, e.g. `allow_nondeterminism`.
pub(crate) fn flag(cx: &Ctxt, meta: &ParseNestedMeta) -> bool {
    if meta.input.peek(Token![=]) || meta.input.peek(syn::token::Paren) {
        cx.error_spanned_by(
            &meta.path,
            format!("`{}` takes no value", path_name(&meta.path)),
        );
        skip_value(meta.input);
        return false;
    }
    true
}
