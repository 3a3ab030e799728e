//! (in progress)
#![allow(missing_docs, unused_variables)]
use super::*;
use crate::error::Error;
fn todo<T>() -> Result<T> {
    Err(Error::Store("not implemented yet".into()))
}
impl Engine {
    pub(super) async fn do_create(&self, req: CreateInstanceRequest) -> Result<WorkflowInstance> {
        todo()
    }
    pub(super) async fn do_message(&self, req: MessageRequest) -> Result<WorkflowTurn> {
        todo()
    }
    pub(super) async fn do_get(&self, id: &str) -> Result<WorkflowInstance> {
        todo()
    }
    pub(super) async fn do_list(&self, q: ListInstancesQuery) -> Result<InstanceList> {
        todo()
    }
    pub(super) async fn do_inbox(&self, q: InboxQuery) -> Result<InboxResponse> {
        todo()
    }
    pub(super) async fn do_type_inbox(&self, q: TypeInboxQuery) -> Result<TypeInboxResponse> {
        todo()
    }
    pub(super) async fn do_history(&self, q: HistoryQuery) -> Result<HistoryResponse> {
        todo()
    }
    pub(super) async fn do_turn(&self, q: TurnQuery) -> Result<WorkflowTurn> {
        todo()
    }
    pub(super) async fn do_control(&self, r: ControlRequest) -> Result<WorkflowInstance> {
        todo()
    }
    pub(super) async fn do_delete(&self, r: DeleteRequest) -> Result<DeleteResponse> {
        todo()
    }
    pub(super) async fn do_claim(&self, r: ClaimRequest) -> Result<ClaimResponse> {
        todo()
    }
    pub(super) async fn do_operation(&self, r: OperationRequest) -> Result<WorkflowTurn> {
        todo()
    }
    pub(super) async fn do_progress(&self, r: ProgressRequest) -> Result<WorkflowTurn> {
        todo()
    }
    pub(super) async fn do_checkpoint(&self, r: CheckpointRequest) -> Result<WorkflowTurn> {
        todo()
    }
    pub(super) async fn do_wait_signal(&self, r: WaitSignalRequest) -> Result<WorkflowTurn> {
        todo()
    }
    pub(super) async fn do_signal(&self, r: SignalRequest) -> Result<WorkflowTurn> {
        todo()
    }
    pub(super) async fn do_complete(&self, r: CompleteRequest) -> Result<WorkflowTurn> {
        todo()
    }
    pub(super) async fn do_fail(&self, r: FailRequest) -> Result<WorkflowTurn> {
        todo()
    }
    pub(super) async fn do_heartbeat(&self, l: Lease) -> Result<WorkflowTurn> {
        todo()
    }
}
