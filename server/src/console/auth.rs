//! The console's authentication: the API's token, carried by a cookie after a login, and a
//! CSRF token on every state-changing form.
//!
//! - With a token configured ([`ServerOptions::api_token`]), every console page and action needs
//!   it: as the API's `Authorization: Bearer` header, or as the `HttpOnly`, `SameSite=Strict`
//!   cookie the login form sets. A page asked for without it answers `401` with the login form;
//!   an action answers `401` and does nothing. Without a token the console is open, as the API
//!   is (the server refuses a non-loopback bind without a token).
//! - Every console answer carries a CSRF cookie (`SameSite=Strict`, random per browser), and
//!   every form that changes something carries the same value in a hidden field; an action whose
//!   field does not match its cookie is refused with `403` (a double-submit check: another site
//!   can neither read the cookie nor make the browser send it).

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, COOKIE, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::forms::FormData;
use super::Fail;
use crate::AppState;

/// The cookie holding the token after a login.
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
    let by_header =
        bearer.is_some_and(|t| crate::constant_time_eq(t.as_bytes(), expected.as_bytes()));
    let by_cookie = cookie(headers, TOKEN_COOKIE)
        .is_some_and(|t| crate::constant_time_eq(t.as_bytes(), encoded(expected).as_bytes()));
    by_header || by_cookie
}

/// A token as a cookie value: percent-encoded, so that any token fits.
fn encoded(token: &str) -> String {
    form_urlencoded::byte_serialize(token.as_bytes()).collect()
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
    if expected.is_empty() || !crate::constant_time_eq(given.as_bytes(), expected.as_bytes()) {
        return Err(Fail::new(
            StatusCode::FORBIDDEN,
            "the form's CSRF token does not match this browser's: reload the page and submit \
             it again",
        ));
    }
    Ok(())
}

/// Check a login form's token: the cookie to set when it is the server's.
pub fn login_cookie(expected: Option<&str>, given: &str) -> Option<String> {
    let expected = expected?;
    crate::constant_time_eq(given.trim().as_bytes(), expected.as_bytes()).then(|| {
        format!(
            "{TOKEN_COOKIE}={}; Path=/console; HttpOnly; SameSite=Strict",
            encoded(given.trim())
        )
    })
}

/// The cookie that logs out.
pub fn logout_cookie() -> String {
    format!("{TOKEN_COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0")
}
