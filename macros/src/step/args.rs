//! `#[step(...)]` arguments.

use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;

use crate::args::{self, Seen};
use crate::ctxt::Ctxt;
use crate::duration;
use turnwise_rules::durations::{
    DEFAULT_OPERATION_TIMEOUT_MS, HEARTBEAT_TIMEOUT_MIN_MS, OPERATION_TIMEOUT,
};
use turnwise_rules::Bounds;

/// Every `#[step]` argument, for messages.
pub(crate) const KNOWN: &[&str] = &["kind", "timeout", "heartbeat_timeout", "crate"];

/// The default per-attempt timeout: 5 minutes (the runtime's `StepOptions::default`).
pub(crate) const DEFAULT_TIMEOUT_MS: u64 = DEFAULT_OPERATION_TIMEOUT_MS;

/// The parsed arguments.
#[derive(Default)]
pub(crate) struct StepArgs {
    /// `kind = "step" | "model" | "tool"`, as the variant's name.
    pub(crate) kind: Option<syn::Ident>,
    /// `timeout = "5m"`, in ms.
    pub(crate) timeout_ms: Option<u64>,
    /// `heartbeat_timeout = "30s"`, in ms.
    pub(crate) heartbeat_ms: Option<(u64, Span)>,
    /// `crate = path`.
    pub(crate) krate: Option<syn::Path>,
}

impl StepArgs {
    pub(crate) fn parse(cx: &Ctxt, tokens: TokenStream) -> Self {
        let mut out = StepArgs::default();
        let tokens = args::positional(cx, tokens, "#[step]", |lit| {
            let text = args::lit_text(lit);
            match lit {
                syn::Lit::Str(s) if ["step", "model", "tool"].contains(&s.value().as_str()) => {
                    format!("write `kind = {text}`")
                }
                syn::Lit::Str(s) if duration::parse_ms(&s.value()).is_ok() => {
                    format!("write `timeout = {text}` (or `heartbeat_timeout = {text}`)")
                }
                _ => format!("supported arguments are {}", args::one_of(KNOWN)),
            }
        });
        let mut seen = Seen::new("#[step]", KNOWN);
        let parser = syn::meta::parser(|meta| {
            if !seen.admit(cx, &meta) {
                return Ok(());
            }
            if meta.path.is_ident("kind") {
                out.kind = kind(cx, &meta);
            } else if meta.path.is_ident("timeout") {
                out.timeout_ms =
                    args::duration(cx, &meta, "5m", OPERATION_TIMEOUT).map(|(ms, _)| ms);
            } else if meta.path.is_ident("heartbeat_timeout") {
                out.heartbeat_ms = args::duration(
                    cx,
                    &meta,
                    "30s",
                    Bounds {
                        min: HEARTBEAT_TIMEOUT_MIN_MS,
                        max: OPERATION_TIMEOUT.max,
                    },
                );
            } else if meta.path.is_ident("crate") {
                out.krate = args::krate(cx, &meta);
            }
            Ok(())
        });
        if let Err(e) = parser.parse2(tokens) {
            cx.syn_error(e);
        }
        if let Some((hb, span)) = out.heartbeat_ms {
            let timeout = out.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
            if hb > timeout {
                cx.error_at(
                    span,
                    format!(
                        "`heartbeat_timeout` of {} is longer than the step's timeout of {}{}; use at most the timeout",
                        duration::show(hb),
                        duration::show(timeout),
                        if out.timeout_ms.is_none() { " (the default)" } else { "" }
                    ),
                );
            }
        }
        out
    }
}

fn kind(cx: &Ctxt, meta: &syn::meta::ParseNestedMeta) -> Option<syn::Ident> {
    let lit = args::string(cx, meta, "kind = \"tool\"")?;
    let variant = match lit.value().as_str() {
        "step" => "Step",
        "model" => "Model",
        "tool" => "Tool",
        other => {
            cx.error_spanned_by(
                &lit,
                format!("unknown step kind {other:?}; expected \"step\", \"model\" or \"tool\""),
            );
            return None;
        }
    };
    Some(syn::Ident::new(variant, lit.span()))
}
