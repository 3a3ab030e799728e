//! Durable stores: the contract the engine relies on, and its implementations.
//!
//! Stores are dumb; the `Engine` is smart. A store keeps three kinds of rows:
//!
//! - one [`InstanceRecord`] per instance, carrying a `revision` that rises on every write;
//! - its [`TurnRecord`]s, both unfinished (the inbox) and finished (history), keyed by turn
//!   number and unique by message id, which makes the message-id index (a write set that
//!   adds a turn under a taken id is refused with [`CommitError::MessageIdTaken`]);
//! - a schedule index: each instance's `due_at_ms`, the next time the engine must look at it.
//!
//! Every change goes through [`Store::commit`] as a [`WriteSet`] for one instance, written only
//! if the instance's revision is still the one the engine read (a conditional write). A commit is
//! atomic (all of it or none), isolated from other commits, and, for
//! [`Durability::Durable`], on stable storage before `commit` returns. Finished turns are never
//! rewritten once they are in history, except to apply retention, which only deletes.
//!
//! A store that several processes share (PostgreSQL) also tells each engine over it about the
//! commits the *other* processes make ([`Store::watch`]), so that claims and readers waiting in
//! one process are woken by work admitted in another.
//!
//! The contract has its own test suite (`runtime/tests/it/store_contract.rs`) that every store runs.

pub mod support;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::error::{Error, Source};
use crate::protocol::*;

/// One instance: definition, saved state, options and inbox bookkeeping.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InstanceRecord {
    /// The namespace (graph/environment scope) the instance lives in.
    pub ns: String,
    /// The instance id.
    pub id: String,
    /// The workflow type.
    pub workflow_type: String,
    /// The pinned version.
    pub version: String,
    /// The saved state.
    pub state: Value,
    /// Lease length for its turns.
    pub lease_ms: u64,
    /// Attempts per turn.
    pub max_attempts: u32,
    /// Exhaustion policy.
    pub on_exhausted: OnExhausted,
    /// Paused by an operator.
    pub paused: bool,
    /// Creation time.
    pub created_at_ms: Millis,
    /// Last write.
    pub updated_at_ms: Millis,
    /// Rises by one on every commit; the conditional-write version (wire `sequence`).
    pub revision: u64,
    /// The number the next admitted message gets.
    pub next_turn: u64,
    /// Unfinished turn numbers, oldest first; the first is the inbox head.
    pub pending: Vec<u64>,
    /// Finished turns, pruned or not.
    pub completed_turns: u64,
    /// The newest finished turn number.
    pub history_through: u64,
    /// The newest turn number retention deleted. Maintained by the store.
    pub history_pruned_through: u64,
    /// When the engine must next look at this instance (schedule index); `None` when nothing
    /// can happen without an outside event.
    pub due_at_ms: Option<Millis>,
    /// An id of this incarnation of the instance, mixed into effect prefixes so that a
    /// deleted and re-created instance does not reuse effect ids.
    pub epoch: String,
    /// Outcomes of this instance's turns still to be delivered to the parent turns that sent
    /// their messages (child workflows, a turnwise extension). Written in the same commit as
    /// the outcome, emptied by the engine once delivered; while it holds anything the
    /// instance stays due, so a claim scan finds it after a crash.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outbox: Vec<OutboxEntry>,
    /// The instance's schedules (delayed messages and recurring firings), by name. Kept in the
    /// record so that admitting a firing and advancing its schedule are one conditional write.
    /// The engine folds the earliest unpaused `next_fire_ms` into `due_at_ms`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<WorkflowSchedule>,
    /// What operators and the engine did to the instance outside its turns (suspensions,
    /// restarts, forks), oldest first, the newest
    /// [`INSTANCE_EVENTS`](turnwise_rules::limits::INSTANCE_EVENTS) kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<InstanceEvent>,
}

impl InstanceRecord {
    /// Record `event`, dropping the oldest ones past
    /// [`INSTANCE_EVENTS`](turnwise_rules::limits::INSTANCE_EVENTS).
    pub fn record_event(&mut self, event: InstanceEvent) {
        self.events.push(event);
        let over = self
            .events
            .len()
            .saturating_sub(turnwise_rules::limits::INSTANCE_EVENTS);
        self.events.drain(..over);
    }
}

/// A child turn's outcome on its way to the parent turn waiting for it, as the signal the
/// engine delivers: `signal` is both the signal's name and its event id, so a delivery that
/// is repeated (after a crash, or by two nodes at once) is answered as the first one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutboxEntry {
    /// The parent instance.
    pub parent_id: String,
    /// The parent's turn that sent the message.
    pub parent_turn: u64,
    /// The signal name (and event id) the parent turn waits on.
    pub signal: String,
    /// The child turn whose outcome this is.
    pub turn: u64,
    /// The outcome: `{"status", "workflow_id", "turn", "reply" | "error"}`.
    pub value: Value,
}

/// One turn: a message and what became of it. Unfinished turns form the inbox; finished ones
/// are immutable history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// The turn number.
    pub number: u64,
    /// The message id (unique per instance among kept turns).
    pub message_id: String,
    /// The message.
    pub message: Value,
    /// Where it came from.
    pub origin: Option<MessageOrigin>,
    /// Where the turn is.
    #[serde(deserialize_with = "known_status")]
    pub status: TurnStatus,
    /// Attempts counted so far.
    pub attempt: u32,
    /// Per-turn write counter.
    pub sequence: u64,
    /// Admission time.
    pub created_at_ms: Millis,
    /// Last write.
    pub updated_at_ms: Millis,
    /// When it may next run.
    pub ready_at_ms: Millis,
    /// Saved steps.
    pub steps: Vec<StepCheckpoint>,
    /// The reply.
    pub result: Value,
    /// The state after completion.
    pub state_after: Value,
    /// The continuation's turn number.
    pub continued_to: Option<u64>,
    /// The last failed attempt's error.
    pub error: Option<String>,
    /// When it finished; `Some` exactly for history.
    pub finished_at_ms: Option<Millis>,
    /// The running step attempt.
    pub operation: Option<TurnOperation>,
    /// The last operation of an ended attempt, whose cursor the next attempt of the same
    /// step carries forward.
    pub last_operation: Option<TurnOperation>,
    /// Signals delivered to the turn, in arrival order.
    pub signals: Vec<TurnSignal>,
    /// A wait that counts no attempt.
    pub wait: Option<TurnWait>,
    /// The current or last run.
    pub run: Option<TurnRun>,
    /// The worker holding or last holding it.
    pub worker: Option<String>,
    /// The current lease token, while running.
    pub token: Option<String>,
    /// The lease deadline, while running.
    pub deadline_ms: Option<Millis>,
    /// Claims so far; tokens are made from it so they rise.
    pub claims: u64,
    /// Stable across attempts; effect ids are `<effect_prefix>/<key>`.
    pub effect_prefix: String,
    /// The next claim resumes the same attempt (after a sleep, a signal wait or a retry wait).
    pub resume: bool,
    /// Digest of the applied completion, to answer its exact repeat.
    pub completion_digest: Option<String>,
    /// The W3C `traceparent` the message was admitted in ([`crate::trace`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// Why the turn is suspended, while it is ([`TurnStatus::Suspended`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatch: Option<MismatchReport>,
    /// Set by the engine's decision that ends the current run (how it ended, and the results
    /// report the worker sent with it). The engine turns it into the run's summary
    /// ([`WriteSet::runs`]) and clears it before the turn is written: a store never keeps it.
    #[serde(skip)]
    pub run_ending: Option<RunEnding>,
}

/// How the current run of a turn ended, until the engine writes the run's summary.
#[derive(Clone, Debug, PartialEq)]
pub struct RunEnding {
    /// How it ended.
    pub end: RunEnd,
    /// The results report sent with the completion or failure that ended it.
    pub results: Option<RunResultsReport>,
}

/// A stored turn's status must be one this version knows: a record with another one is
/// unreadable (its instance is quarantined), not read as [`TurnStatus::Unknown`].
fn known_status<'de, D: serde::Deserializer<'de>>(d: D) -> Result<TurnStatus, D::Error> {
    match TurnStatus::deserialize(d)? {
        TurnStatus::Unknown => Err(serde::de::Error::custom(format_args!(
            "a turn status this version of turnwise does not know (known: {})",
            TurnStatus::ALL.join(", ")
        ))),
        known => Ok(known),
    }
}

impl TurnRecord {
    /// A new turn for a message, queued at `now`: no attempt, no steps, no lease.
    pub fn queued(
        number: u64,
        message_id: String,
        message: Value,
        origin: Option<MessageOrigin>,
        now: Millis,
        effect_prefix: String,
    ) -> Self {
        TurnRecord {
            number,
            message_id,
            message,
            origin,
            status: TurnStatus::Queued,
            attempt: 0,
            sequence: 1,
            created_at_ms: now,
            updated_at_ms: now,
            ready_at_ms: now,
            steps: Vec::new(),
            result: Value::Null,
            state_after: Value::Null,
            continued_to: None,
            error: None,
            finished_at_ms: None,
            operation: None,
            last_operation: None,
            signals: Vec::new(),
            wait: None,
            run: None,
            worker: None,
            token: None,
            deadline_ms: None,
            claims: 0,
            effect_prefix,
            resume: false,
            completion_digest: None,
            traceparent: None,
            mismatch: None,
            run_ending: None,
        }
    }

    /// Whether the turn is in history.
    pub fn is_finished(&self) -> bool {
        self.finished_at_ms.is_some()
    }
}

/// How durable a commit must be before it is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Durability {
    /// On stable storage (fsync) before `commit` returns.
    Durable,
    /// Survives a crash of the process; an operating-system crash may roll it back to the last
    /// durable commit. Used for writes the protocol can lose safely (claims, operation starts,
    /// progress, heartbeats); the next durable commit makes them durable too.
    Relaxed,
}

/// History retention for one commit: delete finished turns that are neither among the newest
/// `keep_turns` nor finished at or after `keep_since_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// How many of the newest finished turns are always kept (≥ 1).
    pub keep_turns: u64,
    /// Turns finished at or after this time are always kept.
    pub keep_since_ms: Millis,
}

/// Everything one engine step writes, for one instance, applied atomically.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteSet {
    /// The namespace.
    pub ns: String,
    /// The instance id.
    pub id: String,
    /// The revision the engine read; `None` means the instance must not exist yet.
    pub expected_revision: Option<u64>,
    /// The new instance record (its `revision` must be `expected + 1`, or 1 when created);
    /// `None` deletes the instance with all its turns.
    pub instance: Option<InstanceRecord>,
    /// Turns to insert or replace.
    pub turns: Vec<TurnRecord>,
    /// Retention to apply after the write.
    pub retention: Option<Retention>,
    /// Run summaries to insert or replace (by namespace and run id), written with the rest.
    pub runs: Vec<WorkflowRun>,
    /// Run retention to apply with the write: delete at most [`RUN_PRUNE_BATCH`] run
    /// summaries, of any instance and namespace, that ended before this time.
    pub prune_runs_before: Option<Millis>,
    /// How durable the commit must be.
    pub durability: Durability,
}

/// Which turns of an instance to list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TurnRange {
    /// History (`true`) or the inbox (`false`).
    pub finished: bool,
    /// Exclusive turn-number cursor.
    pub after: Option<u64>,
    /// At most this many, ascending by number.
    pub limit: usize,
}

/// Which runs to list: newest first (descending run id).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Only the runs of this instance.
    pub instance: Option<String>,
    /// Exclusive run-id cursor: only runs whose id sorts before it.
    pub before: Option<String>,
    /// At most this many.
    pub limit: usize,
}

/// Runs that started in one hour and ended one way, as [`Store::count_runs`] answers them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunCount {
    /// Where the hour begins (Unix ms, a multiple of 3 600 000).
    pub hour_ms: Millis,
    /// How the runs ended (a [`RunEnd`] wire value).
    pub outcome: String,
    /// How many.
    pub runs: u64,
}

/// The most run summaries one commit's run retention deletes
/// ([`WriteSet::prune_runs_before`]). A commit that deletes some writes at most two, so
/// retention keeps up.
pub const RUN_PRUNE_BATCH: usize = 64;

/// The width of the hours of [`Store::count_runs`], in ms.
pub const HOUR_MS: Millis = 3_600_000;

/// Which instances to list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstanceFilter {
    /// Only this workflow type.
    pub workflow_type: Option<String>,
    /// Only this version.
    pub version: Option<String>,
    /// Exclusive id cursor.
    pub after: Option<String>,
    /// At most this many, ascending by id.
    pub limit: usize,
}

/// Why a commit was not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitError {
    /// The instance's revision is not the expected one: another commit came first. Nothing
    /// was written; read again and retry.
    #[error("the instance changed since it was read")]
    Conflict,
    /// A turn the write set adds carries a message id that another turn of the instance
    /// already has (a kept turn, or an earlier one of the same write set): the message-id
    /// index is unique. Nothing was written. The engine admits a message by trying to commit
    /// it and, on this answer, looks the kept turn up with [`Store::find_message`].
    #[error("message id `{message_id}` is already another turn's of this instance")]
    MessageIdTaken {
        /// The message id that is taken.
        message_id: String,
    },
    /// The store failed; nothing was written.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A failure of the store itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store could not do what was asked (I/O, a closed store, a full disk). Nothing was
    /// written; the same call may succeed later.
    #[error("{message}")]
    Failed {
        /// What failed (including the underlying error's text).
        message: String,
        /// The underlying error (an I/O or SQLite error), when there is one.
        #[source]
        source: Option<Source>,
    },
    /// A stored record of one instance cannot be decoded. The store keeps serving every other
    /// instance and refuses this one (it is *quarantined*) until an operator deletes or restores
    /// it; retrying does not help.
    #[error(
        "the stored record of instance `{id}` (namespace `{ns}`) cannot be read ({reason}); \
         the instance is quarantined: the rest of the store serves, this instance answers this \
         error until it is deleted or its record is restored from a backup"
    )]
    Unreadable {
        /// The namespace.
        ns: String,
        /// The instance id.
        id: String,
        /// What failed while decoding.
        reason: String,
    },
    /// The file is held by another open store, in this process or another one: a file is
    /// served by one store at a time (see `SqliteStore`). Nothing
    /// was opened; the same call succeeds once the holder has closed the file or exited.
    #[error("{}", locked_message(path, lock, *pid))]
    Locked {
        /// The database file.
        path: std::path::PathBuf,
        /// The lock file the holder holds (`<database file>.lock`).
        lock: std::path::PathBuf,
        /// The holder's process id, as it wrote it into the lock file (`None` if it could not
        /// be read).
        pid: Option<u32>,
    },
}

fn locked_message(path: &std::path::Path, lock: &std::path::Path, pid: Option<u32>) -> String {
    let (path, lock) = (path.display(), lock.display());
    match pid {
        Some(pid) if pid == std::process::id() => format!(
            "the store file {path} is already open in this process (pid {pid}, lock file \
             {lock}): open a file once and share the store by cloning its handle"
        ),
        Some(pid) => format!(
            "the store file {path} is in use by another process (pid {pid}, lock file {lock}): \
             a file is served by one process at a time; stop that process or use another file"
        ),
        None => format!(
            "the store file {path} is in use by another store (lock file {lock} is locked): a \
             file is served by one process at a time; stop that process or use another file"
        ),
    }
}

impl StoreError {
    /// A [`StoreError::Failed`] with this message.
    pub fn new(message: impl Into<String>) -> Self {
        StoreError::Failed {
            message: message.into(),
            source: None,
        }
    }

    /// A [`StoreError::Failed`] caused by `source`: the message says what failed and ends with
    /// the source's text; the source stays reachable through [`std::error::Error::source`].
    pub fn caused(
        what: impl std::fmt::Display,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreError::Failed {
            message: format!("{what}: {source}"),
            source: Some(Source::new(source)),
        }
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Failed { message, source } => Error::Store { message, source },
            StoreError::Locked { .. } => Error::Store {
                message: e.to_string(),
                source: Some(Source::new(e)),
            },
            StoreError::Unreadable { .. } => Error::Unreadable {
                message: e.to_string(),
            },
        }
    }
}

/// The store contract; see the [module docs](self).
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Read one instance.
    async fn load_instance(&self, ns: &str, id: &str)
        -> Result<Option<InstanceRecord>, StoreError>;
    /// Read one turn, unfinished or in history.
    async fn load_turn(
        &self,
        ns: &str,
        id: &str,
        number: u64,
    ) -> Result<Option<TurnRecord>, StoreError>;
    /// Read one instance and one of its turns (`None` for a turn that is not kept), as one
    /// read where the store can (one query on PostgreSQL). `None` when there is no instance.
    /// The default reads the instance, then the turn.
    async fn load_instance_turn(
        &self,
        ns: &str,
        id: &str,
        number: u64,
    ) -> Result<Option<(InstanceRecord, Option<TurnRecord>)>, StoreError> {
        let Some(instance) = self.load_instance(ns, id).await? else {
            return Ok(None);
        };
        let turn = self.load_turn(ns, id, number).await?;
        Ok(Some((instance, turn)))
    }
    /// Find a kept turn by its message id.
    async fn find_message(
        &self,
        ns: &str,
        id: &str,
        message_id: &str,
    ) -> Result<Option<TurnRecord>, StoreError>;
    /// List turns of an instance, ascending by number.
    async fn list_turns(
        &self,
        ns: &str,
        id: &str,
        range: TurnRange,
    ) -> Result<Vec<TurnRecord>, StoreError>;
    /// List instances, ascending by id.
    async fn list_instances(
        &self,
        ns: &str,
        filter: InstanceFilter,
    ) -> Result<Vec<InstanceRecord>, StoreError>;
    /// Count instances of a type (and version): `(all, with pending turns)`.
    async fn count_instances(
        &self,
        ns: &str,
        workflow_type: &str,
        version: Option<&str>,
    ) -> Result<(u64, u64), StoreError>;
    /// Ids of instances of the listed workflows with `due_at_ms <= now`, earliest due first.
    async fn due(
        &self,
        ns: &str,
        workflows: &[WorkflowRef],
        now: Millis,
        limit: usize,
    ) -> Result<Vec<String>, StoreError>;
    /// The earliest `due_at_ms` among instances of the listed workflows.
    async fn next_due(
        &self,
        ns: &str,
        workflows: &[WorkflowRef],
    ) -> Result<Option<Millis>, StoreError>;
    /// Apply a write set atomically if the instance's revision is the expected one.
    async fn commit(&self, write: WriteSet) -> Result<(), CommitError>;

    /// List run summaries of a namespace, newest first (descending run id).
    async fn list_runs(&self, ns: &str, filter: RunFilter) -> Result<Vec<WorkflowRun>, StoreError>;
    /// Read one run summary.
    async fn load_run(&self, ns: &str, run_id: &str) -> Result<Option<WorkflowRun>, StoreError>;
    /// Count the runs of a namespace that started at or after `since_ms`, by hour of their
    /// start and outcome.
    async fn count_runs(&self, ns: &str, since_ms: Millis) -> Result<Vec<RunCount>, StoreError>;

    /// Keep the registered schema document of one workflow type and version (its JSON text),
    /// replacing the one kept before; durable when it returns.
    async fn save_schema(
        &self,
        ns: &str,
        workflow_type: &str,
        version: &str,
        document: &str,
    ) -> Result<(), StoreError>;
    /// The schema documents kept for a namespace (their JSON text), by type and version.
    async fn load_schemas(&self, ns: &str) -> Result<Vec<String>, StoreError>;

    /// Delete a quarantined instance, one whose reads answer [`StoreError::Unreadable`], with
    /// every row the store keeps of it, and lift its quarantine. The engine cannot read such an
    /// instance to delete it the usual way. Answers whether there was one to delete.
    ///
    /// Stores that never quarantine (their records cannot be unreadable) keep the default,
    /// which deletes nothing.
    async fn delete_unreadable(&self, ns: &str, id: &str) -> Result<bool, StoreError> {
        let _ = (ns, id);
        Ok(false)
    }

    /// Whether the store can take writes now: `Err` says why not (its files were deleted or
    /// replaced, a sync failed, its last write failed). Cheap (no write, no query), for health
    /// checks. The default answers `Ok(())`: a store that cannot fail this way.
    async fn health(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Report the commits other processes make to this store to `watcher`, from now on, until
    /// it answers `false`. Stores that one process serves alone (memory, SQLite: the file lock
    /// sees to that) keep the default, which reports nothing: every commit is the engine's own.
    fn watch(&self, watcher: Watcher) {
        let _ = watcher;
    }
}

/// A commit made by another process on a store several processes share, as [`Store::watch`]
/// reports it: what an engine needs to ring its waiting claims and wake its waiting readers.
///
/// Its fields are all public, so that a store outside this crate can build one from what it
/// received (PostgreSQL: a notification's payload).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The namespace.
    pub ns: String,
    /// The instance id.
    pub id: String,
    /// The instance's workflow type after the commit (empty when the commit deleted it).
    pub workflow_type: String,
    /// The instance's version after the commit (empty when the commit deleted it).
    pub version: String,
    /// When the instance is next due after the commit (its `due_at_ms`).
    pub due_at_ms: Option<Millis>,
    /// Whether the commit gave a turn an outcome (completed, failed or cancelled) or deleted
    /// the instance: readers awaiting a turn of it should read again.
    pub settled: bool,
}

impl Change {
    /// What a write set tells the other processes.
    pub fn of(write: &WriteSet) -> Self {
        let (workflow_type, version, due_at_ms) = match &write.instance {
            Some(i) => (i.workflow_type.clone(), i.version.clone(), i.due_at_ms),
            None => (String::new(), String::new(), None),
        };
        Change {
            ns: write.ns.clone(),
            id: write.id.clone(),
            workflow_type,
            version,
            due_at_ms,
            settled: Self::settles(write),
        }
    }

    /// Whether a write set settles something readers may await: it gives a turn an outcome,
    /// or deletes the instance.
    pub fn settles(write: &WriteSet) -> bool {
        write.instance.is_none() || write.turns.iter().any(|t| t.status.is_outcome())
    }
}

/// What [`Store::watch`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// Another process committed this.
    Changed(Change),
    /// Notices may have been lost (the store's connection for them dropped and came back):
    /// anything may have changed, so every waiting claim and reader should look again.
    Missed,
}

/// A watcher of a shared store's changes, given to [`Store::watch`]. It answers whether it
/// still wants notices: once it answers `false` the store drops it.
pub type Watcher = std::sync::Arc<dyn Fn(&Notice) -> bool + Send + Sync>;
