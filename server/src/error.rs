//! The error envelope every refusal answers with.
//!
//! A handler returns an [`ApiError`]. It becomes a response whose status is final but whose
//! body is written by the request middleware, which knows the request id:
//!
//! ```json
//! {"error":{"type":"invalid_request_error","code":"invalid_request","message":"…",
//!           "request_id":"req_…","doc_url":null,"param":"turn","retryable":false}}
//! ```

use std::borrow::Cow;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

/// A refusal, on its way to becoming the wire's error envelope. Boxed, so results stay small.
#[derive(Clone, Debug)]
pub struct ApiError(Box<Repr>);

/// The parts of an [`ApiError`].
#[derive(Clone, Debug)]
pub struct Repr {
    /// The HTTP status.
    pub status: StatusCode,
    /// The machine code (`error.code`), e.g. `turn_lease_lost`.
    pub code: Cow<'static, str>,
    /// What went wrong and what to do about it.
    pub message: String,
    /// The request field at fault, when there is one.
    pub param: Option<String>,
    /// Whether the same request may succeed later.
    pub retryable: bool,
    /// Seconds to wait before retrying (`Retry-After` and `error.retry_after_seconds`).
    pub retry_after: Option<u64>,
    /// Structured details, e.g. the schema validation errors.
    pub details: Option<Value>,
}

impl std::ops::Deref for ApiError {
    type Target = Repr;
    fn deref(&self) -> &Repr {
        &self.0
    }
}

impl ApiError {
    /// An error with the given status, code and message; not retryable.
    pub fn new(
        status: StatusCode,
        code: impl Into<Cow<'static, str>>,
        message: impl Into<String>,
    ) -> Self {
        Self(Box::new(Repr {
            status,
            code: code.into(),
            message: message.into(),
            param: None,
            retryable: false,
            retry_after: None,
            details: None,
        }))
    }

    /// A `400 invalid_request` about `param`.
    pub fn invalid(param: Option<String>, message: impl Into<String>) -> Self {
        let mut e = Self::new(StatusCode::BAD_REQUEST, "invalid_request", message);
        e.0.param = param;
        e
    }

    /// A `501 not_supported` for a route this server does not offer.
    pub fn not_supported(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_IMPLEMENTED,
            "not_supported",
            format!("{what} is not supported by this server"),
        )
    }

    /// Name the request field at fault.
    pub fn with_param(mut self, param: impl Into<String>) -> Self {
        self.0.param = Some(param.into());
        self
    }

    /// Attach structured details.
    pub fn with_details(mut self, details: Value) -> Self {
        self.0.details = Some(details);
        self
    }

    /// The envelope's `type`, from the status.
    pub fn kind(&self) -> &'static str {
        match self.status.as_u16() {
            409 => "conflict_error",
            429 => "rate_limit_error",
            s if s >= 500 => "api_error",
            _ => "invalid_request_error",
        }
    }

    /// The JSON envelope for a request with the given id.
    pub fn body(&self, request_id: &str) -> Value {
        let mut error = Map::new();
        error.insert("type".into(), json!(self.kind()));
        error.insert("code".into(), json!(self.code));
        error.insert("message".into(), json!(self.message));
        error.insert("request_id".into(), json!(request_id));
        error.insert("doc_url".into(), Value::Null);
        error.insert("param".into(), json!(self.param));
        error.insert("retryable".into(), json!(self.retryable));
        if let Some(secs) = self.retry_after {
            error.insert("retry_after_seconds".into(), json!(secs));
        }
        if let Some(details) = &self.details {
            error.insert("details".into(), details.clone());
        }
        json!({ "error": error })
    }
}

impl From<turnwise::Error> for ApiError {
    /// The envelope of an engine error: its status, code, message and `param`, and its
    /// fields as `details`, from which a client rebuilds the same variant
    /// ([`turnwise::Error::from_wire`]) without reading the message.
    fn from(e: turnwise::Error) -> Self {
        let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Self(Box::new(Repr {
            status,
            code: Cow::Owned(e.code().to_owned()),
            message: e.to_string(),
            param: e.param().map(str::to_owned),
            retryable: e.is_retryable(),
            retry_after: (status == StatusCode::SERVICE_UNAVAILABLE).then_some(1),
            details: e.wire_details(),
        }))
    }
}

impl IntoResponse for ApiError {
    /// The status and headers are final here; the request middleware writes the body, since
    /// only it knows the request id.
    fn into_response(self) -> Response {
        let mut res = self.status.into_response();
        if let Some(secs) = self.retry_after {
            res.headers_mut()
                .insert("retry-after", HeaderValue::from(secs));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            res.headers_mut()
                .insert("www-authenticate", HeaderValue::from_static("Bearer"));
        }
        res.extensions_mut().insert(self);
        res
    }
}

/// A handler's result.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_are_retryable_503s_with_retry_after() {
        let e = ApiError::from(turnwise::Error::store("disk full"));
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(e.code, "store_unavailable");
        assert_eq!(e.kind(), "api_error");
        let body = e.body("req_1");
        assert_eq!(body["error"]["retryable"], true);
        assert_eq!(body["error"]["retry_after_seconds"], 1);
        let res = e.into_response();
        assert_eq!(res.headers()["retry-after"], "1");
    }

    #[test]
    fn engine_errors_keep_their_status_code_and_param() {
        let e = ApiError::from(turnwise::Error::LeaseLost {
            workflow_id: "c-1".into(),
            turn: 1,
            reason: "the lease expired".into(),
        });
        assert_eq!(e.status, StatusCode::CONFLICT);
        assert_eq!(e.kind(), "conflict_error");
        let body = e.body("req_2");
        assert_eq!(body["error"]["code"], "turn_lease_lost");
        assert_eq!(body["error"]["retryable"], false);
        // The variant's fields travel as details, for the client to rebuild it unparsed.
        assert_eq!(
            body["error"]["details"],
            json!({"workflow_id": "c-1", "turn": 1, "reason": "the lease expired"})
        );
        assert_eq!(body["error"]["doc_url"], Value::Null);
        assert!(body["error"].get("retry_after_seconds").is_none());

        let e = ApiError::from(turnwise::Error::Invalid {
            param: "key".into(),
            message: "bad".into(),
        });
        assert_eq!(e.body("r")["error"]["param"], "key");
        assert_eq!(e.kind(), "invalid_request_error");
        let e = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "slow_down", "later");
        assert_eq!(e.kind(), "rate_limit_error");
    }
}
