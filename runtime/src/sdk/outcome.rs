//! What a turn ends with: [`Done`] on success, [`TurnError`] (with [`WorkflowError`] and
//! [`WorkflowWait`]) otherwise. Both the workflow definition and the turn context use these,
//! so they sit below both.

use crate::protocol::Millis;
use crate::sdk::codec::CodecError;

/// The end of a turn: the new state, an optional reply, and an optional continuation message.
#[derive(Clone, Debug, PartialEq)]
pub struct Done<S, R, M> {
    pub(crate) state: S,
    pub(crate) reply: Option<R>,
    pub(crate) next: Option<M>,
}

impl<S, R, M> Done<S, R, M> {
    /// The turn ends with this state and no reply.
    pub fn new(state: S) -> Self {
        Self {
            state,
            reply: None,
            next: None,
        }
    }

    /// Record a reply.
    pub fn reply(mut self, reply: R) -> Self {
        self.reply = Some(reply);
        self
    }

    /// Continue: append `message` at the tail of the inbox, atomically with this turn's state.
    pub fn continue_with(mut self, message: M) -> Self {
        self.next = Some(message);
        self
    }

    /// The new state.
    pub fn state(&self) -> &S {
        &self.state
    }
}

/// A permanent failure: the turn fails for good, whatever attempts remain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkflowError(pub String);

impl WorkflowError {
    /// A permanent failure with a message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl std::fmt::Display for WorkflowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Wait: end this attempt and run the turn again at `retry_at`, counting no attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkflowWait {
    /// When to run again, in Unix ms: at least one second and at most 366 days ahead is used.
    pub retry_at_ms: Millis,
    /// Why, recorded as the turn's error.
    pub reason: String,
}

impl WorkflowWait {
    /// Wait until `retry_at_ms`.
    pub fn until(retry_at_ms: Millis) -> Self {
        Self {
            retry_at_ms,
            reason: "the turn waits".into(),
        }
    }

    /// Say why.
    pub fn because(mut self, reason: impl Into<String>) -> Self {
        self.reason = reason.into();
        self
    }
}

/// Why a turn (or a step) did not finish. Ordinary errors convert with `?` and make the attempt
/// retry with backoff; [`WorkflowError`] fails the turn for good; [`WorkflowWait`] waits without
/// counting an attempt.
#[derive(Debug)]
#[non_exhaustive]
pub enum TurnError {
    /// Retry the attempt with backoff.
    Retry(Box<dyn std::error::Error + Send + Sync + 'static>),
    /// Fail the turn for good.
    Permanent(WorkflowError),
    /// Wait without counting an attempt.
    Wait(WorkflowWait),
}

impl TurnError {
    /// A retryable error from a message.
    pub fn retry(message: impl Into<String>) -> Self {
        TurnError::Retry(message.into().into())
    }

    /// A permanent error from a message.
    pub fn permanent(message: impl Into<String>) -> Self {
        TurnError::Permanent(WorkflowError::new(message))
    }

    /// The text sent as the fail body's `error`.
    pub fn wire_message(&self) -> String {
        match self {
            TurnError::Retry(e) => format!("Error: {e}"),
            TurnError::Permanent(e) => format!("WorkflowError: {e}"),
            TurnError::Wait(w) => format!("WorkflowWait: {}", w.reason),
        }
    }
}

impl std::fmt::Display for TurnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.wire_message())
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for TurnError {
    fn from(e: E) -> Self {
        TurnError::Retry(Box::new(e))
    }
}

impl From<WorkflowError> for TurnError {
    fn from(e: WorkflowError) -> Self {
        TurnError::Permanent(e)
    }
}

impl From<WorkflowWait> for TurnError {
    fn from(w: WorkflowWait) -> Self {
        TurnError::Wait(w)
    }
}

impl From<CodecError> for WorkflowError {
    fn from(e: CodecError) -> Self {
        WorkflowError(e.to_string())
    }
}
