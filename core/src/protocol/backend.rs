//! The [`Backend`] trait: the message-workflow protocol as one async interface.
//!
//! Handles and workers talk only to a `Backend`. The embedded `Engine`
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
    /// Read one turn once it is settled ([`TurnStatus::is_settled`]: it has an outcome,
    /// `completed`, `failed` or `cancelled`, or it is `suspended` by a replay mismatch until an
    /// operator acts), waiting up to `wait` for that; when the wait runs out, the turn as it is
    /// then. A turnwise extension
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
        Err(not_offered("schedules"))
    }
    /// Read one schedule of an instance.
    async fn get_schedule(&self, workflow_id: &str, name: &str) -> Result<WorkflowSchedule> {
        let _ = (workflow_id, name);
        Err(not_offered("schedules"))
    }
    /// List schedules: one instance's, or a page of instances' at a time.
    async fn list_schedules(&self, query: ListSchedulesQuery) -> Result<ScheduleList> {
        let _ = query;
        Err(not_offered("schedules"))
    }
    /// Pause, resume or delete a schedule.
    async fn control_schedule(
        &self,
        req: ScheduleControlRequest,
    ) -> Result<ScheduleControlResponse> {
        let _ = req;
        Err(not_offered("schedules"))
    }

    /// Run a turn suspended by a replay mismatch again on the instance's own version, from its
    /// last accepted step or from scratch (a turnwise extension; see [`RestartTurnRequest`]).
    /// Backends that cannot (an LBB server) answer [`Error::Http`](crate::Error::Http) with
    /// status 404; the default answers the same, naming the call.
    async fn restart_turn(&self, req: RestartTurnRequest) -> Result<RestartTurnResponse> {
        let _ = req;
        Err(not_offered("the ways out of a suspension (`restart_turn`)"))
    }
    /// Fork an instance whose head turn is suspended into a new instance of the same version
    /// (a turnwise extension; see [`ForkInstanceRequest`]). The default answers as
    /// [`restart_turn`](Self::restart_turn)'s does.
    async fn fork_instance(&self, req: ForkInstanceRequest) -> Result<ForkInstanceResponse> {
        let _ = req;
        Err(not_offered(
            "the ways out of a suspension (`fork_instance`)",
        ))
    }
    /// Check which instances of `query.workflow_type` not on `query.to_version` could move
    /// there now (a turnwise extension): every such instance, each with its [`Verdict`], read
    /// from the keys, kinds and order of its saved steps and the replay manifests registered
    /// for its version and the target, never from a payload value. Backends that keep no
    /// manifests (an LBB server) answer [`Error::Http`](crate::Error::Http) with status 404;
    /// the default answers the same, naming the call.
    async fn compat_live(&self, query: LiveCompatQuery) -> Result<LiveCompat> {
        let _ = query;
        Err(not_offered("the live compatibility check (`compat_live`)"))
    }
    /// Move one instance, or every instance of a type that can move, to another version (a
    /// turnwise extension). Each instance is checked again in its own conditional commit, and
    /// moved only when that check holds; a repeat answers the recorded move and records
    /// nothing. The default answers as [`compat_live`](Backend::compat_live)'s.
    async fn upgrade_instances(&self, req: UpgradeRequest) -> Result<UpgradeResponse> {
        let _ = req;
        Err(not_offered("upgrades (`upgrade_instances`)"))
    }
}

/// What a backend without a turnwise extension answers for `what` (the extension, naming the
/// call).
fn not_offered(what: &str) -> crate::Error {
    crate::Error::Http {
        status: 404,
        code: "not_found".into(),
        message: format!(
            "this backend does not offer {what} (a turnwise extension); use an embedded engine \
             or a turnwise server"
        ),
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
    async fn restart_turn(&self, req: RestartTurnRequest) -> Result<RestartTurnResponse> {
        (**self).restart_turn(req).await
    }
    async fn fork_instance(&self, req: ForkInstanceRequest) -> Result<ForkInstanceResponse> {
        (**self).fork_instance(req).await
    }
    async fn compat_live(&self, query: LiveCompatQuery) -> Result<LiveCompat> {
        (**self).compat_live(query).await
    }
    async fn upgrade_instances(&self, req: UpgradeRequest) -> Result<UpgradeResponse> {
        (**self).upgrade_instances(req).await
    }
}
