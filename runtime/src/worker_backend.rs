//! [`WorkerBackend`]: a [`Backend`] as a [`Worker`](crate::Worker) and a
//! [`Handle`](crate::Handle) use it.
//!
//! [`Backend`] is the protocol, one method per route. A worker and a handle's `call` need a
//! little more: calls that answer only what they read (no view of the turn built for a write
//! whose answer is dropped), writes chained into one (a step's checkpoint with the next step's
//! start, or with the completion), and the capabilities a backend may or may not offer (step
//! transactions). This trait holds those, each with a default made of the routes, so a backend
//! offers them by implementing one line, and the embedded engine overrides them.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::protocol::backend::Backend;
use crate::protocol::error::Result;
use crate::protocol::*;

/// A [`Backend`] as workers and handles use it: the routes, plus the calls that answer less
/// or chain two writes, and the capabilities a backend may offer.
///
/// Every method has a default made of the routes, which behaves exactly as the routes do: a
/// backend of your own (a wrapper that counts or logs calls, say) implements it with an empty
/// `impl WorkerBackend for MyBackend {}`, or forwards the methods to the backend it wraps to
/// keep that backend's fast paths and capabilities. The embedded [`Engine`](crate::Engine)
/// overrides them all; the `Http` backend keeps the defaults; `Arc<B>` forwards to `B`.
///
/// The conformance cases `chained::*` and `brief::*` (crate `turnwise-conformance`) hold every
/// backend to the writes and refusals of the routes these calls stand for.
#[async_trait]
pub trait WorkerBackend: Backend {
    /// [`Backend::send_message`], answering only the admitted turn's number (what
    /// [`Handle::call`](crate::Handle::call) reads).
    async fn send_message_ack(&self, req: MessageRequest) -> Result<u64> {
        self.send_message(req).await.map(|t| t.number)
    }

    /// [`Backend::await_turn`], answering only where the turn stands and its reply or error,
    /// without its message and steps (what [`Handle::call`](crate::Handle::call) reads).
    async fn await_outcome(&self, query: TurnQuery, wait: Duration) -> Result<TurnOutcome> {
        self.await_turn(query, wait).await.map(TurnOutcome::from)
    }

    /// [`Backend::operation`], answering only the step's resume cursor: the running
    /// operation's `checkpoint` (`null` when the attempt carries none).
    async fn operation_cursor(&self, req: OperationRequest) -> Result<Value> {
        let turn = self.operation(req).await?;
        Ok(turn.operation.map_or(Value::Null, |op| op.checkpoint))
    }

    /// [`Backend::progress`], answering only that it was accepted.
    async fn progress_ack(&self, req: ProgressRequest) -> Result<()> {
        self.progress(req).await.map(drop)
    }

    /// [`Backend::checkpoint`], answering only that the step (or sleep) was saved.
    async fn checkpoint_ack(&self, req: CheckpointRequest) -> Result<()> {
        self.checkpoint(req).await.map(drop)
    }

    /// [`Backend::complete`], answering only that the turn was completed.
    async fn complete_ack(&self, req: CompleteRequest) -> Result<()> {
        self.complete(req).await.map(drop)
    }

    /// [`Backend::heartbeat`], answering only that the lease was extended.
    async fn heartbeat_ack(&self, lease: Lease) -> Result<()> {
        self.heartbeat(lease).await.map(drop)
    }

    /// Save a step, then start the next one on the same lease:
    /// [`checkpoint_ack`](WorkerBackend::checkpoint_ack) then
    /// [`operation_cursor`](WorkerBackend::operation_cursor), answering the new step's resume
    /// cursor. The default makes the two calls one after the other; the embedded engine
    /// decides both on the same turn and writes them in one commit.
    ///
    /// The outer error is the checkpoint's, and nothing was written. The inner one is the
    /// operation's: the checkpoint was saved, and the next step was not started.
    async fn checkpoint_then_operation(
        &self,
        save: CheckpointRequest,
        next: OperationRequest,
    ) -> Result<Result<Value>> {
        self.checkpoint_ack(save).await?;
        Ok(self.operation_cursor(next).await)
    }

    /// Save a step, then complete the turn on the same lease:
    /// [`checkpoint_ack`](WorkerBackend::checkpoint_ack) then
    /// [`complete_ack`](WorkerBackend::complete_ack), made one commit by the embedded engine.
    ///
    /// The outer error is the checkpoint's, and nothing was written. The inner one is the
    /// completion's: the checkpoint was saved, and the turn was not completed.
    async fn checkpoint_then_complete(
        &self,
        save: CheckpointRequest,
        done: CompleteRequest,
    ) -> Result<Result<()>> {
        self.checkpoint_ack(save).await?;
        Ok(self.complete_ack(done).await)
    }

    /// The database transactions a step's own SQL can share with its checkpoint
    /// ([`Turn::transact`](crate::context::Turn::transact)), if this backend offers them: an
    /// embedded engine over PostgreSQL does, answering from its store. A remote backend cannot
    /// (the server's transaction is not the worker's to join), nor can an engine over SQLite or
    /// memory. The default is `None`.
    #[cfg(feature = "postgres")]
    fn step_transactions(&self) -> Option<crate::store::StepTransactions> {
        None
    }
}

#[async_trait]
impl<B: WorkerBackend + ?Sized> WorkerBackend for std::sync::Arc<B> {
    async fn send_message_ack(&self, req: MessageRequest) -> Result<u64> {
        (**self).send_message_ack(req).await
    }
    async fn await_outcome(&self, query: TurnQuery, wait: Duration) -> Result<TurnOutcome> {
        (**self).await_outcome(query, wait).await
    }
    async fn operation_cursor(&self, req: OperationRequest) -> Result<Value> {
        (**self).operation_cursor(req).await
    }
    async fn progress_ack(&self, req: ProgressRequest) -> Result<()> {
        (**self).progress_ack(req).await
    }
    async fn checkpoint_ack(&self, req: CheckpointRequest) -> Result<()> {
        (**self).checkpoint_ack(req).await
    }
    async fn complete_ack(&self, req: CompleteRequest) -> Result<()> {
        (**self).complete_ack(req).await
    }
    async fn heartbeat_ack(&self, lease: Lease) -> Result<()> {
        (**self).heartbeat_ack(lease).await
    }
    async fn checkpoint_then_operation(
        &self,
        save: CheckpointRequest,
        next: OperationRequest,
    ) -> Result<Result<Value>> {
        (**self).checkpoint_then_operation(save, next).await
    }
    async fn checkpoint_then_complete(
        &self,
        save: CheckpointRequest,
        done: CompleteRequest,
    ) -> Result<Result<()>> {
        (**self).checkpoint_then_complete(save, done).await
    }
    #[cfg(feature = "postgres")]
    fn step_transactions(&self) -> Option<crate::store::StepTransactions> {
        (**self).step_transactions()
    }
}
