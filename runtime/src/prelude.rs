//! What workflow code usually needs: `use turnwise::prelude::*;`.

pub use crate::backend::Backend;
pub use crate::context::{Resumable, StepCtx, StepOptions, Turn};
pub use crate::engine::Engine;
pub use crate::handle::{Handle, WorkflowExt};
pub use crate::protocol::{OnExhausted, OperationKind};
pub use crate::worker::Worker;
pub use crate::workflow::{
    Accepts, Done, Signal, TurnError, TurnResult, Workflow, WorkflowError, WorkflowOptions,
    WorkflowWait,
};
#[cfg(feature = "macros")]
pub use turnwise_macros::{step, workflow, Signal};
