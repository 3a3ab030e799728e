//! The console's authentication: the API's token, proven once at the login form and then carried
//! by a session cookie derived from it, and a CSRF token on every state-changing form.
//!
//! - With a token configured ([`ServerOptions::api_token`]), every console page and action needs
//!   it: as the API's `Authorization: Bearer` header, or as the `HttpOnly`, `SameSite=Strict`
//!   session cookie the login form sets (`Secure` too when the request came over HTTPS, as a
//!   proxy's `X-Forwarded-Proto`/`Forwarded` says). A page asked for without it answers `401`
//!   with the login form; an action answers `401` and does nothing. Without a token the console
//!   is open, as the API is (the server refuses a non-loopback bind without a token).
//! - The session cookie is not the token: it is the SHA-256 of a fixed context string, a random
//!   secret drawn when the process starts and the token ([`session_value`]), compared in
//!   constant time. A leaked cookie does not give the API token, and stops working when the
//!   server restarts (the console then asks for a new login). **Log out** (a POST with the CSRF
//!   field) clears it.
//! - Every console answer carries a CSRF cookie (`SameSite=Strict`, random per browser), and
//!   every form that changes something carries the same value in a hidden field; an action whose
//!   field does not match its cookie is refused with `403` (a double-submit check: another site
//!   can neither read the cookie nor make the browser send it).

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, COOKIE, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::forms::FormData;
use super::Fail;
use crate::layers::constant_time_eq;
use crate::AppState;

/// The session cookie a login sets (a digest of the token, not the token).
pub const TOKEN_COOKIE: &str = "turnwise_console";
/// The CSRF cookie; forms repeat its value in the field [`CSRF_FIELD`].
pub const CSRF_COOKIE: &str = "turnwise_csrf";
/// The hidden form field of the CSRF token.
pub const CSRF_FIELD: &str = "csrf";

/// The CSRF token of the request being served (its cookie's, or a new one set on the answer).
#[derive(Clone, Debug)]
pub struct Csrf(pub String);

/// Whether a token is needed, and given.
#[derive(Clone, Copy, Debug)]
pub struct Login {
    /// A token is configured (the pages then offer to log out).
    pub required: bool,
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

/// Whether the request carries the configured token (always, when none is configured).
fn authorized(expected: Option<&str>, headers: &HeaderMap) -> bool {
    let Some(expected) = expected else {
        return true;
    };
    let bearer = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim());
    let by_header = bearer.is_some_and(|t| constant_time_eq(t.as_bytes(), expected.as_bytes()));
    let by_cookie = cookie(headers, TOKEN_COOKIE)
        .is_some_and(|t| constant_time_eq(t.as_bytes(), session_value(expected).as_bytes()));
    by_header || by_cookie
}

/// The domain-separation string of the session digest.
const SESSION_CONTEXT: &[u8] = b"turnwise console session v1\0";

/// The process's session secret: 32 random bytes drawn once (from the OS; should that fail,
/// from the process's random hasher keys).
fn session_secret() -> &'static [u8; 32] {
    static SECRET: OnceLock<[u8; 32]> = OnceLock::new();
    SECRET.get_or_init(|| {
        let mut secret = [0u8; 32];
        if getrandom::fill(&mut secret).is_err() {
            let fallback = format!("{}{}", new_id(), new_id());
            for (i, pair) in fallback.as_bytes().chunks(2).enumerate().take(32) {
                let hex = std::str::from_utf8(pair).unwrap_or("0");
                secret[i] = u8::from_str_radix(hex, 16).unwrap_or(0);
            }
        }
        secret
    })
}

/// The session cookie's value for `token`: hex SHA-256 of the context, the process's secret and
/// the token. Not the token, and not computable without the secret.
fn session_value(token: &str) -> String {
    let mut h = Sha256::new();
    h.update(SESSION_CONTEXT);
    h.update(session_secret());
    h.update(token.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether the request reached the server over HTTPS: its URI's scheme, or the proxy's
/// `X-Forwarded-Proto: https` or `Forwarded: proto=https` (the server itself speaks plain HTTP).
pub fn over_tls(headers: &HeaderMap, uri: &axum::http::Uri) -> bool {
    let forwarded_proto = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"));
    let forwarded = headers
        .get_all("forwarded")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split([';', ',']))
        .filter_map(|kv| kv.trim().split_once('='))
        .any(|(k, v)| {
            k.eq_ignore_ascii_case("proto") && v.trim_matches('"').eq_ignore_ascii_case("https")
        });
    uri.scheme_str() == Some("https") || forwarded_proto || forwarded
}

/// 128 unpredictable bits in hex: two hashes under the process's random hasher keys, over a
/// counter and the time.
pub(crate) fn new_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut out = String::with_capacity(32);
    for salt in [0x5a17u64, 0xc0ffee] {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(salt);
        h.write_u64(n);
        h.write_u128(now);
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

/// The paths served without the token: the login form and the stylesheet it uses.
fn open_path(path: &str) -> bool {
    path == super::LOGIN || path == super::CSS
}

/// The console's guard, before every console route: the token (or a `401`: the login form for
/// a page, a refusal for an action) and the CSRF cookie.
pub async fn guard(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let expected = state.options.api_token.as_deref();
    let existing = cookie(req.headers(), CSRF_COOKIE)
        .filter(|c| c.len() == 32 && c.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_owned);
    let csrf = existing.clone().unwrap_or_else(new_id);
    req.extensions_mut().insert(Csrf(csrf.clone()));
    req.extensions_mut().insert(Login {
        required: expected.is_some(),
    });
    let path = req.uri().path().to_owned();
    let mut res = if authorized(expected, req.headers()) || open_path(&path) {
        next.run(req).await
    } else if req.method() == Method::GET {
        let page = super::pages::login(&csrf, Some("This console needs the server's API token."));
        (
            StatusCode::UNAUTHORIZED,
            axum::response::Html(page.into_string()),
        )
            .into_response()
    } else {
        Fail::new(
            StatusCode::UNAUTHORIZED,
            "this action needs the server's API token: log in to the console first",
        )
        .into_response()
    };
    if existing.is_none() {
        let value = format!("{CSRF_COOKIE}={csrf}; Path=/console; HttpOnly; SameSite=Strict");
        if let Ok(v) = HeaderValue::from_str(&value) {
            res.headers_mut().append(SET_COOKIE, v);
        }
    }
    res.headers_mut()
        .insert("x-frame-options", HeaderValue::from_static("DENY"));
    res
}

/// Refuse (`403`) a form whose CSRF field does not match the request's CSRF cookie.
pub fn check_csrf(headers: &HeaderMap, form: &FormData) -> Result<(), Fail> {
    let given = form.get(CSRF_FIELD).unwrap_or("");
    let expected = cookie(headers, CSRF_COOKIE).unwrap_or("");
    if expected.is_empty() || !constant_time_eq(given.as_bytes(), expected.as_bytes()) {
        return Err(Fail::new(
            StatusCode::FORBIDDEN,
            "the form's CSRF token does not match this browser's: reload the page and submit \
             it again",
        ));
    }
    Ok(())
}

/// Check a login form's token: the session cookie to set when it is the server's (`Secure`
/// when the request came over HTTPS).
pub fn login_cookie(expected: Option<&str>, given: &str, secure: bool) -> Option<String> {
    let expected = expected?;
    constant_time_eq(given.trim().as_bytes(), expected.as_bytes()).then(|| {
        format!(
            "{TOKEN_COOKIE}={}; Path=/console; HttpOnly; SameSite=Strict{}",
            session_value(expected),
            if secure { "; Secure" } else { "" }
        )
    })
}

/// The cookie that logs out: the session cookie, emptied and expired.
pub fn logout_cookie(secure: bool) -> String {
    format!(
        "{TOKEN_COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0{}",
        if secure { "; Secure" } else { "" }
    )
}
