//! The protocol's typed error.
//!
//! Every refusal of the protocol is an [`Error`]: a variant says what went wrong, and
//! [`Error::status`] / [`Error::code`] give the HTTP status and machine code the wire uses
//! (`docs/protocol.md` §11 lists them). Messages name the offending thing and what to do about
//! it.
//!
//! An error crosses HTTP by its code, never by its message: a server answers with
//! [`Error::status`], [`Error::code`], [`Error::param`] and [`Error::wire_details`] (the
//! variant's fields), and the `Http` backend rebuilds the very same variant from them with
//! [`Error::from_wire`]. So code that branches on variants ([`Error::is_lease_lost`],
//! [`Error::is_refusal`]) behaves the same over the embedded engine and over a server.
//!
//! Adding a variant: give it a distinct code in [`Error::code`], a status in [`Error::status`],
//! its fields in [`Error::wire_details`], its case in [`Error::from_wire`], and a row in the
//! table test below and in `docs/protocol.md` §11.

use std::fmt;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::protocol::SchemaViolation;

/// The underlying error of a store or transport failure (an I/O error, a SQLite error, an
/// HTTP client error), kept so that [`std::error::Error::source`] of the error holding it
/// returns the underlying error itself, to inspect or downcast.
///
/// The message of the error that holds it already includes this error's text (so that the
/// message a server sends, or a log line, says everything); a report that prints the whole
/// chain shows that text twice. Two sources are equal when their texts are: [`Error`] compares
/// by meaning.
#[derive(Clone)]
pub struct Source(Arc<dyn std::error::Error + Send + Sync + 'static>);

impl Source {
    /// Keep `error` as a source.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Source(Arc::new(error))
    }
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// The underlying error, to inspect or downcast (`source.downcast_ref::<std::io::Error>()`).
// `Deref` (and no `Error` impl of its own) also makes the holder's `source()` the underlying
// error itself rather than this wrapper.
impl std::ops::Deref for Source {
    type Target = dyn std::error::Error + Send + Sync + 'static;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl PartialEq for Source {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl Eq for Source {}

/// A refusal or failure of a protocol call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request was malformed: a field is missing, of the wrong type or outside its rules.
    /// Nothing was written.
    #[error("invalid `{param}`: {message}")]
    Invalid {
        /// The offending field.
        param: String,
        /// What is wrong and what is expected.
        message: String,
    },
    /// A value is larger than its limit. Nothing was written.
    #[error("`{what}` is {size} bytes, over its limit of {limit} bytes")]
    TooLarge {
        /// The value that is too large.
        what: String,
        /// Its size in bytes (compact UTF-8 JSON).
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A count limit was reached (pending messages, signals per turn, steps per turn).
    /// Nothing was written. `limit` is one of [`Error::LIMITS`]: `pending_messages` (409
    /// `inbox_full`), `schedules` (409 `schedule_limit`), `signals` (409 `signal_limit`) or
    /// `steps` (422 `step_limit`).
    #[error("{message}")]
    LimitReached {
        /// Which limit, e.g. `pending_messages`.
        limit: &'static str,
        /// What was refused and why.
        message: String,
    },
    /// The instance or turn does not exist (or a turn was pruned from history).
    #[error("{what} was not found")]
    NotFound {
        /// What was looked up, e.g. ``instance `counter-1` ``.
        what: String,
    },
    /// The token no longer holds the turn: another claim holds it, the lease expired, the
    /// turn finished or was cancelled, or the turn or its instance no longer exists (pruned or
    /// deleted). The attempt is over; nothing was written. The only error on which a worker
    /// stops an attempt without a word.
    #[error("turn {turn} of `{workflow_id}` is not held by this token: {reason}")]
    LeaseLost {
        /// The instance.
        workflow_id: String,
        /// The turn.
        turn: u64,
        /// Why, e.g. "the lease expired".
        reason: String,
    },
    /// The request conflicts with what is stored (a reused id with other content, a step
    /// at a taken position, a definition that differs). Nothing was written.
    #[error("{message}")]
    Conflict {
        /// What conflicted.
        message: String,
    },
    /// An operator's way out of a suspension (restart, fork) named a turn that is not
    /// suspended by a replay mismatch (`409 turn_not_suspended`). Nothing was written.
    #[error("{message}")]
    NotSuspended {
        /// The instance.
        workflow_id: String,
        /// The turn asked about (for a fork, the inbox head; `None` when the inbox is empty).
        turn: Option<u64>,
        /// The state it is in instead: the turn's status, or the instance's when it has no
        /// unfinished turn.
        status: String,
        /// What was refused, the state found and what to do.
        message: String,
    },
    /// A message or signal value does not match the JSON Schema registered for its workflow
    /// type and version (`400 schema_validation_failed`). Nothing was written.
    #[error("{message}")]
    SchemaValidation {
        /// The field at fault with the JSON Pointer of the first failing part, e.g.
        /// `message/add`.
        param: String,
        /// What does not match, naming every failing path.
        message: String,
        /// The failures, at most 10.
        errors: Vec<SchemaViolation>,
    },
    /// A reserved workflow type or instance id.
    #[error("{message}")]
    Reserved {
        /// `reserved_workflow_type` or `reserved_workflow_id`.
        code: &'static str,
        /// What was reserved.
        message: String,
    },
    /// The store failed; the request may be retried.
    #[error("store error: {message}")]
    Store {
        /// What failed (including the underlying error's text).
        message: String,
        /// The underlying error, when there is one (never across HTTP).
        #[source]
        source: Option<Source>,
    },
    /// A stored record of the instance cannot be decoded: the instance is quarantined (every
    /// other instance is served). Retrying does not help; an operator deletes the instance or
    /// restores its record.
    #[error("{message}")]
    Unreadable {
        /// Which instance, why, and what to do.
        message: String,
    },
    /// The backend could not be reached or answered something unreadable.
    #[error("transport error: {message}")]
    Transport {
        /// What failed (including the underlying error's text).
        message: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<Source>,
    },
    /// An HTTP server refused the call with an error this crate has no variant for (a status
    /// or machine code other than the protocol's own, e.g. `500 internal_error` or a `429`
    /// from a proxy). [`Error::status`] and [`Error::code`] answer what the server said.
    #[error("HTTP {status} `{code}`: {message}")]
    Http {
        /// The HTTP status.
        status: u16,
        /// The machine code (`error.code`), or `unstructured_error` when the body had none.
        code: String,
        /// The server's message.
        message: String,
    },
}

/// The count limits of [`Error::LimitReached`]: `(limit, code, status)`.
const LIMITS: [(&str, &str, u16); 4] = [
    ("pending_messages", "inbox_full", 409),
    ("schedules", "schedule_limit", 409),
    ("signals", "signal_limit", 409),
    // Not a 409: an LBB worker takes any 409 on a worker route for a lost turn and goes
    // quiet; a 422 makes it fail the attempt with the message (wire.md §3.11).
    ("steps", "step_limit", 422),
];

/// The code of an [`Error::LimitReached`] whose `limit` is none of [`Error::LIMITS`] (only
/// code outside this crate builds one). The `Http` backend maps it to [`Error::Http`].
const OTHER_LIMIT: &str = "limit_reached";

impl Error {
    /// The names of the count limits [`Error::LimitReached`] reports, with their codes and
    /// statuses: `(limit, code, status)`.
    pub const LIMITS: &'static [(&'static str, &'static str, u16)] = &LIMITS;

    /// An [`Error::Store`] with this message and no underlying error.
    pub fn store(message: impl Into<String>) -> Self {
        Error::Store {
            message: message.into(),
            source: None,
        }
    }

    /// An [`Error::Store`] caused by `source`: the message says what failed and ends with the
    /// source's text; the source stays reachable through [`std::error::Error::source`].
    pub fn store_caused(
        what: impl fmt::Display,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Store {
            message: format!("{what}: {source}"),
            source: Some(Source::new(source)),
        }
    }

    /// An [`Error::Transport`] with this message and no underlying error.
    pub fn transport(message: impl Into<String>) -> Self {
        Error::Transport {
            message: message.into(),
            source: None,
        }
    }

    /// An [`Error::Transport`] caused by `source` (see [`Error::store_caused`]).
    pub fn transport_caused(
        what: impl fmt::Display,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Transport {
            message: format!("{what}: {source}"),
            source: Some(Source::new(source)),
        }
    }

    /// The HTTP status of this error on the wire.
    pub fn status(&self) -> u16 {
        match self {
            Error::Invalid { .. } | Error::SchemaValidation { .. } => 400,
            Error::TooLarge { .. } => 413,
            Error::LimitReached { limit, .. } => LIMITS
                .iter()
                .find(|(name, ..)| name == limit)
                .map_or(409, |(.., status)| *status),
            Error::NotFound { .. } => 404,
            Error::LeaseLost { .. } | Error::Conflict { .. } | Error::NotSuspended { .. } => 409,
            Error::Reserved { .. } => 403,
            Error::Store { .. } | Error::Transport { .. } => 503,
            Error::Unreadable { .. } => 500,
            Error::Http { status, .. } => *status,
        }
    }

    /// The machine code of this error on the wire (`error.code`).
    pub fn code(&self) -> &str {
        match self {
            Error::Invalid { .. } => "invalid_request",
            Error::SchemaValidation { .. } => "schema_validation_failed",
            Error::TooLarge { .. } => "payload_too_large",
            Error::LimitReached { limit, .. } => LIMITS
                .iter()
                .find(|(name, ..)| name == limit)
                .map_or(OTHER_LIMIT, |(_, code, _)| code),
            Error::NotFound { .. } => "not_found",
            Error::LeaseLost { .. } => "turn_lease_lost",
            Error::Conflict { .. } => "conflict",
            Error::NotSuspended { .. } => "turn_not_suspended",
            Error::Reserved { code, .. } => code,
            Error::Store { .. } => "store_unavailable",
            Error::Unreadable { .. } => "record_unreadable",
            Error::Transport { .. } => "transport_error",
            Error::Http { code, .. } => code,
        }
    }

    /// Whether retrying the same request later may succeed: a store or transport failure, or
    /// an HTTP `429` or `5xx` answer.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Store { .. } | Error::Transport { .. } => true,
            Error::Http { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }

    /// Whether this is the answer "the attempt is over" to a worker's call: the token no
    /// longer holds the turn ([`Error::LeaseLost`], code `turn_lease_lost`). A worker stops
    /// the attempt and sends nothing more for it. No other error, whatever its status, means
    /// that.
    pub fn is_lease_lost(&self) -> bool {
        matches!(self, Error::LeaseLost { .. })
    }

    /// Whether the protocol refused the request for what it is, so that sending it again can
    /// never succeed: a malformed or too large value, a count limit, a conflict with what is
    /// stored, a reserved name, or an unreadable record. A worker fails the attempt for good
    /// on one of these, with the message recorded on the turn. Not a refusal: a lost lease, a
    /// missing instance or turn, a store or transport failure, and an [`Error::Http`] the
    /// protocol does not know.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Error::Invalid { .. }
                | Error::SchemaValidation { .. }
                | Error::TooLarge { .. }
                | Error::LimitReached { .. }
                | Error::Conflict { .. }
                | Error::NotSuspended { .. }
                | Error::Reserved { .. }
                | Error::Unreadable { .. }
        )
    }

    /// The request field at fault, for the envelope's `error.param`: the field of an
    /// [`Error::Invalid`], the value of an [`Error::TooLarge`].
    pub fn param(&self) -> Option<&str> {
        match self {
            Error::Invalid { param, .. } | Error::SchemaValidation { param, .. } => Some(param),
            Error::TooLarge { what, .. } => Some(what),
            _ => None,
        }
    }

    /// The variant's fields as the envelope's `error.details`, so that a client rebuilds
    /// exactly this error with [`Error::from_wire`] without reading the message. `None` for
    /// [`Error::Transport`] and [`Error::Http`], which no server sends as themselves.
    pub fn wire_details(&self) -> Option<Value> {
        Some(match self {
            Error::Invalid { param, message } => json!({"param": param, "message": message}),
            Error::SchemaValidation { errors, .. } => json!({ "errors": errors }),
            Error::TooLarge { what, size, limit } => {
                json!({"what": what, "size": size, "limit": limit})
            }
            Error::LimitReached { limit, message } => json!({"limit": limit, "message": message}),
            Error::NotFound { what } => json!({"what": what}),
            Error::LeaseLost {
                workflow_id,
                turn,
                reason,
            } => json!({"workflow_id": workflow_id, "turn": turn, "reason": reason}),
            Error::NotSuspended {
                workflow_id,
                turn,
                status,
                message,
            } => json!({"workflow_id": workflow_id, "turn": turn, "status": status,
                        "message": message}),
            Error::Conflict { message }
            | Error::Reserved { message, .. }
            | Error::Unreadable { message } => json!({"message": message}),
            Error::Store { message, .. } => json!({"message": message}),
            Error::Transport { .. } | Error::Http { .. } => return None,
        })
    }

    /// The error a server's refusal stands for, from the envelope's `status`, `error.code`,
    /// `error.message`, `error.param` and `error.details`: the protocol's variant for its
    /// code, its fields from `details` as [`Error::wire_details`] writes them.
    ///
    /// The variant is chosen by the code alone, never by the message. A server that sends no
    /// `details` still gets the variant, with the message (or `param`) standing in for the
    /// fields (and sizes of 0 for a [`Error::TooLarge`]). `lease` fills the instance and turn
    /// of an [`Error::LeaseLost`] without details. An unknown code, or a known code with a
    /// status other than the protocol's (say `conflict` with 503), is [`Error::Http`] with
    /// what the server said, so [`Error::status`] and [`Error::code`] always repeat it.
    pub fn from_wire(
        status: u16,
        code: &str,
        message: &str,
        param: Option<&str>,
        details: &Value,
        lease: Option<(&str, u64)>,
    ) -> Error {
        let text = |key: &str| details.get(key).and_then(Value::as_str).map(str::to_owned);
        let number = |key: &str| details.get(key).and_then(Value::as_u64);
        let message_field = || text("message").unwrap_or_else(|| message.to_owned());
        let known = match code {
            "invalid_request" => Some(Error::Invalid {
                param: text("param")
                    .or_else(|| param.map(str::to_owned))
                    .unwrap_or_default(),
                message: message_field(),
            }),
            "schema_validation_failed" => Some(Error::SchemaValidation {
                param: param.unwrap_or_default().to_owned(),
                message: message.to_owned(),
                errors: details
                    .get("errors")
                    .and_then(|e| serde_json::from_value(e.clone()).ok())
                    .unwrap_or_default(),
            }),
            "payload_too_large" => {
                let size = |key: &str| number(key).and_then(|n| usize::try_from(n).ok());
                Some(Error::TooLarge {
                    what: text("what")
                        .or_else(|| param.map(str::to_owned))
                        .unwrap_or_default(),
                    size: size("size").unwrap_or(0),
                    limit: size("limit").unwrap_or(0),
                })
            }
            "not_found" => Some(Error::NotFound {
                what: text("what").unwrap_or_else(|| message.to_owned()),
            }),
            "turn_lease_lost" => Some(Error::LeaseLost {
                workflow_id: text("workflow_id")
                    .or_else(|| lease.map(|l| l.0.to_owned()))
                    .unwrap_or_default(),
                turn: number("turn").or(lease.map(|l| l.1)).unwrap_or(0),
                reason: text("reason").unwrap_or_else(|| message.to_owned()),
            }),
            "conflict" => Some(Error::Conflict {
                message: message_field(),
            }),
            "turn_not_suspended" => Some(Error::NotSuspended {
                workflow_id: text("workflow_id").unwrap_or_default(),
                turn: number("turn"),
                status: text("status").unwrap_or_default(),
                message: message_field(),
            }),
            "reserved_workflow_type" => Some(Error::Reserved {
                code: "reserved_workflow_type",
                message: message_field(),
            }),
            "reserved_workflow_id" => Some(Error::Reserved {
                code: "reserved_workflow_id",
                message: message_field(),
            }),
            "store_unavailable" => Some(Error::store(message_field())),
            "record_unreadable" => Some(Error::Unreadable {
                message: message_field(),
            }),
            _ => LIMITS
                .iter()
                .find(|(_, c, _)| *c == code)
                .map(|&(limit, ..)| Error::LimitReached {
                    limit,
                    message: message_field(),
                }),
        };
        match known {
            Some(e) if e.status() == status => e,
            _ => Error::Http {
                status,
                code: code.to_owned(),
                message: message.to_owned(),
            },
        }
    }

    /// [`Error::Invalid`]: the input `param` is refused because of `message`.
    pub fn invalid(param: impl Into<String>, message: impl fmt::Display) -> Self {
        Error::Invalid {
            param: param.into(),
            message: message.to_string(),
        }
    }

    /// [`Error::Conflict`] with `message`.
    pub fn conflict(message: impl fmt::Display) -> Self {
        Error::Conflict {
            message: message.to_string(),
        }
    }

    /// [`Error::NotFound`]: `what` does not exist.
    pub fn not_found(what: impl fmt::Display) -> Self {
        Error::NotFound {
            what: what.to_string(),
        }
    }
}

/// A protocol result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_underlying_error_stays_the_source() {
        let disk = std::io::Error::other("disk full");
        let e = Error::store_caused("sqlite: commit", disk);
        assert_eq!(e.to_string(), "store error: sqlite: commit: disk full");
        let source = std::error::Error::source(&e).expect("a source");
        let io = source
            .downcast_ref::<std::io::Error>()
            .expect("the io::Error itself");
        assert_eq!(io.kind(), std::io::ErrorKind::Other);
        // Through the store's error too.
        let from_store: Error =
            crate::store::StoreError::caused("sqlite: write", std::io::Error::other("gone")).into();
        assert!(
            std::error::Error::source(&from_store).is_some(),
            "{from_store:?}"
        );
        // An error rebuilt from the wire has no source and still equals the same message.
        assert_eq!(Error::store("disk full"), Error::store("disk full"));
    }

    /// One error of every variant the protocol sends, each limit and reserved code included.
    fn every_protocol_error() -> Vec<Error> {
        let mut all = vec![
            Error::invalid("workflows[0].version", "must be 1-128 of A-Z a-z 0-9 _ - ."),
            Error::TooLarge {
                what: "output".into(),
                size: 70_000,
                limit: 65_536,
            },
            Error::not_found("turn 3 of `w-1`"),
            Error::LeaseLost {
                workflow_id: "w-1".into(),
                turn: 3,
                reason: "the lease expired".into(),
            },
            Error::conflict("position 4 is not the next step"),
            Error::NotSuspended {
                workflow_id: "w-1".into(),
                turn: Some(3),
                status: "queued".into(),
                message: "turn 3 of `w-1` is queued, not suspended".into(),
            },
            Error::store("disk full"),
            Error::Unreadable {
                message: "instance `w-1` is quarantined".into(),
            },
        ];
        for (limit, ..) in LIMITS {
            all.push(Error::LimitReached {
                limit,
                message: format!("the {limit} limit"),
            });
        }
        for code in ["reserved_workflow_type", "reserved_workflow_id"] {
            all.push(Error::Reserved {
                code,
                message: format!("{code}: choose another"),
            });
        }
        all
    }

    #[test]
    fn every_protocol_error_crosses_the_wire_as_itself() {
        let mut codes = std::collections::HashSet::new();
        for e in every_protocol_error() {
            assert!(
                codes.insert(e.code().to_owned()),
                "{e:?}: a code used twice"
            );
            let details = e.wire_details().expect("a protocol error has details");
            let back = Error::from_wire(
                e.status(),
                e.code(),
                &e.to_string(),
                e.param(),
                &details,
                None,
            );
            assert_eq!(back, e, "{} {}", e.status(), e.code());
        }
    }

    #[test]
    fn without_details_the_code_still_picks_the_variant() {
        for e in every_protocol_error() {
            let back = Error::from_wire(
                e.status(),
                e.code(),
                "what the server said",
                e.param(),
                &Value::Null,
                Some(("w-1", 3)),
            );
            assert_eq!(
                std::mem::discriminant(&back),
                std::mem::discriminant(&e),
                "{} {}: {back:?}",
                e.status(),
                e.code()
            );
            assert_eq!(back.code(), e.code());
        }
        let lost = Error::from_wire(
            409,
            "turn_lease_lost",
            "gone",
            None,
            &Value::Null,
            Some(("w-1", 3)),
        );
        assert_eq!(
            lost,
            Error::LeaseLost {
                workflow_id: "w-1".into(),
                turn: 3,
                reason: "gone".into()
            }
        );
    }

    #[test]
    fn unknown_codes_and_unexpected_statuses_stay_http() {
        for (status, code) in [
            (409, "mystery"),
            (404, "route_not_found"),
            (503, "conflict"),
            (409, "step_limit"),
            (404, "turn_lease_lost"),
            (409, OTHER_LIMIT),
        ] {
            let e = Error::from_wire(status, code, "said", None, &Value::Null, None);
            assert_eq!(
                e,
                Error::Http {
                    status,
                    code: code.into(),
                    message: "said".into()
                }
            );
            assert!(!e.is_lease_lost() && !e.is_refusal(), "{e:?}");
        }
    }

    #[test]
    fn only_a_lost_lease_is_lease_lost() {
        for e in every_protocol_error() {
            assert_eq!(e.is_lease_lost(), e.code() == "turn_lease_lost", "{e:?}");
            let refusal = !matches!(
                e,
                Error::NotFound { .. } | Error::LeaseLost { .. } | Error::Store { .. }
            );
            assert_eq!(e.is_refusal(), refusal, "{e:?}");
        }
    }

    #[test]
    fn the_step_limit_is_not_a_409() {
        let e = Error::LimitReached {
            limit: "steps",
            message: "a turn holds at most 2 steps".into(),
        };
        assert_eq!((e.status(), e.code()), (422, "step_limit"));
        let other = Error::LimitReached {
            limit: "widgets",
            message: "too many widgets".into(),
        };
        assert_eq!((other.status(), other.code()), (409, OTHER_LIMIT));
    }
}
