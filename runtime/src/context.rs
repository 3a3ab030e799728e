//! The turn context ([`Turn`]) and the step context ([`StepCtx`]).
//!
//! A turn runs the handler from the top. Every durable call (step, sleep, signal wait) takes
//! the next *position*; where the turn already has a saved entry at that position, the call
//! replays it (checking key, kind, sleep length and signal name) and returns the saved value
//! instead of running again. A call that suspends the turn (a sleep not yet due, a signal wait
//! with no signal) ends the attempt by never completing: the worker drops the handler's future
//! at that await, so no code after it runs, whatever the handler does with errors.

use std::collections::HashSet;
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::backend::Backend;
use crate::clock::Clock;
use crate::codec;
use crate::error::Error;
use crate::protocol::*;
use crate::validate;
use crate::workflow::{Accepts, Done, Signal, TurnError, Workflow, WorkflowError};

/// The most durable calls (steps, sleeps, signal waits) a turn holds by default: the wire's
/// 64, the engine's default `Limits::steps_per_turn`, and the step context's limit when a
/// claim does not carry one. A claim from a turnwise server carries the engine's own limit
/// (the task's `steps_max`), and the step context enforces that instead.
///
/// The number is `turnwise_rules::limits::STEPS_PER_TURN`, which the macros' compile-time
/// budget check reads too.
pub const MAX_STEPS: usize = turnwise_rules::limits::STEPS_PER_TURN;

/// Why an attempt stopped without an answer of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Interrupt {
    /// A sleep or signal wait released the turn; the server re-offers it when due.
    Suspended,
    /// The lease is gone (another holder, expiry, cancellation): send nothing more.
    Lost(String),
    /// A local step timeout fired: send nothing; the server expires the attempt.
    Abandoned(String),
}

/// What a turn shares with the worker driving it.
pub(crate) struct TurnShared {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) lease: Lease,
    pub(crate) effect_prefix: String,
    pub(crate) workflow: String,
    pub(crate) version: String,
    pub(crate) interrupt: watch::Sender<Option<Interrupt>>,
    /// Whether the driver should send lease heartbeats now.
    pub(crate) heartbeats: watch::Sender<bool>,
    pub(crate) progress_every: Duration,
    pub(crate) clock: Arc<dyn Clock>,
    /// The most durable calls the turn may hold: the claim's `steps_max`, else [`MAX_STEPS`].
    pub(crate) steps_max: usize,
}

impl TurnShared {
    /// Stop the attempt with `why` and never return: the driver drops the handler future.
    async fn stop(&self, why: Interrupt) -> ! {
        self.interrupt.send_if_modified(|slot| {
            if slot.is_none() {
                *slot = Some(why);
                true
            } else {
                false
            }
        });
        std::future::pending::<()>().await;
        unreachable!("a pending future never completes")
    }

    /// Map a backend error of a turn route by what it means, never by its status: a lost
    /// lease stops the attempt silently; a refusal ([`Error::is_refusal`]: a limit, a size, a
    /// conflict, an invalid value) fails the turn for good with the server's message and code;
    /// anything else (a store or transport failure, an error the protocol does not know)
    /// fails the attempt retryably.
    async fn check<T>(&self, what: &str, r: Result<T, Error>) -> Result<T, TurnError> {
        match r {
            Ok(v) => Ok(v),
            Err(e) => Err(self.refused(what, e).await),
        }
    }

    /// The [`TurnError`] of a refused call (see [`check`](Self::check)); never returns for a
    /// lost lease.
    pub(crate) async fn refused(&self, what: &str, e: Error) -> TurnError {
        if e.is_lease_lost() {
            self.stop(Interrupt::Lost(e.to_string())).await
        }
        if e.is_refusal() {
            return TurnError::permanent(format!("{what} was refused ({}): {e}", e.code()));
        }
        TurnError::Retry(Box::new(e))
    }
}

/// Options of one step call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepOptions {
    /// What kind of work the step does (metadata). Default [`OperationKind::Step`].
    pub kind: OperationKind,
    /// Per-attempt timeout. Default 5 minutes; 100 ms to 24 h.
    pub timeout: Duration,
    /// Abandon the attempt if the step reports no progress for this long.
    pub heartbeat_timeout: Option<Duration>,
}

impl Default for StepOptions {
    fn default() -> Self {
        Self {
            kind: OperationKind::Step,
            timeout: Duration::from_secs(300),
            heartbeat_timeout: None,
        }
    }
}

/// The context of one turn, handed to the workflow handler.
///
/// Steps borrow it mutably, so two steps can never be in flight at once.
pub struct Turn<W> {
    shared: Arc<TurnShared>,
    saved: Vec<StepCheckpoint>,
    position: usize,
    keys: HashSet<String>,
    _workflow: PhantomData<fn() -> W>,
}

impl<W> std::fmt::Debug for Turn<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn")
            .field("workflow_id", &self.shared.lease.workflow_id)
            .field("turn", &self.shared.lease.turn)
            .field("position", &self.position)
            .finish()
    }
}

impl<W: Workflow> Turn<W> {
    pub(crate) fn new(shared: Arc<TurnShared>, saved: Vec<StepCheckpoint>) -> Self {
        Self {
            shared,
            saved,
            position: 0,
            keys: HashSet::new(),
            _workflow: PhantomData,
        }
    }

    /// The instance id.
    pub fn workflow_id(&self) -> &str {
        &self.shared.lease.workflow_id
    }

    /// The turn number.
    pub fn turn_number(&self) -> u64 {
        self.shared.lease.turn
    }

    /// The effect id a step with `key` gets: `<effect_prefix>/<key>`, stable across attempts.
    pub fn effect_id(&self, key: &str) -> String {
        format!("{}/{key}", self.shared.effect_prefix)
    }

    /// After the handler returned: every saved entry must have been replayed. Otherwise the
    /// permanent failure names the first entry left over and its position.
    pub(crate) fn check_replayed(&self) -> Result<(), TurnError> {
        let Some(old) = self.saved.get(self.position) else {
            return Ok(());
        };
        let left = self.saved.len() - self.position;
        Err(self.fail(
            self.position,
            format_args!(
                "the saved turn has {} but the handler returned ({left} saved step(s) not replayed); \
                 keep the code of existing versions unchanged and publish changes under a new version",
                describe(old.kind, &old.key, old.delay_ms, old.signal_name.as_deref()),
            ),
        ))
    }

    fn fail(&self, position: usize, message: impl std::fmt::Display) -> TurnError {
        TurnError::Permanent(WorkflowError::new(format!(
            "workflow {} {} turn {}: position {position}: {message}",
            self.shared.workflow, self.shared.version, self.shared.lease.turn
        )))
    }

    /// Take the next position for a durable call, replaying the saved entry if there is one.
    fn next(
        &mut self,
        key: &str,
        kind: CheckpointKind,
        delay_ms: Option<u64>,
        signal_name: Option<&str>,
    ) -> Result<Option<StepCheckpoint>, TurnError> {
        let position = self.position;
        if !validate::is_identifier(key) {
            return Err(self.fail(
                position,
                format_args!("step key {key:?} is invalid: use 1-128 of A-Z a-z 0-9 _ - ."),
            ));
        }
        if !self.keys.insert(key.to_owned()) {
            return Err(self.fail(
                position,
                format_args!(
                    "step key `{key}` is used twice; step keys must be unique within a turn"
                ),
            ));
        }
        let Some(old) = self.saved.get(position) else {
            let limit = self.shared.steps_max;
            if position >= limit {
                return Err(self.fail(
                    position,
                    format_args!("{kind} `{key}` is past the step limit (step_limit): a turn holds at most {limit} steps; continue the work in a new turn with a continuation"),
                ));
            }
            if let Some(i) = self.saved.iter().position(|s| s.key == key) {
                return Err(self.fail(
                    position,
                    format_args!("step key `{key}` is already saved at position {i}"),
                ));
            }
            self.position += 1;
            return Ok(None);
        };
        let matches = old.key == key
            && old.kind == kind
            && old.delay_ms == delay_ms
            && old.signal_name.as_deref() == signal_name;
        if !matches {
            return Err(self.fail(
                position,
                format_args!(
                    "step order changed: the saved turn has {} but the code now calls {}; keep the code of existing versions unchanged and publish changes under a new version",
                    describe(old.kind, &old.key, old.delay_ms, old.signal_name.as_deref()),
                    describe(kind, key, delay_ms, signal_name),
                ),
            ));
        }
        let old = old.clone();
        self.position += 1;
        Ok(Some(old))
    }

    /// A step: run `f` once, save its output, and on every later attempt return the saved
    /// output instead of running it again. The value returned is the *decoded* saved value on
    /// the first run too.
    ///
    /// Chain [`Step::kind`], [`Step::timeout`] or [`Step::heartbeat_timeout`] before `.await`
    /// to change the step's options.
    pub fn step<'a, T, F, Fut>(&'a mut self, key: impl Into<String>, f: F) -> Step<'a, W, T, F>
    where
        T: Serialize + DeserializeOwned + Send + 'a,
        F: FnOnce(StepCtx) -> Fut + Send + 'a,
        Fut: Future<Output = Result<T, TurnError>> + Send + 'a,
    {
        Step {
            turn: self,
            key: key.into(),
            options: StepOptions::default(),
            f,
            _t: PhantomData,
        }
    }

    async fn run_step<T, F, Fut>(
        &mut self,
        key: String,
        options: StepOptions,
        f: F,
    ) -> Result<T, TurnError>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnOnce(StepCtx) -> Fut + Send,
        Fut: Future<Output = Result<T, TurnError>> + Send,
    {
        let what = format!("step `{key}`");
        if let Some(old) = self.next(&key, CheckpointKind::Step, None, None)? {
            return codec::decode(&W::Codec::default(), &what, &old.output)
                .map_err(|e| TurnError::Permanent(e.into()));
        }
        let position = (self.position - 1) as u32;
        let timeout_ms = options.timeout.as_millis() as u64;
        let op = self
            .shared
            .backend
            .operation(OperationRequest {
                lease: self.shared.lease.clone(),
                position,
                key: key.clone(),
                kind: options.kind,
                timeout_ms,
                heartbeat_timeout_ms: options.heartbeat_timeout.map(|d| d.as_millis() as u64),
            })
            .await;
        let op = self
            .shared
            .check(&format!("{what}: the operation"), op)
            .await?;
        let cursor = op.operation.map_or(Value::Null, |o| o.checkpoint);
        let (ctx, writer) =
            StepCtx::start(self.shared.clone(), &key, cursor, options.heartbeat_timeout);
        let deadline = Instant::now() + options.timeout;
        let span = tracing::info_span!("step", key = %key, position, kind = %options.kind);
        let mut fut = std::pin::pin!(tracing::Instrument::instrument(f(ctx.clone()), span));
        let mut last = ctx.inner.last_write.subscribe();
        let out = loop {
            let quiet = options
                .heartbeat_timeout
                .map(|d| *last.borrow_and_update() + d);
            tokio::select! {
                biased;
                out = &mut fut => break out,
                _ = last.changed() => {}
                () = tokio::time::sleep_until(deadline) => {
                    let why = format!("{what} ran past its timeout of {timeout_ms} ms");
                    self.shared.stop(Interrupt::Abandoned(why)).await
                }
                () = sleep_until_opt(quiet) => {
                    let why = format!("{what} reported no progress within its heartbeat timeout");
                    self.shared.stop(Interrupt::Abandoned(why)).await
                }
            }
        };
        // Every progress write goes out, in order, before the checkpoint.
        let flushed = writer.finish().await;
        let value = out?;
        self.shared
            .check(&format!("{what}: its progress"), flushed)
            .await?;
        let (encoded, decoded) = codec::encode_verified(&W::Codec::default(), &what, &value)
            .map_err(|e| TurnError::Permanent(e.into()))?;
        let saved = self
            .shared
            .backend
            .checkpoint(CheckpointRequest {
                lease: self.shared.lease.clone(),
                position,
                key: key.clone(),
                kind: CheckpointKind::Step,
                output: encoded.clone(),
                delay_ms: None,
            })
            .await;
        self.shared
            .check(&format!("{what}: its checkpoint"), saved)
            .await?;
        self.saved.push(StepCheckpoint {
            key,
            kind: CheckpointKind::Step,
            output: encoded,
            at_ms: 0,
            delay_ms: None,
            signal_name: None,
            wake_at_ms: None,
        });
        Ok(decoded)
    }

    /// The current time (Unix ms) as a step: read once from the worker's clock and saved, so
    /// every replay of this turn sees the same time. Use it instead of reading the system clock
    /// in the handler, which would make replays diverge.
    pub async fn now(&mut self, key: impl Into<String>) -> Result<Millis, TurnError> {
        let now = self.shared.clock.now_ms();
        self.step(key, move |_| async move { Ok(now) }).await
    }

    /// A random `u64` as a step: drawn once and saved, so every replay sees the same value.
    pub async fn random(&mut self, key: impl Into<String>) -> Result<u64, TurnError> {
        use std::hash::{BuildHasher, RandomState};
        let value = RandomState::new().hash_one(self.shared.clock.now_ms());
        // JSON numbers above 2^53 lose precision in many clients: keep 53 bits.
        let value = value & ((1u64 << 53) - 1);
        self.step(key, move |_| async move { Ok(value) }).await
    }

    /// A durable sleep. The first time, the turn is released and this call never returns: the
    /// worker drops the handler here. When the sleep is due the turn runs again from the top,
    /// and this call returns at once.
    pub async fn sleep(
        &mut self,
        key: impl Into<String>,
        duration: Duration,
    ) -> Result<(), TurnError> {
        let key = key.into();
        let what = format!("sleep `{key}`");
        let delay_ms = duration.as_millis() as u64;
        if self
            .next(&key, CheckpointKind::Sleep, Some(delay_ms), None)?
            .is_some()
        {
            return Ok(());
        }
        let position = (self.position - 1) as u32;
        self.shared.heartbeats.send_replace(false);
        let r = self
            .shared
            .backend
            .checkpoint(CheckpointRequest {
                lease: self.shared.lease.clone(),
                position,
                key,
                kind: CheckpointKind::Sleep,
                output: Value::Null,
                delay_ms: Some(delay_ms),
            })
            .await;
        self.shared.check(&what, r).await?;
        self.shared.stop(Interrupt::Suspended).await
    }

    /// Wait for signal `S` for at most `timeout`: `Some(value)` when one arrived before the
    /// deadline, `None` when time ran out. Signals sent earlier to this turn are buffered and
    /// the oldest is taken first. Without a signal the turn is released here and runs again
    /// from the top when one arrives or the deadline passes.
    pub async fn wait_for_signal<S>(
        &mut self,
        key: impl Into<String>,
        timeout: Duration,
    ) -> Result<Option<S>, TurnError>
    where
        S: Signal,
        W: Accepts<S>,
    {
        let key = key.into();
        let timeout_ms = timeout.as_millis() as u64;
        let what = format!("signal wait `{key}`");
        let position = self.position;
        let output = match self.next(
            &key,
            CheckpointKind::Signal,
            Some(timeout_ms),
            Some(S::NAME),
        )? {
            Some(old) => old.output,
            None => {
                self.shared.heartbeats.send_replace(false);
                let r = self
                    .shared
                    .backend
                    .wait_signal(WaitSignalRequest {
                        lease: self.shared.lease.clone(),
                        position: position as u32,
                        key: key.clone(),
                        name: S::NAME.to_owned(),
                        timeout_ms,
                    })
                    .await;
                let turn = self.shared.check(&what, r).await?;
                if turn.status == TurnStatus::Waiting {
                    self.shared.stop(Interrupt::Suspended).await
                }
                self.shared.heartbeats.send_replace(true);
                let Some(step) = turn.steps.get(position).cloned() else {
                    return Err(
                        self.fail(position, "the signal wait answered no step at its position")
                    );
                };
                self.saved.push(step.clone());
                step.output
            }
        };
        if output.get("received") != Some(&Value::Bool(true)) {
            return Ok(None);
        }
        let value = output.get("value").cloned().unwrap_or(Value::Null);
        codec::decode(&W::Codec::default(), &what, &value)
            .map(Some)
            .map_err(|e| TurnError::Permanent(e.into()))
    }

    /// End the turn with `state` and continue with `message` as the next turn, appended at the
    /// tail of the inbox atomically with this turn's state.
    pub fn continue_(
        &self,
        state: W::State,
        message: W::Message,
    ) -> Done<W::State, W::Reply, W::Message> {
        Done::new(state).continue_with(message)
    }
}

/// A durable call as replay errors name it, e.g. ``sleep `nap` delay_ms=1000``.
fn describe(
    kind: CheckpointKind,
    key: &str,
    delay_ms: Option<u64>,
    signal: Option<&str>,
) -> String {
    let mut out = format!("{kind} `{key}`");
    if let Some(d) = delay_ms {
        out.push_str(&format!(" delay_ms={d}"));
    }
    if let Some(s) = signal {
        out.push_str(&format!(" signal={s}"));
    }
    out
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A step call being configured; `.await` it to run the step.
#[must_use = "a step does nothing until it is awaited"]
pub struct Step<'a, W, T, F> {
    turn: &'a mut Turn<W>,
    key: String,
    options: StepOptions,
    f: F,
    _t: PhantomData<fn() -> T>,
}

impl<W, T, F> Step<'_, W, T, F> {
    /// Record what kind of work the step does.
    pub fn kind(mut self, kind: OperationKind) -> Self {
        self.options.kind = kind;
        self
    }

    /// Set the per-attempt timeout (100 ms to 24 h; default 5 minutes).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.options.timeout = timeout;
        self
    }

    /// Abandon the attempt when the step reports no progress for this long.
    pub fn heartbeat_timeout(mut self, timeout: Duration) -> Self {
        self.options.heartbeat_timeout = Some(timeout);
        self
    }

    /// Set all options at once.
    pub fn options(mut self, options: StepOptions) -> Self {
        self.options = options;
        self
    }

    /// Use `key` for this call instead of the step's own key: a `#[step]` function called
    /// twice in one turn needs a distinct key per call, e.g. `crawl(ctx, a).key("crawl-a")`.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = key.into();
        self
    }
}

/// The future of a boxed step body.
pub type BoxStepFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, TurnError>> + Send + 'a>>;

/// A boxed step body: what a `#[step]` function hands to [`Turn::step`], so that it can return
/// the nameable type `Step<'a, W, T, BoxStepFn<'a, T>>`.
pub type BoxStepFn<'a, T> = Box<dyn FnOnce(StepCtx) -> BoxStepFuture<'a, T> + Send + 'a>;

/// A step context whose resume cursor has the type `C`: a `#[step]` function that takes
/// `s: Resumable<C>` instead of `s: StepCtx` reads its cursor with
/// [`checkpoint`](Self::checkpoint) and saves one with [`heartbeat`](Self::heartbeat), both
/// typed. Everything else of [`StepCtx`] is reached through `Deref`.
pub struct Resumable<C> {
    ctx: StepCtx,
    _cursor: PhantomData<fn() -> C>,
}

impl<C> Resumable<C> {
    /// The typed view of a step context.
    pub fn new(ctx: StepCtx) -> Self {
        Self {
            ctx,
            _cursor: PhantomData,
        }
    }

    /// The untyped step context.
    pub fn untyped(&self) -> &StepCtx {
        &self.ctx
    }
}

impl<C: Serialize + DeserializeOwned> Resumable<C> {
    /// The cursor the last heartbeat of an earlier attempt of this step saved; `None` on a
    /// first attempt.
    pub fn checkpoint(&self) -> Option<C> {
        self.ctx.checkpoint::<C>()
    }

    /// Save a resume cursor now; a later attempt of this step reads it with
    /// [`checkpoint`](Self::checkpoint).
    pub async fn heartbeat(&self, cursor: C) -> Result<(), TurnError> {
        self.ctx.heartbeat(cursor).await
    }
}

impl<C> Clone for Resumable<C> {
    fn clone(&self) -> Self {
        Self::new(self.ctx.clone())
    }
}

impl<C> std::fmt::Debug for Resumable<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Resumable").field(&self.ctx).finish()
    }
}

impl<C> std::ops::Deref for Resumable<C> {
    type Target = StepCtx;

    fn deref(&self) -> &StepCtx {
        &self.ctx
    }
}

impl<C> From<StepCtx> for Resumable<C> {
    fn from(ctx: StepCtx) -> Self {
        Self::new(ctx)
    }
}

impl<'a, W, T, F, Fut> IntoFuture for Step<'a, W, T, F>
where
    W: Workflow,
    T: Serialize + DeserializeOwned + Send + 'a,
    F: FnOnce(StepCtx) -> Fut + Send + 'a,
    Fut: Future<Output = Result<T, TurnError>> + Send + 'a,
{
    type Output = Result<T, TurnError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<T, TurnError>> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.turn.run_step(self.key, self.options, self.f))
    }
}

enum Write {
    Progress(Value),
    Heartbeat(Value, oneshot::Sender<Result<(), Error>>),
    Finish(oneshot::Sender<Result<(), Error>>),
}

struct StepInner {
    turn: Arc<TurnShared>,
    key: String,
    effect_id: String,
    cursor: Mutex<Value>,
    writes: mpsc::UnboundedSender<Write>,
    last_write: watch::Sender<Instant>,
}

/// The context of one step attempt: its effect id, resume cursor, heartbeats and progress.
///
/// Cheap to clone; clones share the step.
#[derive(Clone)]
pub struct StepCtx {
    inner: Arc<StepInner>,
}

impl std::fmt::Debug for StepCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepCtx")
            .field("key", &self.inner.key)
            .field("effect_id", &self.inner.effect_id)
            .finish()
    }
}

/// The background writer of a step's progress; aborted if the step is dropped.
struct Writer {
    task: tokio::task::JoinHandle<Result<(), Error>>,
    writes: mpsc::UnboundedSender<Write>,
}

impl Writer {
    async fn finish(self) -> Result<(), Error> {
        let (tx, rx) = oneshot::channel();
        if self.writes.send(Write::Finish(tx)).is_err() {
            return Ok(());
        }
        let r = rx.await.unwrap_or(Ok(()));
        self.task.abort();
        r
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StepCtx {
    fn start(
        turn: Arc<TurnShared>,
        key: &str,
        cursor: Value,
        hb: Option<Duration>,
    ) -> (Self, Writer) {
        let (tx, rx) = mpsc::unbounded_channel();
        let every = match hb {
            // min(progress_every, max(50 ms, heartbeat_timeout / 2)), as the wire says; a
            // clamp would panic when progress_every is under 50 ms (the test env uses zero).
            Some(d) => (d / 2)
                .max(Duration::from_millis(50))
                .min(turn.progress_every),
            None => turn.progress_every,
        };
        let inner = Arc::new(StepInner {
            effect_id: format!("{}/{key}", turn.effect_prefix),
            key: key.to_owned(),
            cursor: Mutex::new(cursor),
            writes: tx.clone(),
            last_write: watch::Sender::new(Instant::now()),
            turn,
        });
        let task = tokio::spawn(progress_writer(inner.clone(), rx, every));
        (StepCtx { inner }, Writer { task, writes: tx })
    }

    /// The step's effect id, `<effect_prefix>/<key>`: the same on every attempt of this step,
    /// so pass it to external systems as an idempotency key.
    pub fn effect_id(&self) -> &str {
        &self.inner.effect_id
    }

    /// The step key.
    pub fn key(&self) -> &str {
        &self.inner.key
    }

    /// The lease of the attempt (for fenced writes to other systems).
    pub fn fence(&self) -> &Lease {
        &self.inner.turn.lease
    }

    /// The resume cursor of the last heartbeat of an earlier attempt of this step, decoded as
    /// `C`; `None` on a first attempt (or if it does not decode as `C`).
    pub fn checkpoint<C: DeserializeOwned>(&self) -> Option<C> {
        let cursor = self
            .inner
            .cursor
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if cursor.is_null() {
            return None;
        }
        serde_json::from_value(cursor).ok()
    }

    /// Save a resume cursor now (awaited): a later attempt of this step reads it with
    /// [`checkpoint`](Self::checkpoint). A held progress value is dropped, as this is newer.
    pub async fn heartbeat<C: Serialize>(&self, cursor: C) -> Result<(), TurnError> {
        let what = format!("heartbeat of step `{}`", self.inner.key);
        let cursor = serde_json::to_value(&cursor)
            .map_err(|e| TurnError::permanent(format!("{what}: cannot be encoded: {e}")))?;
        let (tx, rx) = oneshot::channel();
        if self
            .inner
            .writes
            .send(Write::Heartbeat(cursor, tx))
            .is_err()
        {
            return Err(TurnError::permanent(format!(
                "{what}: the step has already finished"
            )));
        }
        let r = rx.await.unwrap_or(Ok(()));
        self.inner.turn.check(&what, r).await
    }

    /// Report progress in the convention `{phase, done, total, unit}`. Fire-and-forget and
    /// coalesced: a new phase is sent at once, other updates at most once per interval (the
    /// last one wins).
    ///
    /// Details that break the convention (an empty phase, a bad unit) make the step fail for
    /// good when it returns.
    pub fn progress(&self, phase: &str, done: u64, total: Option<u64>, unit: &str) {
        let mut details = serde_json::Map::new();
        details.insert("phase".into(), json!(phase));
        details.insert("done".into(), json!(done));
        if let Some(t) = total {
            details.insert("total".into(), json!(t));
        }
        if !unit.is_empty() {
            details.insert("unit".into(), json!(unit));
        }
        if self
            .inner
            .writes
            .send(Write::Progress(Value::Object(details)))
            .is_err()
        {
            tracing::warn!(key = %self.inner.key, "progress() after the step finished is ignored");
        }
    }
}

/// Sends a step's progress writes strictly in order, coalescing `progress()` calls.
async fn progress_writer(
    step: Arc<StepInner>,
    mut rx: mpsc::UnboundedReceiver<Write>,
    every: Duration,
) -> Result<(), Error> {
    let mut sequence = 0u64;
    let mut held: Option<Value> = None;
    let mut last_phase: Option<Value> = None;
    let mut last_sent: Option<Instant> = None;
    let mut failed: Option<Error> = None;
    // The details last sent: a heartbeat repeats them, so it does not wipe the progress view.
    let mut last_details = Value::Null;

    let send = |details: Value, cursor: Value, sequence: u64| {
        let step = step.clone();
        async move {
            let r = step
                .turn
                .backend
                .progress(ProgressRequest {
                    lease: step.turn.lease.clone(),
                    key: step.key.clone(),
                    sequence,
                    details,
                    checkpoint: cursor,
                })
                .await
                .map(|_| ());
            step.last_write.send_replace(Instant::now());
            r
        }
    };
    let cursor = || {
        step.cursor
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    };

    loop {
        let flush_at = held.as_ref().and(last_sent).map(|t| t + every);
        let msg = tokio::select! {
            m = rx.recv() => m,
            () = sleep_until_opt(flush_at) => {
                if let Some(details) = held.take() {
                    sequence += 1;
                    last_details = details.clone();
                    if let Err(e) = send(details, cursor(), sequence).await { failed.get_or_insert(e); }
                    last_sent = Some(Instant::now());
                }
                continue;
            }
        };
        let Some(msg) = msg else {
            return failed.map_or(Ok(()), Err);
        };
        match msg {
            Write::Progress(details) => {
                if let Err(e) = validate::progress_details(&details) {
                    failed.get_or_insert(e);
                    continue;
                }
                let phase = details.get("phase").cloned();
                let due = last_sent.is_none_or(|t| t + every <= Instant::now());
                if phase != last_phase || due {
                    last_phase = phase;
                    held = None;
                    sequence += 1;
                    last_details = details.clone();
                    if let Err(e) = send(details, cursor(), sequence).await {
                        failed.get_or_insert(e);
                    }
                    last_sent = Some(Instant::now());
                } else {
                    held = Some(details);
                }
            }
            Write::Heartbeat(new_cursor, reply) => {
                // The heartbeat is newer than a held progress value: it carries it instead.
                if let Some(details) = held.take() {
                    last_details = details;
                }
                *step.cursor.lock().unwrap_or_else(|p| p.into_inner()) = new_cursor.clone();
                sequence += 1;
                let r = send(last_details.clone(), new_cursor, sequence).await;
                last_sent = Some(Instant::now());
                let _ = reply.send(r);
            }
            Write::Finish(reply) => {
                if let Some(details) = held.take() {
                    sequence += 1;
                    if let Err(e) = send(details, cursor(), sequence).await {
                        failed.get_or_insert(e);
                    }
                }
                let _ = reply.send(failed.take().map_or(Ok(()), Err));
                return Ok(());
            }
        }
    }
}
