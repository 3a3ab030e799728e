//! Workflow definitions: the [`Workflow`] trait, signals, and what a turn returns.

use std::future::Future;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::protocol::OnExhausted;
use crate::sdk::codec::EqFn;
use crate::sdk::context::Turn;

pub use crate::sdk::outcome::{Done, TurnError, WorkflowError, WorkflowWait};

/// What a step may return: its output is saved as the step's checkpoint and decoded on every
/// replay, so it must serialize and deserialize.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a step's output: it must implement `Serialize` and `Deserialize`",
    label = "saved as the step's checkpoint and decoded on replay",
    note = "derive them: `#[derive(serde::Serialize, serde::Deserialize)]`"
)]
pub trait StepOutput: Serialize + DeserializeOwned {}
impl<T: Serialize + DeserializeOwned> StepOutput for T {}

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

/// What a turn does when its replay finds that the code no longer makes the durable calls the
/// turn saved (a *replay mismatch*: another key, kind, sleep length or signal name at a
/// position, saved steps left over when the handler returns, or a saved key met at another
/// position). `#[workflow(on_mismatch = "fail")]` chooses [`OnMismatch::Fail`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OnMismatch {
    /// Suspend the turn (the default): nothing runs past the divergence, no attempt is
    /// counted, the inbox keeps its messages, and an operator restarts the turn, forks the
    /// instance or cancels the turn. The turn records a
    /// [`MismatchReport`](crate::protocol::MismatchReport) naming the version, the saved
    /// prefix, what the code called instead and where.
    #[default]
    Suspend,
    /// Fail the turn for good, as an error of the handler does: it blocks the inbox until an
    /// operator retries or skips it (or moves to history with `on_exhausted = skip`).
    Fail,
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
    /// uses [`JsonCodec`](crate::sdk::codec::JsonCodec) (canonical JSON) unless told
    /// `codec = Path`; a hand-written workflow names it.
    type Codec: crate::sdk::codec::Codec + Default;
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

    /// What a replay mismatch does to a turn of this workflow: suspend it (the default) or
    /// fail it for good. `#[workflow(on_mismatch = "fail")]` overrides it.
    fn on_mismatch(&self) -> OnMismatch {
        OnMismatch::Suspend
    }

    /// The JSON Schemas of this workflow's message, state, reply, signals and steps, if it has
    /// them: `#[workflow]` generates them; a hand-written workflow has none unless it says so.
    /// Once registered, a signal whose name the schema does not declare is refused, so a schema
    /// lists every signal the workflow accepts
    /// ([`WorkflowSchema::signal`](crate::schema::WorkflowSchema::signal)).
    fn schema(&self) -> Option<crate::sdk::schema::WorkflowSchema> {
        None
    }

    /// The replay manifest of this version: the grammar of its durable calls and its schemas
    /// (see `docs/versions.md`). `#[workflow]` generates it; a hand-written workflow has none,
    /// and the compatibility check skips it.
    fn manifest(&self) -> Option<crate::manifest::Manifest> {
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

/// A signal that workflow `W` accepts: the bound a [`Handle`](crate::Handle) puts on the signal
/// it sends. It holds for every `S` where `W: Accepts<S>`; implement [`Accepts`], not this.
///
/// The bound is on the signal rather than on the workflow so that the signal's type is known
/// when a wrong one is reported: `handle.signal(1, Cancel, "id")` names `Cancel`, also for a
/// workflow that accepts no signal at all.
pub trait AcceptedBy<W>: Signal {}

impl<S: Signal, W: Accepts<S>> AcceptedBy<W> for S {}
