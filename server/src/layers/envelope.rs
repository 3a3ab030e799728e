//! Error answers in the wire's envelope (`{"error": {…, "request_id"}}`), whether a handler,
//! a layer or the framework itself refused the request. The console's answers are its own
//! HTML pages and pass unchanged.

use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::is_console;
use super::request_id::RequestId;
use crate::ApiError;

/// The error a response was rewritten from, left in its extensions for the access log.
#[derive(Clone)]
pub(super) struct Enveloped(pub(super) ApiError);

/// Rewrite an error answer (outside the console) in the envelope.
pub(super) async fn wrap_errors(req: Request, next: Next) -> Response {
    // A clone of the URI shares its bytes with the request: no copy of the path.
    let uri = req.uri().clone();
    let path = uri.path();
    let id = RequestId::of(&req).to_owned();
    let mut res = next.run(req).await;
    let status = res.status();
    if !(status.is_client_error() || status.is_server_error()) || is_console(path) {
        return res;
    }
    let error = match res.extensions_mut().remove::<ApiError>() {
        Some(e) => e,
        // A refusal from the framework itself (e.g. a method not allowed on a route).
        None => ApiError::new(status, generic_code(status), generic_message(status, path)),
    };
    let mut headers = std::mem::take(res.headers_mut());
    headers.remove(header::CONTENT_LENGTH);
    let mut json = axum::Json(error.body(&id)).into_response();
    *json.status_mut() = status;
    for (k, v) in headers.iter() {
        if k != header::CONTENT_TYPE {
            json.headers_mut().insert(k.clone(), v.clone());
        }
    }
    if matches!(status.as_u16(), 408 | 413) {
        // The body was not read to its end: the connection cannot carry another request.
        json.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    json.extensions_mut().insert(Enveloped(error));
    json
}

fn generic_code(status: StatusCode) -> &'static str {
    match status.as_u16() {
        404 => "not_found",
        405 => "method_not_allowed",
        408 => "request_timeout",
        413 => "payload_too_large",
        414 => "uri_too_long",
        431 => "request_header_fields_too_large",
        415 => "unsupported_media_type",
        s if s >= 500 => "internal_error",
        _ => "invalid_request",
    }
}

fn generic_message(status: StatusCode, path: &str) -> String {
    match status.as_u16() {
        404 => format!("there is no route {path}; see docs/http.md for the routes"),
        405 => format!("{path} does not take this method; see docs/http.md for the routes"),
        413 => "the request body is larger than this server accepts".to_owned(),
        _ => format!(
            "{} on {path}",
            status.canonical_reason().unwrap_or("request refused")
        ),
    }
}
