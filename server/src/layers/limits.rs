//! The size limits checked before a body is read: the request target, the headers, and the
//! body's declared length.
//!
//! `tower_http::limit::RequestBodyLimitLayer` does not do this job: it answers its own `413`
//! body (without the sizes this refusal names) and checks neither the target nor the headers.
//! A body without a declared length is held to the limit as it is read, by axum's
//! `DefaultBodyLimit`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::{ApiError, ServerOptions, MAX_HEADER_BYTES, MAX_URI_BYTES};

/// Refuse the request whose target, headers or declared body is over its limit.
pub(super) async fn refuse_too_large(
    State(options): State<Arc<ServerOptions>>,
    req: Request,
    next: Next,
) -> Response {
    match too_large(&options, &req) {
        Some(refused) => refused.into_response(),
        None => next.run(req).await,
    }
}

/// The refusal of a request whose target or declared body is over its limit, before any of
/// the body is read.
fn too_large(options: &ServerOptions, req: &Request) -> Option<ApiError> {
    let target = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if target > MAX_URI_BYTES {
        return Some(ApiError::new(
            StatusCode::URI_TOO_LONG,
            "uri_too_long",
            format!(
                "the request target is {target} bytes; this server accepts at most \
                 {MAX_URI_BYTES}"
            ),
        ));
    }
    let headers: usize = req
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len())
        .sum();
    if headers > MAX_HEADER_BYTES {
        return Some(ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "request_header_fields_too_large",
            format!(
                "the request headers are {headers} bytes; this server accepts at most \
                 {MAX_HEADER_BYTES}"
            ),
        ));
    }
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()?;
    (declared > options.body_limit as u64).then(|| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!(
                "the request body is {declared} bytes (content-length), larger than the {} \
                 this server accepts; keep large data elsewhere and send a reference",
                options.body_limit
            ),
        )
    })
}
