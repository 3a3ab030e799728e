//! The embedded engine: every rule of the message-workflow protocol, over any [`Store`].
//!
//! The engine keeps no authoritative state in memory. Each call reads the instance from the
//! store, decides with the pure rules in this module, and commits one
//! [`WriteSet`](crate::store::WriteSet) guarded by the instance's revision (all through one
//! path, `commit.rs`); a conflicting commit is re-read and decided again. Time comes from a
//! [`Clock`], so tests move it by hand.
//!
//! Wake-ups are in-process hints: every commit reports when its instance is next due, which
//! rings one waiting claim of each worker that runs its workflow (see `wakeups`), and a waiting
//! claim also sleeps until the earliest due time in the schedule index. No claim polls at a
//! fixed interval. On a store that several processes share, the commits of the other processes
//! arrive as [`Notice`]s ([`Store::watch`]) and ring the same way.

mod app_routes;
mod backend;
mod children;
mod claim;
mod commit;
mod compat;
mod connect;
mod outcomes;
mod schedules;
mod schemas;
mod suspend;
mod transitions;
mod upgrade;
mod wakeups;
mod worker_routes;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::clock::{Clock, SystemClock};
use crate::protocol::backend::Backend;
use crate::protocol::error::{Error, Result};
use crate::protocol::*;
use crate::store::{
    CommitError, Durability, InstanceRecord, MemoryStore, Notice, Store, TurnRecord,
};
pub use crate::worker_backend::WorkerBackend;
use commit::{Committed, InstanceDecision, Record};
pub use connect::Driver;
use turnwise_rules::limits;

/// Size and count limits, refused with a clear error before anything is written.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Steps (including sleeps and signal waits) per turn. Default
    /// [`MAX_STEPS`](crate::protocol::validate::MAX_STEPS) (64). Claims carry it to workers
    /// (the task's `steps_max`), whose step context enforces it.
    pub steps_per_turn: usize,
    /// Saved state, bytes of compact JSON. Default 64 KiB.
    pub state_bytes: usize,
    /// One step output. Default 64 KiB.
    pub output_bytes: usize,
    /// One reply. Default 64 KiB.
    pub result_bytes: usize,
    /// One message (also a continuation). Default 32 KiB.
    pub message_bytes: usize,
    /// One stored turn with its steps, signals and reply. Default 256 KiB.
    pub turn_bytes: usize,
    /// Unfinished turns per instance. Default 128.
    pub pending_messages: usize,
    /// Signals delivered to one turn. Default 64.
    pub signals_per_turn: usize,
    /// One signal value. Default 32 KiB.
    pub signal_bytes: usize,
    /// Progress details. Default 8 KiB.
    pub details_bytes: usize,
    /// A resume cursor. Default 32 KiB.
    pub checkpoint_bytes: usize,
    /// A message origin. Default 1 KiB.
    pub origin_bytes: usize,
    /// Schedules (delayed messages and recurring ones) per instance. Default 32.
    pub schedules_per_instance: usize,
    /// All schedules of one instance together, with their messages. Default 64 KiB.
    pub schedule_bytes: usize,
}

/// The defaults are the protocol's, from `turnwise_rules::limits`.
impl Default for Limits {
    fn default() -> Self {
        Self {
            steps_per_turn: limits::STEPS_PER_TURN,
            state_bytes: limits::STATE_BYTES,
            output_bytes: limits::OUTPUT_BYTES,
            result_bytes: limits::RESULT_BYTES,
            message_bytes: limits::MESSAGE_BYTES,
            turn_bytes: limits::TURN_BYTES,
            pending_messages: limits::PENDING_MESSAGES,
            signals_per_turn: limits::SIGNALS_PER_TURN,
            signal_bytes: limits::SIGNAL_BYTES,
            details_bytes: limits::DETAILS_BYTES,
            checkpoint_bytes: limits::CHECKPOINT_BYTES,
            origin_bytes: limits::ORIGIN_BYTES,
            schedules_per_instance: 32,
            schedule_bytes: 64 * 1024,
        }
    }
}

/// How much history each instance keeps: a finished turn is kept while it is among the newest
/// `keep_turns` **or** finished within `keep_for`. Setting either to zero keeps everything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Newest finished turns always kept. Default 256.
    pub keep_turns: u64,
    /// Turns finished this recently are always kept. Default 24 hours.
    pub keep_for: Duration,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        Self {
            keep_turns: 256,
            keep_for: Duration::from_secs(24 * 3600),
        }
    }
}

/// Engine settings. `EngineConfig::default()` is the protocol's documented behaviour.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EngineConfig {
    /// Size and count limits.
    pub limits: Limits,
    /// History retention.
    pub retention: RetentionPolicy,
    /// Lease length when a create request names none. Default 60 s.
    pub default_lease_ms: u64,
    /// Attempts per turn when a create request names none. Default 3.
    pub default_max_attempts: u32,
    /// The longest a claim, or a read awaiting a turn's outcome, may wait. Default 10 s.
    pub max_claim_wait: Duration,
    /// First retry delay after a failed attempt; it doubles per attempt. Default 1 s.
    pub backoff_base: Duration,
    /// The longest retry delay. Default 60 s.
    pub backoff_max: Duration,
    /// How long run summaries ([`WorkflowRun`]) are kept after their run ended. Default 30
    /// days; zero keeps them all. Commits that write run summaries delete expired ones, a
    /// bounded number at a time.
    pub run_retention: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            retention: RetentionPolicy::default(),
            default_lease_ms: turnwise_rules::durations::DEFAULT_LEASE_MS,
            default_max_attempts: limits::DEFAULT_MAX_ATTEMPTS,
            max_claim_wait: Duration::from_secs(10),
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            run_retention: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

struct Inner {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    config: EngineConfig,
    /// Waiting claims, rung by the commits that concern them.
    wakeups: wakeups::Wakeups,
    /// Who waits for a turn's outcome.
    outcomes: outcomes::Outcomes,
    /// The instances claims are deciding on.
    claiming: claim::Claiming,
    /// Whether child outcomes stay in their outboxes (crash tests; see `children.rs`).
    #[cfg(feature = "test-util")]
    hold_deliveries: std::sync::atomic::AtomicBool,
    /// The registered schema documents of the namespaces looked at.
    schemas: schemas::Schemas,
    /// What the engine offers beyond its store's contract.
    #[cfg_attr(
        not(feature = "postgres"),
        expect(dead_code, reason = "step transactions are the only capability so far")
    )]
    capabilities: Capabilities,
}

/// The capabilities an engine took from its store when it was built, by a constructor that
/// knew the store's type; the `Store` contract has no hook for them.
#[derive(Default)]
struct Capabilities {
    /// The transactions of transactional steps: a `PostgresStore`'s, when the engine was built
    /// over one by [`Engine::postgres`] (or [`Engine::connect`]).
    #[cfg(feature = "postgres")]
    step_transactions: Option<crate::store::StepTransactions>,
}

/// The message-workflow engine, in-process. Cheap to clone; clones share the store.
///
/// An `Engine` addresses one namespace (the wire's `graph`/`stack` scope); see
/// [`Engine::namespace`]. It implements [`Backend`], so handles and workers use it exactly as
/// they use a remote server.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
    ns: Arc<str>,
}

/// The namespace an engine addresses unless told otherwise.
pub const DEFAULT_NAMESPACE: &str = "default";

impl Engine {
    /// An engine over `store`, timed by `clock`. Over a `PostgresStore`, [`Engine::postgres`]
    /// also offers transactional steps.
    pub fn new(store: impl Store, clock: impl Clock, config: EngineConfig) -> Self {
        Self::from_parts(Arc::new(store), Arc::new(clock), config)
    }

    /// An engine over shared parts.
    ///
    /// An engine built this way offers no transactional steps (`Turn::transact`), whatever
    /// its store: over a `PostgresStore`, build it with [`Engine::postgres`].
    pub fn from_parts(store: Arc<dyn Store>, clock: Arc<dyn Clock>, config: EngineConfig) -> Self {
        Self::build(store, clock, config, Capabilities::default())
    }

    /// An engine over a PostgreSQL store, timed by `clock`, that offers its workers
    /// transactional steps (`Turn::transact`): a step's SQL and its checkpoint commit in one
    /// transaction of `store`'s database. [`Engine::connect`] with a `postgres://` address
    /// builds one with the system clock.
    #[cfg(feature = "postgres")]
    pub fn postgres(
        store: crate::store::PostgresStore,
        clock: impl Clock,
        config: EngineConfig,
    ) -> Self {
        let capabilities = Capabilities {
            step_transactions: Some(store.step_transactions()),
        };
        Self::build(Arc::new(store), Arc::new(clock), config, capabilities)
    }

    fn build(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        config: EngineConfig,
        capabilities: Capabilities,
    ) -> Self {
        let inner = Inner {
            store,
            clock,
            config,
            wakeups: wakeups::Wakeups::default(),
            claiming: claim::Claiming::default(),
            outcomes: outcomes::Outcomes::default(),
            #[cfg(feature = "test-util")]
            hold_deliveries: std::sync::atomic::AtomicBool::new(false),
            schemas: schemas::Schemas::default(),
            capabilities,
        };
        let inner = Arc::new(inner);
        // Other processes' commits on a shared store ring this engine's claims and readers
        // as its own commits do. The watcher holds the engine weakly, and leaves when the
        // engine is gone.
        let weak = Arc::downgrade(&inner);
        inner.store.watch(Arc::new(move |notice: &Notice| {
            let Some(inner) = weak.upgrade() else {
                return false;
            };
            inner.noticed(notice);
            true
        }));
        Self {
            inner,
            ns: Arc::from(DEFAULT_NAMESPACE),
        }
    }

    /// An engine over a fresh [`MemoryStore`] with the system clock: for tests and examples.
    pub fn in_memory() -> Self {
        Self::new(MemoryStore::new(), SystemClock, EngineConfig::default())
    }

    /// The same engine addressing another namespace. Instances in different namespaces are
    /// independent, even with equal ids.
    pub fn namespace(&self, ns: impl AsRef<str>) -> Self {
        Self {
            inner: self.inner.clone(),
            ns: Arc::from(ns.as_ref()),
        }
    }

    /// The namespace this engine addresses.
    pub fn ns(&self) -> &str {
        &self.ns
    }

    /// The engine's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// The engine's settings.
    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// The engine's store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// How many claims are parked in a long poll right now: asleep until a commit that
    /// concerns them rings them, or until the time they planned to look at the schedule again.
    ///
    /// It counts the claims of the whole engine (its clones and every [`Engine::namespace`]
    /// share them). A claim scanning the schedule, or rung and not yet looking again, is not
    /// counted, nor is a claim that does not wait (`wait_ms` 0). Cheap: one lock and a count,
    /// no store access. Tests use it to see a claim waiting instead of sleeping for it; the
    /// server shows it as the `turnwise_claims_waiting` gauge of `/metrics`.
    pub fn waiting_claims(&self) -> usize {
        self.inner.wakeups.sleeping()
    }

    /// Whether the store can take writes now ([`Store::health`]): `Err` is
    /// [`Error::Store`] saying why not (its files were deleted or replaced, a sync or the last
    /// write failed). Cheap: no query, no write.
    pub async fn health(&self) -> Result<()> {
        Ok(self.inner.store.health().await?)
    }

    fn now(&self) -> Millis {
        self.inner.clock.now_ms()
    }

    /// Read an instance or answer `NotFound`.
    async fn load(&self, id: &str) -> Result<InstanceRecord> {
        self.inner
            .store
            .load_instance(&self.ns, id)
            .await?
            .ok_or_else(|| Error::not_found(format_args!("instance `{id}`")))
    }

    /// Read a turn of an instance or answer `NotFound`.
    async fn load_turn(&self, inst: &InstanceRecord, number: u64) -> Result<TurnRecord> {
        self.inner
            .store
            .load_turn(&self.ns, &inst.id, number)
            .await?
            .ok_or_else(|| self.turn_not_found(inst, number))
    }

    /// `NotFound` for turn `number` of `inst`, saying whether retention pruned it.
    fn turn_not_found(&self, inst: &InstanceRecord, number: u64) -> Error {
        let why = if number <= inst.history_pruned_through {
            " (pruned from history)"
        } else {
            ""
        };
        Error::not_found(format_args!("turn {number} of `{}`{why}", inst.id))
    }

    /// Read the head turn of an instance, if it has one.
    async fn load_head(&self, inst: &InstanceRecord) -> Result<Option<TurnRecord>> {
        match inst.pending.first() {
            Some(&n) => Ok(self.inner.store.load_turn(&self.ns, &inst.id, n).await?),
            None => Ok(None),
        }
    }
}

impl Inner {
    /// Another process committed to the shared store: ring and wake as for a commit of ours.
    fn noticed(&self, notice: &Notice) {
        match notice {
            Notice::Changed(change) => {
                if let Some(at) = change.due_at_ms {
                    let workflow = workflow_key(&change.workflow_type, &change.version);
                    self.wakeups
                        .due(&change.ns, workflow, at, self.clock.now_ms());
                }
                if change.settled {
                    self.outcomes.settled(instance_key(&change.ns, &change.id));
                }
            }
            Notice::Missed => {
                self.wakeups.ring_all();
                self.outcomes.settled_all();
            }
        }
    }
}

/// A 64-bit key of a (type, version) pair, for ringing claims without copying the names. Two
/// pairs with one key only ring a claim that then finds nothing.
fn workflow_key(workflow_type: &str, version: &str) -> u64 {
    key_of((workflow_type, version))
}

/// A 64-bit key of an instance, for waking outcome waiters (and marking the instances claims
/// decide on) without copying its id. Two instances with one key only wake a waiter that reads
/// its turn and waits again.
fn instance_key(ns: &str, id: &str) -> u64 {
    key_of((ns, id))
}

fn key_of(parts: impl std::hash::Hash) -> u64 {
    use std::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

/// Bounds the read-decide-commit loop under contention.
struct Tries(u32);

impl Tries {
    const MAX: u32 = 64;

    fn new() -> Self {
        Tries(0)
    }

    fn next(&mut self, id: &str) -> Result<()> {
        self.0 += 1;
        if self.0 > Self::MAX {
            return Err(Error::store(format!(
                "instance `{id}` changed under {} consecutive writes; retry the request",
                Self::MAX
            )));
        }
        Ok(())
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("ns", &self.ns)
            .field("config", &self.inner.config)
            .finish()
    }
}
