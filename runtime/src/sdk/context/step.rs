//! The step context: [`StepCtx`], a step's effect id, resume cursor, heartbeats and progress;
//! [`Resumable`], its typed-cursor view; and the options of a step call.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::{sleep_until_opt, TurnShared};
use crate::protocol::error::Error;
use crate::protocol::*;
use crate::sdk::workflow::TurnError;

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

/// The future of a boxed step body.
pub type BoxStepFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, TurnError>> + Send + 'a>>;

/// A boxed step body: what a `#[step]` function hands to [`Turn::step`](super::Turn::step),
/// so that it can return the nameable type `Step<'a, W, T, BoxStepFn<'a, T>>`.
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
    /// The progress writer: started by the first progress or heartbeat, so a step that reports
    /// neither costs no task and no channel.
    writer: Mutex<WriterState>,
    /// How often progress is sent at most.
    every: Duration,
    last_write: watch::Sender<Instant>,
    /// A member of a parallel group: progress and cursors stay in the worker (the wire holds
    /// one open step per turn), and a malformed progress report is kept here until the end.
    detached: Option<Mutex<Option<Error>>>,
}

/// A started progress writer: the way to it, and its task.
type Started = (
    mpsc::UnboundedSender<Write>,
    tokio::task::JoinHandle<Result<(), Error>>,
);

enum WriterState {
    /// Nothing written yet.
    Idle,
    /// The writer task and the way to it.
    Running(Started),
    /// The step has finished: writes are refused.
    Finished,
}

impl StepInner {
    /// Hand `write` to the writer, starting it first if this is the step's first write; the
    /// write back if the step has finished.
    fn send(self: &Arc<Self>, write: Write) -> Result<(), Write> {
        let mut state = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(failed) = &self.detached {
            if matches!(*state, WriterState::Finished) {
                return Err(write);
            }
            match write {
                Write::Progress(details) => {
                    if let Err(e) = validate::progress_details(&details) {
                        failed
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .get_or_insert(e);
                    }
                }
                Write::Heartbeat(cursor, reply) => {
                    *self.cursor.lock().unwrap_or_else(|p| p.into_inner()) = cursor;
                    let _ = reply.send(Ok(()));
                }
                Write::Finish(reply) => {
                    let _ = reply.send(Ok(()));
                }
            }
            self.last_write.send_replace(Instant::now());
            return Ok(());
        }
        if matches!(*state, WriterState::Idle) {
            let (tx, rx) = mpsc::unbounded_channel();
            let task = tokio::spawn(progress_writer(self.clone(), rx, self.every));
            *state = WriterState::Running((tx, task));
        }
        match &*state {
            WriterState::Running((tx, _)) => tx.send(write).map_err(|e| e.0),
            _ => Err(write),
        }
    }

    /// The step is over: no more writes; answer the writer, if one was started.
    fn finish(&self) -> Option<Started> {
        let mut state = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        match std::mem::replace(&mut *state, WriterState::Finished) {
            WriterState::Running(started) => Some(started),
            _ => None,
        }
    }
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

/// The end of a step's writes: flushes the progress writer, if one was started; aborts it if
/// the step is dropped.
pub(super) struct Writer {
    inner: Arc<StepInner>,
}

impl Writer {
    pub(super) async fn finish(self) -> Result<(), Error> {
        if let Some(failed) = &self.inner.detached {
            self.inner.finish();
            let failed = failed.lock().unwrap_or_else(|p| p.into_inner()).take();
            return failed.map_or(Ok(()), Err);
        }
        let Some((writes, task)) = self.inner.finish() else {
            return Ok(());
        };
        let (tx, rx) = oneshot::channel();
        if writes.send(Write::Finish(tx)).is_err() {
            return Ok(());
        }
        let r = rx.await.unwrap_or(Ok(()));
        task.abort();
        r
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if let Some((_, task)) = self.inner.finish() {
            task.abort();
        }
    }
}

impl StepCtx {
    /// A receiver that changes whenever the step writes progress or a heartbeat.
    pub(super) fn watch_writes(&self) -> watch::Receiver<Instant> {
        self.inner.last_write.subscribe()
    }

    pub(super) fn start(
        turn: Arc<TurnShared>,
        key: &str,
        cursor: Value,
        hb: Option<Duration>,
    ) -> (Self, Writer) {
        Self::start_with(turn, key, cursor, hb, false)
    }

    /// A member of a parallel group: its progress and heartbeats are kept by the worker, not
    /// sent (the wire holds one open step per turn); they still feed its heartbeat timeout.
    pub(super) fn start_detached(
        turn: Arc<TurnShared>,
        key: &str,
        hb: Option<Duration>,
    ) -> (Self, Writer) {
        Self::start_with(turn, key, Value::Null, hb, true)
    }

    fn start_with(
        turn: Arc<TurnShared>,
        key: &str,
        cursor: Value,
        hb: Option<Duration>,
        detached: bool,
    ) -> (Self, Writer) {
        let every = match hb {
            // min(progress_every, max(50 ms, heartbeat_timeout / 2)), as the wire says; a
            // clamp would panic when progress_every is under 50 ms (the test env uses zero).
            Some(d) => (d / 2)
                .max(Duration::from_millis(50))
                .min(turn.progress_every),
            None => turn.progress_every,
        };
        let inner = Arc::new(StepInner {
            effect_id: [turn.effect_prefix.as_str(), "/", key].concat(),
            key: key.to_owned(),
            cursor: Mutex::new(cursor),
            writer: Mutex::new(WriterState::Idle),
            every,
            last_write: watch::Sender::new(Instant::now()),
            detached: detached.then(|| Mutex::new(None)),
            turn,
        });
        (
            StepCtx {
                inner: inner.clone(),
            },
            Writer { inner },
        )
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
        if self.inner.send(Write::Heartbeat(cursor, tx)).is_err() {
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
                .progress_ack(ProgressRequest {
                    lease: step.turn.lease.clone(),
                    key: step.key.clone(),
                    sequence,
                    details,
                    checkpoint: cursor,
                })
                .await;
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
