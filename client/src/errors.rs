//! Turning an error answer into an [`Error`]: its envelope read into the variant the embedded
//! engine returns. (A failed exchange becomes [`Error::Transport`] in
//! [`transport`](super::transport).)

use std::time::Duration;

use serde_json::Value;

use turnwise_core::protocol::error::Error;
use turnwise_core::protocol::Lease;

/// The error envelope of a non-2xx answer, read in the wire's order of preference.
#[derive(Debug, Default)]
pub(super) struct WireError {
    code: String,
    message: String,
    param: Option<String>,
    pub(super) retryable: Option<bool>,
    pub(super) retry_after: Option<Duration>,
    details: Value,
}

impl WireError {
    pub(super) fn parse(status: u16, body: &[u8]) -> WireError {
        let text = || {
            let raw = String::from_utf8_lossy(body).trim().to_owned();
            if raw.is_empty() {
                format!("the server answered HTTP {status} without a body")
            } else {
                raw
            }
        };
        let unstructured = || WireError {
            code: "unstructured_error".into(),
            message: text(),
            ..WireError::default()
        };
        let Ok(Value::Object(mut root)) = turnwise_core::protocol::json::from_slice::<Value>(body)
        else {
            return unstructured();
        };
        let string = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        match root.remove("error") {
            // The data-plane envelope: {"error": {"code", "message", ...}}.
            Some(Value::Object(e)) => WireError {
                code: string(e.get("code")).unwrap_or_else(|| "unstructured_error".into()),
                message: string(e.get("message")).unwrap_or_else(text),
                param: string(e.get("param")),
                retryable: e.get("retryable").and_then(Value::as_bool),
                retry_after: e
                    .get("retry_after_seconds")
                    .and_then(Value::as_f64)
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(|s| Duration::from_secs_f64(s.min(1e9))),
                details: e.get("details").cloned().unwrap_or(Value::Null),
            },
            // The integrations style: {"ok": false, "error": "<text>", "code": "..."}.
            Some(Value::String(message)) => WireError {
                code: string(root.get("code")).unwrap_or_else(|| "unstructured_error".into()),
                message,
                details: root.remove("details").unwrap_or(Value::Null),
                ..WireError::default()
            },
            _ => unstructured(),
        }
    }

    /// The [`Error`] the embedded engine would have returned: chosen by the code (and a
    /// status that agrees with it), its fields from `details`; see [`Error::from_wire`].
    pub(super) fn into_error(self, status: u16, lease: Option<&Lease>) -> Error {
        Error::from_wire(
            status,
            &self.code,
            &self.message,
            self.param.as_deref(),
            &self.details,
            lease.map(|l| (l.workflow_id.as_str(), l.turn)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies() {
        let lease = Lease {
            workflow_id: "w".into(),
            turn: 3,
            token: "t".into(),
        };
        // With details (as a turnwise server sends them), the fields come from there.
        let body = br#"{"error":{"type":"conflict_error","code":"turn_lease_lost","message":"turn 3 of `w` is not held by this token: the lease expired","request_id":null,"doc_url":null,"details":{"workflow_id":"w","turn":3,"reason":"the lease expired"}}}"#;
        let e = WireError::parse(409, body).into_error(409, None);
        assert_eq!(
            e,
            Error::LeaseLost {
                workflow_id: "w".into(),
                turn: 3,
                reason: "the lease expired".into()
            }
        );
        // Without, the code still picks the variant; the message is not parsed.
        let body = br#"{"error":{"code":"turn_lease_lost","message":"gone"}}"#;
        let e = WireError::parse(409, body).into_error(409, Some(&lease));
        assert_eq!(
            e,
            Error::LeaseLost {
                workflow_id: "w".into(),
                turn: 3,
                reason: "gone".into()
            }
        );

        let body = br#"{"error":{"code":"payload_too_large","message":"`state` is 70000 bytes, over its limit of 65536 bytes","param":"state","details":{"what":"state","size":70000,"limit":65536}}}"#;
        let e = WireError::parse(413, body).into_error(413, None);
        assert_eq!(
            e,
            Error::TooLarge {
                what: "state".into(),
                size: 70000,
                limit: 65536
            }
        );

        let body = br#"{"error":{"code":"invalid_request","message":"invalid `id`: too long","param":"id","details":{"param":"id","message":"too long"}}}"#;
        let e = WireError::parse(400, body).into_error(400, None);
        assert_eq!(
            e,
            Error::Invalid {
                param: "id".into(),
                message: "too long".into()
            }
        );

        // A known code with another status keeps what the server said.
        let body = br#"{"error":{"code":"conflict","message":"busy"}}"#;
        let e = WireError::parse(503, body).into_error(503, None);
        assert_eq!((e.status(), e.code()), (503, "conflict"));
        assert!(e.is_retryable());

        let e = WireError::parse(502, b"Bad Gateway").into_error(502, None);
        assert_eq!((e.status(), e.code()), (502, "unstructured_error"));

        let body = br#"{"ok":false,"error":"nope","code":"weird"}"#;
        let e = WireError::parse(400, body).into_error(400, None);
        assert_eq!(
            e,
            Error::Http {
                status: 400,
                code: "weird".into(),
                message: "nope".into()
            }
        );
    }
}
