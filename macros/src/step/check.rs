//! The rules only a `#[step]` function's signature keeps, one function per rule (the rules it
//! shares with `#[workflow]` are in `crate::signature`). Each reports its own error at the
//! user's token and answers whether the item can still be expanded.

use syn::{PatType, Signature, Type};

use super::SHAPE;
use crate::ctxt::Ctxt;
use crate::signature::{self, is_turn, last_segment};

/// The function's name is the step's default key, so it keeps the key rules.
pub(super) fn name_is_a_key(cx: &Ctxt, sig: &Signature) {
    let key = sig.ident.to_string().trim_start_matches("r#").to_owned();
    if let Err(why) = turnwise_rules::check_identifier(&key) {
        cx.error_spanned_by(
            &sig.ident,
            format!("the step's name is its key, and {key:?} breaks the key rules: {why}"),
        );
    }
}

/// The most arguments a `#[step]` function takes besides its context: the arities the runtime's
/// `__private::StepCall` is implemented for (`runtime/src/sdk/private.rs`), through which a
/// workflow names a step function.
pub(super) const MAX_ARGUMENTS: usize = 12;

/// At most [`MAX_ARGUMENTS`] arguments besides the context (`args`: the arguments so far, the
/// context left out; `t`: the next one). Whether `t` may be one.
pub(super) fn argument_count(cx: &Ctxt, args: usize, t: &PatType) -> bool {
    if args < MAX_ARGUMENTS {
        return true;
    }
    cx.error_spanned_by(
        t,
        format!(
            "a `#[step]` function takes at most {MAX_ARGUMENTS} arguments besides its step context, and this is argument {}; pass them together in one struct",
            args + 1
        ),
    );
    false
}

/// Arguments are moved into the step: owned, concrete types; never the turn context.
pub(super) fn argument_type(cx: &Ctxt, ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => {
            let msg = if is_turn(ty) {
                format!("a step does not take the turn context: the generated function does (call it as `name(ctx, args..)`); take the step context instead, {SHAPE}")
            } else {
                reference_message(r)
            };
            cx.error_spanned_by(r, msg);
            false
        }
        Type::ImplTrait(_) => {
            cx.error_spanned_by(
                ty,
                "a `#[step]` function cannot be generic: name the argument's type",
            );
            false
        }
        _ => true,
    }
}

/// The return type is `Result<Output, Error>`: its output and error types.
pub(super) fn returns_result(cx: &Ctxt, sig: &Signature) -> Option<(Type, Option<Type>)> {
    let ty = signature::return_type(
        cx,
        sig,
        "a `#[step]` function returns `Result<Output, TurnError>`",
    )?;
    let found = last_segment(ty).cloned().and_then(|mut seg| {
        let (ok, error) = signature::result_args(&mut seg)?;
        Some((ok.clone(), error))
    });
    if found.is_none() {
        cx.error_spanned_by(
            ty,
            "the return type of a `#[step]` function is `Result<Output, TurnError>`",
        );
    }
    found
}

/// The fix for a step argument taken by reference, naming the owned type to take instead.
fn reference_message(r: &syn::TypeReference) -> String {
    let written = type_text(&Type::Reference(r.clone()));
    let owned = owned_type(&r.elem);
    if r.mutability.is_some() {
        format!(
            "step arguments are moved into the step, so a step cannot change its caller's value through `{written}`: take `{owned}` instead and return the changed value in the step's output"
        )
    } else {
        format!("step arguments are moved into the step: take an owned type, `{owned}` instead of `{written}`")
    }
}

/// The owned counterpart of a borrowed type: `String` for `str`, `PathBuf` for `Path` (and
/// `OsString`, `CString`), `Vec<T>` for `[T]`, `Box<dyn Tr>` for `dyn Tr`, `T` otherwise.
fn owned_type(elem: &Type) -> String {
    let known = |name: &str| match name {
        "str" => Some("String"),
        "Path" => Some("PathBuf"),
        "OsStr" => Some("OsString"),
        "CStr" => Some("CString"),
        _ => None,
    };
    match elem {
        Type::Slice(s) => format!("Vec<{}>", type_text(&s.elem)),
        Type::TraitObject(_) => format!("Box<{}>", type_text(elem)),
        Type::Path(p) if p.qself.is_none() => {
            let mut owned = p.clone();
            if let Some(last) = owned.path.segments.last_mut() {
                if let (Some(owned), true) =
                    (known(&last.ident.to_string()), last.arguments.is_none())
                {
                    last.ident = syn::Ident::new(owned, last.ident.span());
                }
            }
            type_text(&Type::Path(owned))
        }
        Type::Paren(p) => owned_type(&p.elem),
        other => type_text(other),
    }
}

/// A type as written, for messages: `Vec<u64>` rather than the token stream's `Vec < u64 >`.
fn type_text(ty: &Type) -> String {
    let mut text = quote::ToTokens::to_token_stream(ty).to_string();
    for (from, to) in [
        (" < ", "<"),
        ("< ", "<"),
        (" <", "<"),
        (" >", ">"),
        (" ::", "::"),
        (":: ", "::"),
        (" ,", ","),
        ("& ", "&"),
        ("[ ", "["),
        (" ]", "]"),
        ("( ", "("),
        (" )", ")"),
        (" ;", ";"),
    ] {
        text = text.replace(from, to);
    }
    text
}
