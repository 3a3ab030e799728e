//! The worker: claims turns, runs their handlers, heartbeats their leases, reports the result.
//!
//! A worker has `concurrency` slots (default 1). Each free slot long-polls one claim; each
//! claimed turn runs in its own task with a lease heartbeat every third of the lease. A turn
//! whose lease is lost ([`Error::is_lease_lost`] on any turn route, or any heartbeat failure)
//! stops silently; the server hands it out again. A refusal ([`Error::is_refusal`]: a limit, a
//! size, a conflict) fails the turn for good with the server's message; any other error fails
//! the attempt retryably. Never by HTTP status. Stopping drains held turns for `drain` (default
//! 30 s), then releases the rest with a `retry_at_ms` one second ahead, so another worker picks
//! them up. A claim still waiting for a turn is abandoned at once.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument;

use crate::clock::{Clock, SystemClock};
use crate::protocol::backend::Backend;
use crate::protocol::error::Error;
use crate::protocol::*;
use crate::sdk::codec;
use crate::sdk::context::{checkpoint_of, refusal, Interrupt, Turn, TurnShared, MAX_STEPS};
use crate::sdk::workflow::{OnMismatch, TurnError, Workflow, WorkflowError};
use crate::trace::TraceContext;
use crate::worker_backend::WorkerBackend;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a finished handler asks the server to commit.
pub(crate) struct Finished {
    pub(crate) state: Value,
    pub(crate) result: Value,
    pub(crate) next: Option<Value>,
}

/// A registered workflow with its types erased.
pub(crate) trait Runnable: Send + Sync {
    fn workflow_ref(&self) -> WorkflowRef;
    fn schema(&self) -> Option<crate::sdk::schema::WorkflowSchema>;
    /// The version's replay manifest, built once per registered workflow.
    fn manifest(&self) -> Option<crate::manifest::Manifest>;
    /// What a replay mismatch does to a turn.
    fn on_mismatch(&self) -> OnMismatch;
    fn run(
        &self,
        shared: Arc<TurnShared>,
        task: TurnTask,
    ) -> BoxFuture<'_, Result<Finished, TurnError>>;
}

struct Registered<W> {
    workflow: W,
    /// The replay manifest, built the first time it is asked for: mismatch reports read their
    /// `file:line` from it.
    manifest: std::sync::OnceLock<Option<crate::manifest::Manifest>>,
}

fn permanent(e: impl std::fmt::Display) -> TurnError {
    TurnError::Permanent(WorkflowError::new(e.to_string()))
}

impl<W: Workflow> Runnable for Registered<W> {
    fn workflow_ref(&self) -> WorkflowRef {
        WorkflowRef::new(W::NAME, W::VERSION)
    }

    /// The workflow's schemas. Under a codec other than [`JsonCodec`](codec::JsonCodec) the
    /// wire carries the codec's encoding of a message or signal, not the JSON its type's
    /// schema describes: the message and signal schemas are left out (not checked).
    fn schema(&self) -> Option<crate::sdk::schema::WorkflowSchema> {
        let mut schema = self.workflow.schema()?;
        if std::any::TypeId::of::<W::Codec>() != std::any::TypeId::of::<codec::JsonCodec>() {
            schema.message = serde_json::Value::Null;
            schema.signals.clear();
        }
        Some(schema)
    }

    fn manifest(&self) -> Option<crate::manifest::Manifest> {
        self.manifest
            .get_or_init(|| self.workflow.manifest())
            .clone()
    }

    fn on_mismatch(&self) -> OnMismatch {
        self.workflow.on_mismatch()
    }

    fn run(
        &self,
        shared: Arc<TurnShared>,
        task: TurnTask,
    ) -> BoxFuture<'_, Result<Finished, TurnError>> {
        Box::pin(async move {
            let mut ctx = Turn::<W>::new(shared, task.turn.steps);
            // Saved data this code cannot read suspends the turn, like a replay mismatch.
            let state: W::State = codec::decode(&W::Codec::default(), "state", &task.state)
                .map_err(|e| ctx.unreadable("the state", None, &e))?;
            let message: W::Message =
                codec::decode(&W::Codec::default(), "message", &task.turn.message)
                    .map_err(|e| ctx.unreadable("the message", None, &e))?;
            let done = self.workflow.run(&mut ctx, state, message).await?;
            ctx.check_replayed()?;
            let (state, _) =
                codec::encode_checked(&W::Codec::default(), "state", &done.state, W::state_eq())
                    .map_err(permanent)?;
            let result = match &done.reply {
                Some(r) => {
                    codec::encode_checked(&W::Codec::default(), "reply", r, W::reply_eq())
                        .map_err(permanent)?
                        .0
                }
                None => Value::Null,
            };
            let next = match &done.next {
                Some(m) => Some(
                    codec::encode_checked(
                        &W::Codec::default(),
                        "continuation message",
                        m,
                        W::message_eq(),
                    )
                    .map_err(permanent)?
                    .0,
                ),
                None => None,
            };
            Ok(Finished {
                state,
                result,
                next,
            })
        })
    }
}

/// The workflows a worker runs, by (name, version).
#[derive(Clone, Default)]
pub(crate) struct Registry {
    by_ref: HashMap<WorkflowRef, Arc<dyn Runnable>>,
}

impl Registry {
    pub(crate) fn add<W: Workflow>(&mut self, workflow: W) {
        let r: Arc<dyn Runnable> = Arc::new(Registered {
            workflow,
            manifest: std::sync::OnceLock::new(),
        });
        self.by_ref.insert(r.workflow_ref(), r);
    }

    fn refs(&self) -> Vec<WorkflowRef> {
        let mut refs: Vec<WorkflowRef> = self.by_ref.keys().cloned().collect();
        refs.sort();
        refs
    }
}

/// How a worker is stopping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    Running,
    /// No new claims; held turns finish.
    Draining,
    /// Release held turns now.
    Release,
}

/// Worker settings.
#[derive(Clone, Debug)]
struct Options {
    id: String,
    concurrency: usize,
    claim_wait: Duration,
    drain: Duration,
    progress_every: Duration,
}

/// A worker. Build it, register workflows, then [`run`](Worker::run) it.
///
/// ```
/// # use turnwise::prelude::*;
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Serialize, Deserialize, Default)] struct Count { count: u64 }
/// # struct Counter;
/// # impl Workflow for Counter {
/// #     type State = Count; type Message = u64; type Reply = u64; type Codec = turnwise::codec::JsonCodec;
/// #     const NAME: &'static str = "counter"; const VERSION: &'static str = "v1";
/// #     async fn run(&self, ctx: &mut Turn<Self>, state: Count, add: u64) -> TurnResult<Self> {
/// #         let add = ctx.step("add", |_s| async move { Ok(add) }).await?;
/// #         Ok(Done::new(Count { count: state.count + add }).reply(state.count + add))
/// #     }
/// # }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), turnwise::Error> {
/// let engine = turnwise::Engine::in_memory();
/// let counter = Counter.start(&engine, "counter-1").await?;
/// counter.send(2, "request-1").await?;
///
/// let worker = Worker::new(engine.clone()).register(Counter).concurrency(4);
/// worker.run_until_idle().await?;
/// assert_eq!(counter.state().await?.count, 2);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Worker {
    backend: Arc<dyn WorkerBackend>,
    registry: Registry,
    options: Options,
    clock: Arc<dyn Clock>,
    /// Whether the registered workflows' schemas were registered with the backend.
    schemas_registered: Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("options", &self.options)
            .field("workflows", &self.registry.refs())
            .finish()
    }
}

impl Worker {
    /// A worker over `backend` with no workflows yet.
    pub fn new(backend: impl WorkerBackend + 'static) -> Self {
        let id = format!("worker-{}", std::process::id());
        Self {
            backend: Arc::new(backend),
            registry: Registry::default(),
            options: Options {
                id,
                concurrency: 1,
                claim_wait: Duration::from_secs(10),
                drain: Duration::from_secs(30),
                progress_every: Duration::from_secs(3),
            },
            clock: Arc::new(SystemClock),
            schemas_registered: Arc::default(),
        }
    }

    /// The replay manifests of the registered workflows, sorted by name and version: what
    /// [`turnwise::manifest::files::check`](crate::manifest::files::check) compares with the
    /// committed files.
    pub fn manifests(&self) -> Vec<crate::manifest::Manifest> {
        let mut out: Vec<_> = self
            .registry
            .by_ref
            .values()
            .filter_map(|r| r.manifest())
            .collect();
        out.sort_by(|a, b| (&a.name, &a.version).cmp(&(&b.name, &b.version)));
        out
    }

    /// Run this workflow's turns. Its schemas are registered with the backend
    /// ([`Worker::register_schemas`]) before the worker's first claim, so that the engine or
    /// server checks the messages and signals admitted for it.
    pub fn register<W: Workflow>(mut self, workflow: W) -> Self {
        self.registry.add(workflow);
        self.schemas_registered = Arc::default();
        self
    }

    /// How many turns run at once (default 1).
    pub fn concurrency(mut self, slots: usize) -> Self {
        self.options.concurrency = slots.max(1);
        self
    }

    /// The worker id recorded on the turns it claims (default `worker-<pid>`).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.options.id = id.into();
        self
    }

    /// How long an idle claim waits on the server (default 10 s).
    pub fn claim_wait(mut self, wait: Duration) -> Self {
        self.options.claim_wait = wait;
        self
    }

    /// How long a stop lets held turns finish before releasing them (default 30 s).
    pub fn drain(mut self, drain: Duration) -> Self {
        self.options.drain = drain;
        self
    }

    /// The coalescing interval of step progress (default 3 s).
    pub fn progress_every(mut self, every: Duration) -> Self {
        self.options.progress_every = every;
        self
    }

    /// The clock used for `retry_at` times (default the system clock; tests use a manual one).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    fn claim_request(&self, wait: Duration) -> ClaimRequest {
        ClaimRequest {
            worker: self.options.id.clone(),
            workflows: self.registry.refs(),
            wait_ms: wait.as_millis() as u64,
            include_execution_credential: None,
        }
    }

    /// Claim one ready turn without waiting and run it to the end of its attempt. Returns
    /// whether a turn was claimed.
    pub async fn run_once(&self) -> Result<bool, Error> {
        self.register_schemas_once().await;
        let (_tx, stop) = watch::channel(Stop::Running);
        match self
            .backend
            .claim(self.claim_request(Duration::ZERO))
            .await?
            .task
        {
            Some(task) => {
                self.drive(task, stop).await;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Run turns until none is ready now. Returns how many attempts ran.
    pub async fn run_until_idle(&self) -> Result<usize, Error> {
        let mut n = 0;
        while self.run_once().await? {
            n += 1;
        }
        Ok(n)
    }

    /// Run until SIGTERM or SIGINT. The first SIGTERM drains held turns for the drain time
    /// and then releases the rest; a SIGINT or a second SIGTERM releases them at once; a second
    /// SIGINT stops without releasing (their leases expire). Where there are no Unix signals
    /// (Windows), Ctrl-C counts as SIGINT and nothing as SIGTERM.
    pub async fn run(self) -> Result<(), Error> {
        let handler = |listen: fn() -> std::io::Result<signals::Listener>, name: &str| {
            listen().map_err(|e| {
                Error::transport_caused(format_args!("installing the {name} handler"), e)
            })
        };
        let mut term = handler(signals::Listener::terminate, "SIGTERM")?;
        let mut int = handler(signals::Listener::interrupt, "SIGINT")?;
        let RunningWorker { stop, mut task } = self.run_async();
        let (mut terms, mut ints) = (0, 0);
        loop {
            tokio::select! {
                r = &mut task => return r.unwrap_or_else(|e| Err(Error::transport_caused("worker task", e))),
                _ = term.recv() => {
                    terms += 1;
                    let next = if terms == 1 { Stop::Draining } else { Stop::Release };
                    tracing::info!(?next, "SIGTERM");
                    stop.send_replace(next);
                }
                _ = int.recv() => {
                    ints += 1;
                    if ints > 1 {
                        tracing::warn!("second SIGINT: stopping without releasing held turns");
                        task.abort();
                        return Ok(());
                    }
                    tracing::info!("SIGINT: releasing held turns");
                    stop.send_replace(Stop::Release);
                }
            }
        }
    }

    /// Start the worker in the background; stop it with [`RunningWorker::stop`].
    pub fn run_async(self) -> RunningWorker {
        let stop = Arc::new(watch::Sender::new(Stop::Running));
        let task = tokio::spawn(Arc::new(self).serve(stop.clone()));
        RunningWorker { stop, task }
    }

    /// Register every workflow's schemas, with its replay manifest, with the backend (a server
    /// validates admissions with the schemas; the compatibility check reads the manifests).
    /// Called when the worker starts serving; a refusal is reported, not fatal.
    pub async fn register_schemas(&self) -> Result<usize, Error> {
        let mut n = 0;
        for r in self.registry.by_ref.values() {
            if let Some(schema) = r.schema() {
                let mut document = schema.document();
                document.manifest = r.manifest();
                self.backend.register_schema(&document).await?;
                n += 1;
            }
        }
        self.schemas_registered
            .store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(n)
    }

    /// [`Worker::register_schemas`] unless done since the last [`Worker::register`]; a
    /// refusal is reported, not fatal, and tried again next time.
    async fn register_schemas_once(&self) {
        if self
            .schemas_registered
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        if let Err(e) = self.register_schemas().await {
            tracing::warn!(error = %e, "registering workflow schemas failed; admissions go unvalidated");
        }
    }

    async fn serve(self: Arc<Self>, stop: Arc<watch::Sender<Stop>>) -> Result<(), Error> {
        self.register_schemas_once().await;
        let mut slots = JoinSet::new();
        for slot in 0..self.options.concurrency {
            slots.spawn(self.clone().slot(slot, stop.subscribe()));
        }
        let mut next_slot = self.options.concurrency;
        let mut changes = stop.subscribe();
        let mut drain_timer: Option<tokio::task::JoinHandle<()>> = None;
        let mut result = Ok(());
        loop {
            tokio::select! {
                joined = slots.join_next() => match joined {
                    None => break,
                    Some(Ok(Err(e))) => {
                        // A claim refusal other than transport/429/5xx ends the worker: release
                        // what the other slots hold, then report it.
                        stop.send_replace(Stop::Release);
                        result = Err(e);
                    }
                    Some(Err(e)) if e.is_panic() => {
                        // Handler panics are caught per turn; this is a panic in the slot's own
                        // loop. Keep the worker at its concurrency rather than shrinking silently.
                        tracing::error!(error = %e, "a worker slot panicked; starting a new one");
                        if *stop.borrow() == Stop::Running {
                            next_slot += 1;
                            slots.spawn(self.clone().slot(next_slot, stop.subscribe()));
                        }
                    }
                    Some(_) => {}
                },
                changed = changes.changed() => {
                    if changed.is_ok() && *changes.borrow_and_update() == Stop::Draining && drain_timer.is_none() {
                        let stop = stop.clone();
                        let drain = self.options.drain;
                        drain_timer = Some(tokio::spawn(async move {
                            tokio::time::sleep(drain).await;
                            stop.send_replace(Stop::Release);
                        }));
                    }
                }
            }
        }
        if let Some(t) = drain_timer {
            t.abort();
        }
        result
    }

    async fn slot(self: Arc<Self>, slot: usize, stop: watch::Receiver<Stop>) -> Result<(), Error> {
        let mut backoff = Duration::ZERO;
        loop {
            if *stop.borrow() != Stop::Running {
                return Ok(());
            }
            if !backoff.is_zero() {
                let mut s = stop.clone();
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    _ = s.changed() => return Ok(()),
                }
            }
            // The claim long-polls for up to the claim wait: race it with the stop signal, so an
            // idle worker stops at once. A claim dropped here was either still waiting (nothing
            // granted) or, in a narrow window, granted a turn this worker never saw: that turn
            // stays leased until its lease expires and is then claimed again as a new attempt,
            // as after a worker that vanished. A claim that answered first is taken (`biased`)
            // and released below.
            let claim = self
                .backend
                .claim(self.claim_request(self.options.claim_wait));
            let mut s = stop.clone();
            let claimed = tokio::select! {
                biased;
                claimed = claim => claimed,
                _ = s.wait_for(|state| *state != Stop::Running) => return Ok(()),
            };
            let task = match claimed {
                Ok(r) => {
                    backoff = Duration::ZERO;
                    r.task
                }
                Err(e) if e.is_retryable() || e.status() == 429 || e.status() >= 500 => {
                    backoff = next_backoff(backoff);
                    tracing::warn!(slot, error = %e, ?backoff, "claim failed; backing off");
                    continue;
                }
                Err(e) => {
                    tracing::error!(slot, error = %e, "claim refused; the worker stops");
                    return Err(e);
                }
            };
            let Some(task) = task else { continue };
            if *stop.borrow() != Stop::Running {
                self.release(&task).await;
                return Ok(());
            }
            self.drive(task, stop.clone()).await;
        }
    }

    async fn release(&self, task: &TurnTask) {
        let lease = Lease {
            workflow_id: task.turn.workflow_id.clone(),
            turn: task.turn.number,
            token: task.token.clone(),
        };
        self.release_lease(lease).await;
    }

    /// Run one claimed attempt to its end.
    /// One claimed turn's attempt, in its trace and span: build its shared context, run its
    /// handler, conclude it with the backend.
    async fn drive(&self, task: TurnTask, mut stop: watch::Receiver<Stop>) {
        // The trace the message was admitted in, else a new one for this attempt.
        let trace = task
            .turn
            .traceparent
            .as_deref()
            .and_then(TraceContext::parse)
            .map_or_else(TraceContext::new_root, |c| c.child());
        let span = tracing::info_span!(
            "turn",
            workflow_id = %task.turn.workflow_id,
            turn = task.turn.number,
            attempt = task.turn.attempt,
            workflow = %task.workflow_type,
            trace_id = %trace.trace_id(),
        );
        let started = Instant::now();
        let workflow_type = task.workflow_type.clone();
        let outcome = trace
            .scope(
                async move {
                    let (workflow, mut attempt) = self.build(&task)?;
                    let handler = workflow.run(attempt.shared.clone(), task);
                    let end = self.run_handler(&mut attempt, handler, &mut stop).await;
                    Some(self.conclude(&*workflow, attempt, end).await)
                }
                .instrument(span),
            )
            .await;
        if let Some(outcome) = outcome {
            crate::metrics::worker_turn(&workflow_type, outcome, started.elapsed());
        }
    }

    /// The attempt's shared turn context and the channels its handler and heartbeats report
    /// through, with the registered workflow that runs it; `None` for a workflow version this
    /// worker does not run.
    fn build(&self, task: &TurnTask) -> Option<(Arc<dyn Runnable>, Attempt)> {
        let wref = WorkflowRef::new(task.workflow_type.clone(), task.turn.version.clone());
        let Some(workflow) = self.registry.by_ref.get(&wref).cloned() else {
            // Never fail a turn we cannot run: the server recovers it by lease expiry.
            tracing::error!(
                ?wref,
                "the server returned an unregistered workflow version"
            );
            return None;
        };
        let lease = Lease {
            workflow_id: task.turn.workflow_id.clone(),
            turn: task.turn.number,
            token: task.token.clone(),
        };
        let (interrupt, interrupted) = watch::channel(None);
        let (heartbeats, beating) = watch::channel(true);
        let shared = Arc::new(TurnShared {
            backend: self.backend.clone(),
            lease: lease.clone(),
            effect_prefix: task.effect_prefix.clone(),
            workflow: task.workflow_type.clone(),
            version: task.turn.version.clone(),
            interrupt,
            heartbeats,
            progress_every: self.options.progress_every,
            clock: self.clock.clone(),
            steps_max: task
                .steps_max
                .map_or(MAX_STEPS, |n| usize::try_from(n).unwrap_or(usize::MAX)),
            deferred: Default::default(),
            mismatch: Default::default(),
        });
        let attempt = Attempt {
            shared,
            lease,
            interrupted,
            beating,
            every: Duration::from_millis((task.lease_ms / 3).max(20)),
            beat_timeout: Duration::from_millis((task.lease_ms / 3).max(50)),
        };
        Some((workflow, attempt))
    }

    /// Run the handler to its end, heartbeating the lease while the handler asks for it, until
    /// it finishes, an interrupt or a lost heartbeat stops it, or the worker releases it.
    async fn run_handler(
        &self,
        attempt: &mut Attempt,
        handler: BoxFuture<'_, Result<Finished, TurnError>>,
        stop: &mut watch::Receiver<Stop>,
    ) -> End {
        let Attempt {
            shared,
            lease,
            interrupted,
            beating,
            every,
            beat_timeout,
        } = attempt;
        let (every, beat_timeout) = (*every, *beat_timeout);
        let mut fut = CatchPanic(SendDeferredWhenWaiting {
            shared: shared.clone(),
            fut: handler,
        });
        let mut next_beat = Instant::now() + every;
        let end = loop {
            let beat = *beating.borrow_and_update();
            tokio::select! {
                biased;
                _ = interrupted.changed() => break End::Interrupted(interrupted.borrow().clone()),
                r = &mut fut => break End::Finished(r.unwrap_or_else(|panic| {
                    // A panicking handler fails its attempt like an ordinary error, instead
                    // of unwinding through the slot (which lost the slot, and with one slot
                    // the whole worker, while the turn waited for its lease to expire).
                    Err(TurnError::retry(format!("the handler panicked: {}", panic_message(&*panic))))
                })),
                changed = stop.changed() => {
                    if changed.is_err() || *stop.borrow() == Stop::Release { break End::Release; }
                }
                _ = beating.changed() => { next_beat = Instant::now() + every; }
                () = tokio::time::sleep_until(next_beat), if beat => {
                    match tokio::time::timeout(beat_timeout, self.backend.heartbeat_ack(lease.clone())).await {
                        Ok(Ok(_)) => next_beat = Instant::now() + every,
                        Ok(Err(e)) => break End::Interrupted(Some(Interrupt::Lost(e.to_string()))),
                        Err(_) => break End::Interrupted(Some(Interrupt::Lost("the heartbeat timed out".into()))),
                    }
                }
            }
        };
        // Dropping the handler future here is what suspends it: no code after the await
        // that interrupted it ever runs.
        drop(fut);
        end
    }

    /// Report how the attempt ended to the backend; the outcome's metric label. A step the
    /// attempt finished is saved before the attempt reports how it ended, so the next attempt
    /// replays it.
    async fn conclude(&self, workflow: &dyn Runnable, attempt: Attempt, end: End) -> &'static str {
        let Attempt { shared, lease, .. } = attempt;
        if let (End::Finished(_), Some(report)) = (&end, shared.mismatch()) {
            // Whatever the handler made of the mismatch's error, the attempt ends with it.
            return match flush_deferred(&shared).await {
                Ok(()) => self.mismatch(workflow, lease, report).await,
                Err(Some(refused)) => {
                    self.fail(lease, refused).await;
                    "failed"
                }
                Err(None) => "interrupted",
            };
        }
        match end {
            End::Interrupted(why) => {
                if !matches!(why, Some(Interrupt::Lost(_))) {
                    let _ = flush_deferred(&shared).await;
                }
                tracing::debug!(?why, "attempt ended without an answer");
                "interrupted"
            }
            End::Release => {
                if !matches!(flush_deferred(&shared).await, Err(None)) {
                    self.release_lease(lease).await;
                }
                "released"
            }
            End::Finished(Ok(done)) => {
                self.complete(&shared, lease, done).await;
                "completed"
            }
            End::Finished(Err(e)) => {
                // A refused checkpoint is reported instead of `e`.
                match flush_deferred(&shared).await {
                    Ok(()) => self.fail(lease, e).await,
                    Err(Some(refused)) => self.fail(lease, refused).await,
                    Err(None) => tracing::debug!("turn lost before failing"),
                }
                "failed"
            }
        }
    }

    /// End an attempt that met a replay mismatch, as the workflow asks: suspend the turn with
    /// `report` (its `at` read from the version's manifest), or fail it for good. The outcome's
    /// metric label.
    async fn mismatch(
        &self,
        workflow: &dyn Runnable,
        lease: Lease,
        mut report: MismatchReport,
    ) -> &'static str {
        report.at = report
            .found
            .as_ref()
            .and_then(|found| locate(workflow.manifest().as_ref()?, found));
        if workflow.on_mismatch() == OnMismatch::Fail {
            let e = TurnError::Permanent(WorkflowError::new(report.message));
            self.fail(lease, e).await;
            return "failed";
        }
        let error = format!("ReplayMismatch: {}", report.message);
        tracing::warn!(%error, at = ?report.at, "replay mismatch: suspending the turn");
        let req = FailRequest {
            lease,
            error,
            non_retryable: false,
            retry_at_ms: None,
            usage: None,
            results: None,
            mismatch: Some(report),
        };
        match self.backend.fail(req).await {
            Ok(_) => {}
            Err(e) if e.is_lease_lost() => {
                tracing::debug!(error = %e, "turn lost before suspending")
            }
            Err(e) => {
                tracing::warn!(error = %e, "suspending the turn failed; the lease will expire")
            }
        }
        "suspended"
    }

    async fn release_lease(&self, lease: Lease) {
        let now = self.clock.now_ms();
        let fail = FailRequest {
            lease,
            error: "the worker stopped and released the turn".into(),
            non_retryable: false,
            retry_at_ms: Some(now + 1000),
            usage: None,
            results: None,
            mismatch: None,
        };
        if let Err(e) = self.backend.fail(fail).await {
            tracing::warn!(error = %e, "releasing a turn failed; its lease will expire");
        }
    }

    async fn complete(&self, shared: &TurnShared, lease: Lease, done: Finished) {
        let req = CompleteRequest {
            lease: lease.clone(),
            state: done.state,
            result: done.result,
            continuation: done.next.map(|message| Continuation { message }),
            usage: None,
            results: None,
        };
        // The last step's checkpoint, if still deferred, goes with the completion.
        let saved = match shared.take_deferred_raw().await {
            Ok(None) => Ok(self.backend.complete_ack(req).await),
            Ok(Some(save)) => {
                let key = save.key.clone();
                let both = self.backend.checkpoint_then_complete(save, req).await;
                both.map_err(|e| (key, e))
            }
            Err(refused) => Err(refused),
        };
        let completed = match saved {
            Ok(completed) => completed,
            Err((key, e)) => match refusal(&checkpoint_of(&key), e) {
                Ok(e) => return self.fail(lease, e).await,
                Err(e) => return tracing::debug!(error = %e, "turn lost before completing"),
            },
        };
        match completed {
            Ok(_) => tracing::debug!("turn completed"),
            Err(e) if e.is_lease_lost() => {
                tracing::debug!(error = %e, "turn lost before completing")
            }
            // A refused completion (a state or reply over its limit, say) fails the turn for
            // good with the server's message; anything else fails the attempt retryably.
            Err(e) if e.is_refusal() => {
                let why = format!("the completion was refused ({}): {e}", e.code());
                self.fail(lease, TurnError::permanent(why)).await
            }
            Err(e) => self.fail(lease, TurnError::Retry(Box::new(e))).await,
        }
    }

    async fn fail(&self, lease: Lease, e: TurnError) {
        // A child call's failure that came through `?` fails the turn for good.
        let e = crate::sdk::context::child_error(e);
        let now = self.clock.now_ms();
        let (non_retryable, retry_at_ms) = match &e {
            TurnError::Permanent(_) => (true, None),
            // Kept within the times a request may name (`durations::TIME`): the engine takes
            // any of them, moved into now + 1 s ..= now + 366 days.
            TurnError::Wait(w) => {
                let last = turnwise_rules::durations::TIME.max as crate::protocol::Millis;
                (false, Some(w.retry_at_ms.max(now + 1000).min(last)))
            }
            TurnError::Retry(_) => (false, None),
        };
        let error = e.wire_message();
        tracing::info!(%error, non_retryable, "attempt failed");
        let req = FailRequest {
            lease,
            error,
            non_retryable,
            retry_at_ms,
            usage: None,
            results: None,
            mismatch: None,
        };
        match self.backend.fail(req).await {
            Ok(_) => {}
            Err(e) if e.is_lease_lost() => {
                tracing::debug!(error = %e, "turn lost before failing")
            }
            Err(e) => {
                tracing::warn!(error = %e, "reporting the failure failed; the lease will expire")
            }
        }
    }
}

/// One attempt being driven: its shared turn context, its lease, and the channels its
/// handler reports interrupts and heartbeat wishes through.
struct Attempt {
    shared: Arc<TurnShared>,
    lease: Lease,
    interrupted: watch::Receiver<Option<Interrupt>>,
    beating: watch::Receiver<bool>,
    /// How often the lease is heartbeaten: a third of the lease.
    every: Duration,
    /// How long one heartbeat may take before the lease counts as lost.
    beat_timeout: Duration,
}

/// How an attempt's handler run ended.
enum End {
    /// The handler returned (or panicked, as a retryable error).
    Finished(Result<Finished, TurnError>),
    /// An interrupt stopped it, or a heartbeat lost the lease.
    Interrupted(Option<Interrupt>),
    /// The worker is stopping and releases the turn.
    Release,
}

/// Where the code makes the call `found`, from the version's manifest: the `file:line` of the
/// call whose key (or key pattern) and kind match it, an exact key before a pattern; for a
/// patch's marker, where `ctx.patched` is called.
fn locate(
    manifest: &crate::manifest::Manifest,
    found: &crate::manifest::grammar::Saved,
) -> Option<String> {
    use crate::manifest::grammar;
    if let Some(id) = found.marker_id() {
        return patch_at(&manifest.grammar, id);
    }
    let calls = grammar::calls(&manifest.grammar);
    let matching = |exact: bool| {
        calls
            .iter()
            .find(|c| grammar::call_matches(c, found) && (!exact || c.key == found.key))
    };
    matching(true)
        .or_else(|| matching(false))
        .map(|c| c.at.clone())
        .filter(|at| !at.is_empty())
}

/// Where patch `id` asks `ctx.patched`, in `node`.
fn patch_at(node: &crate::manifest::Node, id: &str) -> Option<String> {
    use crate::manifest::Node;
    match node {
        Node::Patch(p) if p.id == id => Some(p.at.clone()).filter(|at| !at.is_empty()),
        Node::Patch(p) => patch_at(&p.new, id).or_else(|| patch_at(&p.old, id)),
        Node::Seq(parts) | Node::Parallel(parts) => parts.iter().find_map(|n| patch_at(n, id)),
        Node::Alt(alt) => alt.arms.iter().find_map(|n| patch_at(n, id)),
        Node::Loop(body) => patch_at(body, id),
        Node::Call(_) => None,
    }
}

/// Send the attempt's deferred step checkpoint, if any, on its own, for the driver. `Err(None)`:
/// the lease is lost, send nothing more; `Err(Some(e))`: the checkpoint was refused, report `e`.
async fn flush_deferred(shared: &TurnShared) -> Result<(), Option<TurnError>> {
    let flushed = shared.flush_deferred_raw().await;
    flushed.map_err(|(key, e)| refusal(&checkpoint_of(&key), e).ok())
}

/// A handler future that sends a deferred step checkpoint on its own whenever the handler waits
/// (see [`Deferred`](crate::sdk::context::Deferred)): a step checkpoint is never deferred across a wait.
struct SendDeferredWhenWaiting<F> {
    shared: Arc<TurnShared>,
    fut: F,
}

impl<F: Future + Unpin> Future for SendDeferredWhenWaiting<F> {
    type Output = F::Output;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let poll = Pin::new(&mut self.fut).poll(cx);
        if poll.is_pending() {
            self.shared.send_deferred();
        }
        poll
    }
}

/// A handler future whose panics are caught and returned.
struct CatchPanic<F>(F);

impl<F: Future + Unpin> Future for CatchPanic<F> {
    type Output = Result<F::Output, Box<dyn std::any::Any + Send>>;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let fut = &mut self.0;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Pin::new(fut).poll(cx))) {
            Ok(poll) => poll.map(Ok),
            Err(panic) => std::task::Poll::Ready(Err(panic)),
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-string panic payload")
}

fn next_backoff(prev: Duration) -> Duration {
    if prev.is_zero() {
        Duration::from_secs(1)
    } else {
        (prev * 2).min(Duration::from_secs(30))
    }
}

/// A worker running in the background.
#[derive(Debug)]
pub struct RunningWorker {
    stop: Arc<watch::Sender<Stop>>,
    task: tokio::task::JoinHandle<Result<(), Error>>,
}

impl RunningWorker {
    /// Stop claiming, let held turns finish for up to the worker's drain time (see
    /// [`Worker::drain`]), release what is left, and wait for the worker to end. Claims still
    /// waiting for a turn are abandoned at once, so an idle worker stops without waiting out its
    /// claim wait.
    pub async fn stop(self) -> Result<(), Error> {
        self.stop.send_if_modified(|s| {
            let was = *s;
            if was == Stop::Running {
                *s = Stop::Draining;
            }
            was == Stop::Running
        });
        self.join().await
    }

    /// Release every held turn at once and wait for the worker to end (claims still waiting
    /// for a turn are abandoned, as by [`stop`](RunningWorker::stop)).
    pub async fn stop_now(self) -> Result<(), Error> {
        self.stop.send_replace(Stop::Release);
        self.join().await
    }

    async fn join(self) -> Result<(), Error> {
        self.task
            .await
            .unwrap_or_else(|e| Err(Error::transport_caused("worker task", e)))
    }
}

/// The two stop signals `Worker::run` listens for.
#[cfg(unix)]
mod signals {
    use tokio::signal::unix::{signal, Signal, SignalKind};

    /// One signal's stream of arrivals.
    pub(super) struct Listener(Signal);

    impl Listener {
        pub(super) fn terminate() -> std::io::Result<Self> {
            signal(SignalKind::terminate()).map(Self)
        }

        pub(super) fn interrupt() -> std::io::Result<Self> {
            signal(SignalKind::interrupt()).map(Self)
        }

        /// The next arrival (never, once the stream has ended).
        pub(super) async fn recv(&mut self) {
            if self.0.recv().await.is_none() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// The two stop signals `Worker::run` listens for, without Unix signals: Ctrl-C is the
/// interrupt and nothing terminates.
#[cfg(not(unix))]
mod signals {
    /// Ctrl-C (`true`) or a signal that never arrives (`false`).
    pub(super) struct Listener(bool);

    impl Listener {
        pub(super) fn terminate() -> std::io::Result<Self> {
            Ok(Self(false))
        }

        pub(super) fn interrupt() -> std::io::Result<Self> {
            Ok(Self(true))
        }

        /// The next arrival (never, for the one without a counterpart here).
        pub(super) async fn recv(&mut self) {
            if self.0 && tokio::signal::ctrl_c().await.is_ok() {
                return;
            }
            std::future::pending::<()>().await;
        }
    }
}
