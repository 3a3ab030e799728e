//! Replaying saved turns in a test: a turn's saved record (state, message and saved steps,
//! with their payloads) exported from a backend ([`export_turn`], `turnwise turns export`) and
//! replayed against the current code ([`replay`], `TestEnv::replay`), which answers whether the
//! code still makes the saved durable calls or where it diverges, with the same report a live
//! mismatch suspends a turn with.
//!
//! This is the payload-bearing companion of the replay manifests' structural check
//! (`turnwise compat`): it runs the real handler over real saved values, so it also finds a
//! saved value the new code cannot decode (reported as a divergence, as a live turn is
//! suspended for it), or a branch the new code takes differently on the saved values. Nothing runs past the saved steps: the replay stops at the first durable call
//! the turn has not saved, before that call does anything.
//!
//! ```
//! # use turnwise::prelude::*;
//! # use std::time::Duration;
//! # #[workflow(name = "nap")]
//! # async fn nap(ctx: &mut Turn, n: u64, m: u64) -> Result<Done<u64, u64>, TurnError> {
//! #     let a = ctx.step("a", move |_| async move { Ok(m) }).await?;
//! #     ctx.sleep("nap", Duration::from_secs(60)).await?;
//! #     Ok(Done::new(n + a).reply(a))
//! # }
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), turnwise::Error> {
//! use turnwise::replay::{export_turn, replay, Replayed};
//! use turnwise::testing::TestEnv;
//!
//! let env = TestEnv::new().register(nap);
//! let h = env.start(&nap, "nap-1").await?;
//! let turn = h.send(2, "m-1").await?.number;
//! env.run_until_idle().await?; // step `a`, then asleep at `nap`
//! let saved = export_turn(env.engine(), "nap-1", turn).await?;
//! // The saved record is JSON: commit it as a fixture, replay it against new code in CI.
//! let text = serde_json::to_string(&saved).unwrap();
//! let saved: turnwise::replay::SavedTurn = serde_json::from_str(&text).unwrap();
//! assert!(matches!(replay(nap, &saved).await?, Replayed::Accepted { replayed: 2, .. }));
//! # Ok(())
//! # }
//! ```

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::error::{Error, Result};
use crate::protocol::*;
use crate::sdk::worker::Worker;
use crate::sdk::workflow::Workflow;
use crate::Backend;

/// The format of a [`SavedTurn`] this version writes and reads.
pub const SAVED_TURN_FORMAT: u32 = 1;

/// A turn's saved record, as [`export_turn`] writes it: what a replay needs, with payloads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedTurn {
    /// [`SAVED_TURN_FORMAT`].
    pub format: u32,
    /// The workflow type.
    pub workflow_type: String,
    /// The version the turn ran on.
    pub version: String,
    /// The instance's state before the turn.
    pub state: Value,
    /// The turn: its message and its saved steps, in order.
    pub turn: WorkflowTurn,
}

/// What a replay found.
#[derive(Clone, Debug, PartialEq)]
pub enum Replayed {
    /// The code made every saved durable call again, in order.
    Accepted {
        /// How many saved steps it replayed.
        replayed: usize,
        /// Whether the handler then returned (no durable call left to make); otherwise the
        /// replay stopped at the first call the turn had not saved.
        finished: bool,
    },
    /// The code diverged from the saved steps, or cannot decode a saved value: the report a
    /// live turn is suspended with.
    Diverged(MismatchReport),
    /// The handler returned an error on the saved values.
    Failed(String),
}

/// Read turn `turn` of instance `workflow_id` from `backend` as a [`SavedTurn`].
///
/// The state before the turn is the instance's state for an unfinished turn, and the state
/// the previous turn left for a finished one.
///
/// # Errors
///
/// The backend's errors; [`Error::Invalid`] naming `turn` when the state before it is no
/// longer known (the first turn, once finished, or a previous turn pruned from history).
pub async fn export_turn(
    backend: &(impl Backend + ?Sized),
    workflow_id: &str,
    turn: u64,
) -> Result<SavedTurn> {
    let instance = backend.get_instance(workflow_id).await?;
    let t = backend
        .turn(TurnQuery {
            id: workflow_id.to_owned(),
            turn,
        })
        .await?;
    let state = if !t.status.is_outcome() {
        instance.state.clone()
    } else if turn > 1 {
        let before = backend.turn(TurnQuery {
            id: workflow_id.to_owned(),
            turn: turn - 1,
        });
        match before.await {
            Ok(prev) if prev.status == TurnStatus::Completed => prev.state_after,
            _ => return Err(state_unknown(workflow_id, turn)),
        }
    } else {
        return Err(state_unknown(workflow_id, turn));
    };
    Ok(SavedTurn {
        format: SAVED_TURN_FORMAT,
        workflow_type: instance.workflow_type,
        version: t.version.clone(),
        state,
        turn: t,
    })
}

fn state_unknown(workflow_id: &str, turn: u64) -> Error {
    Error::invalid(
        "turn",
        format_args!(
            "the state before turn {turn} of `{workflow_id}` is no longer kept (its previous turn did not complete, or left history); export a turn in flight or one after a completed turn"
        ),
    )
}

/// Replay `saved` against `workflow`'s code: run its handler over the saved state, message and
/// steps, stopping at the first durable call the turn has not saved. Nothing is written
/// anywhere and no step past the saved ones runs.
///
/// # Errors
///
/// [`Error::Invalid`] when `saved` is of another workflow type than `workflow`, or of a format
/// this version does not read.
pub async fn replay<W: Workflow>(workflow: W, saved: &SavedTurn) -> Result<Replayed> {
    if saved.format != SAVED_TURN_FORMAT {
        return Err(Error::invalid(
            "format",
            format_args!(
                "saved turn format {} is not read by this version (it reads {SAVED_TURN_FORMAT}); export the turn again",
                saved.format
            ),
        ));
    }
    if saved.workflow_type != W::NAME {
        return Err(Error::invalid(
            "workflow_type",
            format_args!(
                "the saved turn is of `{}`, the workflow replaying it is `{}`",
                saved.workflow_type,
                W::NAME
            ),
        ));
    }
    let backend = Arc::new(ReplayBackend::new(saved, W::VERSION));
    let worker = Worker::new(backend.clone()).id("replay").register(workflow);
    worker.run_once().await?;
    let end = backend
        .end
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    Ok(end.unwrap_or(Replayed::Accepted {
        replayed: saved.turn.steps.len(),
        finished: false,
    }))
}

/// A backend that hands out one saved turn and ends the replay at its first write.
struct ReplayBackend {
    task: Mutex<Option<TurnTask>>,
    turn: WorkflowTurn,
    end: Mutex<Option<Replayed>>,
}

impl ReplayBackend {
    fn new(saved: &SavedTurn, version: &str) -> Self {
        let mut turn = saved.turn.clone();
        // The turn runs on the code under test.
        turn.version = version.to_owned();
        turn.status = TurnStatus::Running;
        let task = TurnTask {
            workflow_type: saved.workflow_type.clone(),
            state: saved.state.clone(),
            token: "replay".to_owned(),
            lease_ms: 3_600_000,
            effect_prefix: format!("replay.{}.{}", turn.workflow_id, turn.number),
            turn: turn.clone(),
            steps_max: None,
            results_max: None,
        };
        ReplayBackend {
            task: Mutex::new(Some(task)),
            turn,
            end: Mutex::new(None),
        }
    }

    /// End the replay with `end` (the first end stands), and stop the attempt.
    fn finish(&self, end: Replayed) -> Error {
        let mut slot = self.end.lock().unwrap_or_else(PoisonError::into_inner);
        slot.get_or_insert(end);
        Error::LeaseLost {
            workflow_id: self.turn.workflow_id.clone(),
            turn: self.turn.number,
            reason: "the replay ends at the saved steps".to_owned(),
        }
    }

    /// The code reached a durable call past the saved steps.
    fn reached_new_call(&self) -> Error {
        self.finish(Replayed::Accepted {
            replayed: self.turn.steps.len(),
            finished: false,
        })
    }

    fn not_in_a_replay(what: &str) -> Error {
        Error::invalid("replay", format_args!("a replayed turn does not {what}"))
    }
}

#[async_trait]
impl Backend for ReplayBackend {
    async fn create_instance(&self, _: CreateInstanceRequest) -> Result<WorkflowInstance> {
        Err(Self::not_in_a_replay("create instances"))
    }
    async fn send_message(&self, _: MessageRequest) -> Result<WorkflowTurn> {
        Err(Self::not_in_a_replay("send messages"))
    }
    async fn get_instance(&self, _: &str) -> Result<WorkflowInstance> {
        Err(Self::not_in_a_replay("read instances"))
    }
    async fn list_instances(&self, _: ListInstancesQuery) -> Result<InstanceList> {
        Err(Self::not_in_a_replay("list instances"))
    }
    async fn instance_inbox(&self, _: InboxQuery) -> Result<InboxResponse> {
        Err(Self::not_in_a_replay("read inboxes"))
    }
    async fn type_inbox(&self, _: TypeInboxQuery) -> Result<TypeInboxResponse> {
        Err(Self::not_in_a_replay("read inboxes"))
    }
    async fn history(&self, _: HistoryQuery) -> Result<HistoryResponse> {
        Err(Self::not_in_a_replay("read history"))
    }
    async fn turn(&self, _: TurnQuery) -> Result<WorkflowTurn> {
        Ok(self.turn.clone())
    }
    async fn control(&self, _: ControlRequest) -> Result<WorkflowInstance> {
        Err(Self::not_in_a_replay("take operator actions"))
    }
    async fn delete_instance(&self, _: DeleteRequest) -> Result<DeleteResponse> {
        Err(Self::not_in_a_replay("delete instances"))
    }
    async fn claim(&self, _: ClaimRequest) -> Result<ClaimResponse> {
        let task = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        Ok(ClaimResponse { task })
    }
    async fn operation(&self, _: OperationRequest) -> Result<WorkflowTurn> {
        Err(self.reached_new_call())
    }
    async fn progress(&self, _: ProgressRequest) -> Result<WorkflowTurn> {
        Ok(self.turn.clone())
    }
    async fn checkpoint(&self, _: CheckpointRequest) -> Result<WorkflowTurn> {
        Err(self.reached_new_call())
    }
    async fn wait_signal(&self, _: WaitSignalRequest) -> Result<WorkflowTurn> {
        Err(self.reached_new_call())
    }
    async fn signal(&self, _: SignalRequest) -> Result<WorkflowTurn> {
        Err(Self::not_in_a_replay("deliver signals"))
    }
    async fn complete(&self, _: CompleteRequest) -> Result<WorkflowTurn> {
        Err(self.finish(Replayed::Accepted {
            replayed: self.turn.steps.len(),
            finished: true,
        }))
    }
    async fn fail(&self, req: FailRequest) -> Result<WorkflowTurn> {
        Err(self.finish(match req.mismatch {
            Some(report) => Replayed::Diverged(report),
            None => Replayed::Failed(req.error),
        }))
    }
    async fn heartbeat(&self, _: Lease) -> Result<WorkflowTurn> {
        Ok(self.turn.clone())
    }
    async fn runs(&self, _: RunsQuery) -> Result<RunPage> {
        Err(Self::not_in_a_replay("read runs"))
    }
    async fn run(&self, _: &str) -> Result<WorkflowRun> {
        Err(Self::not_in_a_replay("read runs"))
    }
    async fn run_stats(&self, _: u32) -> Result<RunStats> {
        Err(Self::not_in_a_replay("read runs"))
    }
    async fn register_schema(&self, _: &SchemaDocument) -> Result<()> {
        Ok(())
    }
}

impl crate::WorkerBackend for ReplayBackend {}
