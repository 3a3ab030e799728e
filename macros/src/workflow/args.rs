//! `#[workflow(...)]` arguments.

use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{LitStr, Token};

use crate::args::{self, Seen};
use crate::ctxt::Ctxt;
use turnwise_rules::durations::LEASE;
use turnwise_rules::limits::{MAX_ATTEMPTS_MAX, MAX_ATTEMPTS_MIN};
use turnwise_rules::names::{is_reserved_type, RESERVED_TYPE_PREFIX};

/// Every `#[workflow]` argument, for messages.
pub(crate) const KNOWN: &[&str] = &[
    "name",
    "version",
    "signals",
    "max_attempts",
    "lease",
    "on_exhausted",
    "allow_nondeterminism",
    "frozen",
    "codec",
    "crate",
];

/// The parsed arguments.
#[derive(Default)]
pub(crate) struct WorkflowArgs {
    /// `name = "..."`: the workflow type on the wire (default: the function's name).
    pub(crate) name: Option<LitStr>,
    /// `version = "..."` (default `"v1"`).
    pub(crate) version: Option<LitStr>,
    /// `signals(A, B)`: the signal types the workflow accepts.
    pub(crate) signals: Vec<syn::Path>,
    /// `max_attempts = N` (`turnwise_rules::limits::MAX_ATTEMPTS_MIN..=MAX_ATTEMPTS_MAX`).
    pub(crate) max_attempts: Option<syn::LitInt>,
    /// `lease = "60s"`, in ms.
    pub(crate) lease_ms: Option<(u64, Span)>,
    /// `on_exhausted = "block" | "skip"`, as the variant's name.
    pub(crate) on_exhausted: Option<syn::Ident>,
    /// `allow_nondeterminism`: skip the replay-determinism checks of the body.
    pub(crate) allow_nondeterminism: bool,
    /// `frozen`: the body's shape must match the version's committed manifest (its token).
    pub(crate) frozen: Option<Span>,
    /// `codec = Path`: the codec type (default `JsonCodec`).
    pub(crate) codec: Option<syn::Path>,
    /// `crate = path`: where `turnwise` is.
    pub(crate) krate: Option<syn::Path>,
}

impl WorkflowArgs {
    /// The workflow's name on the wire: `name = ".."`, or the function's name `ident`.
    pub(crate) fn name_or(&self, ident: &syn::Ident) -> String {
        self.name.as_ref().map_or_else(
            || ident.to_string().trim_start_matches("r#").to_owned(),
            LitStr::value,
        )
    }

    /// The version: `version = ".."`, or `v1`.
    pub(crate) fn version_or_default(&self) -> String {
        self.version
            .as_ref()
            .map_or_else(|| "v1".to_owned(), LitStr::value)
    }

    pub(crate) fn parse(cx: &Ctxt, tokens: TokenStream) -> Self {
        let mut out = WorkflowArgs::default();
        let tokens = args::positional(cx, tokens, "#[workflow]", |lit| match lit {
            syn::Lit::Str(_) => format!("write `name = {}`", args::lit_text(lit)),
            syn::Lit::Int(_) => format!("write `max_attempts = {}`", args::lit_text(lit)),
            _ => format!("supported arguments are {}", args::one_of(KNOWN)),
        });
        let mut seen = Seen::new("#[workflow]", KNOWN);
        let parser = syn::meta::parser(|meta| {
            if !seen.admit(cx, &meta) {
                return Ok(());
            }
            if meta.path.is_ident("name") {
                out.name = args::string(cx, &meta, "name = \"counter\"")
                    .filter(|s| check_identifier(cx, s, "workflow name"));
                if let Some(name) = &out.name {
                    if is_reserved_type(&name.value()) {
                        cx.error_spanned_by(
                            name,
                            format!("workflow names starting `{RESERVED_TYPE_PREFIX}` are reserved by the server; choose another name"),
                        );
                    }
                }
            } else if meta.path.is_ident("version") {
                out.version = args::string(cx, &meta, "version = \"v1\"")
                    .filter(|s| check_identifier(cx, s, "workflow version"));
            } else if meta.path.is_ident("signals") {
                out.signals = signals(cx, &meta);
            } else if meta.path.is_ident("max_attempts") {
                out.max_attempts = max_attempts(cx, &meta);
            } else if meta.path.is_ident("lease") {
                out.lease_ms = args::duration(cx, &meta, "60s", LEASE);
            } else if meta.path.is_ident("on_exhausted") {
                out.on_exhausted = on_exhausted(cx, &meta);
            } else if meta.path.is_ident("allow_nondeterminism") {
                out.allow_nondeterminism = args::flag(cx, &meta);
            } else if meta.path.is_ident("frozen") {
                if args::flag(cx, &meta) {
                    out.frozen = Some(meta.path.span());
                }
            } else if meta.path.is_ident("codec") {
                out.codec = codec(cx, &meta);
            } else if meta.path.is_ident("crate") {
                out.krate = args::krate(cx, &meta);
            }
            Ok(())
        });
        if let Err(e) = parser.parse2(tokens) {
            cx.syn_error(e);
        }
        out
    }
}

/// Check a name or version against the key rules.
fn check_identifier(cx: &Ctxt, s: &LitStr, what: &str) -> bool {
    match turnwise_rules::check_identifier(&s.value()) {
        Ok(()) => true,
        Err(why) => {
            cx.error_spanned_by(s, format!("invalid {what} {:?}: {why}", s.value()));
            false
        }
    }
}

fn signals(cx: &Ctxt, meta: &syn::meta::ParseNestedMeta) -> Vec<syn::Path> {
    let example = "`signals(Approval, Cancel)`";
    if !meta.input.peek(syn::token::Paren) {
        cx.error_spanned_by(
            &meta.path,
            format!("`signals` takes a list of signal types: {example}"),
        );
        args::skip_value(meta.input);
        return Vec::new();
    }
    let parsed = (|| {
        let content;
        syn::parenthesized!(content in meta.input);
        Punctuated::<syn::Path, Token![,]>::parse_terminated(&content)
    })();
    let list = match parsed {
        Ok(list) => list,
        Err(e) => {
            cx.syn_error(syn::Error::new(
                e.span(),
                format!("expected signal types: {example}"),
            ));
            return Vec::new();
        }
    };
    let mut out: Vec<syn::Path> = Vec::new();
    for path in list {
        let name = args::path_name(&path);
        if out.iter().any(|p| args::path_name(p) == name) {
            cx.error_spanned_by(
                &path,
                format!("signal `{name}` is listed twice in `signals(..)`; list it once"),
            );
            continue;
        }
        out.push(path);
    }
    out
}

fn max_attempts(cx: &Ctxt, meta: &syn::meta::ParseNestedMeta) -> Option<syn::LitInt> {
    let expr = args::value(cx, meta, "max_attempts = 5")?;
    if let syn::Expr::Lit(syn::ExprLit {
        lit: syn::Lit::Int(n),
        ..
    }) = &expr
    {
        let accepted = MAX_ATTEMPTS_MIN..=MAX_ATTEMPTS_MAX;
        if matches!(n.base10_parse::<u32>(), Ok(v) if accepted.contains(&v))
            && n.suffix().is_empty()
        {
            return Some(n.clone());
        }
    }
    cx.error_spanned_by(
        &expr,
        format!("`max_attempts` takes a whole number from {MAX_ATTEMPTS_MIN} to {MAX_ATTEMPTS_MAX}, e.g. `max_attempts = 5`"),
    );
    None
}

fn on_exhausted(cx: &Ctxt, meta: &syn::meta::ParseNestedMeta) -> Option<syn::Ident> {
    let lit = args::string(cx, meta, "on_exhausted = \"skip\"")?;
    let variant = match lit.value().as_str() {
        "block" => "Block",
        "skip" => "Skip",
        other => {
            cx.error_spanned_by(
                &lit,
                format!("unknown `on_exhausted` policy {other:?}; expected \"block\" or \"skip\""),
            );
            return None;
        }
    };
    Some(syn::Ident::new(variant, lit.span()))
}

/// `codec = MyCodec`: a type implementing `turnwise::codec::Codec + Default`.
fn codec(cx: &Ctxt, meta: &syn::meta::ParseNestedMeta) -> Option<syn::Path> {
    let example = "`codec = MyCodec` (a type implementing `turnwise::codec::Codec + Default`)";
    let parsed = meta.value().and_then(|v| v.parse::<syn::Path>());
    match parsed {
        Ok(path) => Some(path),
        Err(_) => {
            cx.error_spanned_by(&meta.path, format!("`codec` takes a type path: {example}"));
            args::skip_value(meta.input);
            None
        }
    }
}
