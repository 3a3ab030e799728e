//! The protocol's typed error.
//!
//! Every refusal of the protocol is an [`Error`]: a variant says what went wrong, and
//! [`Error::status`] / [`Error::code`] give the HTTP status and machine code the wire uses
//! (`docs/protocol.md` lists them). Messages name the offending thing and what to do about it.

use std::fmt;

/// Which request field an [`Error::Invalid`] is about, and why.
pub type Param = &'static str;

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
    /// Nothing was written.
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
    /// turn finished or was cancelled. The attempt is over; nothing was written.
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
    /// A reserved workflow type or instance id.
    #[error("{message}")]
    Reserved {
        /// `reserved_workflow_type` or `reserved_workflow_id`.
        code: &'static str,
        /// What was reserved.
        message: String,
    },
    /// The store failed; the request may be retried.
    #[error("store error: {0}")]
    Store(String),
    /// A stored record of the instance cannot be decoded: the instance is quarantined (every
    /// other instance is served). Retrying does not help; an operator deletes the instance or
    /// restores its record.
    #[error("{message}")]
    Unreadable {
        /// Which instance, why, and what to do.
        message: String,
    },
    /// The backend could not be reached or answered something unreadable.
    #[error("transport error: {0}")]
    Transport(String),
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

impl Error {
    /// The HTTP status of this error on the wire.
    pub fn status(&self) -> u16 {
        match self {
            Error::Invalid { .. } => 400,
            Error::TooLarge { .. } => 413,
            Error::LimitReached { .. } => 409,
            Error::NotFound { .. } => 404,
            Error::LeaseLost { .. } | Error::Conflict { .. } => 409,
            Error::Reserved { .. } => 403,
            Error::Store(_) | Error::Transport(_) => 503,
            Error::Unreadable { .. } => 500,
            Error::Http { status, .. } => *status,
        }
    }

    /// The machine code of this error on the wire (`error.code`).
    pub fn code(&self) -> &str {
        match self {
            Error::Invalid { .. } => "invalid_request",
            Error::TooLarge { .. } => "payload_too_large",
            Error::LimitReached { limit, .. } => match *limit {
                "pending_messages" => "inbox_full",
                "signals" => "signal_limit",
                _ => "limit_reached",
            },
            Error::NotFound { .. } => "not_found",
            Error::LeaseLost { .. } => "turn_lease_lost",
            Error::Conflict { .. } => "conflict",
            Error::Reserved { code, .. } => code,
            Error::Store(_) => "store_unavailable",
            Error::Unreadable { .. } => "record_unreadable",
            Error::Transport(_) => "transport_error",
            Error::Http { code, .. } => code,
        }
    }

    /// Whether retrying the same request later may succeed: a store or transport failure, or
    /// an HTTP `429` or `5xx` answer.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Store(_) | Error::Transport(_) => true,
            Error::Http { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }

    pub(crate) fn invalid(param: impl Into<String>, message: impl fmt::Display) -> Self {
        Error::Invalid {
            param: param.into(),
            message: message.to_string(),
        }
    }

    pub(crate) fn conflict(message: impl fmt::Display) -> Self {
        Error::Conflict {
            message: message.to_string(),
        }
    }

    pub(crate) fn not_found(what: impl fmt::Display) -> Self {
        Error::NotFound {
            what: what.to_string(),
        }
    }
}

/// A protocol result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
