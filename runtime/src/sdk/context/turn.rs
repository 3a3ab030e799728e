//! The turn context: [`Turn`], the durable calls of one turn and their replay.

mod parallel;

pub use parallel::{FanOut, GroupOutput, Parallel, Push};

use std::collections::{HashMap, HashSet};
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant;

use super::{checkpoint_of, sleep_until_opt, Interrupt, StepCtx, StepOptions, TurnShared};
use crate::manifest::grammar::Saved;
use crate::manifest::CallKind;
use crate::protocol::validate;
use crate::protocol::*;
use crate::sdk::codec;
use crate::sdk::workflow::{Accepts, Done, Signal, StepOutput, TurnError, Workflow, WorkflowError};

mod child;

pub(crate) use child::child_error;
pub use child::{ChildCall, ChildError, ChildWait, StartedChild, DEFAULT_CHILD_TIMEOUT};

/// The context of one turn, handed to the workflow handler.
///
/// Steps borrow it mutably, so two steps can never be in flight at once.
pub struct Turn<W> {
    shared: Arc<TurnShared>,
    saved: Vec<StepCheckpoint>,
    position: usize,
    keys: HashSet<String>,
    /// The answers of `patched`, by patch id.
    patches: HashMap<String, bool>,
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
            patches: HashMap::new(),
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

    /// After the handler returned: every saved entry must have been replayed. Otherwise that is
    /// a replay mismatch naming the first entry left over and its position.
    pub(crate) fn check_replayed(&self) -> Result<(), TurnError> {
        let Some(old) = self.saved.get(self.position) else {
            return Ok(());
        };
        let left = self.saved.len() - self.position;
        Err(self.mismatched(
            self.position,
            None,
            format_args!(
                "the saved turn has {} but the handler returned ({left} saved step(s) not replayed); \
                 keep the code of existing versions unchanged and publish changes under a new version",
                describe(old.kind, &old.key, old.delay_ms, old.signal_name.as_deref()),
            ),
        ))
    }

    fn fail(&self, position: usize, message: impl std::fmt::Display) -> TurnError {
        TurnError::Permanent(WorkflowError::new(self.located(position, message)))
    }

    /// `message` with the workflow, version, turn and position it is about.
    fn located(&self, position: usize, message: impl std::fmt::Display) -> String {
        format!(
            "workflow {} {} turn {}: position {position}: {message}",
            self.shared.workflow, self.shared.version, self.shared.lease.turn
        )
    }

    /// A replay mismatch at `position`, where the code called `found` (`None`: it returned):
    /// recorded in the attempt's shared state, so that it holds whatever the handler does with
    /// the error, and answered as the error of the call.
    fn mismatched(
        &self,
        position: usize,
        found: Option<Saved>,
        message: impl std::fmt::Display,
    ) -> TurnError {
        let message = self.located(position, message);
        self.shared.record_mismatch(MismatchReport {
            version: self.shared.version.clone(),
            position: u32::try_from(position).unwrap_or(u32::MAX),
            saved: self.saved.iter().map(saved_entry).collect(),
            found,
            at: None,
            message: message.clone(),
        });
        TurnError::Permanent(WorkflowError::new(message))
    }

    /// Saved data this code cannot decode (`part`: the state, the message, a step's output, a
    /// signal), met at the call `found` (`None`: before the handler ran): recorded as the
    /// attempt's mismatch, so that the turn is suspended like at a replay mismatch (or fails for
    /// good under `on_mismatch = "fail"`), and answered as the error of the call. The report
    /// names the part, the kind of failure and, for a missing field, the field; never the
    /// decoder's own message, which can quote a value.
    pub(crate) fn unreadable(
        &self,
        part: &str,
        found: Option<Saved>,
        e: &codec::CodecError,
    ) -> TurnError {
        let position = match found {
            Some(_) => self.position.saturating_sub(1),
            None => 0,
        };
        self.mismatched(
            position,
            found,
            format_args!(
                "{part} cannot be read by this code ({}); keep old values readable (e.g. \
                 `#[serde(default)]` on a new field, keep a removed variant) or publish the change \
                 under a new version",
                codec::failure_kind(e)
            ),
        )
    }

    /// The refusal of a durable call made after the attempt met a replay mismatch.
    fn after_mismatch(&self, report: &MismatchReport) -> TurnError {
        TurnError::Permanent(WorkflowError::new(format!(
            "workflow {} {} turn {}: no durable call runs after the replay mismatch at position {}: {}",
            self.shared.workflow,
            self.shared.version,
            self.shared.lease.turn,
            report.position,
            report.message
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
        if let Some(report) = self.shared.mismatch() {
            return Err(self.after_mismatch(&report));
        }
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
        let found = || found_entry(kind, key, signal_name);
        let Some(old) = self.saved.get(position) else {
            let limit = self.shared.steps_max;
            if position >= limit {
                return Err(self.fail(
                    position,
                    format_args!("{kind} `{key}` is past the step limit (step_limit): a turn holds at most {limit} steps; continue the work in a new turn with a continuation"),
                ));
            }
            if let Some(i) = self.saved.iter().position(|s| s.key == key) {
                return Err(self.mismatched(
                    position,
                    Some(found()),
                    format_args!("step key `{key}` is already saved at position {i}"),
                ));
            }
            self.position += 1;
            return Ok(None);
        };
        // A sleep's length and a signal wait's timeout are the call's input, not its shape: a
        // saved one keeps the deadline it was saved with, as a saved step keeps its output.
        let matches =
            old.key == key && old.kind == kind && old.signal_name.as_deref() == signal_name;
        if !matches {
            let elsewhere = self
                .saved
                .iter()
                .position(|s| s.key == key)
                .map(|i| format!(" (`{key}` is saved at position {i})"))
                .unwrap_or_default();
            return Err(self.mismatched(
                position,
                Some(found()),
                format_args!(
                    "step order changed: the saved turn has {} but the code now calls {}{elsewhere}; keep the code of existing versions unchanged and publish changes under a new version",
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
        W: Workflow,
        T: StepOutput + Send + 'a,
        F: FnOnce(StepCtx) -> Fut + Send + 'a,
        Fut: Future<Output = Result<T, TurnError>> + Send + 'a,
    {
        Step {
            turn: self,
            key: key.into(),
            options: StepOptions::default(),
            f,
            // The bounds are checked here, once; `.await` needs none of its own, so an output
            // that cannot be saved is one error at this call, not one more at the await.
            run: |turn, key, options, f| Box::pin(turn.run_step(key, options, f)),
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
            return codec::decode(&W::Codec::default(), &what, &old.output).map_err(|e| {
                let found = found_entry(CheckpointKind::Step, &key, None);
                self.unreadable(&format!("the output of step `{key}`"), Some(found), &e)
            });
        }
        let position = (self.position - 1) as u32;
        let timeout_ms = options.timeout.as_millis() as u64;
        let cursor = self
            .start_step(
                OperationRequest {
                    lease: self.shared.lease.clone(),
                    position,
                    key: key.clone(),
                    kind: options.kind,
                    timeout_ms,
                    heartbeat_timeout_ms: options.heartbeat_timeout.map(|d| d.as_millis() as u64),
                },
                &what,
            )
            .await?;
        let (ctx, writer) =
            StepCtx::start(self.shared.clone(), &key, cursor, options.heartbeat_timeout);
        let deadline = Instant::now() + options.timeout;
        let trace_id = crate::trace::TraceContext::current().map(|c| c.trace_id());
        let span =
            tracing::info_span!("step", key = %key, position, kind = %options.kind, trace_id);
        let started = Instant::now();
        let mut fut = std::pin::pin!(tracing::Instrument::instrument(f(ctx.clone()), span));
        let mut last = ctx.watch_writes();
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
        crate::metrics::worker_step(&self.shared.workflow, out.is_ok(), started.elapsed());
        // Every progress write goes out, in order, before the checkpoint.
        let flushed = writer.finish().await;
        let value = out?;
        if let Err(e) = flushed {
            let what = format!("{what}: its progress");
            return Err(self.shared.refused(&what, e).await);
        }
        let (encoded, decoded) = codec::encode_verified(&W::Codec::default(), &what, &value)
            .map_err(|e| TurnError::Permanent(e.into()))?;
        // Sent with the next durable call (see `Deferred`).
        self.shared
            .defer(self.step_checkpoint(position, &key, &encoded));
        self.remember_step(key, encoded);
        Ok(decoded)
    }

    /// Start a step with `op`, saving a deferred step checkpoint in the same call.
    async fn start_step(&self, op: OperationRequest, what: &str) -> Result<Value, TurnError> {
        let started = match self.shared.take_deferred().await? {
            None => self.shared.backend.operation_cursor(op).await,
            Some(save) => {
                let key = save.key.clone();
                let both = self
                    .shared
                    .backend
                    .checkpoint_then_operation(save, op)
                    .await;
                match both {
                    Ok(started) => started,
                    Err(e) => return Err(self.shared.refused(&checkpoint_of(&key), e).await),
                }
            }
        };
        match started {
            Ok(cursor) => Ok(cursor),
            // The labels of refusals are made only for a refusal.
            Err(e) => {
                let what = format!("{what}: the operation");
                Err(self.shared.refused(&what, e).await)
            }
        }
    }

    /// A transactional step (PostgreSQL engines only): run `f` with a database
    /// [`Transaction`](crate::store::Transaction) and save its output **in that transaction**,
    /// so that the SQL `f` runs and the step's record commit together or not at all. Once the
    /// step is saved, later attempts return the saved output without running `f`; an attempt
    /// that dies before the commit leaves nothing of `f`'s writes behind, and the next attempt
    /// runs `f` again. Each effect therefore lands exactly once, across crashes and retries,
    /// without an idempotency key of the user's own.
    ///
    /// ```no_run
    /// # use turnwise::prelude::*;
    /// # #[allow(dead_code)]
    /// # async fn debit(ctx: &mut Turn<impl Workflow>, account: i64, cents: i64)
    /// #     -> Result<u64, TurnError> {
    /// let changed = ctx
    ///     .transact("debit", move |tx| async move {
    ///         let n = tx
    ///             .execute(
    ///                 "UPDATE accounts SET cents = cents - $2 WHERE id = $1",
    ///                 &[&account, &cents],
    ///             )
    ///             .await?;
    ///         Ok(n)
    ///     })
    ///     .await?;
    /// # Ok(changed) }
    /// ```
    ///
    /// It needs a worker on an embedded [`Engine`](crate::Engine) over a
    /// [`PostgresStore`](crate::store::PostgresStore): the step's output must be saved by the
    /// same database connection that ran `f`. On any other backend the turn fails for good,
    /// saying why: over HTTP the worker cannot join the server's transaction (use
    /// [`step`](Self::step) with [`effect_id`](Self::effect_id) as an idempotency key), and the
    /// SQLite store commits on a writer thread of its own, batching many instances' writes in
    /// each transaction, which a step's SQL cannot join without holding them all up.
    ///
    /// The step runs under the default step timeout (five minutes); a statement error aborts
    /// the transaction, and returning it (`?`) fails the attempt, which is retried.
    #[cfg(feature = "postgres")]
    pub async fn transact<T, F, Fut>(
        &mut self,
        key: impl Into<String>,
        f: F,
    ) -> Result<T, TurnError>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnOnce(crate::store::Transaction) -> Fut + Send,
        Fut: Future<Output = Result<T, TurnError>> + Send,
    {
        let key = key.into();
        let what = format!("transactional step `{key}`");
        if let Some(old) = self.next(&key, CheckpointKind::Step, None, None)? {
            return codec::decode(&W::Codec::default(), &what, &old.output).map_err(|e| {
                let found = found_entry(CheckpointKind::Step, &key, None);
                self.unreadable(&format!("the output of step `{key}`"), Some(found), &e)
            });
        }
        let position = (self.position - 1) as u32;
        let Some(transactions) = self.shared.backend.step_transactions() else {
            return Err(self.fail(
                position as usize,
                format_args!(
                    "{what} needs a backend that offers step transactions, an embedded engine \
                     over PostgreSQL, and this worker's backend does not (a remote server \
                     cannot share its database transaction; SQLite and memory stores do not \
                     offer them, nor does an engine built with Engine::new; see Turn::transact). \
                     Run the worker on Engine::connect(\"postgres://…\") or \
                     Engine::postgres(store, clock, config), or use ctx.step with \
                     ctx.effect_id(\"{key}\") as an idempotency key"
                ),
            ));
        };
        let options = StepOptions::default();
        self.start_step(
            OperationRequest {
                lease: self.shared.lease.clone(),
                position,
                key: key.clone(),
                kind: options.kind,
                timeout_ms: options.timeout.as_millis() as u64,
                heartbeat_timeout_ms: None,
            },
            &what,
        )
        .await?;
        let joined = transactions
            .begin_joined()
            .await
            .map_err(|e| TurnError::Retry(Box::new(crate::Error::from(e))))?;
        let tx = joined.transaction(self.effect_id(&key));
        let span = tracing::info_span!("step", key = %key, position, kind = "transaction");
        let ran = tokio::time::timeout(
            options.timeout,
            tracing::Instrument::instrument(f(tx), span),
        )
        .await;
        let value = match ran {
            Ok(Ok(value)) => value,
            Ok(Err(e)) => {
                joined.rollback().await;
                return Err(e);
            }
            Err(_) => {
                joined.rollback().await;
                let why = format!(
                    "{what} ran past its timeout of {} ms",
                    options.timeout.as_millis()
                );
                self.shared.stop(Interrupt::Abandoned(why)).await
            }
        };
        let (encoded, decoded) = match codec::encode_verified(&W::Codec::default(), &what, &value) {
            Ok(both) => both,
            Err(e) => {
                joined.rollback().await;
                return Err(TurnError::Permanent(e.into()));
            }
        };
        // The checkpoint joins the transaction: the engine decides as for any step, and its
        // commit is written in `joined`, which is committed below, or rolled back.
        let saved = joined
            .scope(
                self.shared
                    .backend
                    .checkpoint_ack(self.step_checkpoint(position, &key, &encoded)),
            )
            .await;
        if let Err(e) = saved {
            joined.rollback().await;
            let what = format!("{what}: its checkpoint");
            return Err(self.shared.refused(&what, e).await);
        }
        if let Err(e) = joined.commit().await {
            return Err(TurnError::Retry(Box::new(crate::Error::from(e))));
        }
        self.remember_step(key, encoded);
        Ok(decoded)
    }

    /// The checkpoint that saves step `key`'s output at `position`.
    fn step_checkpoint(&self, position: u32, key: &str, output: &Value) -> CheckpointRequest {
        CheckpointRequest {
            lease: self.shared.lease.clone(),
            position,
            key: key.to_owned(),
            kind: CheckpointKind::Step,
            output: output.clone(),
            delay_ms: None,
        }
    }

    /// A step saved in this attempt: a later durable call's checks see it as saved.
    fn remember_step(&mut self, key: String, output: Value) {
        self.saved.push(StepCheckpoint {
            key,
            kind: CheckpointKind::Step,
            output,
            at_ms: 0,
            delay_ms: None,
            signal_name: None,
            wake_at_ms: None,
        });
    }

    /// The current time (Unix ms) as a step: read once from the worker's clock and saved, so
    /// every replay of this turn sees the same time. Use it instead of reading the system clock
    /// in the handler, which would make replays diverge.
    pub async fn now(&mut self, key: impl Into<String>) -> Result<Millis, TurnError> {
        let now = self.shared.clock.now_ms();
        self.step(key, move |_| async move { Ok(now) }).await
    }

    /// Whether this turn runs the code added by patch `id`: write
    /// `if ctx.patched("id").await? { new code } else { old code }` to change a version's
    /// durable calls while turns saved before the change are in flight.
    ///
    /// - A turn that reaches the patch on this code saves a marker step (`patched.<id>`) and
    ///   takes the new branch, on every replay too.
    /// - A turn saved before the patch existed, whose saved steps go on past this point
    ///   without the marker, takes the old branch, and keeps it.
    ///
    /// The answer for an id is the same for the whole turn. `#[workflow]` checks that each id
    /// is used once and records the patch in the version's replay manifest (see
    /// `docs/versions.md`).
    ///
    /// # Errors
    ///
    /// Saving the marker failed as any step can (the turn is retried), or the id does not make
    /// a valid key.
    pub async fn patched(&mut self, id: &str) -> Result<bool, TurnError> {
        if let Some(&answer) = self.patches.get(id) {
            return Ok(answer);
        }
        if let Some(report) = self.shared.mismatch() {
            return Err(self.after_mismatch(&report));
        }
        let key = crate::manifest::Patch::marker_key(id);
        let answer = match self.saved.get(self.position) {
            Some(saved) if saved.key == key && saved.kind == CheckpointKind::Step => {
                self.next(&key, CheckpointKind::Step, None, None)?;
                true
            }
            // Replaying a turn saved before the patch: its next saved step is the old code's.
            Some(_) => false,
            None => self.step(key, |_| async { Ok(true) }).await?,
        };
        self.patches.insert(id.to_owned(), answer);
        Ok(answer)
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
        self.shared.flush_deferred().await?;
        self.shared.heartbeats.send_replace(false);
        let r = self
            .shared
            .backend
            .checkpoint_ack(CheckpointRequest {
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
        let what = format!("signal wait `{key}`");
        let output = self
            .signal_wait(key.clone(), S::NAME, timeout, &what)
            .await?;
        if output.get("received") != Some(&Value::Bool(true)) {
            return Ok(None);
        }
        let value = output.get("value").cloned().unwrap_or(Value::Null);
        codec::decode(&W::Codec::default(), &what, &value)
            .map(Some)
            .map_err(|e| {
                let found = found_entry(CheckpointKind::Signal, &key, Some(S::NAME));
                self.unreadable(&format!("signal `{}`", S::NAME), Some(found), &e)
            })
    }

    /// A signal wait at the next position, replayed or made: the saved output,
    /// `{"received": bool, "value": ..}`. Without a signal the turn is released here.
    pub(super) async fn signal_wait(
        &mut self,
        key: String,
        name: &str,
        timeout: Duration,
        what: &str,
    ) -> Result<Value, TurnError> {
        let timeout_ms = timeout.as_millis() as u64;
        let position = self.position;
        if let Some(old) = self.next(&key, CheckpointKind::Signal, Some(timeout_ms), Some(name))? {
            return Ok(old.output);
        }
        self.wait_signal_at(position, key, name, timeout_ms, what)
            .await
    }

    /// Make the signal wait at `position`, which [`next`](Self::next) has just taken.
    pub(super) async fn wait_signal_at(
        &mut self,
        position: usize,
        key: String,
        name: &str,
        timeout_ms: u64,
        what: &str,
    ) -> Result<Value, TurnError> {
        self.shared.flush_deferred().await?;
        self.shared.heartbeats.send_replace(false);
        let r = self
            .shared
            .backend
            .wait_signal(WaitSignalRequest {
                lease: self.shared.lease.clone(),
                position: position as u32,
                key,
                name: name.to_owned(),
                timeout_ms,
            })
            .await;
        let turn = self.shared.check(what, r).await?;
        if turn.status == TurnStatus::Waiting {
            self.shared.stop(Interrupt::Suspended).await
        }
        self.shared.heartbeats.send_replace(true);
        let Some(step) = turn.steps.get(position).cloned() else {
            return Err(self.fail(position, "the signal wait answered no step at its position"));
        };
        self.saved.push(step.clone());
        Ok(step.output)
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

/// The replay manifest's kind of a saved entry's kind.
fn call_kind(kind: CheckpointKind) -> CallKind {
    match kind {
        CheckpointKind::Step => CallKind::Step,
        CheckpointKind::Sleep => CallKind::Sleep,
        CheckpointKind::Signal => CallKind::Signal,
    }
}

/// A saved entry as a mismatch report lists it: key, kind and signal name, no output.
fn saved_entry(s: &StepCheckpoint) -> Saved {
    Saved {
        key: s.key.clone(),
        kind: call_kind(s.kind),
        signal: s.signal_name.clone(),
    }
}

/// The call the code made, as a mismatch report names it.
fn found_entry(kind: CheckpointKind, key: &str, signal: Option<&str>) -> Saved {
    Saved {
        key: key.to_owned(),
        kind: call_kind(kind),
        signal: signal.map(str::to_owned),
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

/// A step call being configured; `.await` it to run the step.
#[must_use = "a step does nothing until it is awaited"]
pub struct Step<'a, W, T, F> {
    turn: &'a mut Turn<W>,
    key: String,
    options: StepOptions,
    f: F,
    run: RunStep<'a, W, T, F>,
}

/// How a [`Step`] runs, chosen where its bounds were checked.
type RunStep<'a, W, T, F> = fn(
    &'a mut Turn<W>,
    String,
    StepOptions,
    F,
) -> Pin<Box<dyn Future<Output = Result<T, TurnError>> + Send + 'a>>;

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

impl<'a, W, T, F> IntoFuture for Step<'a, W, T, F> {
    type Output = Result<T, TurnError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<T, TurnError>> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        (self.run)(self.turn, self.key, self.options, self.f)
    }
}
