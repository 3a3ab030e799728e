//! Worker turn routes: operation, progress, checkpoint, wait-signal, complete, fail, heartbeat.
//!
//! Each one reads the instance and the turn, answers an exact repeat of an already-applied
//! request with success (a client that lost the answer retries), checks the lease, decides, and
//! commits guarded by the instance revision.

use serde_json::{json, Value};

use super::rules;
use super::writes::{new_turn, turn_size};
use super::*;
use crate::store::Durability::{Durable, Relaxed};
use crate::validate;

use turnwise_rules::durations::{
    HEARTBEAT_TIMEOUT_MIN_MS, OPERATION_TIMEOUT, RETRY_AT_AHEAD, SLEEP_DELAY, WAIT_TIMEOUT,
};
use turnwise_rules::{limits, names};

/// The step limit (`Limits::steps_per_turn`, carried to workers as the task's `steps_max`):
/// `422 step_limit`, so that every worker fails the attempt with this message instead of
/// taking it for a lost turn.
fn steps_limit(position: u32, limit: usize) -> Result<()> {
    if position as usize >= limit {
        return Err(Error::LimitReached {
            limit: "steps",
            message: format!(
                "a turn holds at most {limit} steps (steps_per_turn) and position {position} is \
                 past that; continue the work in a new turn with a continuation"
            ),
        });
    }
    Ok(())
}

/// The next step must go at the end, under a key not used before in this turn.
fn next_position(workflow_id: &str, turn: &TurnRecord, position: u32, key: &str) -> Result<()> {
    if position as usize != turn.steps.len() {
        return Err(Error::conflict(format_args!(
            "position {position} is not the next step of turn {} of `{workflow_id}`: it has {} saved steps",
            turn.number,
            turn.steps.len()
        )));
    }
    if let Some(i) = turn.steps.iter().position(|s| s.key == key) {
        return Err(Error::conflict(format_args!(
            "step key `{key}` is already saved at position {i} of turn {}; step keys must be unique within a turn",
            turn.number
        )));
    }
    Ok(())
}

/// Check a run's results report against the limits of [`RunResultsReport`]: at most 200
/// inputs, 32 values and a 500-character error per input, user values within the nesting
/// limit, and 512 KiB in all. The report's shape is checked by its type.
fn check_results(results: Option<&RunResultsReport>) -> Result<()> {
    let Some(report) = results else {
        return Ok(());
    };
    let inputs = report.inputs.as_deref().unwrap_or_default();
    if inputs.len() > RunResultsReport::MAX_INPUTS {
        return Err(Error::invalid(
            "results.inputs",
            format!(
                "{} inputs are listed; a results report lists at most {} (count the rest in \
                 `counts`)",
                inputs.len(),
                RunResultsReport::MAX_INPUTS
            ),
        ));
    }
    for (i, input) in inputs.iter().enumerate() {
        if let Some(error) = &input.error {
            let n = error.chars().count();
            if n > RunResultsReport::MAX_ERROR_CHARS {
                return Err(Error::invalid(
                    format!("results.inputs[{i}].error"),
                    format!(
                        "it is {n} characters long; an input's error is at most {}",
                        RunResultsReport::MAX_ERROR_CHARS
                    ),
                ));
            }
        }
        if let Some(region) = &input.region {
            for v in region.values() {
                validate::nesting(&format!("results.inputs[{i}].region"), v)?;
            }
        }
        if let Some(values) = &input.values {
            if values.len() > RunResultsReport::MAX_VALUES {
                return Err(Error::invalid(
                    format!("results.inputs[{i}].values"),
                    format!(
                        "{} values are listed; an input lists at most {}",
                        values.len(),
                        RunResultsReport::MAX_VALUES
                    ),
                ));
            }
            for (j, v) in values.iter().enumerate() {
                validate::nesting(&format!("results.inputs[{i}].values[{j}]"), v)?;
            }
        }
    }
    let size = validate::serialized_len(report);
    if size > RunResultsReport::MAX_BYTES {
        return Err(Error::TooLarge {
            what: "results".to_owned(),
            size,
            limit: RunResultsReport::MAX_BYTES,
        });
    }
    Ok(())
}

/// What a turn route decided, given the instance and turn as they stand.
enum Decision {
    /// Answer with the turn as it is; nothing to write (an exact repeat).
    Answer,
    /// Commit the changed turn, with these further turns (a continuation), at this durability.
    Write(Durability, Vec<TurnRecord>),
}

impl Engine {
    /// Read the instance and turn a lease names. Where either does not exist (deleted,
    /// pruned, or never there) no token holds the turn: the answer is `turn_lease_lost`, the
    /// one error on which a worker ends the attempt quietly, not `not_found`.
    async fn leased(&self, lease: &Lease) -> Result<(InstanceRecord, TurnRecord)> {
        validate::identifier("workflow_id", &lease.workflow_id)?;
        let lost = |reason: &str| Error::LeaseLost {
            workflow_id: lease.workflow_id.clone(),
            turn: lease.turn,
            reason: reason.to_owned(),
        };
        let inst = match self.load(&lease.workflow_id).await {
            Err(Error::NotFound { .. }) => {
                return Err(lost(
                    "the instance does not exist (it was deleted, or never created)",
                ))
            }
            r => r?,
        };
        let turn = match self.load_turn(&inst, lease.turn).await {
            Err(Error::NotFound { .. }) if lease.turn <= inst.history_pruned_through => {
                return Err(lost("the turn was pruned from history"))
            }
            Err(Error::NotFound { .. }) => return Err(lost("the turn does not exist")),
            r => r?,
        };
        Ok((inst, turn))
    }

    /// The loop every turn route shares: read the instance and the turn, let `decide` check
    /// the request and change them, and commit guarded by the revision, deciding again from
    /// fresh reads when another write came first. The answer is the turn as decided.
    async fn on_turn(
        &self,
        lease: &Lease,
        mut decide: impl FnMut(&mut InstanceRecord, &mut TurnRecord, Millis) -> Result<Decision>,
    ) -> Result<WorkflowTurn> {
        let mut tries = Tries::new();
        loop {
            tries.next(&lease.workflow_id)?;
            let (mut inst, mut turn) = self.leased(lease).await?;
            let now = self.now();
            let read_rev = inst.revision;
            let (durability, extra) = match decide(&mut inst, &mut turn, now)? {
                Decision::Answer => return Ok(rules::turn_view(&inst, &turn)),
                Decision::Write(durability, extra) => (durability, extra),
            };
            if turn.is_finished() {
                // The head moved to history; the next one is not loaded here: look now.
                inst.due_at_ms = (!inst.pending.is_empty() && !inst.paused).then_some(now);
            } else if inst.pending.first() == Some(&turn.number) {
                inst.due_at_ms = rules::due_at(&inst, Some(&turn), now);
            }
            let view = rules::turn_view(&inst, &turn);
            let mut turns = Vec::with_capacity(1 + extra.len());
            turns.push(turn);
            turns.extend(extra);
            if self
                .commit(Some(read_rev), &mut inst, turns, durability)
                .await?
            {
                return Ok(view);
            }
        }
    }

    pub(super) async fn do_operation(&self, req: OperationRequest) -> Result<WorkflowTurn> {
        validate::identifier("key", &req.key)?;
        let timeout = OPERATION_TIMEOUT;
        validate::range("timeout_ms", req.timeout_ms, timeout.min, timeout.max)?;
        if let Some(hb) = req.heartbeat_timeout_ms {
            let min = HEARTBEAT_TIMEOUT_MIN_MS;
            validate::range("heartbeat_timeout_ms", hb, min, req.timeout_ms)?;
        }
        steps_limit(req.position, self.inner.config.limits.steps_per_turn)?;
        self.on_turn(&req.lease, |inst, turn, now| {
            rules::check_lease(&inst.id, turn, &req.lease.token, now)?;
            let same = turn.operation.as_ref().is_some_and(|op| {
                op.key == req.key
                    && op.kind == req.kind
                    && op.timeout_ms == req.timeout_ms
                    && op.heartbeat_timeout_ms == req.heartbeat_timeout_ms
            });
            if same && req.position as usize == turn.steps.len() {
                return Ok(Decision::Answer);
            }
            next_position(&inst.id, turn, req.position, &req.key)?;
            let carried = [turn.operation.as_ref(), turn.last_operation.as_ref()]
                .into_iter()
                .flatten()
                .find(|op| op.key == req.key)
                .map_or(Value::Null, |op| op.checkpoint.clone());
            turn.operation = Some(TurnOperation {
                key: req.key.clone(),
                kind: req.kind,
                attempt: turn.attempt,
                started_at_ms: now,
                timeout_ms: req.timeout_ms,
                deadline_ms: now.saturating_add(req.timeout_ms as Millis),
                last_heartbeat_ms: now,
                sequence: 0,
                details: Value::Null,
                checkpoint: carried,
                heartbeat_timeout_ms: req.heartbeat_timeout_ms,
            });
            rules::touch(turn, now);
            Ok(Decision::Write(Relaxed, Vec::new()))
        })
        .await
    }

    pub(super) async fn do_progress(&self, req: ProgressRequest) -> Result<WorkflowTurn> {
        let limits = &self.inner.config.limits;
        validate::identifier("key", &req.key)?;
        validate::range("sequence", req.sequence, 1, u64::MAX)?;
        validate::size("details", &req.details, limits.details_bytes)?;
        validate::size("checkpoint", &req.checkpoint, limits.checkpoint_bytes)?;
        validate::progress_details(&req.details)?;
        self.on_turn(&req.lease, |inst, turn, now| {
            rules::check_lease(&inst.id, turn, &req.lease.token, now)?;
            let number = turn.number;
            let Some(op) = turn.operation.as_mut().filter(|op| op.key == req.key) else {
                return Err(Error::conflict(format_args!(
                    "no step `{}` is running in turn {number}; start it with an operation first",
                    req.key
                )));
            };
            if op.sequence == req.sequence
                && op.details == req.details
                && op.checkpoint == req.checkpoint
            {
                return Ok(Decision::Answer);
            }
            if req.sequence <= op.sequence {
                return Err(Error::conflict(format_args!(
                    "progress sequence {} of step `{}` is not after the last accepted one ({})",
                    req.sequence, req.key, op.sequence
                )));
            }
            op.sequence = req.sequence;
            op.details = req.details.clone();
            op.checkpoint = req.checkpoint.clone();
            op.last_heartbeat_ms = now;
            rules::touch(turn, now);
            Ok(Decision::Write(Relaxed, Vec::new()))
        })
        .await
    }

    pub(super) async fn do_checkpoint(&self, req: CheckpointRequest) -> Result<WorkflowTurn> {
        let limits = &self.inner.config.limits;
        validate::identifier("key", &req.key)?;
        match (req.kind, req.delay_ms) {
            (CheckpointKind::Signal, _) => {
                return Err(Error::invalid(
                    "kind",
                    "signal waits are saved through wait-signal; use `step` or `sleep`",
                ))
            }
            (CheckpointKind::Step, Some(_)) => {
                return Err(Error::invalid(
                    "delay_ms",
                    "only a `sleep` checkpoint carries delay_ms",
                ))
            }
            (CheckpointKind::Sleep, None) => {
                return Err(Error::invalid(
                    "delay_ms",
                    "a `sleep` checkpoint needs delay_ms",
                ))
            }
            (CheckpointKind::Sleep, Some(d)) => {
                validate::range("delay_ms", d, SLEEP_DELAY.min, SLEEP_DELAY.max)?;
                if !req.output.is_null() {
                    return Err(Error::invalid(
                        "output",
                        "a `sleep` checkpoint has no output",
                    ));
                }
            }
            (CheckpointKind::Step, None) => {}
        }
        validate::size("output", &req.output, limits.output_bytes)?;
        steps_limit(req.position, limits.steps_per_turn)?;
        self.on_turn(&req.lease, |inst, turn, now| {
            let repeat = turn.token.as_deref() == Some(req.lease.token.as_str())
                && turn.steps.get(req.position as usize).is_some_and(|s| {
                    s.key == req.key
                        && s.kind == req.kind
                        && s.output == req.output
                        && s.delay_ms == req.delay_ms
                });
            if repeat {
                return Ok(Decision::Answer);
            }
            rules::check_lease(&inst.id, turn, &req.lease.token, now)?;
            next_position(&inst.id, turn, req.position, &req.key)?;
            let mut step = StepCheckpoint {
                key: req.key.clone(),
                kind: req.kind,
                output: req.output.clone(),
                at_ms: now,
                delay_ms: None,
                signal_name: None,
                wake_at_ms: None,
            };
            if let Some(delay) = req.delay_ms {
                let wake = now.saturating_add(delay as Millis);
                step.delay_ms = Some(delay);
                step.wake_at_ms = Some(wake);
                rules::release(turn, now);
                turn.status = TurnStatus::Waiting;
                turn.ready_at_ms = wake;
                turn.resume = true;
            }
            turn.steps.push(step);
            turn.operation = None;
            turn.last_operation = None;
            rules::touch(turn, now);
            turn_size(turn, limits.turn_bytes)?;
            Ok(Decision::Write(Durable, Vec::new()))
        })
        .await
    }

    pub(super) async fn do_wait_signal(&self, req: WaitSignalRequest) -> Result<WorkflowTurn> {
        let limits = &self.inner.config.limits;
        validate::identifier("key", &req.key)?;
        validate::identifier("name", &req.name)?;
        let bounds = WAIT_TIMEOUT;
        validate::range("timeout_ms", req.timeout_ms, bounds.min, bounds.max)?;
        steps_limit(req.position, limits.steps_per_turn)?;
        self.on_turn(&req.lease, |inst, turn, now| {
            let repeat = turn.token.as_deref() == Some(req.lease.token.as_str())
                && turn.steps.get(req.position as usize).is_some_and(|s| {
                    s.key == req.key
                        && s.kind == CheckpointKind::Signal
                        && s.signal_name.as_deref() == Some(req.name.as_str())
                        && s.delay_ms == Some(req.timeout_ms)
                });
            if repeat {
                return Ok(Decision::Answer);
            }
            rules::check_lease(&inst.id, turn, &req.lease.token, now)?;
            next_position(&inst.id, turn, req.position, &req.key)?;
            let mut step = StepCheckpoint {
                key: req.key.clone(),
                kind: CheckpointKind::Signal,
                output: Value::Null,
                at_ms: now,
                delay_ms: Some(req.timeout_ms),
                signal_name: Some(req.name.clone()),
                wake_at_ms: None,
            };
            // Signals are kept in arrival order, so the first unconsumed match is the oldest.
            if let Some(sig) = turn
                .signals
                .iter_mut()
                .find(|s| s.consumed_by.is_none() && s.name == req.name)
            {
                sig.consumed_by = Some(req.key.clone());
                step.output = json!({"received": true, "value": sig.value});
            } else {
                let wake = now.saturating_add(req.timeout_ms as Millis);
                step.wake_at_ms = Some(wake);
                rules::release(turn, now);
                turn.status = TurnStatus::Waiting;
                turn.ready_at_ms = wake;
                turn.resume = true;
            }
            turn.steps.push(step);
            rules::touch(turn, now);
            turn_size(turn, limits.turn_bytes)?;
            Ok(Decision::Write(Durable, Vec::new()))
        })
        .await
    }

    pub(super) async fn do_complete(&self, req: CompleteRequest) -> Result<WorkflowTurn> {
        let limits = &self.inner.config.limits;
        validate::size("state", &req.state, limits.state_bytes)?;
        validate::size("result", &req.result, limits.result_bytes)?;
        if let Some(c) = &req.continuation {
            validate::size("continuation.message", &c.message, limits.message_bytes)?;
        }
        check_results(req.results.as_ref())?;
        let digest = rules::completion_digest(
            &req.state,
            &req.result,
            req.continuation.as_ref().map(|c| &c.message),
        );
        self.on_turn(&req.lease, |inst, turn, now| {
            if turn.token.as_deref() == Some(req.lease.token.as_str())
                && turn.completion_digest.as_deref() == Some(digest.as_str())
            {
                return Ok(Decision::Answer);
            }
            rules::check_lease(&inst.id, turn, &req.lease.token, now)?;
            let mut extra = Vec::new();
            if let Some(c) = &req.continuation {
                let number = inst.next_turn;
                let mut origin = MessageOrigin::new(names::CONTINUATION_ORIGIN_KIND);
                origin.fields.insert("turn".into(), json!(turn.number));
                origin
                    .fields
                    .insert("message_id".into(), json!(turn.message_id));
                let next = new_turn(
                    inst,
                    number,
                    format!("{}{}", names::CONTINUATION_ID_PREFIX, turn.number),
                    c.message.clone(),
                    Some(origin),
                    now,
                );
                inst.next_turn += 1;
                inst.pending.push(number);
                turn.continued_to = Some(number);
                extra.push(next);
            }
            if let (Some(usage), Some(run)) = (&req.usage, turn.run.as_mut()) {
                run.usage = Some(usage.clone());
            }
            turn.result = req.result.clone();
            turn.state_after = req.state.clone();
            turn.completion_digest = Some(digest.clone());
            turn.resume = false;
            rules::finish(inst, turn, TurnStatus::Completed, now);
            turn_size(turn, limits.turn_bytes)?;
            inst.state = req.state.clone();
            Ok(Decision::Write(Durable, extra))
        })
        .await
    }

    pub(super) async fn do_fail(&self, req: FailRequest) -> Result<WorkflowTurn> {
        if req.non_retryable && req.retry_at_ms.is_some() {
            return Err(Error::invalid(
                "retry_at_ms",
                "cannot be combined with non_retryable: true",
            ));
        }
        check_results(req.results.as_ref())?;
        let error: String = req.error.chars().take(limits::ERROR_CHARS).collect();
        let config = &self.inner.config;
        self.on_turn(&req.lease, |inst, turn, now| {
            rules::check_lease(&inst.id, turn, &req.lease.token, now)?;
            if let (Some(usage), Some(run)) = (&req.usage, turn.run.as_mut()) {
                run.usage = Some(usage.clone());
            }
            if let Some(at) = req.retry_at_ms {
                let at = at.clamp(
                    now.saturating_add(RETRY_AT_AHEAD.min as Millis),
                    now.saturating_add(RETRY_AT_AHEAD.max as Millis),
                );
                rules::release(turn, now);
                turn.status = TurnStatus::Waiting;
                turn.ready_at_ms = at;
                turn.wait = Some(TurnWait {
                    since_ms: now,
                    until_ms: at,
                    reason: None,
                });
                turn.resume = true;
                turn.error = Some(error.clone());
            } else if req.non_retryable {
                turn.error = Some(error.clone());
                turn.resume = false;
                rules::exhaust(inst, turn, now);
            } else {
                rules::fail_attempt(inst, turn, now, error.clone(), config);
            }
            rules::touch(turn, now);
            Ok(Decision::Write(Durable, Vec::new()))
        })
        .await
    }

    pub(super) async fn do_heartbeat(&self, lease: Lease) -> Result<WorkflowTurn> {
        self.on_turn(&lease, |inst, turn, now| {
            rules::check_lease(&inst.id, turn, &lease.token, now)?;
            turn.deadline_ms = Some(now.saturating_add(inst.lease_ms as Millis));
            rules::touch(turn, now);
            Ok(Decision::Write(Relaxed, Vec::new()))
        })
        .await
    }
}
