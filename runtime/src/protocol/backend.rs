//! The [`Backend`] trait: the message-workflow protocol as one async interface.
//!
//! Handles and workers talk only to a `Backend`. The embedded [`Engine`](crate::Engine)
//! implements it in-process over a [`Store`](crate::store::Store); an HTTP client implements it
//! over the wire. Both behave identically: the conformance suite (crate `turnwise-conformance`)
//! runs the same cases against each.

use async_trait::async_trait;

use crate::protocol::error::Result;
use crate::protocol::*;

/// The message-workflow protocol.
///
/// Application-side calls manage instances, admit messages, deliver signals and read state;
/// worker-side calls claim turns and report what each attempt did, every one carrying the lease
/// triple (`workflow_id`, `turn`, `token`) from the claim. A write from a token that no longer
/// holds its turn is refused with [`Error::LeaseLost`](crate::Error::LeaseLost) and changes
/// nothing.
#[async_trait]
pub trait Backend: Send + Sync {
    /// Create an instance. An identical repeat answers the existing instance; a different
    /// definition under the same id is a conflict.
    async fn create_instance(&self, req: CreateInstanceRequest) -> Result<WorkflowInstance>;
    /// Admit a message to an instance's inbox, once per message id.
    async fn send_message(&self, req: MessageRequest) -> Result<WorkflowTurn>;
    /// [`Backend::send_message`], answering only the admitted turn's number (what
    /// [`Handle::call`](crate::Handle::call) reads). The default calls `send_message`; the
    /// embedded engine builds no view of the turn.
    async fn send_message_ack(&self, req: MessageRequest) -> Result<u64> {
        self.send_message(req).await.map(|t| t.number)
    }
    /// Read one instance.
    async fn get_instance(&self, id: &str) -> Result<WorkflowInstance>;
    /// List instances by id.
    async fn list_instances(&self, query: ListInstancesQuery) -> Result<InstanceList>;
    /// Read an instance's unfinished turns, oldest first.
    async fn instance_inbox(&self, query: InboxQuery) -> Result<InboxResponse>;
    /// Read the instances of one workflow type.
    async fn type_inbox(&self, query: TypeInboxQuery) -> Result<TypeInboxResponse>;
    /// Read an instance's finished turns, oldest kept first.
    async fn history(&self, query: HistoryQuery) -> Result<HistoryResponse>;
    /// Read one turn, pending or kept in history.
    async fn turn(&self, query: TurnQuery) -> Result<WorkflowTurn>;
    /// Read one turn once it has an outcome (`completed`, `failed` or `cancelled`), waiting up
    /// to `wait` for one; when the wait runs out, the turn as it is then. A turnwise extension
    /// of the protocol: the embedded engine is woken by the commit that settles the turn, the
    /// `Http` backend long-polls the turn route with `wait_ms`. The default reads the turn at
    /// once without waiting (a backend that cannot wait), so callers loop until an outcome.
    async fn await_turn(
        &self,
        query: TurnQuery,
        wait: std::time::Duration,
    ) -> Result<WorkflowTurn> {
        let _ = wait;
        self.turn(query).await
    }
    /// [`Backend::await_turn`], answering only where the turn stands and its reply or error,
    /// without its message and steps (what [`Handle::call`](crate::Handle::call) reads). The
    /// default calls `await_turn`; the embedded engine builds no view of the turn.
    async fn await_outcome(
        &self,
        query: TurnQuery,
        wait: std::time::Duration,
    ) -> Result<TurnOutcome> {
        self.await_turn(query, wait).await.map(TurnOutcome::from)
    }
    /// Apply an operator action.
    async fn control(&self, req: ControlRequest) -> Result<WorkflowInstance>;
    /// Delete an instance with its inbox and history.
    async fn delete_instance(&self, req: DeleteRequest) -> Result<DeleteResponse>;

    /// Claim one ready inbox head of the listed workflows, waiting up to `wait_ms` for one.
    async fn claim(&self, req: ClaimRequest) -> Result<ClaimResponse>;
    /// Start (or resume) a step attempt.
    async fn operation(&self, req: OperationRequest) -> Result<WorkflowTurn>;
    /// Report progress and a resume cursor for the running step.
    async fn progress(&self, req: ProgressRequest) -> Result<WorkflowTurn>;
    /// Save a step, or save a sleep and release the turn until it is due.
    async fn checkpoint(&self, req: CheckpointRequest) -> Result<WorkflowTurn>;
    /// Consume the oldest matching signal, or suspend the turn until one arrives or time runs out.
    async fn wait_signal(&self, req: WaitSignalRequest) -> Result<WorkflowTurn>;
    /// Deliver a signal to one turn, once per event id.
    async fn signal(&self, req: SignalRequest) -> Result<WorkflowTurn>;
    /// Commit the turn's new state, reply and continuation.
    async fn complete(&self, req: CompleteRequest) -> Result<WorkflowTurn>;
    /// End the attempt with an error.
    async fn fail(&self, req: FailRequest) -> Result<WorkflowTurn>;
    /// Extend the lease.
    async fn heartbeat(&self, lease: Lease) -> Result<WorkflowTurn>;

    // Worker writes answered briefly. The SDK's workers read nothing of the turn that a
    // worker-side write answers (but a step's resume cursor), so they call these. Each does
    // exactly what its full counterpart does and answers less; the defaults call the full
    // call and keep that part of its answer, and the embedded engine builds no view of the
    // turn at all (no copy of its message, steps and outputs per call).

    /// [`Backend::operation`], answering only the step's resume cursor: the running
    /// operation's `checkpoint` (`null` when the attempt carries none).
    async fn operation_cursor(&self, req: OperationRequest) -> Result<serde_json::Value> {
        let turn = self.operation(req).await?;
        Ok(turn
            .operation
            .map_or(serde_json::Value::Null, |op| op.checkpoint))
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

    // Chained worker writes. A worker that has just finished a step goes straight on to the
    // next step or to the turn's completion; these save the step and make that next call in
    // one go. The defaults make the two calls one after the other; the embedded engine decides
    // both on the same turn and writes them in one commit. The conformance cases `chained::*`
    // hold every backend to the writes and refusals of the two calls made apart.

    /// Save a step, then start the next one on the same lease: [`Backend::checkpoint_ack`]
    /// then [`Backend::operation_cursor`], answering the new step's resume cursor.
    ///
    /// The outer error is the checkpoint's, and nothing was written. The inner one is the
    /// operation's: the checkpoint was saved, and the next step was not started.
    async fn checkpoint_then_operation(
        &self,
        save: CheckpointRequest,
        next: OperationRequest,
    ) -> Result<Result<serde_json::Value>> {
        self.checkpoint_ack(save).await?;
        Ok(self.operation_cursor(next).await)
    }
    /// Save a step, then complete the turn on the same lease: [`Backend::checkpoint_ack`]
    /// then [`Backend::complete_ack`].
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

    /// Read run summaries ([`WorkflowRun`]): one page, newest first, of one instance's runs
    /// (`query.id`) or of every run of the namespace. Each attempt of a turn is a run.
    async fn runs(&self, query: RunsQuery) -> Result<RunPage>;
    /// Read one run summary by its id.
    async fn run(&self, run_id: &str) -> Result<WorkflowRun>;
    /// Count the runs of the last `hours` hours (1–720) by hour and outcome.
    async fn run_stats(&self, hours: u32) -> Result<RunStats>;

    /// Tell the backend a workflow's JSON Schemas, so it can validate messages and signals of
    /// that workflow type and version at admission. Workers call it for every workflow they
    /// register before they first claim. The embedded engine and a server keep the document
    /// in the store (it survives a restart) and refuse non-conforming messages and signals
    /// with [`Error::SchemaValidation`](crate::Error::SchemaValidation) (`400
    /// schema_validation_failed`), writing nothing. The default ignores it.
    async fn register_schema(&self, schema: &SchemaDocument) -> Result<()> {
        let _ = schema;
        Ok(())
    }

    /// Create a schedule on an instance: a delayed message or a recurring firing (a turnwise
    /// extension). An identical repeat answers the existing schedule. Backends that keep no
    /// schedules (an LBB server) answer [`Error::Http`](crate::Error::Http) with status 404;
    /// the default answers the same, naming the call.
    async fn create_schedule(&self, req: CreateScheduleRequest) -> Result<WorkflowSchedule> {
        let _ = req;
        Err(no_schedules())
    }
    /// Read one schedule of an instance.
    async fn get_schedule(&self, workflow_id: &str, name: &str) -> Result<WorkflowSchedule> {
        let _ = (workflow_id, name);
        Err(no_schedules())
    }
    /// List schedules: one instance's, or a page of instances' at a time.
    async fn list_schedules(&self, query: ListSchedulesQuery) -> Result<ScheduleList> {
        let _ = query;
        Err(no_schedules())
    }
    /// Pause, resume or delete a schedule.
    async fn control_schedule(
        &self,
        req: ScheduleControlRequest,
    ) -> Result<ScheduleControlResponse> {
        let _ = req;
        Err(no_schedules())
    }
}

/// What a backend without schedules answers.
fn no_schedules() -> crate::Error {
    crate::Error::Http {
        status: 404,
        code: "not_found".into(),
        message: "this backend keeps no schedules (a turnwise extension); use an embedded engine \
                  or a turnwise server"
            .into(),
    }
}

#[async_trait]
impl<B: Backend + ?Sized> Backend for std::sync::Arc<B> {
    async fn create_instance(&self, req: CreateInstanceRequest) -> Result<WorkflowInstance> {
        (**self).create_instance(req).await
    }
    async fn send_message(&self, req: MessageRequest) -> Result<WorkflowTurn> {
        (**self).send_message(req).await
    }
    async fn get_instance(&self, id: &str) -> Result<WorkflowInstance> {
        (**self).get_instance(id).await
    }
    async fn list_instances(&self, query: ListInstancesQuery) -> Result<InstanceList> {
        (**self).list_instances(query).await
    }
    async fn instance_inbox(&self, query: InboxQuery) -> Result<InboxResponse> {
        (**self).instance_inbox(query).await
    }
    async fn type_inbox(&self, query: TypeInboxQuery) -> Result<TypeInboxResponse> {
        (**self).type_inbox(query).await
    }
    async fn history(&self, query: HistoryQuery) -> Result<HistoryResponse> {
        (**self).history(query).await
    }
    async fn turn(&self, query: TurnQuery) -> Result<WorkflowTurn> {
        (**self).turn(query).await
    }
    async fn await_turn(
        &self,
        query: TurnQuery,
        wait: std::time::Duration,
    ) -> Result<WorkflowTurn> {
        (**self).await_turn(query, wait).await
    }
    async fn await_outcome(
        &self,
        query: TurnQuery,
        wait: std::time::Duration,
    ) -> Result<TurnOutcome> {
        (**self).await_outcome(query, wait).await
    }
    async fn send_message_ack(&self, req: MessageRequest) -> Result<u64> {
        (**self).send_message_ack(req).await
    }
    async fn control(&self, req: ControlRequest) -> Result<WorkflowInstance> {
        (**self).control(req).await
    }
    async fn delete_instance(&self, req: DeleteRequest) -> Result<DeleteResponse> {
        (**self).delete_instance(req).await
    }
    async fn claim(&self, req: ClaimRequest) -> Result<ClaimResponse> {
        (**self).claim(req).await
    }
    async fn operation(&self, req: OperationRequest) -> Result<WorkflowTurn> {
        (**self).operation(req).await
    }
    async fn progress(&self, req: ProgressRequest) -> Result<WorkflowTurn> {
        (**self).progress(req).await
    }
    async fn checkpoint(&self, req: CheckpointRequest) -> Result<WorkflowTurn> {
        (**self).checkpoint(req).await
    }
    async fn wait_signal(&self, req: WaitSignalRequest) -> Result<WorkflowTurn> {
        (**self).wait_signal(req).await
    }
    async fn signal(&self, req: SignalRequest) -> Result<WorkflowTurn> {
        (**self).signal(req).await
    }
    async fn complete(&self, req: CompleteRequest) -> Result<WorkflowTurn> {
        (**self).complete(req).await
    }
    async fn fail(&self, req: FailRequest) -> Result<WorkflowTurn> {
        (**self).fail(req).await
    }
    async fn heartbeat(&self, lease: Lease) -> Result<WorkflowTurn> {
        (**self).heartbeat(lease).await
    }
    async fn operation_cursor(&self, req: OperationRequest) -> Result<serde_json::Value> {
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
    ) -> Result<Result<serde_json::Value>> {
        (**self).checkpoint_then_operation(save, next).await
    }
    async fn checkpoint_then_complete(
        &self,
        save: CheckpointRequest,
        done: CompleteRequest,
    ) -> Result<Result<()>> {
        (**self).checkpoint_then_complete(save, done).await
    }
    async fn runs(&self, query: RunsQuery) -> Result<RunPage> {
        (**self).runs(query).await
    }
    async fn run(&self, run_id: &str) -> Result<WorkflowRun> {
        (**self).run(run_id).await
    }
    async fn run_stats(&self, hours: u32) -> Result<RunStats> {
        (**self).run_stats(hours).await
    }
    async fn register_schema(&self, schema: &SchemaDocument) -> Result<()> {
        (**self).register_schema(schema).await
    }
    async fn create_schedule(&self, req: CreateScheduleRequest) -> Result<WorkflowSchedule> {
        (**self).create_schedule(req).await
    }
    async fn get_schedule(&self, workflow_id: &str, name: &str) -> Result<WorkflowSchedule> {
        (**self).get_schedule(workflow_id, name).await
    }
    async fn list_schedules(&self, query: ListSchedulesQuery) -> Result<ScheduleList> {
        (**self).list_schedules(query).await
    }
    async fn control_schedule(
        &self,
        req: ScheduleControlRequest,
    ) -> Result<ScheduleControlResponse> {
        (**self).control_schedule(req).await
    }
}
