//! Helpers of the worker turn routes (operation, progress, checkpoint, wait-signal, complete,
//! fail, heartbeat; the routes are in `backend.rs`): position and result checks, and the
//! lease check every route shares.
//!
//! Each route reads the instance and the turn, answers an exact repeat of an already-applied
//! request with success (a client that lost the answer retries), checks the lease, decides, and
//! commits guarded by the instance revision.

use super::transitions;
use super::*;
use crate::protocol::validate;

/// The step limit (`Limits::steps_per_turn`, carried to workers as the task's `steps_max`):
/// `422 step_limit`, so that every worker fails the attempt with this message instead of
/// taking it for a lost turn.
pub(super) fn steps_limit(position: u32, limit: usize) -> Result<()> {
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
pub(super) fn next_position(
    workflow_id: &str,
    turn: &TurnRecord,
    position: u32,
    key: &str,
) -> Result<()> {
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
pub(super) fn check_results(results: Option<&RunResultsReport>) -> Result<()> {
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
pub(super) enum Decision {
    /// Answer with the turn as it is; nothing to write (an exact repeat).
    Answer,
    /// Commit the changed turn, with these further turns (a continuation), at this durability.
    Write(Durability, Vec<TurnRecord>),
}

impl Decision {
    /// This decision followed by `then` on the same records: one write, durable when either
    /// is, with the extra turns of both.
    pub(super) fn and(self, then: Decision) -> Decision {
        match (self, then) {
            (Decision::Answer, d) | (d, Decision::Answer) => d,
            (Decision::Write(a, mut extra), Decision::Write(b, more)) => {
                extra.extend(more);
                let durability = if b == Durability::Durable { b } else { a };
                Decision::Write(durability, extra)
            }
        }
    }
}

impl Engine {
    /// Read the instance and turn a lease names. Where either does not exist (deleted,
    /// pruned, or never there) no token holds the turn: the answer is `turn_lease_lost`, the
    /// one error on which a worker ends the attempt quietly, not `not_found`.
    pub(super) async fn leased(&self, lease: &Lease) -> Result<(InstanceRecord, TurnRecord)> {
        validate::identifier("workflow_id", &lease.workflow_id)?;
        let lost = |reason: &str| Error::LeaseLost {
            workflow_id: lease.workflow_id.clone(),
            turn: lease.turn,
            reason: reason.to_owned(),
        };
        // One read of both where the store can (PostgreSQL: one query instead of two).
        let read = self
            .inner
            .store
            .load_instance_turn(&self.ns, &lease.workflow_id, lease.turn)
            .await?;
        match read {
            None => Err(lost(
                "the instance does not exist (it was deleted, or never created)",
            )),
            Some((inst, None)) if lease.turn <= inst.history_pruned_through => {
                Err(lost("the turn was pruned from history"))
            }
            Some((_, None)) => Err(lost("the turn does not exist")),
            Some((inst, Some(turn))) => Ok((inst, turn)),
        }
    }

    /// The loop every turn route shares: read the instance and the turn, let `decide` check
    /// the request and change them, and commit guarded by the revision, deciding again from
    /// fresh reads when another write came first. The answer is the turn as decided.
    ///
    /// `answer` makes the answer from the instance and the turn as decided: the wire view
    /// ([`transitions::turn_view`]) for the protocol's routes, or only what an SDK worker reads (the
    /// `*_ack` and `operation_cursor` calls), which spares copying the turn's message, steps
    /// and outputs on every call.
    pub(super) async fn on_turn<T>(
        &self,
        lease: &Lease,
        answer: fn(&InstanceRecord, &TurnRecord) -> T,
        decide: impl FnMut(&mut InstanceRecord, &mut TurnRecord, Millis) -> Result<Decision>,
    ) -> Result<T> {
        let answer = self.decide_on_turn(lease, answer, decide).await;
        if let Err(Error::LeaseLost { .. }) = &answer {
            crate::metrics::lease_lost();
        }
        answer
    }

    /// [`Engine::on_turn`] without the lease-loss count.
    async fn decide_on_turn<T>(
        &self,
        lease: &Lease,
        answer: fn(&InstanceRecord, &TurnRecord) -> T,
        mut decide: impl FnMut(&mut InstanceRecord, &mut TurnRecord, Millis) -> Result<Decision>,
    ) -> Result<T> {
        let mut tries = Tries::new();
        loop {
            tries.next(&lease.workflow_id)?;
            let (mut inst, mut turn) = self.leased(lease).await?;
            let now = self.now();
            let read_rev = inst.revision;
            let (durability, extra) = match decide(&mut inst, &mut turn, now)? {
                Decision::Answer => return Ok(answer(&inst, &turn)),
                Decision::Write(durability, extra) => (durability, extra),
            };
            if turn.is_finished() {
                // The head moved to history; the next one is not loaded here: look now.
                inst.due_at_ms = (!inst.pending.is_empty() && !inst.paused).then_some(now);
            } else if inst.pending.first() == Some(&turn.number) {
                inst.due_at_ms = transitions::due_at(&inst, Some(&turn), now);
            }
            let view = answer(&inst, &turn);
            let mut turns = Vec::with_capacity(1 + extra.len());
            turns.push(turn);
            turns.extend(extra);
            if self
                .write(
                    Some(read_rev),
                    Record::Owned(inst),
                    turns,
                    Vec::new(),
                    durability,
                )
                .await?
                .landed()?
            {
                return Ok(view);
            }
        }
    }
}
