//! The protocol's rules as pure functions over records: no I/O, no clock, no store.
//!
//! Every decision that depends on time takes `now` explicitly, so the same function serves a
//! write (whose result is committed) and a read (which shows the settled view without writing).

use std::fmt::Write as _;
use std::hash::{BuildHasher, RandomState};
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::EngineConfig;
use crate::protocol::error::Error;
use crate::protocol::*;
use crate::store::{InstanceRecord, RunEnding, TurnRecord};

/// What [`settle`] did to a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Transitioned {
    /// Nothing was due.
    Unchanged,
    /// A time-based transition happened; the turn is still unfinished.
    Changed,
    /// The turn ran out of attempts with `on_exhausted = skip` and moved to history.
    Finished,
}

/// Apply every transition that is due at `now` to an instance's head turn: an expired
/// operation or lease ends the attempt, a due sleep or retry wait makes the turn ready, a
/// signal wait whose deadline passed resolves as not received.
pub(super) fn settle(
    inst: &mut InstanceRecord,
    head: &mut TurnRecord,
    now: Millis,
    cfg: &EngineConfig,
) -> Transitioned {
    match head.status {
        TurnStatus::Running => {
            if let Some(why) = operation_expiry(head, now) {
                return fail_attempt(inst, head, now, why, cfg);
            }
            if head.deadline_ms.is_some_and(|d| d <= now) {
                let why = format!(
                    "the lease expired: no heartbeat within {} ms; the attempt was abandoned",
                    inst.lease_ms
                );
                // The lease already made the turn wait, so it is ready again at once.
                return end_attempt(inst, head, now, why, 0, RunEnd::LeaseLost);
            }
            Transitioned::Unchanged
        }
        TurnStatus::Waiting if head.ready_at_ms <= now => {
            if let Some(step) = head.steps.last_mut() {
                if step.kind == CheckpointKind::Signal && step.output.is_null() {
                    step.output = json!({"received": false, "value": null});
                }
            }
            head.status = TurnStatus::Queued;
            touch(head, now);
            Transitioned::Changed
        }
        _ => Transitioned::Unchanged,
    }
}

fn operation_expiry(head: &TurnRecord, now: Millis) -> Option<String> {
    let op = head.operation.as_ref()?;
    if op.deadline_ms <= now {
        return Some(format!(
            "step `{}` ran past its timeout of {} ms",
            op.key, op.timeout_ms
        ));
    }
    let hb = op.heartbeat_timeout_ms?;
    (op.last_heartbeat_ms.saturating_add(hb as Millis) <= now).then(|| {
        format!(
            "step `{}` sent no progress within its heartbeat timeout of {hb} ms",
            op.key
        )
    })
}

/// End the current attempt as an ordinary failure: count it, then back off or exhaust.
pub(super) fn fail_attempt(
    inst: &mut InstanceRecord,
    head: &mut TurnRecord,
    now: Millis,
    error: String,
    cfg: &EngineConfig,
) -> Transitioned {
    let delay = backoff(head.attempt, cfg);
    end_attempt(inst, head, now, error, delay, RunEnd::Failed)
}

fn end_attempt(
    inst: &mut InstanceRecord,
    head: &mut TurnRecord,
    now: Millis,
    error: String,
    delay_ms: Millis,
    end: RunEnd,
) -> Transitioned {
    release(head, now, end);
    head.error = Some(error);
    head.resume = false;
    if head.attempt >= inst.max_attempts {
        return exhaust(inst, head, now);
    }
    head.status = TurnStatus::Queued;
    head.ready_at_ms = now.saturating_add(delay_ms);
    Transitioned::Changed
}

/// A turn out of attempts: blocks the inbox, or moves to history with `on_exhausted = skip`.
pub(super) fn exhaust(
    inst: &mut InstanceRecord,
    head: &mut TurnRecord,
    now: Millis,
) -> Transitioned {
    release(head, now, RunEnd::Failed);
    match inst.on_exhausted {
        OnExhausted::Skip => {
            finish(inst, head, TurnStatus::Failed, now);
            Transitioned::Finished
        }
        OnExhausted::Block => {
            head.status = TurnStatus::Failed;
            Transitioned::Changed
        }
    }
}

/// End the lease: the token no longer holds the turn. A running operation is kept as
/// `last_operation` so the next attempt of the same step resumes from its cursor.
///
/// A run still going ends here, as `end` says, and the turn carries that until the commit
/// writes the run's summary. A suspended run (sleep, signal or retry wait) that is cancelled
/// ends again, as cancelled; any other run that already ended keeps how it ended.
pub(super) fn release(turn: &mut TurnRecord, now: Millis, end: RunEnd) {
    turn.deadline_ms = None;
    if let Some(op) = turn.operation.take() {
        turn.last_operation = Some(op);
    }
    if let Some(run) = &mut turn.run {
        let ends = run.ended_at_ms.is_none() || (end == RunEnd::Cancelled && turn.resume);
        run.ended_at_ms.get_or_insert(now);
        if ends {
            turn.run_ending = Some(RunEnding { end, results: None });
        }
    }
    touch(turn, now);
}

/// Record a progress write's phase on the run (the progress convention's `phase`, `done`,
/// `total`, `unit`): the same phase as the last one updates it, another one starts a new one.
pub(super) fn record_phase(turn: &mut TurnRecord, details: &Value, now: Millis) {
    let (Some(run), Some(d)) = (turn.run.as_mut(), details.as_object()) else {
        return;
    };
    let (Some(phase), Some(done)) = (
        d.get("phase").and_then(Value::as_str),
        d.get("done").and_then(Value::as_u64),
    ) else {
        return;
    };
    let phase = phase.trim();
    let total = d.get("total").and_then(Value::as_u64);
    let unit = d
        .get("unit")
        .and_then(Value::as_str)
        .map(|u| u.trim().to_owned());
    let phases = run.phases.get_or_insert_with(Vec::new);
    let full = phases.len() >= TurnRun::MAX_PHASES;
    match phases.last_mut() {
        Some(last) if last.phase == phase || full => {
            phase.clone_into(&mut last.phase);
            last.done = done;
            last.total = total;
            last.unit = unit;
            last.ended_at_ms = now;
        }
        _ => phases.push(RunPhase {
            phase: phase.to_owned(),
            done,
            started_at_ms: now,
            ended_at_ms: now,
            total,
            unit,
        }),
    }
}

/// The summary of the run a turn carries, as it ended (`ending`), for the runs routes.
pub(super) fn run_summary(
    ns: &str,
    inst: &InstanceRecord,
    t: &TurnRecord,
    ending: RunEnding,
) -> Option<WorkflowRun> {
    let run = t.run.as_ref()?;
    let phases = run.phases.clone().unwrap_or_default();
    let finished = match phases.last() {
        Some(p) => Some(RunFinished {
            done: p.done,
            unit: p.unit.clone(),
            phase: p.phase.clone(),
            total: p.total,
        }),
        None => t
            .operation
            .as_ref()
            .or(t.last_operation.as_ref())
            .and_then(progress_view)
            .map(|p| RunFinished {
                done: p.done,
                unit: p.unit,
                phase: p.phase,
                total: p.total,
            }),
    };
    let (sample, counters) = if ending.end == RunEnd::Completed {
        result_names(&t.result)
    } else {
        (None, None)
    };
    let error = match ending.end {
        RunEnd::Failed | RunEnd::LeaseLost | RunEnd::Waiting | RunEnd::Suspended => t.error.clone(),
        _ => None,
    };
    Some(WorkflowRun {
        id: run.id.clone(),
        workflow_id: inst.id.clone(),
        workflow_type: inst.workflow_type.clone(),
        version: inst.version.clone(),
        namespace: ns.to_owned(),
        turn: t.number,
        attempt: t.attempt,
        message_id: t.message_id.clone(),
        origin: t.origin.clone(),
        worker: t.worker.clone(),
        started_at_ms: run.started_at_ms,
        ended_at_ms: run.ended_at_ms.unwrap_or(t.updated_at_ms),
        outcome: ending.end,
        turn_status: t.status,
        error,
        queue_before: run.queue_before,
        queue_after: run.queue_after.unwrap_or(inst.pending.len() as u64),
        finished,
        sample,
        counters,
        steps: t
            .steps
            .iter()
            .filter(|s| s.at_ms >= run.started_at_ms)
            .map(|s| RunStep {
                key: s.key.clone(),
                kind: s.kind,
                at_ms: s.at_ms,
            })
            .collect(),
        phases,
        usage: run.usage.clone(),
        results: ending.results,
    })
}

/// The `sample` (names, at most 20) and `counters` (whole numbers by name) a turn's result
/// names, when it is an object with them; anything of another shape is left out.
fn result_names(
    result: &Value,
) -> (
    Option<Vec<String>>,
    Option<std::collections::BTreeMap<String, u64>>,
) {
    let Some(obj) = result.as_object() else {
        return (None, None);
    };
    let sample = obj.get("sample").and_then(Value::as_array).map(|names| {
        names
            .iter()
            .filter_map(Value::as_str)
            .take(WorkflowRun::MAX_SAMPLE)
            .map(str::to_owned)
            .collect()
    });
    let counters = obj.get("counters").and_then(Value::as_object).map(|c| {
        c.iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
            .take(WorkflowRun::MAX_COUNTERS)
            .collect()
    });
    (sample, counters)
}

/// Move a turn to history with a final status.
pub(super) fn finish(
    inst: &mut InstanceRecord,
    turn: &mut TurnRecord,
    status: TurnStatus,
    now: Millis,
) {
    let end = match status {
        TurnStatus::Completed => RunEnd::Completed,
        TurnStatus::Cancelled => RunEnd::Cancelled,
        _ => RunEnd::Failed,
    };
    release(turn, now, end);
    turn.status = status;
    turn.finished_at_ms = Some(now);
    turn.wait = None;
    inst.pending.retain(|n| *n != turn.number);
    inst.completed_turns += 1;
    inst.history_through = inst.history_through.max(turn.number);
    if let Some(run) = &mut turn.run {
        run.queue_after = Some(inst.pending.len() as u64);
    }
}

/// Lease `head`, the ready inbox head of `inst`, to `worker` at `now`: a new token and
/// deadline, the same run when the claim resumes the attempt, a new run otherwise; and the
/// instance due again when the lease ends. Answers the token, and the summary of the run that
/// ended in this decision (its lease expired just now), which the turn no longer carries.
pub(super) fn lease(
    ns: &str,
    inst: &mut InstanceRecord,
    head: &mut TurnRecord,
    worker: &str,
    now: Millis,
) -> (String, Vec<WorkflowRun>) {
    // A run that ended in this decision is summarized before the next one takes its place on
    // the turn.
    let ended = head.run_ending.take();
    let ended = ended.and_then(|ending| run_summary(ns, inst, head, ending));
    // A claim after a sleep, a signal wait or a `retry_at_ms` wait resumes the same attempt,
    // and so the same run (wire.md §3.4: one run per attempt); any other claim starts a new
    // attempt with a new run.
    let resumed = head.resume && head.attempt > 0;
    if !resumed {
        head.attempt += 1;
    }
    head.resume = false;
    head.claims += 1;
    let token = new_token(head.claims);
    head.token = Some(token.clone());
    head.status = TurnStatus::Running;
    head.deadline_ms = Some(now.saturating_add(inst.lease_ms as Millis));
    head.worker = Some(worker.to_owned());
    head.wait = None;
    match head.run.as_mut() {
        Some(run) if resumed => {
            // Running again: the release that suspended it did not end it.
            run.ended_at_ms = None;
            run.queue_after = None;
        }
        _ => head.run = Some(new_run(inst, head, now)),
    }
    touch(head, now);
    inst.due_at_ms = due_at(inst, Some(head), now);
    (token, ended.into_iter().collect())
}

/// The run a claim of `head` at `now` starts.
fn new_run(inst: &InstanceRecord, head: &TurnRecord, now: Millis) -> TurnRun {
    // Sized up front: `format!` would grow it two or three times.
    let mut id = String::with_capacity(inst.id.len() + 36);
    let _ = write!(id, "{now:013}-{}-{}", inst.id, head.number);
    if head.run.as_ref().is_some_and(|r| r.id == id) {
        // The previous run of the turn started in the same millisecond.
        id = format!("{id}~{}", head.claims);
    }
    TurnRun {
        id,
        started_at_ms: now,
        queue_before: inst.pending.len() as u64,
        ended_at_ms: None,
        queue_after: None,
        usage: None,
        phases: None,
    }
}

/// Record a write on a turn.
pub(super) fn touch(turn: &mut TurnRecord, now: Millis) {
    turn.sequence += 1;
    turn.updated_at_ms = now;
}

/// The retry delay after failed attempt number `attempt` (1-based): base, doubling, capped.
pub(super) fn backoff(attempt: u32, cfg: &EngineConfig) -> Millis {
    let base = cfg.backoff_base.as_millis() as u64;
    let max = cfg.backoff_max.as_millis() as u64;
    let shift = attempt.saturating_sub(1).min(32);
    base.saturating_mul(1u64 << shift).min(max) as Millis
}

/// Whether `token` holds `turn` at `now`; the error names why not.
pub(super) fn check_lease(
    workflow_id: &str,
    turn: &TurnRecord,
    token: &str,
    now: Millis,
) -> Result<(), Error> {
    let lost = |reason: &str| Error::LeaseLost {
        workflow_id: workflow_id.to_owned(),
        turn: turn.number,
        reason: reason.to_owned(),
    };
    if turn.token.as_deref() != Some(token) {
        return Err(lost(
            "another claim holds the turn, or the token is unknown",
        ));
    }
    match turn.status {
        TurnStatus::Running => {}
        TurnStatus::Completed => return Err(lost("the turn is completed")),
        TurnStatus::Cancelled => return Err(lost("the turn was cancelled")),
        TurnStatus::Failed => return Err(lost("the turn failed")),
        TurnStatus::Suspended => return Err(lost("the turn is suspended by a replay mismatch")),
        TurnStatus::Queued | TurnStatus::Waiting => {
            return Err(lost("the attempt ended (released, suspended or timed out)"))
        }
        TurnStatus::Unknown => {
            return Err(lost(
                "the turn has a status this version of turnwise does not know",
            ))
        }
    }
    if turn.deadline_ms.is_none_or(|d| d <= now) {
        return Err(lost("the lease expired"));
    }
    if let Some(why) = operation_expiry(turn, now) {
        return Err(lost(&why));
    }
    Ok(())
}

/// When the engine must next look at an instance, given its head turn (`None` when the head
/// was not loaded: look now).
pub(super) fn due_at(
    inst: &InstanceRecord,
    head: Option<&TurnRecord>,
    now: Millis,
) -> Option<Millis> {
    if inst.paused || inst.pending.is_empty() {
        return None;
    }
    let Some(head) = head else { return Some(now) };
    match head.status {
        TurnStatus::Running => {
            let mut due = head.deadline_ms.unwrap_or(now);
            if let Some(op) = &head.operation {
                due = due.min(op.deadline_ms);
                if let Some(hb) = op.heartbeat_timeout_ms {
                    due = due.min(op.last_heartbeat_ms.saturating_add(hb as Millis));
                }
            }
            Some(due)
        }
        TurnStatus::Queued | TurnStatus::Waiting => Some(head.ready_at_ms),
        TurnStatus::Failed
        | TurnStatus::Suspended
        | TurnStatus::Completed
        | TurnStatus::Cancelled
        | TurnStatus::Unknown => None,
    }
}

/// The summary status of an instance with the given (settled) head.
pub(super) fn instance_status(
    inst: &InstanceRecord,
    head: Option<&TurnRecord>,
    now: Millis,
) -> InstanceStatus {
    if inst.paused {
        return InstanceStatus::Paused;
    }
    match head {
        None => InstanceStatus::Idle,
        Some(h) => match h.status {
            TurnStatus::Running => InstanceStatus::Running,
            TurnStatus::Failed => InstanceStatus::Failed,
            TurnStatus::Suspended => InstanceStatus::Suspended,
            TurnStatus::Waiting => InstanceStatus::Waiting,
            TurnStatus::Queued if h.ready_at_ms > now => InstanceStatus::Waiting,
            _ => InstanceStatus::Queued,
        },
    }
}

/// The opaque per-turn prefix of effect ids: stable across attempts, new for every message,
/// distinct across namespaces and instance incarnations, and free of `/`.
pub(super) fn effect_prefix(inst: &InstanceRecord, number: u64, message_id: &str) -> String {
    let mut h = Sha256::new();
    for part in [
        inst.ns.as_bytes(),
        inst.epoch.as_bytes(),
        inst.id.as_bytes(),
    ] {
        h.update(part);
        h.update([0]);
    }
    h.update(number.to_be_bytes());
    h.update(message_id.as_bytes());
    let digest = h.finalize();
    let mut s = String::with_capacity(33);
    s.push('e');
    push_hex(&mut s, &digest[..16]);
    s
}

/// Append `bytes` to `s` as lowercase hexadecimal, two digits a byte.
fn push_hex(s: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    s.reserve(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
}

/// A [`std::io::Write`] into a SHA-256, so that a value is hashed as it is serialized.
struct HashWriter<'h>(&'h mut Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A fresh lease token for claim number `claims` of a turn: rising with every claim, and with a
/// random part so a token is never reused, even if a relaxed claim was lost in a crash.
pub(super) fn new_token(claims: u64) -> String {
    let noise = RandomState::new().hash_one(claims) as u32;
    // Sized up front: `format!` would grow it twice.
    let mut token = String::with_capacity(32);
    let _ = write!(token, "wt_{claims:08x}{noise:08x}");
    token
}

/// What a new instance is made of, besides its namespace and the time.
pub(super) struct NewInstance<'a> {
    pub(super) id: &'a str,
    pub(super) workflow_type: &'a str,
    pub(super) version: &'a str,
    pub(super) state: &'a Value,
    pub(super) lease_ms: u64,
    pub(super) max_attempts: u32,
    pub(super) on_exhausted: OnExhausted,
}

/// The record of a new instance in namespace `ns` at `now`: no turn, no history, a new
/// incarnation. A created instance and a fork both start here.
pub(super) fn new_instance(ns: &str, new: NewInstance<'_>, now: Millis) -> InstanceRecord {
    InstanceRecord {
        ns: ns.to_owned(),
        id: new.id.to_owned(),
        workflow_type: new.workflow_type.to_owned(),
        version: new.version.to_owned(),
        state: new.state.clone(),
        lease_ms: new.lease_ms,
        max_attempts: new.max_attempts,
        on_exhausted: new.on_exhausted,
        paused: false,
        created_at_ms: now,
        updated_at_ms: now,
        revision: 0,
        next_turn: 1,
        pending: Vec::new(),
        completed_turns: 0,
        history_through: 0,
        history_pruned_through: 0,
        due_at_ms: None,
        epoch: new_epoch(now),
        outbox: Vec::new(),
        schedules: Vec::new(),
        events: Vec::new(),
    }
}

/// A random id for an instance incarnation.
pub(super) fn new_epoch(now: Millis) -> String {
    let noise = RandomState::new().hash_one(now);
    format!("{now:x}.{noise:016x}")
}

/// A digest of a completion, to recognise its exact repeat.
pub(super) fn completion_digest(
    state: &Value,
    result: &Value,
    continuation: Option<&Value>,
) -> String {
    let mut h = Sha256::new();
    for v in [Some(state), Some(result), continuation] {
        match v {
            // Writing a `Value` into a hasher cannot fail.
            Some(v) => serde_json::to_writer(HashWriter(&mut h), v).unwrap_or_default(),
            None => h.update(b"\xff"),
        }
        h.update([0]);
    }
    let mut s = String::with_capacity(64);
    push_hex(&mut s, &h.finalize());
    s
}

fn rfc3339(ms: Millis) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(t).to_string()
}

/// The normalized progress view of an operation whose details follow the convention.
pub(super) fn progress_view(op: &TurnOperation) -> Option<Progress> {
    let d = op.details.as_object()?;
    let phase = d.get("phase")?.as_str()?.trim().to_owned();
    Some(Progress {
        phase,
        done: d.get("done")?.as_u64()?,
        started_at: rfc3339(op.started_at_ms),
        heartbeat_at: rfc3339(op.last_heartbeat_ms),
        total: d.get("total").and_then(Value::as_u64),
        unit: d
            .get("unit")
            .and_then(Value::as_str)
            .map(|u| u.trim().to_owned()),
    })
}

/// The resume cursor a step attempt starts from: the running operation's `checkpoint`, as
/// [`WorkerBackend::operation_cursor`](crate::WorkerBackend::operation_cursor) answers it.
pub(super) fn operation_cursor(_: &InstanceRecord, t: &TurnRecord) -> Value {
    t.operation
        .as_ref()
        .map_or(Value::Null, |op| op.checkpoint.clone())
}

/// Where a turn stands, for [`WorkerBackend::await_outcome`](crate::WorkerBackend::await_outcome).
pub(super) fn turn_outcome(inst: &InstanceRecord, t: &TurnRecord) -> TurnOutcome {
    TurnOutcome {
        workflow_id: inst.id.clone(),
        number: t.number,
        status: t.status,
        result: t.result.clone(),
        error: t.error.clone(),
    }
}

/// No answer beyond success, for the `*_ack` calls.
pub(super) fn ack(_: &InstanceRecord, _: &TurnRecord) {}

/// The wire view of a turn.
pub(super) fn turn_view(inst: &InstanceRecord, t: &TurnRecord) -> WorkflowTurn {
    let progress = t
        .operation
        .as_ref()
        .or(t.last_operation.as_ref())
        .and_then(progress_view);
    WorkflowTurn {
        workflow_id: inst.id.clone(),
        number: t.number,
        message_id: t.message_id.clone(),
        message: t.message.clone(),
        version: inst.version.clone(),
        status: t.status,
        attempt: t.attempt,
        sequence: t.sequence,
        created_at_ms: t.created_at_ms,
        updated_at_ms: t.updated_at_ms,
        ready_at_ms: t.ready_at_ms,
        steps: t.steps.clone(),
        result: t.result.clone(),
        state_after: t.state_after.clone(),
        continued_to: t.continued_to,
        deadline_ms: t.deadline_ms,
        error: t.error.clone(),
        finished_at_ms: t.finished_at_ms,
        operation: t.operation.clone(),
        origin: t.origin.clone(),
        progress,
        run: t.run.clone(),
        signals: (!t.signals.is_empty()).then(|| t.signals.clone()),
        wait: t.wait.clone(),
        worker: t.worker.clone(),
        traceparent: t.traceparent.clone(),
        mismatch: t.mismatch.clone(),
    }
}

/// The wire view of an instance with its (settled) head turn.
pub(super) fn instance_view(
    inst: &InstanceRecord,
    head: Option<&TurnRecord>,
    now: Millis,
) -> WorkflowInstance {
    let progress = head
        .filter(|h| h.status == TurnStatus::Running)
        .and_then(|h| h.operation.as_ref())
        .and_then(progress_view);
    WorkflowInstance {
        id: inst.id.clone(),
        workflow_type: inst.workflow_type.clone(),
        version: inst.version.clone(),
        state: inst.state.clone(),
        status: instance_status(inst, head, now),
        pending_messages: inst.pending.len() as u64,
        completed_turns: inst.completed_turns,
        history_through: inst.history_through,
        sequence: inst.revision,
        created_at_ms: inst.created_at_ms,
        updated_at_ms: inst.updated_at_ms,
        current_turn: head.map(|h| Box::new(turn_view(inst, h))),
        history_pruned_through: Some(inst.history_pruned_through),
        on_exhausted: Some(inst.on_exhausted),
        progress,
        lease_ms: Some(inst.lease_ms),
        max_attempts: Some(inst.max_attempts),
        events: inst.events.clone(),
    }
}

/// An inbox entry for an unfinished turn.
pub(super) fn inbox_entry(t: &TurnRecord, payloads: bool) -> InboxMessage {
    InboxMessage {
        turn: t.number,
        message_id: t.message_id.clone(),
        status: t.status,
        received_at_ms: t.created_at_ms,
        ready_at_ms: t.ready_at_ms,
        attempt: t.attempt,
        message_bytes: crate::protocol::validate::json_len(&t.message) as u64,
        message: payloads.then(|| t.message.clone()),
        origin: t.origin.clone(),
        error: t.error.clone(),
        progress: (t.status == TurnStatus::Running)
            .then(|| t.operation.as_ref().and_then(progress_view))
            .flatten(),
        wait: t.wait.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap() {
        let cfg = EngineConfig::default();
        let got: Vec<Millis> = (1..=8).map(|a| backoff(a, &cfg)).collect();
        assert_eq!(got, [1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000]);
        assert_eq!(backoff(u32::MAX, &cfg), 60000);
    }

    #[test]
    fn tokens_rise_and_differ() {
        let a = new_token(1);
        let b = new_token(2);
        assert!(a < b, "{a} {b}");
        assert_ne!(new_token(1), new_token(1));
    }

    #[test]
    fn rfc3339_of_epoch_millis() {
        assert_eq!(rfc3339(1_760_000_000_123), "2025-10-09T08:53:20.123Z");
    }
}
