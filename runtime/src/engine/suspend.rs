//! Turns suspended by a replay mismatch, and the operator's ways out (turnwise extensions).
//!
//! A worker whose replay found that the code no longer makes the durable calls a turn saved
//! ends the attempt with `fail` carrying a [`MismatchReport`]: the turn becomes `suspended`
//! with the report, its lease ends, no attempt is counted and nothing is due, so the inbox
//! waits behind it with every message in order. An operator then restarts the turn (from its
//! last accepted step or from scratch), forks the instance into a new one, or cancels the turn
//! (`control` `cancel_turn`). Each way out is conditional (a turn that is not suspended is
//! refused with [`Error::NotSuspended`]), idempotent (an exact repeat answers what the first
//! one answered and writes nothing), and recorded as an [`InstanceEvent`] naming who asked.
//!
//! Recognising a repeat needs no table of requests: the events the instance keeps say what was
//! done, to which turn, by whom. A restart is a repeat when the newest event about its turn is
//! that restart and the turn is no longer suspended; a fork, when the original records it.

use std::collections::HashSet;

use super::app_routes::new_turn;
use super::commit::{InstanceDecision, Record};
use super::transitions;
use super::worker_routes::{check_results, Decision};
use super::*;
use crate::protocol::validate;
use crate::store::TurnRange;
use turnwise_rules::{limits, names};

/// The refusal of a way out of a suspension for a turn (`turn`; for a fork, the inbox head)
/// that is not suspended.
pub(super) fn not_suspended(inst: &InstanceRecord, turn: Option<&TurnRecord>, what: &str) -> Error {
    let id = &inst.id;
    match turn {
        Some(t) => Error::NotSuspended {
            workflow_id: id.clone(),
            turn: Some(t.number),
            status: t.status.to_string(),
            message: format!(
                "turn {} of `{id}` is {}, not suspended: only a turn suspended by a replay \
                 mismatch can be {what}",
                t.number, t.status
            ),
        },
        None => Error::NotSuspended {
            workflow_id: id.clone(),
            turn: None,
            status: InstanceStatus::Idle.to_string(),
            message: format!(
                "`{id}` has no unfinished turn, so none is suspended: only an instance whose \
                 head turn is suspended by a replay mismatch can be {what}"
            ),
        },
    }
}

/// The event's detail on the original of a fork to `new_id`.
fn forked_to(new_id: &str, messages: usize) -> String {
    format!("forked to `{new_id}` with {messages} message(s)")
}

/// The start of [`forked_to`], to recognise the event whatever its count.
fn forked_to_prefix(new_id: &str) -> String {
    format!("forked to `{new_id}` ")
}

/// The event's detail on a fork of `from`, given `messages` messages.
fn forked_from(from: &str, turn: u64, messages: usize) -> String {
    format!("forked from `{from}` at its suspended turn {turn}, with {messages} message(s)")
}

/// The message count a [`forked_from`] or [`forked_to`] detail names.
fn messages_in(detail: &str) -> usize {
    detail
        .rsplit_once(" message(s)")
        .and_then(|(head, _)| head.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// The message id a fork gives the message `old`: `fork.<old>`, or `fork.` and a digest of
/// `old` when that would be longer than an id may be. The same old id always gives the same
/// new one, so a repeated fork admits nothing twice.
pub(super) fn fork_message_id(old: &str) -> String {
    let id = format!("fork.{old}");
    if id.chars().count() <= validate::MAX_ID_LEN {
        return id;
    }
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(old.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("fork.{hex}")
}

/// Whether `event` records a restart of turn `turn` from `from` asked by `by`.
fn is_restart(event: &InstanceEvent, turn: u64, from: RestartFrom, by: Option<&String>) -> bool {
    event.action == InstanceEvent::RESTART_TURN
        && event.turn == Some(turn)
        && event.by.as_ref() == by
        && event
            .detail
            .as_deref()
            .is_some_and(|d| d.starts_with(&format!("from {from}")))
}

/// The signals of `turn` consumed by waits it no longer keeps go back to its buffer, so the
/// waits made again consume them again.
fn unconsume_dropped(turn: &mut TurnRecord) {
    let kept: HashSet<String> = turn.steps.iter().map(|s| s.key.clone()).collect();
    for sig in &mut turn.signals {
        if sig.consumed_by.as_ref().is_some_and(|k| !kept.contains(k)) {
            sig.consumed_by = None;
        }
    }
}

impl Engine {
    /// The fail route with a mismatch report: suspend the leased turn with it. Fenced by the
    /// lease as any write; counts no attempt and schedules nothing.
    pub(super) async fn suspend(&self, req: FailRequest) -> Result<WorkflowTurn> {
        let Some(mut report) = req.mismatch.clone() else {
            return Err(Error::invalid("mismatch", "a suspension needs its report"));
        };
        validate::mismatch_report(&report, self.inner.config.limits.steps_per_turn)?;
        check_results(req.results.as_ref())?;
        report.message = report.message.chars().take(limits::ERROR_CHARS).collect();
        let error: String = req.error.chars().take(limits::ERROR_CHARS).collect();
        let mut workflow_type = String::new();
        let suspended = self
            .on_turn(&req.lease, transitions::turn_view, |inst, turn, now| {
                transitions::check_lease(&inst.id, turn, &req.lease.token, now)?;
                if report.version != inst.version {
                    return Err(Error::invalid(
                        "mismatch.version",
                        format!(
                            "the report names version `{}`, and instance `{}` runs `{}`",
                            report.version, inst.id, inst.version
                        ),
                    ));
                }
                check_saved(&report, turn)?;
                if let (Some(usage), Some(run)) = (&req.usage, turn.run.as_mut()) {
                    run.usage = Some(usage.clone());
                }
                transitions::release(turn, now, RunEnd::Suspended);
                if let Some(ending) = turn.run_ending.as_mut() {
                    ending.results = req.results.clone();
                }
                turn.status = TurnStatus::Suspended;
                turn.resume = false;
                turn.wait = None;
                turn.error = Some(error.clone());
                turn.mismatch = Some(report.clone());
                transitions::touch(turn, now);
                inst.record_event(InstanceEvent {
                    at_ms: now,
                    action: InstanceEvent::SUSPEND.to_owned(),
                    by: None,
                    from_version: Some(inst.version.clone()),
                    to_version: None,
                    turn: Some(turn.number),
                    detail: Some(report.message.clone()),
                });
                workflow_type.clone_from(&inst.workflow_type);
                Ok(Decision::Write(Durability::Durable, Vec::new()))
            })
            .await?;
        crate::metrics::turn_suspended(&workflow_type);
        Ok(suspended)
    }

    /// The restart route: a suspended turn runs again on the instance's own version, from its
    /// last accepted step or from scratch.
    pub(super) async fn restart_turn_impl(
        &self,
        req: RestartTurnRequest,
    ) -> Result<RestartTurnResponse> {
        validate::identifier("workflow_id", &req.workflow_id)?;
        validate::by(req.by.as_deref())?;
        let req = &req;
        self.on_instance(&req.workflow_id, |mut inst, now, _| {
            Box::pin(async move {
                let mut turn = self.load_turn(&inst, req.turn).await?;
                if turn.status != TurnStatus::Suspended {
                    let newest = inst.events.iter().rev().find(|e| {
                        e.turn == Some(turn.number)
                            && [InstanceEvent::SUSPEND, InstanceEvent::RESTART_TURN]
                                .contains(&e.action.as_str())
                    });
                    return match newest {
                        Some(e) if is_restart(e, turn.number, req.from, req.by.as_ref()) => {
                            Ok(InstanceDecision::Answer(restarted(req, e.clone())))
                        }
                        _ => Err(not_suspended(&inst, Some(&turn), "restarted")),
                    };
                }
                let report = turn.mismatch.take();
                let kept = match req.from {
                    RestartFrom::LastAccepted => report
                        .as_ref()
                        .map_or(0, |r| r.position as usize)
                        .min(turn.steps.len()),
                    RestartFrom::Scratch => 0,
                };
                turn.steps.truncate(kept);
                unconsume_dropped(&mut turn);
                turn.status = TurnStatus::Queued;
                turn.attempt = 0;
                turn.ready_at_ms = now;
                turn.resume = false;
                turn.error = None;
                turn.operation = None;
                turn.last_operation = None;
                transitions::touch(&mut turn, now);
                let event = InstanceEvent {
                    at_ms: now,
                    action: InstanceEvent::RESTART_TURN.to_owned(),
                    by: req.by.clone(),
                    from_version: Some(inst.version.clone()),
                    to_version: Some(inst.version.clone()),
                    turn: Some(turn.number),
                    detail: Some(format!("from {}, keeping {kept} saved step(s)", req.from)),
                };
                inst.record_event(event.clone());
                if inst.pending.first() == Some(&turn.number) {
                    inst.due_at_ms = transitions::due_at(&inst, Some(&turn), now);
                }
                Ok(InstanceDecision::Write(
                    inst,
                    vec![turn],
                    restarted(req, event),
                ))
            })
        })
        .await
    }

    /// The fork route: a new instance with the suspended instance's state and unfinished
    /// messages, in order; the original stays suspended. Two commits, each on one instance:
    /// the fork is created (with its turns) first, then the original records it, so a repeat
    /// after a crash between the two finds the fork and records it then.
    pub(super) async fn fork_impl(&self, req: ForkInstanceRequest) -> Result<ForkInstanceResponse> {
        validate::identifier("workflow_id", &req.workflow_id)?;
        validate::identifier("new_id", &req.new_id)?;
        validate::by(req.by.as_deref())?;
        if req.new_id == req.workflow_id {
            return Err(Error::invalid(
                "new_id",
                "a fork needs an id of its own; name a new instance id",
            ));
        }
        if names::is_reserved_instance_id(&req.new_id) {
            return Err(Error::Reserved {
                code: "reserved_workflow_id",
                message: format!(
                    "instance id `{}` is reserved by the server; choose another id",
                    req.new_id
                ),
            });
        }
        let mut tries = Tries::new();
        loop {
            tries.next(&req.workflow_id)?;
            let mut orig = self.load(&req.workflow_id).await?;
            if let Some(e) = orig.events.iter().rev().find(|e| {
                e.action == InstanceEvent::FORK
                    && e.by == req.by
                    && e.detail
                        .as_deref()
                        .is_some_and(|d| d.starts_with(&forked_to_prefix(&req.new_id)))
            }) {
                return Ok(forked(&req, e.clone()));
            }
            let Some((turn, messages)) = self.make_fork(&orig, &req).await? else {
                continue;
            };
            let now = self.now();
            let event = InstanceEvent {
                at_ms: now,
                action: InstanceEvent::FORK.to_owned(),
                by: req.by.clone(),
                from_version: Some(orig.version.clone()),
                to_version: Some(orig.version.clone()),
                turn: Some(turn),
                detail: Some(forked_to(&req.new_id, messages)),
            };
            orig.record_event(event.clone());
            let read_rev = orig.revision;
            let write = self.write(
                Some(read_rev),
                Record::Kept(&mut orig),
                Vec::new(),
                Vec::new(),
                Durability::Durable,
            );
            if write.await?.landed()? {
                return Ok(forked(&req, event));
            }
        }
    }

    /// Create the fork of `orig` unless it exists: answers the original's suspended turn and
    /// how many messages the fork was given, or `None` when another write came first (read
    /// again). A fork made earlier by the same request (its event names `orig` and the same
    /// `by`) is taken as made; any other instance under the new id is a conflict.
    async fn make_fork(
        &self,
        orig: &InstanceRecord,
        req: &ForkInstanceRequest,
    ) -> Result<Option<(u64, usize)>> {
        let store = &self.inner.store;
        if let Some(target) = store.load_instance(&self.ns, &req.new_id).await? {
            let made = target.events.iter().find(|e| {
                e.action == InstanceEvent::FORK
                    && e.by == req.by
                    && e.detail
                        .as_deref()
                        .is_some_and(|d| d.starts_with(&format!("forked from `{}` ", orig.id)))
            });
            return match made.and_then(|e| Some((e.turn?, e.detail.as_deref()?))) {
                Some((turn, detail)) => Ok(Some((turn, messages_in(detail)))),
                None => Err(Error::conflict(format_args!(
                    "instance `{}` already exists and is not this fork of `{}`; fork to \
                     another id",
                    req.new_id, orig.id
                ))),
            };
        }
        let head = match self.load_head(orig).await? {
            Some(head) if head.status == TurnStatus::Suspended => head,
            other => return Err(not_suspended(orig, other.as_ref(), "forked")),
        };
        let range = TurnRange {
            finished: false,
            after: None,
            limit: orig.pending.len().max(1),
        };
        let mut unfinished = store.list_turns(&self.ns, &orig.id, range).await?;
        unfinished.retain(|t| orig.pending.contains(&t.number));
        unfinished.sort_by_key(|t| orig.pending.iter().position(|n| *n == t.number));
        let now = self.now();
        let mut fork = self.fork_record(orig, req, head.number, unfinished.len(), now);
        let turns: Vec<TurnRecord> = unfinished
            .iter()
            .zip(1..)
            .map(|(t, number)| {
                let mut turn = new_turn(
                    &fork,
                    number,
                    fork_message_id(&t.message_id),
                    t.message.clone(),
                    t.origin.clone(),
                    now,
                );
                turn.traceparent = t.traceparent.clone();
                turn
            })
            .collect();
        fork.pending = turns.iter().map(|t| t.number).collect();
        fork.next_turn = turns.len() as u64 + 1;
        fork.due_at_ms = (!turns.is_empty()).then_some(now);
        let count = turns.len();
        let write = self.write(
            None,
            Record::Kept(&mut fork),
            turns,
            Vec::new(),
            Durability::Durable,
        );
        Ok(write.await?.landed()?.then_some((head.number, count)))
    }

    /// The record of a new fork of `orig` (its turns not yet added).
    fn fork_record(
        &self,
        orig: &InstanceRecord,
        req: &ForkInstanceRequest,
        turn: u64,
        messages: usize,
        now: Millis,
    ) -> InstanceRecord {
        let new = transitions::NewInstance {
            id: &req.new_id,
            workflow_type: &orig.workflow_type,
            version: &orig.version,
            state: &orig.state,
            lease_ms: orig.lease_ms,
            max_attempts: orig.max_attempts,
            on_exhausted: orig.on_exhausted,
        };
        let mut fork = transitions::new_instance(&self.ns, new, now);
        fork.record_event(InstanceEvent {
            at_ms: now,
            action: InstanceEvent::FORK.to_owned(),
            by: req.by.clone(),
            from_version: Some(orig.version.clone()),
            to_version: Some(orig.version.clone()),
            turn: Some(turn),
            detail: Some(forked_from(&orig.id, turn, messages)),
        });
        fork
    }

    /// `cancel_turn` of turn `t`: when it is suspended, the event that records who ended the
    /// suspension; when it was cancelled from a suspension by the same `by` and the instance
    /// still records that, `Err(())`: an exact repeat, answered with nothing written.
    pub(super) fn cancel_event(
        inst: &InstanceRecord,
        t: &TurnRecord,
        by: Option<&String>,
        now: Millis,
    ) -> Result<Option<InstanceEvent>, ()> {
        if t.status == TurnStatus::Suspended {
            return Ok(Some(InstanceEvent {
                at_ms: now,
                action: InstanceEvent::CANCEL_TURN.to_owned(),
                by: by.cloned(),
                from_version: Some(inst.version.clone()),
                to_version: None,
                turn: Some(t.number),
                detail: Some("the suspended turn was cancelled".to_owned()),
            }));
        }
        let repeat = t.status == TurnStatus::Cancelled
            && inst.events.iter().any(|e| {
                e.action == InstanceEvent::CANCEL_TURN
                    && e.turn == Some(t.number)
                    && e.by.as_ref() == by
            });
        if repeat {
            return Err(());
        }
        Ok(None)
    }
}

/// A report's saved entries must be the turn's saved steps (key, kind, signal name), in
/// order: the worker saw them in its claim and saved the rest before it reported.
fn check_saved(report: &MismatchReport, turn: &TurnRecord) -> Result<()> {
    let same = report.saved.len() == turn.steps.len()
        && report.saved.iter().zip(&turn.steps).all(|(entry, step)| {
            entry.key == step.key
                && entry.kind.as_str() == step.kind.as_str()
                && entry.signal == step.signal_name
        });
    if same {
        return Ok(());
    }
    Err(Error::invalid(
        "mismatch.saved",
        format!(
            "the report lists {} saved entries and turn {} holds {} steps that differ; list the \
             turn's saved steps in order (key, kind, signal name)",
            report.saved.len(),
            turn.number,
            turn.steps.len()
        ),
    ))
}

/// The answer to a restart recorded as `event`.
fn restarted(req: &RestartTurnRequest, event: InstanceEvent) -> RestartTurnResponse {
    RestartTurnResponse {
        workflow_id: req.workflow_id.clone(),
        turn: req.turn,
        from: req.from,
        event,
    }
}

/// The answer to a fork recorded on the original as `event`.
fn forked(req: &ForkInstanceRequest, event: InstanceEvent) -> ForkInstanceResponse {
    ForkInstanceResponse {
        workflow_id: req.new_id.clone(),
        forked_from: req.workflow_id.clone(),
        turn: event.turn.unwrap_or_default(),
        event,
    }
}
