//! Workflow definitions: the [`Workflow`] trait, signals, results and errors.

use std::future::Future;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::codec::{CodecError, EqFn};
use crate::context::Turn;
use crate::protocol::{Millis, OnExhausted};

/// A value that can cross a codec: serializable, deserializable, sendable.
pub trait Data: Serialize + DeserializeOwned + Send + Sync + 'static {}
impl<T: Serialize + DeserializeOwned + Send + Sync + 'static> Data for T {}

/// Per-workflow options, applied when an instance is started.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkflowOptions {
    /// Attempts per turn before it fails for good. Default 3.
    pub max_attempts: u32,
    /// The lease length; workers heartbeat every third of it. Default 60 s.
    pub lease: Duration,
    /// What a turn out of attempts does. Default [`OnExhausted::Block`].
    pub on_exhausted: OnExhausted,
}

impl Default for WorkflowOptions {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            lease: Duration::from_secs(60),
            on_exhausted: OnExhausted::Block,
        }
    }
}

impl WorkflowOptions {
    /// Set `max_attempts`.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }
    /// Set the lease length.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }
    /// Set the exhaustion policy.
    pub fn on_exhausted(mut self, policy: OnExhausted) -> Self {
        self.on_exhausted = policy;
        self
    }
}

/// A workflow definition: a name and version that pin the code, typed state, message and
/// reply, and the handler that runs one turn.
///
/// `#[workflow]` generates this implementation from an `async fn`; writing it by hand is
/// supported too:
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use turnwise::prelude::*;
///
/// #[derive(Serialize, Deserialize, Default)]
/// struct Count { count: u64 }
///
/// struct Counter;
///
/// impl Workflow for Counter {
///     type State = Count;
///     type Message = u64;
///     type Reply = u64;
///     type Codec = turnwise::codec::JsonCodec;
///     const NAME: &'static str = "counter";
///     const VERSION: &'static str = "v1";
///
///     async fn run(&self, ctx: &mut Turn<Self>, state: Count, add: u64) -> TurnResult<Self> {
///         let add = ctx.step("add", |_s| async move { Ok(add) }).await?;
///         let total = state.count + add;
///         Ok(Done::new(Count { count: total }).reply(total))
///     }
/// }
/// # fn main() { let _ = (Counter, Count::default()); }
/// ```
pub trait Workflow: Send + Sync + Sized + 'static {
    /// The saved state, handed to every turn and replaced by its result.
    type State: Data;
    /// The message type of the inbox.
    type Message: Data;
    /// The reply a turn records.
    type Reply: Data;
    /// How this workflow's values become JSON: state, message, reply, continuation messages,
    /// step outputs and signal values all cross it, verified on every encode. `#[workflow]`
    /// uses [`JsonCodec`](crate::codec::JsonCodec) (canonical JSON) unless told
    /// `codec = Path`; a hand-written workflow names it.
    type Codec: crate::codec::Codec + Default;
    /// The definition's name (the wire's `workflow_type`).
    const NAME: &'static str;
    /// The code version instances are pinned to.
    const VERSION: &'static str;
    /// The names of the signals this workflow accepts.
    const SIGNALS: &'static [&'static str] = &[];

    /// The state of a new instance.
    fn initial_state(&self) -> Self::State
    where
        Self::State: Default,
    {
        Self::State::default()
    }

    /// Options applied to new instances.
    fn options(&self) -> WorkflowOptions {
        WorkflowOptions::default()
    }

    /// The JSON Schemas of this workflow's message, state, reply, signals and steps, if it has
    /// them: `#[workflow]` generates them; a hand-written workflow has none unless it says so.
    fn schema(&self) -> Option<crate::schema::WorkflowSchema> {
        None
    }

    /// Equality of states, used to verify that a state survives its codec (the decoded value
    /// must equal the original). `#[workflow]` fills it in when the state type is `PartialEq`;
    /// by hand: `Some(<Self::State as PartialEq>::eq)`. `None` checks the encoded bytes only.
    fn state_eq() -> Option<EqFn<Self::State>> {
        None
    }

    /// Equality of replies, for codec verification (see [`state_eq`](Self::state_eq)).
    fn reply_eq() -> Option<EqFn<Self::Reply>> {
        None
    }

    /// Equality of messages, for codec verification (see [`state_eq`](Self::state_eq)).
    fn message_eq() -> Option<EqFn<Self::Message>> {
        None
    }

    /// Run one turn: the handler, from the top, replaying saved steps.
    fn run(
        &self,
        ctx: &mut Turn<Self>,
        state: Self::State,
        message: Self::Message,
    ) -> impl Future<Output = TurnResult<Self>> + Send;
}

/// What a turn handler returns.
pub type TurnResult<W> = Result<
    Done<<W as Workflow>::State, <W as Workflow>::Reply, <W as Workflow>::Message>,
    TurnError,
>;

/// A signal type: a value delivered to one turn under a name.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use turnwise::Signal;
///
/// #[derive(Serialize, Deserialize)]
/// struct Approval { approved: bool }
///
/// impl Signal for Approval {
///     const NAME: &'static str = "approval";
/// }
/// # fn main() { let _ = Approval { approved: true }; }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a signal",
    label = "not a signal",
    note = "derive it: `#[derive(Serialize, Deserialize, JsonSchema, Signal)] #[signal(name = \"...\")]`"
)]
pub trait Signal: Data {
    /// The signal name on the wire (1–128 of `A-Z a-z 0-9 _ - .`).
    const NAME: &'static str;
}

/// Marks the signals a workflow accepts. Waiting for, or sending through a handle, a signal the
/// workflow does not accept does not compile.
#[diagnostic::on_unimplemented(
    message = "workflow `{Self}` does not accept signal `{S}`",
    note = "list the signal in the workflow's accepted signals, e.g. `#[workflow(signals({S}))]`, or implement `Accepts<{S}>`"
)]
pub trait Accepts<S: Signal>: Workflow {}

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
    /// When to run again, in Unix ms (at least one second ahead is used).
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
