//! The turn context ([`Turn`]) and the step context ([`StepCtx`]).
//!
//! A turn runs the handler from the top. Every durable call (step, sleep, signal wait) takes
//! the next *position*; where the turn already has a saved entry at that position, the call
//! replays it (checking key, kind, sleep length and signal name) and returns the saved value
//! instead of running again. A call that suspends the turn (a sleep not yet due, a signal wait
//! with no signal) ends the attempt by never completing: the worker drops the handler's future
//! at that await, so no code after it runs, whatever the handler does with errors.

pub(crate) mod step;
mod turn;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::clock::Clock;
use crate::protocol::error::Error;
use crate::protocol::{CheckpointRequest, Lease, MismatchReport};
use crate::sdk::outcome::TurnError;
use crate::worker_backend::WorkerBackend;

pub use step::{BoxStepFn, BoxStepFuture, Resumable, StepCtx, StepOptions};
pub(crate) use turn::child_error;
pub use turn::{
    ChildCall, ChildError, ChildWait, FanOut, GroupOutput, Parallel, Push, StartedChild, Step,
    Turn, DEFAULT_CHILD_TIMEOUT,
};

pub use crate::protocol::validate::MAX_STEPS;

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
    pub(crate) backend: Arc<dyn WorkerBackend>,
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
    /// A finished step's checkpoint not sent yet (see [`Deferred`]).
    pub(crate) deferred: Mutex<Deferred>,
    /// The replay mismatch this attempt met, once it met one: every later durable call is
    /// refused, and the worker ends the attempt with it whatever the handler returns.
    pub(crate) mismatch: Mutex<Option<MismatchReport>>,
}

/// A deferred checkpoint: a finished step's checkpoint not sent yet. "Deferred" is the one
/// word for it here: [`TurnShared::defer`] puts it aside, [`TurnShared::send_deferred`],
/// [`TurnShared::take_deferred`] and [`TurnShared::flush_deferred`] send it, and the
/// driver's `SendDeferredWhenWaiting` sends it when the handler waits.
///
/// A step's output is not sent the moment the step returns: it goes with the durable call
/// that follows, the next step's operation ([`Backend::checkpoint_then_operation`]) or the
/// turn's completion ([`Backend::checkpoint_then_complete`]), which the embedded engine writes
/// as one commit instead of two. It is never deferred across a wait: when the handler's future
/// waits on anything but the backend, the driver sends it on its own ([`TurnShared::send_deferred`]),
/// and every other durable call (a sleep, a signal wait, a parallel group, a child) sends it
/// first ([`TurnShared::flush_deferred`]). So a step is saved before the handler next waits on
/// anything, and before any later durable call.
#[derive(Default)]
pub(crate) enum Deferred {
    /// Nothing deferred.
    #[default]
    Nothing,
    /// A step's checkpoint, deferred to the next durable call.
    Step(CheckpointRequest),
    /// A step's checkpoint being sent on its own: the task sending it, and the step's key.
    Sending(tokio::task::JoinHandle<Result<(), Error>>, String),
}

impl TurnShared {
    /// The replay mismatch this attempt met, if it met one.
    pub(crate) fn mismatch(&self) -> Option<MismatchReport> {
        self.mismatch
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Record the attempt's replay mismatch; the first one stands (a later one follows from
    /// it).
    pub(crate) fn record_mismatch(&self, report: MismatchReport) {
        self.mismatch
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(report);
    }

    /// Defer a finished step's checkpoint to the next durable call.
    pub(crate) fn defer(&self, save: CheckpointRequest) {
        *self.deferred.lock().unwrap_or_else(|p| p.into_inner()) = Deferred::Step(save);
    }

    /// The handler waits on something: send a deferred checkpoint now, on its own (the next
    /// durable call waits for it).
    pub(crate) fn send_deferred(&self) {
        let mut deferred = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
        *deferred = match std::mem::take(&mut *deferred) {
            Deferred::Step(save) => {
                let key = save.key.clone();
                let backend = self.backend.clone();
                Deferred::Sending(
                    tokio::spawn(async move { backend.checkpoint_ack(save).await }),
                    key,
                )
            }
            other => other,
        };
    }

    /// The deferred checkpoint, to send with the next durable call: `None` when nothing is deferred
    /// or it was sent on its own (then after its answer: a refusal is the step's).
    pub(crate) async fn take_deferred(&self) -> Result<Option<CheckpointRequest>, TurnError> {
        match self.take_deferred_raw().await {
            Ok(deferred) => Ok(deferred),
            Err(refused) => Err(self.checkpoint_refused(refused).await),
        }
    }

    /// [`take_deferred`](Self::take_deferred) for the driver, which must not stop itself: a refusal
    /// of a checkpoint sent on its own is answered with the step's key.
    pub(crate) async fn take_deferred_raw(
        &self,
    ) -> Result<Option<CheckpointRequest>, (String, Error)> {
        let deferred =
            std::mem::take(&mut *self.deferred.lock().unwrap_or_else(|p| p.into_inner()));
        match deferred {
            Deferred::Nothing => Ok(None),
            Deferred::Step(save) => Ok(Some(save)),
            Deferred::Sending(task, key) => {
                // The task ends only by answering, unless the runtime is shutting down.
                let sent = task.await.unwrap_or_else(|e| {
                    Err(Error::transport(format!(
                        "sending the checkpoint ended early: {e}"
                    )))
                });
                sent.map(|()| None).map_err(|e| (key, e))
            }
        }
    }

    /// Send a deferred checkpoint on its own, and wait for its answer: before a durable call that
    /// cannot carry it.
    pub(crate) async fn flush_deferred(&self) -> Result<(), TurnError> {
        match self.flush_deferred_raw().await {
            Ok(()) => Ok(()),
            Err(refused) => Err(self.checkpoint_refused(refused).await),
        }
    }

    /// [`flush_deferred`](Self::flush_deferred) for the driver: a refusal is answered with the step's
    /// key.
    pub(crate) async fn flush_deferred_raw(&self) -> Result<(), (String, Error)> {
        let Some(save) = self.take_deferred_raw().await? else {
            return Ok(());
        };
        let key = save.key.clone();
        self.backend
            .checkpoint_ack(save)
            .await
            .map_err(|e| (key, e))
    }

    /// The [`TurnError`] of step `key`'s refused checkpoint; never returns for a lost lease.
    async fn checkpoint_refused(&self, (key, e): (String, Error)) -> TurnError {
        self.refused(&checkpoint_of(&key), e).await
    }

    /// Stop the attempt with `why` and never return: the driver drops the handler future.
    pub(crate) async fn stop(&self, why: Interrupt) -> ! {
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
    pub(crate) async fn check<T>(&self, what: &str, r: Result<T, Error>) -> Result<T, TurnError> {
        match r {
            Ok(v) => Ok(v),
            Err(e) => Err(self.refused(what, e).await),
        }
    }

    /// The [`TurnError`] of a refused call (see [`check`](Self::check)); never returns for a
    /// lost lease.
    pub(crate) async fn refused(&self, what: &str, e: Error) -> TurnError {
        match refusal(what, e) {
            Ok(e) => e,
            Err(lost) => self.stop(Interrupt::Lost(lost.to_string())).await,
        }
    }
}

/// Sleep until `at`, or forever when there is no deadline.
pub(super) async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What a step's checkpoint is called in errors: ``step `key`: its checkpoint``.
pub(crate) fn checkpoint_of(key: &str) -> String {
    format!("step `{key}`: its checkpoint")
}

/// The [`TurnError`] of a refused call, by what the error means (see
/// [`TurnShared::check`]); `Err` with the error itself when the lease is lost, after which
/// nothing more is sent.
pub(crate) fn refusal(what: &str, e: Error) -> Result<TurnError, Error> {
    if e.is_lease_lost() {
        return Err(e);
    }
    if e.is_refusal() {
        return Ok(TurnError::permanent(format!(
            "{what} was refused ({}): {e}",
            e.code()
        )));
    }
    Ok(TurnError::Retry(Box::new(e)))
}
