//! The bearer token: every route but the probes and the console (which checks the token
//! itself, from a cookie or the header) refuses a request without the configured token.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{is_console, is_probe};
use crate::{ApiError, ServerOptions};

/// Refuse the request without the configured bearer token, or with more than one
/// `Authorization` header.
pub(super) async fn refuse_unauthenticated(
    State(options): State<Arc<ServerOptions>>,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    if is_probe(path) || is_console(path) {
        return next.run(req).await;
    }
    match authenticate(&options, &req) {
        Some(refused) => refused.into_response(),
        None => next.run(req).await,
    }
}

/// The refusal of a request without the configured bearer token, if it is one.
fn authenticate(options: &ServerOptions, req: &Request) -> Option<ApiError> {
    let mut given = req.headers().get_all(header::AUTHORIZATION).iter();
    if given.next().is_some() && given.next().is_some() {
        // Which one would count is ambiguous, whether or not a token is configured.
        return Some(
            ApiError::invalid(
                None,
                "the request has more than one Authorization header; send exactly one",
            )
            .with_param("authorization"),
        );
    }
    let expected = options.api_token.as_deref()?;
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    let token = given.and_then(|v| {
        let (scheme, rest) = v.split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
    });
    match token {
        Some(t) if constant_time_eq(t.as_bytes(), expected.as_bytes()) => None,
        Some(_) => Some(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "the bearer token is not valid for this server",
        )),
        None => Some(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this server requires `Authorization: Bearer <token>` (the token it was started with)",
        )),
    }
}

/// Compare without leaking where the first difference is (only whether the lengths differ).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    bool::from(a.ct_eq(b))
}
