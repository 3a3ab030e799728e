//! The grammar of a body's durable calls, for the replay manifest: built by the walker as it
//! goes (sequence, alternatives, loops, parallel groups, patches and calls), turned into the
//! manifest's [`Node`] for the shape hash and a frozen version's check, and into the tokens
//! that build the same grammar at run time (where a signal type's wire name is known).

use proc_macro2::{Span, TokenStream};
use quote::{quote, ToTokens};
use syn::Expr;
use turnwise_manifest::{Alt, Call, CallKind, Node, Patch};

use crate::private::Private;

/// A part of the grammar, as the macro sees it.
pub(crate) enum GNode {
    Seq(Vec<GNode>),
    Alt {
        cond: String,
        arms: Vec<GNode>,
    },
    Loop(Box<GNode>),
    Parallel(Vec<GNode>),
    Patch {
        id: String,
        new: Box<GNode>,
        old: Box<GNode>,
        span: Span,
    },
    Call(GCall),
}

/// One durable call.
pub(crate) struct GCall {
    pub(crate) kind: CallKind,
    /// The key, or its pattern (`item-*`).
    pub(crate) key: String,
    /// The method as written.
    pub(crate) call: &'static str,
    pub(crate) signal: GSignal,
    /// A fingerprint of the arguments other than the key.
    pub(crate) input: String,
    pub(crate) span: Span,
}

/// The signal a wait names.
pub(crate) enum GSignal {
    /// Not a signal wait, or a wait whose type the macro cannot see.
    None,
    /// A name known as text (a child's outcome signal).
    Name(String),
    /// A signal type: its wire name is `<S as Signal>::NAME`, known at run time.
    Type(syn::Path),
}

/// `file:line` of `span`, when the compiler tells (empty outside a macro expansion).
pub(crate) fn location(span: Span) -> String {
    if !proc_macro::is_available() {
        return String::new();
    }
    let span = span.unwrap();
    format!("{}:{}", span.file(), span.line())
}

/// The fingerprint of some tokens: formatting and comments do not change it.
pub(crate) fn fingerprint<'a>(parts: impl IntoIterator<Item = &'a dyn ToTokens>) -> String {
    let mut text = String::new();
    for part in parts {
        text.push_str(&part.to_token_stream().to_string());
        text.push('\u{1f}');
    }
    if text.is_empty() {
        return text;
    }
    turnwise_manifest::fingerprint(&text)
}

/// The key pattern of a key computed at run time: `format!("item-{i}")` is `item-*`; any other
/// expression is `*`.
pub(crate) fn key_pattern(e: &Expr) -> String {
    match e {
        Expr::Paren(p) => key_pattern(&p.expr),
        Expr::Reference(r) => key_pattern(&r.expr),
        Expr::MethodCall(m) if m.args.is_empty() => key_pattern(&m.receiver),
        Expr::Macro(m) if m.mac.path.is_ident("format") => {
            let lit = m
                .mac
                .parse_body_with(
                    syn::punctuated::Punctuated::<Expr, syn::Token![,]>::parse_terminated,
                )
                .ok()
                .and_then(|args| match args.first() {
                    Some(Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(s),
                        ..
                    })) => Some(s.value()),
                    _ => None,
                });
            lit.map_or_else(|| "*".to_owned(), |f| format_pattern(&f))
        }
        _ => "*".to_owned(),
    }
}

/// A format string as a key pattern: each `{..}` becomes `*`, `{{` and `}}` stay braces.
fn format_pattern(format: &str) -> String {
    let mut out = String::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                for c in chars.by_ref() {
                    if c == '}' {
                        break;
                    }
                }
                if !out.ends_with('*') {
                    out.push('*');
                }
            }
            c => out.push(c),
        }
    }
    out
}

impl GNode {
    /// A sequence, flattened: one part stays itself.
    pub(crate) fn seq(mut parts: Vec<GNode>) -> GNode {
        if parts.len() == 1 {
            return parts.remove(0);
        }
        GNode::Seq(parts)
    }

    /// The manifest's node as the macro knows it: a signal type stands as its path's text.
    pub(crate) fn to_node(&self) -> Node {
        match self {
            GNode::Seq(parts) => Node::Seq(parts.iter().map(GNode::to_node).collect()),
            GNode::Alt { cond, arms } => Node::Alt(Alt {
                cond: cond.clone(),
                arms: arms.iter().map(GNode::to_node).collect(),
            }),
            GNode::Loop(body) => Node::Loop(Box::new(body.to_node())),
            GNode::Parallel(members) => {
                Node::Parallel(members.iter().map(GNode::to_node).collect())
            }
            GNode::Patch { id, new, old, span } => Node::Patch(Patch {
                id: id.clone(),
                new: Box::new(new.to_node()),
                old: Box::new(old.to_node()),
                at: location(*span),
            }),
            GNode::Call(c) => {
                let mut call = Call::new(c.kind, c.key.clone(), location(c.span))
                    .call(c.call)
                    .input(c.input.clone());
                match &c.signal {
                    GSignal::None => {}
                    GSignal::Name(name) => call = call.signal(name.clone()),
                    GSignal::Type(path) => {
                        call = call.signal(path.to_token_stream().to_string().replace(' ', ""));
                    }
                }
                Node::Call(call)
            }
        }
    }

    /// The tokens that build this node at run time, through `p` (`turnwise::__private`).
    pub(crate) fn to_tokens(&self, p: &Private) -> TokenStream {
        let m = quote!(#p::manifest);
        match self {
            GNode::Seq(parts) => {
                let parts = parts.iter().map(|n| n.to_tokens(p));
                quote!(#m::Node::Seq(#p::vec![#(#parts),*]))
            }
            GNode::Alt { cond, arms } => {
                let arms = arms.iter().map(|n| n.to_tokens(p));
                quote!(#m::Node::Alt(#m::Alt {
                    cond: #p::String::from(#cond),
                    arms: #p::vec![#(#arms),*],
                }))
            }
            GNode::Loop(body) => {
                let body = body.to_tokens(p);
                quote!(#m::Node::Loop(#p::Box::new(#body)))
            }
            GNode::Parallel(members) => {
                let members = members.iter().map(|n| n.to_tokens(p));
                quote!(#m::Node::Parallel(#p::vec![#(#members),*]))
            }
            GNode::Patch { id, new, old, span } => {
                let (new, old) = (new.to_tokens(p), old.to_tokens(p));
                let at = location(*span);
                quote!(#m::Node::Patch(#m::Patch {
                    id: #p::String::from(#id),
                    new: #p::Box::new(#new),
                    old: #p::Box::new(#old),
                    at: #p::String::from(#at),
                }))
            }
            GNode::Call(c) => c.to_tokens(p),
        }
    }
}

impl GCall {
    fn to_tokens(&self, p: &Private) -> TokenStream {
        let m = quote!(#p::manifest);
        let kind = match self.kind {
            CallKind::Step => quote!(Step),
            CallKind::Sleep => quote!(Sleep),
            CallKind::Signal => quote!(Signal),
        };
        let (key, call, input) = (&self.key, self.call, &self.input);
        let at = location(self.span);
        let signal = match &self.signal {
            GSignal::None => TokenStream::new(),
            GSignal::Name(name) => quote!(.signal(#name)),
            GSignal::Type(path) => quote!(.signal(<#path as #p::Signal>::NAME)),
        };
        quote!(#m::Node::Call(
            #m::Call::new(#m::CallKind::#kind, #key, #at).call(#call).input(#input) #signal
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_strings_become_key_patterns() {
        assert_eq!(format_pattern("item-{i}"), "item-*");
        assert_eq!(format_pattern("{a}-{b}"), "*-*");
        assert_eq!(format_pattern("{a}{b}"), "*");
        assert_eq!(format_pattern("lit{{x}}-{i:>3}"), "lit{x}-*");
        let e: Expr = syn::parse_quote!(format!("row-{}", i));
        assert_eq!(key_pattern(&e), "row-*");
        let e: Expr = syn::parse_quote!(&format!("row-{i}").to_string());
        assert_eq!(key_pattern(&e), "row-*");
        let e: Expr = syn::parse_quote!(key);
        assert_eq!(key_pattern(&e), "*");
    }
}
