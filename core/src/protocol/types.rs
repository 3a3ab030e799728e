//! The message-workflow protocol as Rust types.
//!
//! Every request and response of the protocol (see `docs/protocol.md`) is a plain struct here.
//! They serialize to exactly the wire shapes of the Little Big Brain message-workflow API:
//! required fields are always present (nullable ones as `null`), optional fields are left out
//! when unset, and enum values are the wire's lowercase words. The embedded engine, the HTTP
//! server and the HTTP client all use these same types, so the shapes cannot drift apart.
//!
//! Request types follow the wire's rules on input: an absent optional key means `null`, unknown
//! keys are ignored, and a required key must be present even when its value is `null` (a
//! request without `state`, `message`, `value`, `details` or `checkpoint` is refused, while
//! `"state": null` is kept). Typed fields (`usage`, `results`) must have their documented shape.
//! JSON values supplied by users (`state`, `message`, step `output`, signal `value`, …) are kept
//! as [`serde_json::Value`]. With the `exact-numbers` feature (serde_json's
//! `arbitrary_precision`, which the server turns on) numbers keep their exact spelling on the
//! way through; without it they are held as serde_json holds them by default (see "Numbers"
//! in `docs/protocol.md`).
//!
//! # Ready to grow
//!
//! Request and answer types are plain structs with public fields, as the wire shapes them, and
//! the engine (another crate) builds every answer with a struct literal, so the compiler holds
//! it to every field. On the wire, growth is safe: a field this version does not know is
//! ignored when an answer is read, and the enums only servers send ([`TurnStatus`],
//! [`InstanceStatus`], [`WaitReason`]) read a value this version does not know as `Unknown`, so
//! an older client keeps reading a newer server. In Rust, a field added to one of these types
//! is a breaking change of the crate, released as one (as with generated protocol types).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

macro_rules! wire_enum {
    // An enum only servers send: a value this version does not know reads as `Unknown`, so an
    // older client keeps reading a newer server's answers.
    ($(#[$meta:meta])* $name:ident (unknown) { $($(#[$vmeta:meta])* $variant:ident = $wire:literal),+ $(,)? }) => {
        wire_enum!(@define $(#[$meta])* $name { $($(#[$vmeta])* $variant = $wire,)+ } {
            /// A value this version of turnwise does not know, from a newer server. It is
            /// never sent, and a store never holds it.
            #[serde(other)]
            Unknown = "unknown",
        });
    };
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $wire:literal),+ $(,)? }) => {
        wire_enum!(@define $(#[$meta])* $name { $($(#[$vmeta])* $variant = $wire,)+ } {});
    };
    (@define $(#[$meta:meta])* $name:ident
        { $($(#[$vmeta:meta])* $variant:ident = $wire:literal,)+ }
        { $($(#[$xmeta:meta])* $xvariant:ident = $xwire:literal,)* }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $wire)] $variant,)+
            $($(#[$xmeta])* #[serde(rename = $xwire)] $xvariant,)*
        }

        impl $name {
            /// The value as it appears on the wire.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $wire,)+ $(Self::$xvariant => $xwire,)* }
            }

            /// Every wire value, for error messages that name the valid alternatives.
            pub const ALL: &'static [&'static str] = &[$($wire),+];
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

wire_enum! {
    /// Where a turn is in its life.
    TurnStatus (unknown) {
        /// Admitted and waiting for its place at the inbox head or for a worker.
        Queued = "queued",
        /// Held by a worker under a lease.
        Running = "running",
        /// Parked without a lease until a time or a signal: a sleep, a signal wait or a
        /// `retry_at_ms` wait. (A turn backing off after a failed attempt is `queued` with a
        /// future `ready_at_ms`.)
        Waiting = "waiting",
        /// Finished; state and reply are saved.
        Completed = "completed",
        /// Failed for good (blocks the inbox until retry or skip), or skipped into history.
        Failed = "failed",
        /// Cancelled by an operator; state was left unchanged.
        Cancelled = "cancelled",
        /// Stopped by a replay mismatch: the code no longer makes the durable calls the turn
        /// saved ([`WorkflowTurn::mismatch`] says where). Nothing runs and no attempt is
        /// counted until an operator resumes it on a version that accepts the saved steps,
        /// restarts it or cancels it; the inbox keeps its messages in order.
        Suspended = "suspended",
    }
}

impl TurnStatus {
    /// Whether the turn has an outcome a caller waits for: `completed`, `failed` (for good)
    /// or `cancelled`. A failed turn may still be retried by an operator.
    pub fn is_outcome(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }

    /// Whether nothing more happens to the turn unless an operator acts: it has an outcome
    /// ([`is_outcome`](Self::is_outcome)) or it is suspended by a replay mismatch. A caller
    /// waiting for the turn stops waiting on either; only an outcome is delivered to a parent
    /// workflow.
    pub fn is_settled(self) -> bool {
        self.is_outcome() || self == Self::Suspended
    }
}

wire_enum! {
    /// The summary status of an instance.
    InstanceStatus (unknown) {
        /// Nothing pending.
        Idle = "idle",
        /// The head turn is ready for a worker.
        Queued = "queued",
        /// The head turn is held by a worker.
        Running = "running",
        /// The head turn is parked (sleep, signal, retry wait or backoff).
        Waiting = "waiting",
        /// The head turn failed for good and blocks the inbox.
        Failed = "failed",
        /// An operator paused the instance: no new claims.
        Paused = "paused",
        /// The head turn is suspended by a replay mismatch and blocks the inbox.
        Suspended = "suspended",
    }
}

wire_enum! {
    /// The kind of a saved step.
    CheckpointKind {
        /// An ordinary step with an output.
        Step = "step",
        /// A durable sleep.
        Sleep = "sleep",
        /// A signal wait.
        Signal = "signal",
    }
}

wire_enum! {
    /// Metadata on an operation (a running step): what kind of work it does.
    OperationKind {
        /// Ordinary work.
        Step = "step",
        /// A model call.
        Model = "model",
        /// A tool call.
        Tool = "tool",
    }
}

wire_enum! {
    /// What happens when a turn runs out of attempts.
    OnExhausted {
        /// The failed turn blocks the inbox until an operator retries or skips it.
        Block = "block",
        /// The failed turn moves to history and the next message runs.
        Skip = "skip",
    }
}

wire_enum! {
    /// Why a turn waits without counting an attempt.
    WaitReason (unknown) {
        /// The worker asked to be retried at a time (`retry_at_ms`).
        Retry = "retry",
        /// The server deferred the turn for capacity.
        Capacity = "capacity",
    }
}

wire_enum! {
    /// An operator action on an instance.
    ControlAction {
        /// Stop handing out claims; messages are still admitted.
        Pause = "pause",
        /// Hand out claims again; a turn in backoff becomes ready at once.
        Resume = "resume",
        /// Run a turn that failed for good again.
        Retry = "retry",
        /// Move a turn that failed for good to history and go on.
        Skip = "skip",
        /// Cancel one unfinished turn, leaving state unchanged.
        CancelTurn = "cancel_turn",
        /// Make a turn that waits without an attempt ready now.
        Wake = "wake",
    }
}

/// `Serialize` and a `Deserialize` that takes only a JSON object for each named struct, which
/// derives both with `#[serde(remote = "Self")]`. A derived `Deserialize` also takes an array
/// of the fields in order (`[1, 2]` for `{"calls": 1, "errors": 2}`), which the wire never
/// means.
macro_rules! object_only {
    ($($ty:ident),+ $(,)?) => {$(
        impl Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                $ty::serialize(self, s)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct Object;
                impl<'de> serde::de::Visitor<'de> for Object {
                    type Value = $ty;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a JSON object")
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(
                        self,
                        map: A,
                    ) -> Result<$ty, A::Error> {
                        $ty::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    }
                }
                d.deserialize_map(Object)
            }
        }
    )+};
}

object_only!(
    WorkflowRef,
    Continuation,
    RunUsage,
    RunResultsReport,
    RunResultCounts,
    RunInput,
);

fn is_null(v: &Value) -> bool {
    v.is_null()
}

/// Where a message came from. Only `kind` is required; the rest is free metadata.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageOrigin {
    /// `app`, `console`, `manual`, `schedule`, … or `continuation` (server-made).
    pub kind: String,
    /// Every other origin field (`actor`, `turn`, `message_id`, `note`, …), kept as sent.
    #[serde(flatten)]
    pub fields: serde_json::Map<String, Value>,
}

impl MessageOrigin {
    /// An origin of the given kind with no other fields.
    pub fn new(kind: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            fields: serde_json::Map::new(),
        }
    }
}

/// `POST /v1/workflows/instances`: create an instance (idempotent for an identical repeat).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CreateInstanceRequest {
    /// The instance id: 1–128 of `A-Z a-z 0-9 _ - .`.
    pub id: String,
    /// The workflow definition's name.
    pub workflow_type: String,
    /// The definition's version, pinned for this instance.
    pub version: String,
    /// The initial state; absent means `null`.
    #[serde(default, skip_serializing_if = "is_null")]
    pub state: Value,
    /// Lease length in ms: 100 ..= 86 400 000 (default 60 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
    /// Attempts before a turn fails for good (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// What to do with a turn out of attempts (absent means block).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_exhausted: Option<OnExhausted>,
}

/// `POST /v1/workflows/instances/message`: admit a message to an instance's inbox.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MessageRequest {
    /// The instance.
    pub workflow_id: String,
    /// The caller's message id, the idempotency key (`continue-` is reserved).
    pub id: String,
    /// The message; required, `null` allowed.
    pub message: Value,
    /// Where it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<MessageOrigin>,
}

/// `POST /v1/workflows/instances/control`: an operator action.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlRequest {
    /// The instance.
    pub workflow_id: String,
    /// What to do.
    pub action: ControlAction,
    /// The turn, for `retry`, `skip` and `cancel_turn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u64>,
    /// Who asks (a turnwise extension): recorded on the instance's event when the action
    /// ends a suspension (`cancel_turn` of a suspended turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// `POST /v1/workflows/instances/delete`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteRequest {
    /// The instance to delete with its inbox and history.
    pub workflow_id: String,
}

/// The answer to a delete.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteResponse {
    /// `false` when there was no such instance (also for a repeat).
    pub deleted: bool,
}

/// `GET /v1/workflows/instances?after=&limit=`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListInstancesQuery {
    /// Exclusive instance-id cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// 1–100, default 50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// A page of instances.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InstanceList {
    /// The instances, by id.
    pub instances: Vec<WorkflowInstance>,
    /// The cursor for the next page, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<String>,
}

/// `GET /v1/workflows/instances/inbox?id=&after=&limit=&payloads=`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxQuery {
    /// The instance.
    pub id: String,
    /// Exclusive turn-number cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    /// 1–100, default 50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Include each entry's message.
    #[serde(default)]
    pub payloads: bool,
}

/// One unfinished turn in an inbox listing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InboxMessage {
    /// The turn number.
    pub turn: u64,
    /// The message id it was admitted under.
    pub message_id: String,
    /// `queued`, `waiting`, `running` or `failed`.
    pub status: TurnStatus,
    /// When it was admitted.
    pub received_at_ms: Millis,
    /// When it may next run.
    pub ready_at_ms: Millis,
    /// Attempts so far.
    pub attempt: u32,
    /// The serialized size of the message in bytes.
    pub message_bytes: u64,
    /// The message, with `payloads=true` only. A message that is JSON `null` reads as
    /// `Some(Value::Null)`: only a missing field is `None`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_value"
    )]
    pub message: Option<Value>,
    /// Where it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<MessageOrigin>,
    /// The last failed attempt's error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Progress of the running turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// A wait that counts no attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<TurnWait>,
}

/// An instance's inbox.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InboxResponse {
    /// The instance.
    pub workflow_id: String,
    /// Its workflow type.
    pub workflow_type: String,
    /// Its pinned version.
    pub version: String,
    /// Its status.
    pub status: InstanceStatus,
    /// Every unfinished turn, on this page or not.
    pub pending_messages: u64,
    /// Oldest first.
    pub messages: Vec<InboxMessage>,
    /// The cursor for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<u64>,
    /// Admission time of the oldest pending message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_received_at_ms: Option<Millis>,
    /// Admission time of the newest pending message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest_received_at_ms: Option<Millis>,
}

/// `GET /v1/workflows/inbox?workflow_type=&version=&after=&limit=`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeInboxQuery {
    /// The workflow type.
    pub workflow_type: String,
    /// Only this version; all versions when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Exclusive instance-id cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// 1–100, default 50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// One instance in a type inbox listing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypeInboxEntry {
    /// The instance.
    pub workflow_id: String,
    /// Its version.
    pub version: String,
    /// Its status.
    pub status: InstanceStatus,
    /// Its unfinished turns.
    pub pending_messages: u64,
    /// Its inbox head, without payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<InboxMessage>,
    /// Admission time of its oldest pending message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_received_at_ms: Option<Millis>,
}

/// The instances of one workflow type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypeInboxResponse {
    /// The workflow type.
    pub workflow_type: String,
    /// The version filter, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Instances of this type.
    pub identities: u64,
    /// Of those, instances with pending messages.
    pub with_messages: u64,
    /// This page.
    pub instances: Vec<TypeInboxEntry>,
    /// The cursor for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<String>,
}

/// `GET /v1/workflows/instances/history?id=&after=&limit=`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryQuery {
    /// The instance.
    pub id: String,
    /// Exclusive turn-number cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    /// 1–50, default 50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// Finished turns, oldest kept first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HistoryResponse {
    /// Completed, cancelled and skipped turns.
    pub turns: Vec<WorkflowTurn>,
    /// The cursor for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<u64>,
}

/// `GET /v1/workflows/instances/turn?id=&turn=`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnQuery {
    /// The instance.
    pub id: String,
    /// The turn number.
    pub turn: u64,
}

/// A (workflow type, version) pair a worker can run.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct WorkflowRef {
    /// The definition name.
    pub workflow_type: String,
    /// The definition version.
    pub version: String,
}

impl WorkflowRef {
    /// A pair from its parts.
    pub fn new(workflow_type: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            workflow_type: workflow_type.into(),
            version: version.into(),
        }
    }
}

/// `POST /v1/workflows/turns/claim`: ask for one ready inbox head, long-polling.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimRequest {
    /// The worker's id, recorded on the turn.
    pub worker: String,
    /// Every (type, version) the worker runs.
    pub workflows: Vec<WorkflowRef>,
    /// How long to hold an idle claim, in ms: any, capped at the engine's `max_claim_wait`
    /// (10 000 by default).
    #[serde(default)]
    pub wait_ms: u64,
    /// Execution credentials are not supported; a claim asking for one is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_execution_credential: Option<bool>,
}

/// A claimed turn: everything a worker needs to run one attempt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnTask {
    /// The definition name (the version is `turn.version`).
    pub workflow_type: String,
    /// The instance state before this turn.
    pub state: Value,
    /// The lease token every write of this attempt carries.
    pub token: String,
    /// The lease length; heartbeat every third of it.
    pub lease_ms: u64,
    /// Stable across attempts of this turn; step effect ids are `<effect_prefix>/<key>`.
    pub effect_prefix: String,
    /// The turn, with its saved steps.
    pub turn: WorkflowTurn,
    /// A turnwise extension: the most durable calls (steps, sleeps, signal waits) the turn
    /// may hold, the engine's `Limits::steps_per_turn`. A worker refuses a call past it itself
    /// (the server would answer `422 step_limit`). Absent from servers that do not send it;
    /// then the wire's 64 ([`MAX_STEPS`](crate::protocol::validate::MAX_STEPS)) applies. LBB
    /// clients ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps_max: Option<u64>,
    /// The most inputs a results report of this run may list: the server keeps run results
    /// (in the run's summary, [`WorkflowRun::results`]). Absent: the server keeps none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results_max: Option<u64>,
}

/// The answer to a claim: a task, or `null` when nothing was ready in time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClaimResponse {
    /// The claimed turn, if any.
    pub task: Option<TurnTask>,
}

/// The lease triple every worker turn route carries.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Lease {
    /// The instance.
    pub workflow_id: String,
    /// The turn number.
    pub turn: u64,
    /// The lease token from the claim.
    pub token: String,
}

/// `POST /v1/workflows/turns/operation`: start (or resume) a step attempt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OperationRequest {
    /// The lease.
    #[serde(flatten)]
    pub lease: Lease,
    /// The step's index in the turn.
    pub position: u32,
    /// The step key.
    pub key: String,
    /// What kind of work it is (the LBB client sends `step` unless told otherwise).
    pub kind: OperationKind,
    /// Per-attempt deadline (100 ms – 24 h; the LBB client sends 300 000 unless told
    /// otherwise).
    pub timeout_ms: u64,
    /// No progress for this long ends the attempt (100 ms – `timeout_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_timeout_ms: Option<u64>,
}

/// `POST /v1/workflows/turns/progress`: report progress and a resume cursor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgressRequest {
    /// The lease.
    #[serde(flatten)]
    pub lease: Lease,
    /// The key of the active operation.
    pub key: String,
    /// 1, 2, 3… per operation.
    pub sequence: u64,
    /// The progress-convention object or free JSON (≤ 8 KiB); required, `null` allowed.
    pub details: Value,
    /// The resume cursor, `null` until there is one (≤ 32 KiB); required.
    pub checkpoint: Value,
}

/// `POST /v1/workflows/turns/checkpoint`: save a step or a sleep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointRequest {
    /// The lease.
    #[serde(flatten)]
    pub lease: Lease,
    /// The index the step takes (must equal the number of saved steps).
    pub position: u32,
    /// The step key.
    pub key: String,
    /// `step` or `sleep`.
    pub kind: CheckpointKind,
    /// The step output; absent means `null`, always absent for sleeps.
    #[serde(default, skip_serializing_if = "is_null")]
    pub output: Value,
    /// The sleep length, 0 ..= 365 days; sleeps only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
}

/// `POST /v1/workflows/turns/wait-signal`: consume a buffered signal or suspend.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitSignalRequest {
    /// The lease.
    #[serde(flatten)]
    pub lease: Lease,
    /// The index the wait takes.
    pub position: u32,
    /// The wait's step key.
    pub key: String,
    /// The signal name.
    pub name: String,
    /// How long to wait (1 ms – 365 days).
    pub timeout_ms: u64,
}

/// `POST /v1/workflows/turns/signal`: deliver a signal to one turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SignalRequest {
    /// The instance.
    pub workflow_id: String,
    /// The turn it targets.
    pub turn: u64,
    /// The event id; one id is delivered once.
    pub id: String,
    /// The signal name.
    pub name: String,
    /// The value (≤ 32 KiB); required, `null` allowed.
    pub value: Value,
}

/// A continuation: the next message, appended at the inbox tail.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct Continuation {
    /// The next message; required, `null` allowed.
    pub message: Value,
}

/// `POST /v1/workflows/turns/complete`: commit state, reply and continuation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompleteRequest {
    /// The lease.
    #[serde(flatten)]
    pub lease: Lease,
    /// The new state; required, and `null` is kept.
    pub state: Value,
    /// The reply; absent means `null`.
    #[serde(default, skip_serializing_if = "is_null")]
    pub result: Value,
    /// The next message, if the workflow continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation: Option<Continuation>,
    /// Usage of activity calls, kept on the turn's run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<RunUsage>,
    /// The run's results report: checked ([`RunResultsReport`]) and kept in the run's summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<RunResultsReport>,
}

/// `POST /v1/workflows/turns/fail`: end an attempt with an error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailRequest {
    /// The lease.
    #[serde(flatten)]
    pub lease: Lease,
    /// What went wrong (≤ 1000 characters are kept).
    pub error: String,
    /// Fail for good now.
    #[serde(default)]
    pub non_retryable: bool,
    /// Wait until then without counting an attempt: a time in Unix ms from 0 to
    /// 253 402 300 799 999 (1970 to 9999; `turnwise_rules::durations::TIME`), moved into
    /// now + 1 s ..= now + 366 days.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at_ms: Option<Millis>,
    /// Usage of activity calls, kept on the turn's run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<RunUsage>,
    /// The run's results report: checked ([`RunResultsReport`]) and kept in the run's summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<RunResultsReport>,
    /// The attempt stopped at a replay mismatch: suspend the turn with this report instead of
    /// failing it (a turnwise extension; `non_retryable` and `retry_at_ms` are ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatch: Option<MismatchReport>,
}

/// Where a turn's replay diverged from its saved steps: what suspends it. It holds keys, kinds
/// and places, never a payload value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MismatchReport {
    /// The version whose code diverged.
    pub version: String,
    /// The position of the first saved step the code did not make again.
    pub position: u32,
    /// The saved steps, in order (key, kind and, for signal waits, the signal's name).
    pub saved: Vec<crate::manifest::grammar::Saved>,
    /// What the code called at `position` instead; `None` when the handler returned before
    /// making every saved call again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found: Option<crate::manifest::grammar::Saved>,
    /// Where the code made that call, `file:line`, when the version's manifest tells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The divergence in one sentence.
    pub message: String,
}

/// Something an operator or the engine did to an instance outside its turns (an upgrade, a
/// resume, a restart, a fork), kept on the instance (the newest
/// [`turnwise_rules::limits::INSTANCE_EVENTS`] of them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceEvent {
    /// When.
    pub at_ms: Millis,
    /// What: `upgrade`, `resume`, `restart_turn`, `fork`, `suspend`.
    pub action: String,
    /// Who asked, as the request said (a user name, a token's name, a tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The version before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_version: Option<String>,
    /// The version after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_version: Option<String>,
    /// The turn it concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u64>,
    /// More, in words (e.g. the new id of a fork).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl InstanceEvent {
    /// The engine suspended a turn at a replay mismatch.
    pub const SUSPEND: &'static str = "suspend";
    /// An operator restarted a suspended turn ([`RestartTurnRequest`]).
    pub const RESTART_TURN: &'static str = "restart_turn";
    /// An operator forked the instance ([`ForkInstanceRequest`]): on the original, and on the
    /// new instance.
    pub const FORK: &'static str = "fork";
    /// An operator cancelled a suspended turn (`control` `cancel_turn`).
    pub const CANCEL_TURN: &'static str = "cancel_turn";
}

wire_enum! {
    /// Where a restarted turn starts again ([`RestartTurnRequest::from`]).
    RestartFrom {
        /// Keep the saved steps before the mismatch report's `position`, the last ones the
        /// code accepted, and run on from there.
        LastAccepted = "last_accepted",
        /// Drop every saved step: the turn runs from the top as if it were new.
        Scratch = "scratch",
    }
}

/// `POST /v1/workflows/turns/restart` (a turnwise extension): run a suspended turn again, on
/// the instance's own version, from its last accepted step or from scratch. The turn becomes
/// `queued`; its attempts count from zero. Refused with `409 turn_not_suspended` when the turn
/// is not suspended; an exact repeat of a restart that was applied answers the same result and
/// records nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartTurnRequest {
    /// The instance.
    pub workflow_id: String,
    /// The suspended turn.
    pub turn: u64,
    /// Where it starts again.
    pub from: RestartFrom,
    /// Who asks (a user name, a token's name, a tool), recorded on the instance's event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// The answer to a restart: what was recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartTurnResponse {
    /// The instance.
    pub workflow_id: String,
    /// The restarted turn.
    pub turn: u64,
    /// Where it starts again.
    pub from: RestartFrom,
    /// The event recorded on the instance (`restart_turn`; its `detail` says how many saved
    /// steps the turn keeps).
    pub event: InstanceEvent,
}

/// `POST /v1/workflows/instances/fork` (a turnwise extension): a new instance `new_id` of the
/// same workflow type and version, with the state of the instance whose head turn is
/// suspended, and its unfinished messages admitted again in order (the suspended turn's
/// message first, starting from scratch there). The original stays suspended. Refused with
/// `409 turn_not_suspended` when the head is not suspended, and `409 conflict` when `new_id`
/// is taken by anything but this fork; an exact repeat answers the same result and records
/// nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkInstanceRequest {
    /// The instance to fork.
    pub workflow_id: String,
    /// The new instance's id.
    pub new_id: String,
    /// Who asks, recorded on both instances' events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// The answer to a fork.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkInstanceResponse {
    /// The new instance.
    pub workflow_id: String,
    /// The instance it was forked from.
    pub forked_from: String,
    /// The suspended turn of the original whose message starts the fork's inbox.
    pub turn: u64,
    /// The event recorded on the original (`fork`; its `detail` names the new instance and
    /// how many messages it was given).
    pub event: InstanceEvent,
}

/// A saved step of a turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepCheckpoint {
    /// The step key.
    pub key: String,
    /// `step`, `sleep` or `signal`.
    pub kind: CheckpointKind,
    /// The output (`null` for sleeps and unresolved waits).
    #[serde(default)]
    pub output: Value,
    /// When it was saved.
    pub at_ms: Millis,
    /// The sleep length or signal timeout; sleeps and signal waits only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// The awaited signal name; signal waits only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal_name: Option<String>,
    /// When a sleep or signal wait is due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_at_ms: Option<Millis>,
}

/// The running step attempt of a turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnOperation {
    /// The step key.
    pub key: String,
    /// What kind of work it is.
    pub kind: OperationKind,
    /// The turn attempt it belongs to.
    pub attempt: u32,
    /// When it started.
    pub started_at_ms: Millis,
    /// Its per-attempt timeout.
    pub timeout_ms: u64,
    /// `started_at_ms + timeout_ms`; lease heartbeats do not move it.
    pub deadline_ms: Millis,
    /// The last progress write (or the start).
    pub last_heartbeat_ms: Millis,
    /// The last accepted progress sequence.
    pub sequence: u64,
    /// The last progress details.
    #[serde(default)]
    pub details: Value,
    /// The resume cursor, carried over from an earlier attempt of the same step.
    #[serde(default)]
    pub checkpoint: Value,
    /// No progress for this long ends the attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_timeout_ms: Option<u64>,
}

/// A signal buffered on (or consumed by) a turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnSignal {
    /// The event id.
    pub id: String,
    /// The signal name.
    pub name: String,
    /// The value.
    #[serde(default)]
    pub value: Value,
    /// When it arrived.
    pub at_ms: Millis,
    /// The key of the wait that consumed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumed_by: Option<String>,
}

/// A wait that counts no attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnWait {
    /// When the wait began.
    pub since_ms: Millis,
    /// When the turn is ready again.
    pub until_ms: Millis,
    /// Absent means `retry`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<WaitReason>,
}

/// One claimed run of a turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnRun {
    /// `<started_at_ms, 13 digits>-<instance>-<turn>`.
    pub id: String,
    /// When the run was claimed.
    pub started_at_ms: Millis,
    /// Unfinished turns of the instance (this one included) when the run was claimed.
    pub queue_before: u64,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<Millis>,
    /// Pending messages after it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_after: Option<u64>,
    /// Usage of activity calls, as the worker reported it. A stored usage that does not have
    /// the [`RunUsage`] shape (written before it was checked) reads as absent.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "usage_or_none"
    )]
    pub usage: Option<RunUsage>,
    /// The phases the run's progress went through, oldest first (at most
    /// [`TurnRun::MAX_PHASES`]; past that the last one keeps changing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<Vec<RunPhase>>,
}

impl TurnRun {
    /// The most phases a run records.
    pub const MAX_PHASES: usize = 32;
}

/// `WorkflowRunPhase`: one phase of a run's progress (the `phase` of the progress convention),
/// from the first progress that named it to the last one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunPhase {
    /// The phase's name.
    pub phase: String,
    /// Units done, as the phase's last progress said.
    pub done: u64,
    /// The first progress of the phase.
    pub started_at_ms: Millis,
    /// The last progress of the phase.
    pub ended_at_ms: Millis,
    /// Units in all, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// The unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

wire_enum! {
    /// How a run (one attempt of a turn) ended, as its summary ([`WorkflowRun`]) says.
    RunEnd (unknown) {
        /// The turn completed.
        Completed = "completed",
        /// The attempt failed (the worker failed it, or a step ran past its timeout): the turn
        /// backs off and retries, or failed for good (`turn_status` tells).
        Failed = "failed",
        /// The lease expired without a heartbeat: the worker was lost.
        LeaseLost = "lease_lost",
        /// The turn sleeps; the same run resumes when the sleep is due.
        Sleeping = "sleeping",
        /// The turn waits for a signal; the same run resumes when it arrives or times out.
        WaitingSignal = "waiting_signal",
        /// The worker asked to wait (`retry_at_ms`) without counting an attempt; the same run
        /// resumes then.
        Waiting = "waiting",
        /// An operator cancelled the turn.
        Cancelled = "cancelled",
        /// The code no longer made the durable calls the turn saved (a replay mismatch): the
        /// turn is suspended until an operator acts.
        Suspended = "suspended",
    }
}

/// What a run finished, from its last progress: the `done` and `unit` (and `phase`, `total`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFinished {
    /// Units done.
    pub done: u64,
    /// The unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// The phase of that progress.
    pub phase: String,
    /// Units in all, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
}

/// A step, sleep or signal wait a run saved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStep {
    /// The step key.
    pub key: String,
    /// `step`, `sleep` or `signal`.
    pub kind: CheckpointKind,
    /// When it was saved.
    pub at_ms: Millis,
}

/// `WorkflowRun`: the summary of one run, one attempt of a turn (the runs routes, kept 30 days
/// by default). Written in the commit that ends the attempt: a completion, a failure, a
/// suspension (sleep, signal wait, `retry_at_ms` wait), a lost lease or a cancellation. A
/// suspended run that resumes is the same run, and its summary is written again when it
/// ends again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkflowRun {
    /// The run id (the turn's `run.id` while it ran).
    pub id: String,
    /// The instance.
    pub workflow_id: String,
    /// The instance's workflow type.
    pub workflow_type: String,
    /// The instance's version.
    pub version: String,
    /// The namespace.
    pub namespace: String,
    /// The turn number.
    pub turn: u64,
    /// The attempt of the turn this run was.
    pub attempt: u32,
    /// The turn's message id.
    pub message_id: String,
    /// Where the message came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<MessageOrigin>,
    /// The worker that ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// When it was claimed.
    pub started_at_ms: Millis,
    /// When it ended (or was suspended).
    pub ended_at_ms: Millis,
    /// How it ended.
    pub outcome: RunEnd,
    /// The turn's status right after the run ended.
    pub turn_status: TurnStatus,
    /// The attempt's error, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Unfinished turns of the instance (this one included) when it was claimed.
    pub queue_before: u64,
    /// Unfinished turns of the instance when it ended.
    pub queue_after: u64,
    /// What it finished: its last progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<RunFinished>,
    /// Up to 20 names of what the turn processed: the `sample` of the turn's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<Vec<String>>,
    /// Whole numbers by name: the `counters` of the turn's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<BTreeMap<String, u64>>,
    /// The steps, sleeps and signal waits it saved, in order.
    #[serde(default)]
    pub steps: Vec<RunStep>,
    /// The phases of its progress.
    #[serde(default)]
    pub phases: Vec<RunPhase>,
    /// Usage of its activity calls, as the worker reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<RunUsage>,
    /// Its results report, when the worker sent one (claims offer `results_max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<RunResultsReport>,
}

impl WorkflowRun {
    /// The most names of `sample` a summary keeps.
    pub const MAX_SAMPLE: usize = 20;
    /// The most `counters` a summary keeps.
    pub const MAX_COUNTERS: usize = 64;
}

/// `GET /v1/workflows/instances/runs?id=&cursor=&limit=`: runs, newest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunsQuery {
    /// Only the runs of this instance; absent: every run of the namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The `next_cursor` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// 1–100, default 50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

impl RunsQuery {
    /// The runs of instance `id`, first page.
    pub fn instance(id: impl Into<String>) -> Self {
        Self {
            id: Some(id.into()),
            ..Self::default()
        }
    }

    /// The same query from `cursor` on.
    pub fn cursor(mut self, cursor: impl Into<String>) -> Self {
        self.cursor = Some(cursor.into());
        self
    }

    /// The same query with pages of `limit` runs.
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// A page of runs, newest first, in the list envelope: pass `next_cursor` as `cursor` for
/// the next page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunPage {
    /// The runs, newest first.
    pub runs: Vec<WorkflowRun>,
    /// The cursor of the next page; absent on the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Whether there is a next page.
    #[serde(default)]
    pub has_more: bool,
}

/// `GET /v1/workflows/instances/runs/stats?hours=`: runs by hour.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStats {
    /// The hours asked for (1–720, default 24).
    pub hours: u32,
    /// Where the first hour begins (Unix ms, on the hour).
    pub since_ms: Millis,
    /// Every hour from `since_ms` on, oldest first, with its runs (by when they started).
    pub by_hour: Vec<RunHour>,
}

/// The runs that started in one hour.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunHour {
    /// Where the hour begins (Unix ms).
    pub start_ms: Millis,
    /// Runs in all.
    pub runs: u64,
    /// Runs by outcome (only outcomes with runs).
    pub outcomes: BTreeMap<String, u64>,
}

/// `usage` as stored: the [`RunUsage`] shape, or absent when it has another one.
fn usage_or_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<RunUsage>, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(v.and_then(|v| serde_json::from_value(v).ok()))
}

/// `WorkflowRunUsage`: what a run's activity calls used, added up. Every counter is an optional
/// integer ≥ 0; unknown keys are ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct RunUsage {
    /// Calls made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<u64>,
    /// Calls that failed or gave no usable answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<u64>,
    /// Input tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_in: Option<u64>,
    /// Output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_out: Option<u64>,
    /// Cost in millionths of a US dollar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_micro_usd: Option<u64>,
}

/// `WorkflowRunResultsReport`: the inputs a run handled and their counts by outcome, sent with
/// a completion or a failure. At most [`RunResultsReport::MAX_INPUTS`] inputs and
/// [`RunResultsReport::MAX_BYTES`] of JSON; the engine checks both, and the other limits of
/// [`RunInput`], and keeps the report in the run's summary ([`WorkflowRun::results`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct RunResultsReport {
    /// Every input the run handled, by outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<RunResultCounts>,
    /// The first inputs of the run, in the order it named them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<RunInput>>,
}

impl RunResultsReport {
    /// The most inputs a report lists.
    pub const MAX_INPUTS: usize = 200;
    /// The largest report, in bytes of compact JSON: 512 KiB.
    pub const MAX_BYTES: usize = 512 * 1024;
    /// The most values one input lists.
    pub const MAX_VALUES: usize = 32;
    /// The longest input `error`, in characters.
    pub const MAX_ERROR_CHARS: usize = 500;
}

/// `WorkflowRunResultCounts`: inputs by outcome. Only these five keys; each an optional integer
/// ≥ 0.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(deny_unknown_fields)]
pub struct RunResultCounts {
    /// Inputs written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<u64>,
    /// Inputs filed for review.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<u64>,
    /// Inputs with no value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_value: Option<u64>,
    /// Inputs that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<u64>,
    /// Inputs already written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<u64>,
}

wire_enum! {
    /// What a run did with one input.
    RunOutcome {
        /// Written.
        Written = "written",
        /// Filed for review.
        Review = "review",
        /// Nothing to write.
        NoValue = "no_value",
        /// Failed.
        Failed = "failed",
        /// Already written.
        Duplicate = "duplicate",
    }
}

/// `WorkflowRunInput`: one input of a run's results report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct RunInput {
    /// What the run did with it.
    pub outcome: RunOutcome,
    /// The input's IRI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iri: Option<String>,
    /// Its label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Why it failed (at most 500 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its model cost in millionths of a US dollar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_micro_usd: Option<u64>,
    /// Where in a file its values are (an object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<serde_json::Map<String, Value>>,
    /// What the run read or wrote (at most 32 values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<Value>>,
}

/// The normalized progress view.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// The phase.
    pub phase: String,
    /// Units done.
    pub done: u64,
    /// When the operation started (RFC 3339).
    pub started_at: String,
    /// The last progress write (RFC 3339).
    pub heartbeat_at: String,
    /// Units in all, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// The unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

/// Where a turn stands, without its message and steps: what a caller waiting for the turn's
/// reply reads (`WorkerBackend::await_outcome`).
#[derive(Clone, Debug, PartialEq)]
pub struct TurnOutcome {
    /// The instance.
    pub workflow_id: String,
    /// The turn number.
    pub number: u64,
    /// Where the turn is; an outcome when [`TurnStatus::is_outcome`].
    pub status: TurnStatus,
    /// The reply (`null` until completed, or when the turn replied nothing).
    pub result: Value,
    /// The last failed attempt's error.
    pub error: Option<String>,
}

impl From<WorkflowTurn> for TurnOutcome {
    fn from(t: WorkflowTurn) -> Self {
        Self {
            workflow_id: t.workflow_id,
            number: t.number,
            status: t.status,
            result: t.result,
            error: t.error,
        }
    }
}

/// A turn: one message and what became of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkflowTurn {
    /// The instance.
    pub workflow_id: String,
    /// The turn number (1, 2, …).
    pub number: u64,
    /// The message id.
    pub message_id: String,
    /// The message.
    #[serde(default)]
    pub message: Value,
    /// The instance's pinned version.
    pub version: String,
    /// Where the turn is.
    pub status: TurnStatus,
    /// Attempts so far.
    pub attempt: u32,
    /// A per-turn write counter.
    pub sequence: u64,
    /// When it was admitted.
    pub created_at_ms: Millis,
    /// The last write.
    pub updated_at_ms: Millis,
    /// When it may next run.
    pub ready_at_ms: Millis,
    /// Saved steps, in order.
    #[serde(default)]
    pub steps: Vec<StepCheckpoint>,
    /// The reply.
    #[serde(default)]
    pub result: Value,
    /// The state after completion.
    #[serde(default)]
    pub state_after: Value,
    /// The continuation's turn number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continued_to: Option<u64>,
    /// The lease deadline while running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<Millis>,
    /// The last failed attempt's error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When it finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at_ms: Option<Millis>,
    /// The running step attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<TurnOperation>,
    /// Where the message came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<MessageOrigin>,
    /// The progress view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// The current or last run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<TurnRun>,
    /// Signals delivered to this turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signals: Option<Vec<TurnSignal>>,
    /// A wait that counts no attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<TurnWait>,
    /// The worker holding (or that last held) the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// The W3C `traceparent` of the request that admitted the message (a continuation's is
    /// its turn's), when it carried one: a turnwise extension, absent on other servers. A
    /// worker runs the turn in this trace ([`crate::trace`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// Why the turn is suspended, while it is (a turnwise extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatch: Option<MismatchReport>,
}

/// An instance: identity, pinned version, saved state and inbox summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkflowInstance {
    /// The instance id.
    pub id: String,
    /// The workflow type.
    pub workflow_type: String,
    /// The pinned version.
    pub version: String,
    /// The saved state.
    #[serde(default)]
    pub state: Value,
    /// The summary status.
    pub status: InstanceStatus,
    /// Unfinished turns.
    pub pending_messages: u64,
    /// Turns that finished (completed, cancelled or skipped).
    pub completed_turns: u64,
    /// The newest turn number in history (0 when none).
    pub history_through: u64,
    /// A per-instance write counter.
    pub sequence: u64,
    /// When it was created.
    pub created_at_ms: Millis,
    /// The last write.
    pub updated_at_ms: Millis,
    /// The inbox head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_turn: Option<Box<WorkflowTurn>>,
    /// The newest pruned turn number (0 when nothing was pruned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_pruned_through: Option<u64>,
    /// The instance's exhaustion policy (absent means block).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_exhausted: Option<OnExhausted>,
    /// Progress of the running head turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// Lease length for this instance's turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
    /// Attempts per turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Upgrades, resumes, restarts and forks, oldest first (a turnwise extension).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<InstanceEvent>,
}

/// `POST /v1/workflows/schemas`: the JSON Schemas of one workflow type and version, as a worker
/// registers them with [`Backend::register_schema`](crate::Backend::register_schema) and a
/// server keeps and serves them.
///
/// Plain data: the SDK builds it from a workflow's Rust types
/// (`turnwise::schema::WorkflowSchema::document`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SchemaDocument {
    /// The workflow type.
    pub workflow_type: String,
    /// The version.
    pub version: String,
    /// The message schema; `null` or absent when messages are not checked.
    #[serde(default)]
    pub message: Value,
    /// The signals the workflow accepts: one schema per signal name (`null`: the value is not
    /// checked). Once the document is registered, a signal of a name not listed is refused.
    #[serde(default)]
    pub signals: BTreeMap<String, Value>,
    /// The state schema (served, not checked).
    #[serde(default)]
    pub state: Value,
    /// The reply schema (served, not checked).
    #[serde(default)]
    pub reply: Value,
    /// The version's replay manifest (the grammar of its durable calls, its shape hash and its
    /// schemas), when the worker has one: what the compatibility check compares against live
    /// instances. Its name and version are the document's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<crate::manifest::Manifest>,
}

/// One way a value fails a registered JSON Schema, as a
/// [`Error::SchemaValidation`](crate::Error::SchemaValidation) lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaViolation {
    /// A JSON Pointer to the failing part of the value (`""` for the value itself).
    pub instance_path: String,
    /// A JSON Pointer to the schema keyword that failed.
    pub schema_path: String,
    /// What is wrong.
    pub message: String,
}

impl SchemaViolation {
    /// A violation at `instance_path` of the keyword at `schema_path`.
    pub fn new(
        instance_path: impl Into<String>,
        schema_path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            instance_path: instance_path.into(),
            schema_path: schema_path.into(),
            message: message.into(),
        }
    }

    /// ``at `/path`: message``, the form refusals list violations in.
    pub fn describe(&self) -> String {
        let at = if self.instance_path.is_empty() {
            "/"
        } else {
            self.instance_path.as_str()
        };
        format!("at `{at}`: {}", self.message)
    }
}

/// A field that is present reads as `Some`, even when it is `null` (which serde's `Option`
/// would read as `None`); `#[serde(default)]` makes a missing field `None`.
fn present_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inbox_message_that_is_null_is_present() {
        let base = serde_json::json!({
            "turn": 1, "message_id": "m", "status": "queued", "received_at_ms": 0,
            "ready_at_ms": 0, "attempt": 0, "message_bytes": 4
        });
        let mut with_null = base.clone();
        with_null["message"] = Value::Null;
        let read = |v: Value| serde_json::from_value::<InboxMessage>(v).map(|m| m.message);
        assert_eq!(read(with_null).unwrap(), Some(Value::Null));
        assert_eq!(read(base).unwrap(), None);
    }
}
