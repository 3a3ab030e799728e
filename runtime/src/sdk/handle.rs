//! Typed handles: start instances, send messages and signals, read state, operate.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::protocol::backend::Backend;
use crate::protocol::error::{Error, Result};
use crate::protocol::*;
use crate::sdk::codec;
use crate::sdk::workflow::{AcceptedBy, Workflow};
use crate::worker_backend::WorkerBackend;

/// The future of a [`Handle`] call that returns a boxed future (see [`Handle::signal`]).
pub type Pending<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T>> + Send + 'a>>;

fn codec_error(e: codec::CodecError) -> Error {
    Error::Invalid {
        param: "value".into(),
        message: e.to_string(),
    }
}

/// How long one read of [`Handle::result`] waits on the backend before it reads again.
const AWAIT_SLICE: Duration = Duration::from_secs(10);

/// An answer without an outcome this fast means the backend answered at once instead of
/// waiting (a server without the `wait_ms` extension): read again after a pause.
const EARLY: Duration = Duration::from_millis(100);

/// The pauses between reads of a backend that cannot wait: from the first to the last,
/// doubling.
const POLL_FIRST: Duration = Duration::from_millis(10);
const POLL_LAST: Duration = Duration::from_secs(1);

/// Why [`Handle::call`] or [`Handle::result`] has no reply to give.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The backend refused or failed a call (the message was refused, the instance or turn
    /// does not exist, the server could not be reached). [`Error`] says which.
    #[error(transparent)]
    Backend(#[from] Error),
    /// The turn failed for good: it ran out of attempts or its handler gave up. An operator
    /// may still retry it ([`Handle::retry`]) or skip it.
    #[error("turn {turn} of `{workflow_id}` failed: {error}")]
    Failed {
        /// The instance.
        workflow_id: String,
        /// The turn.
        turn: u64,
        /// The last attempt's error.
        error: String,
    },
    /// The turn is suspended by a replay mismatch: the worker's code no longer makes the
    /// durable calls the turn saved. It is not final: an operator may restart it
    /// ([`Handle::restart_turn`]), fork the instance ([`Handle::fork`]) or cancel it, and
    /// [`Handle::result`] can then be asked again. `error` names the divergence; the turn's
    /// [`mismatch`](crate::protocol::WorkflowTurn::mismatch) report has it in full.
    #[error("turn {turn} of `{workflow_id}` is suspended by a replay mismatch: {error}")]
    Suspended {
        /// The instance.
        workflow_id: String,
        /// The turn.
        turn: u64,
        /// What diverged, where.
        error: String,
    },
    /// An operator cancelled the turn; the state is unchanged.
    #[error("turn {turn} of `{workflow_id}` was cancelled")]
    Cancelled {
        /// The instance.
        workflow_id: String,
        /// The turn.
        turn: u64,
    },
    /// The turn completed without a reply (it ended with no `reply`, for example when it
    /// continued), and `null` is not a value of the reply type.
    #[error("turn {turn} of `{workflow_id}` completed without a reply")]
    NoReply {
        /// The instance.
        workflow_id: String,
        /// The turn.
        turn: u64,
    },
    /// The saved reply does not decode as the workflow's reply type (the instance runs
    /// another version of the workflow, or the reply was written by other code).
    #[error("the reply of turn {turn} of `{workflow_id}` does not decode: {message}")]
    Decode {
        /// The instance.
        workflow_id: String,
        /// The turn.
        turn: u64,
        /// What the codec said.
        message: String,
    },
}

/// Start and address instances of a workflow. Implemented for every [`Workflow`].
pub trait WorkflowExt: Workflow {
    /// Create the instance `id` with the workflow's initial state and options (idempotent: an
    /// existing instance of the same workflow and version is returned as it is).
    fn start<B: WorkerBackend + Clone + 'static>(
        &self,
        backend: &B,
        id: impl Into<String> + Send,
    ) -> impl std::future::Future<Output = Result<Handle<Self>>> + Send
    where
        Self::State: Default,
    {
        let backend: Arc<dyn WorkerBackend> = Arc::new(backend.clone());
        let id = id.into();
        let state = codec::encode_checked(
            &Self::Codec::default(),
            "initial state",
            &self.initial_state(),
            Self::state_eq(),
        );
        let options = self.options();
        async move {
            let (state, _) = state.map_err(codec_error)?;
            backend
                .create_instance(CreateInstanceRequest {
                    id: id.clone(),
                    workflow_type: Self::NAME.to_owned(),
                    version: Self::VERSION.to_owned(),
                    state,
                    lease_ms: Some(options.lease.as_millis() as u64),
                    max_attempts: Some(options.max_attempts),
                    on_exhausted: Some(options.on_exhausted),
                })
                .await?;
            Ok(Handle {
                backend,
                id,
                by: None,
                _w: PhantomData,
            })
        }
    }

    /// A handle on an existing instance (nothing is checked until it is used).
    fn handle<B: WorkerBackend + Clone + 'static>(
        &self,
        backend: &B,
        id: impl Into<String>,
    ) -> Handle<Self> {
        Handle {
            backend: Arc::new(backend.clone()),
            id: id.into(),
            by: None,
            _w: PhantomData,
        }
    }
}

impl<W: Workflow> WorkflowExt for W {}

/// A typed handle on one instance of workflow `W`.
pub struct Handle<W> {
    backend: Arc<dyn WorkerBackend>,
    id: String,
    /// Who the operator actions say asked ([`Handle::acting_as`]).
    by: Option<String>,
    _w: PhantomData<fn() -> W>,
}

impl<W> Clone for Handle<W> {
    fn clone(&self) -> Self {
        Self {
            backend: self.backend.clone(),
            id: self.id.clone(),
            by: self.by.clone(),
            _w: PhantomData,
        }
    }
}

impl<W> std::fmt::Debug for Handle<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle").field("id", &self.id).finish()
    }
}

impl<W: Workflow> Handle<W> {
    /// The instance id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The same handle, naming `by` as who asks for its operator actions: an upgrade, a
    /// restart, a fork and a cancellation of a suspended turn record it on the instance's
    /// events.
    #[must_use]
    pub fn acting_as(mut self, by: impl Into<String>) -> Self {
        self.by = Some(by.into());
        self
    }

    /// Admit a message under `message_id` (admitted once: a repeat answers the first turn).
    pub async fn send(
        &self,
        message: W::Message,
        message_id: impl Into<String>,
    ) -> Result<WorkflowTurn> {
        let req = self.message_request(message, message_id.into())?;
        self.backend.send_message(req).await
    }

    /// The request that admits `message` under `id`, its round trip checked.
    fn message_request(&self, message: W::Message, id: String) -> Result<MessageRequest> {
        let (message, _) =
            codec::encode_checked(&W::Codec::default(), "message", &message, W::message_eq())
                .map_err(codec_error)?;
        Ok(MessageRequest {
            workflow_id: self.id.clone(),
            id,
            message,
            origin: Some(MessageOrigin::new("app")),
        })
    }

    /// Send signal `S` to turn `turn` under event id `id` (delivered once).
    ///
    /// The value is encoded (and its round trip verified) when this is called; the returned
    /// future delivers it. Sending a signal the workflow does not accept is a compile error,
    /// reported once, at the signal's type.
    pub fn signal<S>(&self, turn: u64, value: S, id: impl Into<String>) -> Pending<'_, WorkflowTurn>
    where
        S: AcceptedBy<W>,
    {
        // The future is boxed so that its type does not depend on `S`: an unaccepted signal is
        // then one unmet bound, at the call, rather than one more for the future and its await.
        let request = codec::encode_verified(&W::Codec::default(), "signal", &value)
            .map_err(codec_error)
            .map(|(value, _)| SignalRequest {
                workflow_id: self.id.clone(),
                turn,
                id: id.into(),
                name: S::NAME.to_owned(),
                value,
            });
        Box::pin(async move { self.backend.signal(request?).await })
    }

    /// Signal whichever turn of the instance is waiting for `S` now, without knowing its
    /// number: the inbox head, if it waits in `ctx.wait_for_signal::<S>(..)`. Answers that turn.
    /// The event id makes it idempotent as with [`signal`](Self::signal): repeating a call
    /// whose answer was lost answers the turn the signal went to, while it is unfinished.
    ///
    /// When no turn waits for `S` it fails with [`Error::NotFound`] naming the signal, and
    /// delivers nothing: the head may be running, waiting for another signal, sleeping, or
    /// absent. (A turn that moves on between the read and the delivery keeps the signal
    /// buffered, for a later wait of the same turn.)
    ///
    /// As with [`signal`](Self::signal), the future is boxed, so that a signal the workflow does
    /// not accept is one compile error.
    pub fn signal_waiting<S>(&self, value: S, id: impl Into<String>) -> Pending<'_, WorkflowTurn>
    where
        S: AcceptedBy<W>,
    {
        let id = id.into();
        Box::pin(self.signal_waiting_inner::<S>(value, id))
    }

    async fn signal_waiting_inner<S>(&self, value: S, id: String) -> Result<WorkflowTurn>
    where
        S: AcceptedBy<W>,
    {
        let head = self
            .backend
            .instance_inbox(InboxQuery {
                id: self.id.clone(),
                after: None,
                limit: Some(1),
                payloads: false,
            })
            .await?;
        let not_waiting = || {
            Error::not_found(format_args!(
                "a turn of `{}` waiting for signal `{}` (none waits for it now)",
                self.id,
                S::NAME
            ))
        };
        let Some(head) = head.messages.first() else {
            return Err(not_waiting());
        };
        let turn = self.turn(head.turn).await?;
        if turn.signals.iter().flatten().any(|s| s.id == id) {
            // A repeat: the engine answers it as the delivery it already made.
            return self.signal(turn.number, value, id).await;
        }
        let waits = turn.status == TurnStatus::Waiting
            && turn.steps.last().is_some_and(|s| {
                s.kind == CheckpointKind::Signal
                    && s.output.is_null()
                    && s.signal_name.as_deref() == Some(S::NAME)
            });
        if !waits {
            return Err(not_waiting());
        }
        self.signal(turn.number, value, id).await
    }

    /// The instance as the server reports it.
    pub async fn instance(&self) -> Result<WorkflowInstance> {
        self.backend.get_instance(&self.id).await
    }

    /// The saved state, decoded.
    pub async fn state(&self) -> Result<W::State> {
        let inst = self.instance().await?;
        codec::decode(&W::Codec::default(), "state", &inst.state).map_err(codec_error)
    }

    /// One turn, pending or kept in history.
    pub async fn turn(&self, turn: u64) -> Result<WorkflowTurn> {
        self.backend
            .turn(TurnQuery {
                id: self.id.clone(),
                turn,
            })
            .await
    }

    /// The reply of a completed turn, decoded; `None` while the turn has not completed, and
    /// when it completed without a reply (unless `null` decodes as the reply type, e.g. `()`).
    pub async fn reply(&self, turn: u64) -> Result<Option<W::Reply>> {
        let t = self.turn(turn).await?;
        if t.status != TurnStatus::Completed {
            return Ok(None);
        }
        match codec::decode(&W::Codec::default(), "reply", &t.result) {
            Ok(reply) => Ok(Some(reply)),
            // A turn that ended without a reply (e.g. one that continued) records `null`.
            Err(_) if t.result.is_null() => Ok(None),
            Err(e) => Err(codec_error(e)),
        }
    }

    /// Admit a message under `message_id` and wait for its turn's reply: [`send`](Self::send)
    /// then [`result`](Self::result). A repeat with the same `message_id` (after a lost
    /// answer, say) waits for the same turn instead of admitting the message again.
    ///
    /// ```
    /// # use turnwise::prelude::*;
    /// # #[workflow(name = "doubler", version = "v1")]
    /// # async fn doubler(_ctx: &mut Turn, state: u64, n: u64) -> Result<Done<u64, u64>, TurnError> {
    /// #     Ok(Done::new(state + 1).reply(n * 2))
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let engine = turnwise::Engine::in_memory();
    /// let worker = Worker::new(engine.clone()).register(doubler).run_async();
    /// let handle = doubler.start(&engine, "doubler-1").await?;
    /// assert_eq!(handle.call(21, "request-1").await?, 42);
    /// worker.stop().await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// It waits as long as the turn takes (retries included); bound it with
    /// `tokio::time::timeout` where a caller cannot wait. Dropping the future stops waiting
    /// and leaves the turn to run. A turn suspended by a replay mismatch answers at once with
    /// [`CallError::Suspended`]; a turn queued behind a suspended one waits until an operator
    /// ends that suspension (the instance's status says `suspended`).
    pub async fn call(
        &self,
        message: W::Message,
        message_id: impl Into<String>,
    ) -> Result<W::Reply, CallError> {
        // As `send`, answered with the turn's number only.
        let req = self.message_request(message, message_id.into())?;
        let turn = self.backend.send_message_ack(req).await?;
        self.result(turn).await
    }

    /// Wait for turn `turn` to have an outcome and answer its reply, or
    /// [`CallError::Suspended`] when it is suspended by a replay mismatch (ask again after an
    /// operator restarts it). Nothing is polled where
    /// the backend can wait: the embedded engine wakes the caller with the commit that settles
    /// the turn, and the `Http` backend long-polls the turn route (a turnwise extension; a
    /// server without it is read again after growing pauses, 10 ms to 1 s).
    pub async fn result(&self, turn: u64) -> Result<W::Reply, CallError> {
        let mut pause = POLL_FIRST;
        loop {
            let asked = tokio::time::Instant::now();
            let query = TurnQuery {
                id: self.id.clone(),
                turn,
            };
            let t = self.backend.await_outcome(query, AWAIT_SLICE).await?;
            if t.status.is_settled() {
                return self.outcome(t);
            }
            if asked.elapsed() < EARLY {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(POLL_LAST);
            }
        }
    }

    /// The reply of a turn with an outcome, or why there is none.
    fn outcome(&self, t: TurnOutcome) -> Result<W::Reply, CallError> {
        let (workflow_id, turn) = (t.workflow_id, t.number);
        match t.status {
            TurnStatus::Completed => {
                match codec::decode(&W::Codec::default(), "reply", &t.result) {
                    Ok(reply) => Ok(reply),
                    Err(_) if t.result.is_null() => Err(CallError::NoReply { workflow_id, turn }),
                    Err(e) => Err(CallError::Decode {
                        workflow_id,
                        turn,
                        message: e.to_string(),
                    }),
                }
            }
            TurnStatus::Cancelled => Err(CallError::Cancelled { workflow_id, turn }),
            TurnStatus::Suspended => Err(CallError::Suspended {
                workflow_id,
                turn,
                error: t.error.unwrap_or_else(|| "no report was recorded".into()),
            }),
            _ => Err(CallError::Failed {
                workflow_id,
                turn,
                error: t.error.unwrap_or_else(|| "no error was recorded".into()),
            }),
        }
    }

    /// The unfinished turns, oldest first (a page of up to 100, with payloads).
    pub async fn inbox(&self) -> Result<InboxResponse> {
        self.backend
            .instance_inbox(InboxQuery {
                id: self.id.clone(),
                after: None,
                limit: Some(100),
                payloads: true,
            })
            .await
    }

    /// Finished turns after `after` (a page of up to 50).
    pub async fn history(&self, after: Option<u64>) -> Result<HistoryResponse> {
        self.backend
            .history(HistoryQuery {
                id: self.id.clone(),
                after,
                limit: Some(50),
            })
            .await
    }

    /// The instance's runs (one per attempt of a turn), newest first: a page of up to 50,
    /// from `cursor` (the `next_cursor` of the previous page) when given.
    pub async fn runs(&self, cursor: Option<String>) -> Result<RunPage> {
        self.backend
            .runs(RunsQuery {
                id: Some(self.id.clone()),
                cursor,
                limit: Some(50),
            })
            .await
    }

    /// Every kept run of the instance, newest first, reading page after page.
    pub async fn all_runs(&self) -> Result<Vec<WorkflowRun>> {
        let mut all = Vec::new();
        let mut cursor = None;
        loop {
            let page = self.runs(cursor).await?;
            all.extend(page.runs);
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(all),
            }
        }
    }

    async fn control(&self, action: ControlAction, turn: Option<u64>) -> Result<WorkflowInstance> {
        self.backend
            .control(ControlRequest {
                workflow_id: self.id.clone(),
                action,
                turn,
                by: self.by.clone(),
            })
            .await
    }

    /// Stop handing out claims (messages are still admitted).
    pub async fn pause(&self) -> Result<WorkflowInstance> {
        self.control(ControlAction::Pause, None).await
    }
    /// Hand out claims again.
    pub async fn resume(&self) -> Result<WorkflowInstance> {
        self.control(ControlAction::Resume, None).await
    }
    /// Run a turn that failed for good again.
    pub async fn retry(&self, turn: u64) -> Result<WorkflowInstance> {
        self.control(ControlAction::Retry, Some(turn)).await
    }
    /// Move a turn that failed for good to history and go on.
    pub async fn skip(&self, turn: u64) -> Result<WorkflowInstance> {
        self.control(ControlAction::Skip, Some(turn)).await
    }
    /// Cancel an unfinished turn, leaving the state unchanged.
    pub async fn cancel_turn(&self, turn: u64) -> Result<WorkflowInstance> {
        self.control(ControlAction::CancelTurn, Some(turn)).await
    }
    /// Run turn `turn`, suspended by a replay mismatch, again on the instance's own version:
    /// from its last accepted step ([`RestartFrom::LastAccepted`]: the saved steps before the
    /// divergence are kept) or from scratch. Use it once the code deployed for the version
    /// makes the calls the turn needs again. A turn that is not suspended is refused with
    /// [`Error::NotSuspended`]; an exact repeat answers the same result.
    pub async fn restart_turn(&self, turn: u64, from: RestartFrom) -> Result<RestartTurnResponse> {
        self.backend
            .restart_turn(RestartTurnRequest {
                workflow_id: self.id.clone(),
                turn,
                from,
                by: self.by.clone(),
            })
            .await
    }

    /// Fork this instance, whose head turn is suspended by a replay mismatch, into a new
    /// instance `new_id` of the same workflow and version: the same state, and the unfinished
    /// messages admitted again in order (under message ids `fork.<old id>`), the suspended
    /// turn's message first, starting from scratch there. This instance stays suspended.
    /// Answers a handle on the fork. Refused with [`Error::NotSuspended`] when the head is not
    /// suspended, and [`Error::Conflict`] when `new_id` is another instance; an exact repeat
    /// answers the same fork.
    pub async fn fork(&self, new_id: impl Into<String>) -> Result<Handle<W>> {
        let new_id = new_id.into();
        let forked = self
            .backend
            .fork_instance(ForkInstanceRequest {
                workflow_id: self.id.clone(),
                new_id,
                by: self.by.clone(),
            })
            .await?;
        Ok(Handle {
            backend: self.backend.clone(),
            id: forked.workflow_id,
            by: self.by.clone(),
            _w: PhantomData,
        })
    }

    /// Make a turn waiting on a retry time ready now.
    pub async fn wake(&self) -> Result<WorkflowInstance> {
        self.control(ControlAction::Wake, None).await
    }
    /// Delete the instance with its inbox and history.
    pub async fn delete(&self) -> Result<bool> {
        Ok(self
            .backend
            .delete_instance(DeleteRequest {
                workflow_id: self.id.clone(),
            })
            .await?
            .deleted)
    }
    /// Move the instance to `new_workflow`'s version of the same workflow, and answer a handle
    /// typed for it. The backend checks the instance again in its own conditional commit and
    /// moves it only when that check holds: its state and message schemas read, and the
    /// steps its turn in flight saved (if any) are accepted by the new version's grammar
    /// (`docs/versions.md`). A suspended turn that the new version accepts is resumed. A
    /// repeat answers as the first call and records nothing; an instance already on that
    /// version is answered as it is.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] when `W2` is another workflow than `W` (an upgrade never changes the
    /// workflow), [`Error::Conflict`] naming why when the backend leaves the instance where it
    /// is (pinned, or its head held by a worker now: then retry later), and the backend's
    /// errors (a backend without upgrades answers 404).
    ///
    /// The move is recorded on the instance as asked by the handle's
    /// [`acting_as`](Self::acting_as), when set.
    pub async fn upgrade<W2: Workflow>(&self, new_workflow: &W2) -> Result<Handle<W2>> {
        let _ = new_workflow;
        if W2::NAME != W::NAME {
            return Err(Error::invalid(
                "workflow",
                format_args!(
                    "instance `{}` is a `{}`; it cannot be upgraded to `{}` `{}`, another \
                     workflow: an upgrade moves an instance to another version of its own \
                     workflow",
                    self.id,
                    W::NAME,
                    W2::NAME,
                    W2::VERSION
                ),
            ));
        }
        let req = UpgradeRequest {
            workflow_id: Some(self.id.clone()),
            workflow_type: Some(W::NAME.to_owned()),
            to_version: W2::VERSION.to_owned(),
            all_upgradable: false,
            by: self.by.clone(),
        };
        let answer = self.backend.upgrade_instances(req).await?;
        if let Some(refused) = answer.refused.first() {
            let again = if refused.retryable {
                "; retry later"
            } else {
                ""
            };
            return Err(Error::conflict(format_args!(
                "instance `{}` stays on `{}` `{}` ({}): {}{again}",
                self.id,
                W::NAME,
                refused.version,
                refused.reason.code,
                refused.reason
            )));
        }
        Ok(Handle {
            backend: self.backend.clone(),
            id: self.id.clone(),
            by: self.by.clone(),
            _w: PhantomData,
        })
    }

    /// Admit `message` under `message_id` at `when` (by the backend's clock), once: not before,
    /// and without holding up the inbox until then. The delayed message is a schedule named
    /// `message_id` until it fires; [`Handle::delete_schedule`] cancels it. An identical repeat
    /// answers the pending schedule.
    pub async fn send_at(
        &self,
        message: W::Message,
        message_id: impl Into<String>,
        when: std::time::SystemTime,
    ) -> Result<WorkflowSchedule> {
        let at_ms = when
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .and_then(|d| Millis::try_from(d.as_millis()).ok())
            .ok_or_else(|| Error::Invalid {
                param: "when".into(),
                message: "the time is before 1970 or too far ahead".into(),
            })?;
        self.schedule_message(
            message_id.into(),
            ScheduleSpec::Once { at_ms },
            message,
            CatchUp::One,
        )
        .await
    }

    /// Admit `message` under `message_id` once `delay` has passed on the backend's clock
    /// (see [`Handle::send_at`]).
    pub async fn send_after(
        &self,
        message: W::Message,
        message_id: impl Into<String>,
        delay: Duration,
    ) -> Result<WorkflowSchedule> {
        let delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.schedule_message(
            message_id.into(),
            ScheduleSpec::After { delay_ms },
            message,
            CatchUp::One,
        )
        .await
    }

    /// Create a recurring schedule `name` ([`ScheduleSpec::every`] or [`ScheduleSpec::cron`])
    /// that admits `message` at each occurrence under the message id
    /// `schedule/<name>/<fire time>` (origin kind `schedule`), once per occurrence;
    /// `catch_up` says what happens to occurrences missed while nothing ran.
    pub async fn schedule(
        &self,
        name: impl Into<String>,
        spec: ScheduleSpec,
        catch_up: CatchUp,
        message: W::Message,
    ) -> Result<WorkflowSchedule> {
        self.schedule_message(name.into(), spec, message, catch_up)
            .await
    }

    async fn schedule_message(
        &self,
        name: String,
        spec: ScheduleSpec,
        message: W::Message,
        catch_up: CatchUp,
    ) -> Result<WorkflowSchedule> {
        let (message, _) =
            codec::encode_checked(&W::Codec::default(), "message", &message, W::message_eq())
                .map_err(codec_error)?;
        self.backend
            .create_schedule(CreateScheduleRequest {
                workflow_id: self.id.clone(),
                name,
                spec,
                message,
                catch_up,
            })
            .await
    }

    /// The instance's schedules, by name (pending delayed messages included).
    pub async fn schedules(&self) -> Result<Vec<WorkflowSchedule>> {
        Ok(self
            .backend
            .list_schedules(ListSchedulesQuery {
                workflow_id: Some(self.id.clone()),
                ..Default::default()
            })
            .await?
            .schedules)
    }

    /// One schedule of the instance.
    pub async fn get_schedule(&self, name: &str) -> Result<WorkflowSchedule> {
        self.backend.get_schedule(&self.id, name).await
    }

    async fn control_schedule(
        &self,
        name: &str,
        action: ScheduleAction,
    ) -> Result<ScheduleControlResponse> {
        self.backend
            .control_schedule(ScheduleControlRequest {
                workflow_id: self.id.clone(),
                name: name.to_owned(),
                action,
            })
            .await
    }

    /// Stop a schedule admitting firings.
    pub async fn pause_schedule(&self, name: &str) -> Result<WorkflowSchedule> {
        let r = self.control_schedule(name, ScheduleAction::Pause).await?;
        r.schedule
            .ok_or_else(|| Error::transport("the backend answered a pause without the schedule"))
    }

    /// Let a paused schedule admit firings again (missed occurrences by its catch-up policy).
    pub async fn resume_schedule(&self, name: &str) -> Result<WorkflowSchedule> {
        let r = self.control_schedule(name, ScheduleAction::Resume).await?;
        r.schedule
            .ok_or_else(|| Error::transport("the backend answered a resume without the schedule"))
    }

    /// Delete a schedule (or cancel a delayed message not yet admitted). Answers whether there
    /// was one.
    pub async fn delete_schedule(&self, name: &str) -> Result<bool> {
        Ok(self
            .control_schedule(name, ScheduleAction::Delete)
            .await?
            .deleted)
    }
}
