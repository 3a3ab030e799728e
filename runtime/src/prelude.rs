//! What workflow code usually needs: `use turnwise::prelude::*;`.

#[cfg(feature = "engine")]
pub use crate::engine::Engine;
pub use crate::protocol::backend::Backend;
pub use crate::protocol::{CatchUp, OnExhausted, OperationKind, ScheduleSpec};
pub use crate::sdk::context::{ChildError, Resumable, StepCtx, StepOptions, Turn};
pub use crate::sdk::handle::{CallError, Handle, WorkflowExt};
pub use crate::sdk::worker::Worker;
pub use crate::sdk::workflow::{
    Accepts, Done, OnMismatch, Signal, TurnError, TurnResult, Workflow, WorkflowError,
    WorkflowOptions, WorkflowWait,
};
pub use crate::worker_backend::WorkerBackend;
#[cfg(feature = "macros")]
pub use turnwise_macros::{step, workflow, Signal};
