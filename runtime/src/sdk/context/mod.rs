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

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::clock::Clock;
use crate::protocol::backend::Backend;
use crate::protocol::error::Error;
use crate::protocol::Lease;
use crate::sdk::outcome::TurnError;

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
    pub(crate) backend: Arc<dyn Backend>,
    /// The backend as the embedded engine it is, if it is one (transactional steps need it).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) engine: Option<crate::engine::Engine>,
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
        if e.is_lease_lost() {
            self.stop(Interrupt::Lost(e.to_string())).await
        }
        if e.is_refusal() {
            return TurnError::permanent(format!("{what} was refused ({}): {e}", e.code()));
        }
        TurnError::Retry(Box::new(e))
    }
}

/// Sleep until `at`, or forever when there is no deadline.
pub(super) async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
