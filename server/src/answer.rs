//! The JSON answer of a route.

use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Most answers (a turn, an instance) are a few hundred bytes to a few KiB: starting here
/// writes them without growing the buffer several times, as a 128-byte start would.
const INITIAL_CAPACITY: usize = 1024;

/// A JSON answer, written exactly as `axum::Json` writes it (the same bytes and
/// `content-type: application/json`; `500` with the error as text if serializing fails), into
/// a buffer sized for the protocol's answers.
pub struct Json<T>(pub T);

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        let mut buf = Vec::with_capacity(INITIAL_CAPACITY);
        match serde_json::to_writer(&mut buf, &self.0) {
            Ok(()) => (
                [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
                buf,
            )
                .into_response(),
            Err(err) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                [(
                    CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; charset=utf-8"),
                )],
                err.to_string(),
            )
                .into_response(),
        }
    }
}
