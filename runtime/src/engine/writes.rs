//! Application-side writes: create, admit a message, deliver a signal, control, delete.

use serde_json::{json, Value};

use super::rules::{self, Settled};
use super::*;
use crate::store::Durability::Durable;
use crate::validate;
use turnwise_rules::durations::LEASE;
use turnwise_rules::{limits, names};

pub(super) fn reserved_type(workflow_type: &str) -> Result<()> {
    if names::is_reserved_type(workflow_type) {
        return Err(Error::Reserved {
            code: "reserved_workflow_type",
            message: format!(
                "workflow type `{workflow_type}` is reserved: names starting `{}` belong to the server",
                names::RESERVED_TYPE_PREFIX
            ),
        });
    }
    Ok(())
}

/// A fresh turn for a message.
pub(super) fn new_turn(
    inst: &InstanceRecord,
    number: u64,
    message_id: String,
    message: Value,
    origin: Option<MessageOrigin>,
    now: Millis,
) -> TurnRecord {
    let effect_prefix = rules::effect_prefix(inst, number, &message_id);
    TurnRecord::queued(number, message_id, message, origin, now, effect_prefix)
}

/// Insert or replace a turn in a write list.
fn upsert(turns: &mut Vec<TurnRecord>, t: TurnRecord) {
    turns.retain(|x| x.number != t.number);
    turns.push(t);
}

/// Refuse a turn whose stored form would exceed the limit.
pub(super) fn turn_size(t: &TurnRecord, limit: usize) -> Result<()> {
    let size = validate::serialized_len(t);
    if size > limit {
        return Err(Error::TooLarge {
            what: "turn".into(),
            size,
            limit,
        });
    }
    Ok(())
}

impl Engine {
    pub(super) async fn do_create(&self, req: CreateInstanceRequest) -> Result<WorkflowInstance> {
        let cfg = &self.inner.config;
        validate::identifier("id", &req.id)?;
        validate::identifier("workflow_type", &req.workflow_type)?;
        validate::identifier("version", &req.version)?;
        reserved_type(&req.workflow_type)?;
        if names::is_reserved_instance_id(&req.id) {
            return Err(Error::Reserved {
                code: "reserved_workflow_id",
                message: format!(
                    "instance id `{}` is reserved by the server; choose another id",
                    req.id
                ),
            });
        }
        let lease_ms = req.lease_ms.unwrap_or(cfg.default_lease_ms);
        validate::range("lease_ms", lease_ms, LEASE.min, LEASE.max)?;
        let max_attempts = req.max_attempts.unwrap_or(cfg.default_max_attempts);
        let (min, max) = (limits::MAX_ATTEMPTS_MIN, limits::MAX_ATTEMPTS_MAX);
        validate::range("max_attempts", max_attempts.into(), min.into(), max.into())?;
        validate::size("state", &req.state, cfg.limits.state_bytes)?;

        let mut tries = Tries::new();
        loop {
            tries.next(&req.id)?;
            if let Some(inst) = self.inner.store.load_instance(&self.ns, &req.id).await? {
                if inst.workflow_type != req.workflow_type || inst.version != req.version {
                    return Err(Error::conflict(format_args!(
                        "instance `{}` already exists as {} {}, not {} {}; pick another id or delete it first",
                        req.id, inst.workflow_type, inst.version, req.workflow_type, req.version
                    )));
                }
                return self.view_instance(inst).await;
            }
            let now = self.now();
            let mut inst = InstanceRecord {
                ns: self.ns.to_string(),
                id: req.id.clone(),
                workflow_type: req.workflow_type.clone(),
                version: req.version.clone(),
                state: req.state.clone(),
                lease_ms,
                max_attempts,
                on_exhausted: req.on_exhausted.unwrap_or(OnExhausted::Block),
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
                epoch: rules::new_epoch(now),
            };
            if self.commit(None, &mut inst, Vec::new(), Durable).await? {
                return Ok(rules::instance_view(&inst, None, now));
            }
        }
    }

    pub(super) async fn do_message(&self, req: MessageRequest) -> Result<WorkflowTurn> {
        let limits = &self.inner.config.limits;
        validate::identifier("workflow_id", &req.workflow_id)?;
        validate::identifier("id", &req.id)?;
        if req.id.starts_with(names::CONTINUATION_ID_PREFIX) {
            return Err(Error::invalid(
                "id",
                format!(
                    "the `{}` prefix is reserved for continuations",
                    names::CONTINUATION_ID_PREFIX
                ),
            ));
        }
        validate::size("message", &req.message, limits.message_bytes)?;
        if let Some(origin) = &req.origin {
            if !names::is_client_origin_kind(&origin.kind) {
                return Err(Error::invalid(
                    "origin.kind",
                    format!(
                        "{:?} is not an origin kind; use one of: {}",
                        origin.kind,
                        names::ORIGIN_KINDS.join(", ")
                    ),
                ));
            }
            let v = serde_json::to_value(origin).unwrap_or(Value::Null);
            validate::size("origin", &v, limits.origin_bytes)?;
        }

        // Admission is optimistic: the store's message-id index is unique, so the new turn is
        // committed without looking the id up first, and only a commit refused because the id
        // is taken (or a full inbox, which must not hide a repeat) looks for the kept turn.
        let mut look_first = false;
        let mut tries = Tries::new();
        loop {
            tries.next(&req.workflow_id)?;
            let mut inst = self.load(&req.workflow_id).await?;
            let full = inst.pending.len() >= limits.pending_messages;
            if look_first || full {
                if let Some(t) = self
                    .inner
                    .store
                    .find_message(&self.ns, &inst.id, &req.id)
                    .await?
                {
                    if t.message == req.message {
                        return Ok(rules::turn_view(&inst, &t));
                    }
                    return Err(Error::conflict(format_args!(
                        "message id `{}` was already admitted as turn {} of `{}` with a different message; \
                         use a new id for a new message",
                        req.id, t.number, inst.id
                    )));
                }
            }
            if full {
                return Err(Error::LimitReached {
                    limit: "pending_messages",
                    message: format!(
                        "instance `{}` already has {} unfinished messages (the limit); retry once some finish",
                        inst.id,
                        inst.pending.len()
                    ),
                });
            }
            let now = self.now();
            let number = inst.next_turn;
            let turn = new_turn(
                &inst,
                number,
                req.id.clone(),
                req.message.clone(),
                req.origin.clone(),
                now,
            );
            inst.next_turn += 1;
            inst.pending.push(number);
            if inst.pending.len() == 1 && !inst.paused {
                inst.due_at_ms = Some(now);
            }
            let view = rules::turn_view(&inst, &turn);
            let read_rev = inst.revision;
            match self
                .try_commit(Some(read_rev), &mut inst, vec![turn], Durable)
                .await?
            {
                Committed::Done => return Ok(view),
                Committed::Conflict => {}
                // Kept by another turn (or by one committed a moment ago): read again, look.
                Committed::MessageIdTaken(_) => look_first = true,
            }
        }
    }

    pub(super) async fn do_signal(&self, req: SignalRequest) -> Result<WorkflowTurn> {
        let limits = &self.inner.config.limits;
        validate::identifier("workflow_id", &req.workflow_id)?;
        validate::identifier("id", &req.id)?;
        validate::identifier("name", &req.name)?;
        validate::size("value", &req.value, limits.signal_bytes)?;

        let mut tries = Tries::new();
        loop {
            tries.next(&req.workflow_id)?;
            let mut inst = self.load(&req.workflow_id).await?;
            let mut turn = self.load_turn(&inst, req.turn).await?;
            if let Some(s) = turn.signals.iter().find(|s| s.id == req.id) {
                if s.name == req.name && s.value == req.value {
                    return Ok(rules::turn_view(&inst, &turn));
                }
                return Err(Error::conflict(format_args!(
                    "signal id `{}` was already delivered to turn {} with another name or value; use a new id",
                    req.id, turn.number
                )));
            }
            if turn.is_finished() {
                return Err(Error::conflict(format_args!(
                    "turn {} of `{}` is {}; signals go to unfinished turns",
                    turn.number, inst.id, turn.status
                )));
            }
            if turn.signals.len() >= limits.signals_per_turn {
                return Err(Error::LimitReached {
                    limit: "signals",
                    message: format!(
                        "turn {} of `{}` already holds {} signals (the limit)",
                        turn.number,
                        inst.id,
                        turn.signals.len()
                    ),
                });
            }
            let now = self.now();
            let mut signal = TurnSignal {
                id: req.id.clone(),
                name: req.name.clone(),
                value: req.value.clone(),
                at_ms: now,
                consumed_by: None,
            };
            let waiting = turn.status == TurnStatus::Waiting && turn.ready_at_ms > now;
            if let Some(step) = turn.steps.last_mut().filter(|s| {
                waiting
                    && s.kind == CheckpointKind::Signal
                    && s.output.is_null()
                    && s.signal_name.as_deref() == Some(req.name.as_str())
            }) {
                step.output = json!({"received": true, "value": req.value});
                signal.consumed_by = Some(step.key.clone());
                turn.status = TurnStatus::Queued;
                turn.ready_at_ms = now;
                if inst.pending.first() == Some(&turn.number) && !inst.paused {
                    inst.due_at_ms = Some(now);
                }
            }
            turn.signals.push(signal);
            rules::touch(&mut turn, now);
            turn_size(&turn, limits.turn_bytes)?;
            let view = rules::turn_view(&inst, &turn);
            let read_rev = inst.revision;
            if self
                .commit(Some(read_rev), &mut inst, vec![turn], Durable)
                .await?
            {
                return Ok(view);
            }
        }
    }

    pub(super) async fn do_control(&self, req: ControlRequest) -> Result<WorkflowInstance> {
        validate::identifier("workflow_id", &req.workflow_id)?;
        let needs_turn = matches!(
            req.action,
            ControlAction::Retry | ControlAction::Skip | ControlAction::CancelTurn
        );
        let number = match (needs_turn, req.turn) {
            (true, None) => {
                return Err(Error::invalid(
                    "turn",
                    format_args!("`{}` needs the turn number", req.action),
                ))
            }
            (_, n) => n,
        };

        let mut tries = Tries::new();
        loop {
            tries.next(&req.workflow_id)?;
            let mut inst = self.load(&req.workflow_id).await?;
            let read_rev = inst.revision;
            let now = self.now();
            let mut head = self.load_head(&inst).await?;
            let mut turns = Vec::new();
            // Decide on the head as it stands now (an expired lease may have exhausted it).
            if let Some(h) = head.as_mut() {
                match rules::settle(&mut inst, h, now, &self.inner.config) {
                    Settled::Unchanged => {}
                    Settled::Changed => turns.push(h.clone()),
                    Settled::Finished => {
                        turns.push(h.clone());
                        head = None;
                    }
                }
            }
            let take = |n: u64, head: &Option<TurnRecord>, turns: &mut Vec<TurnRecord>| {
                let i = turns.iter().position(|t| t.number == n);
                i.map(|i| turns.remove(i))
                    .or_else(|| head.as_ref().filter(|h| h.number == n).cloned())
            };
            match req.action {
                ControlAction::Pause => inst.paused = true,
                ControlAction::Resume => {
                    inst.paused = false;
                    if let Some(h) = head.as_mut().filter(|h| {
                        h.status == TurnStatus::Queued && h.ready_at_ms > now && h.error.is_some()
                    }) {
                        h.ready_at_ms = now;
                        rules::touch(h, now);
                        upsert(&mut turns, h.clone());
                    }
                }
                ControlAction::Retry | ControlAction::Skip => {
                    let n = number.unwrap_or_default();
                    let mut t = match take(n, &head, &mut turns) {
                        Some(t) => t,
                        None => self.load_turn(&inst, n).await?,
                    };
                    if t.status != TurnStatus::Failed || t.is_finished() {
                        return Err(Error::conflict(format_args!(
                            "turn {n} of `{}` is {}; only a turn that failed for good can be {}",
                            inst.id,
                            t.status,
                            if req.action == ControlAction::Retry {
                                "retried"
                            } else {
                                "skipped"
                            }
                        )));
                    }
                    if req.action == ControlAction::Retry {
                        t.status = TurnStatus::Queued;
                        t.attempt = 0;
                        t.ready_at_ms = now;
                        t.resume = false;
                        rules::touch(&mut t, now);
                    } else {
                        rules::finish(&mut inst, &mut t, TurnStatus::Failed, now);
                    }
                    head = head.filter(|h| h.number != n);
                    turns.push(t);
                }
                ControlAction::CancelTurn => {
                    let n = number.unwrap_or_default();
                    let mut t = match take(n, &head, &mut turns) {
                        Some(t) => t,
                        None => self.load_turn(&inst, n).await?,
                    };
                    if t.is_finished() {
                        return Err(Error::conflict(format_args!(
                            "turn {n} of `{}` is already {}; only unfinished turns can be cancelled",
                            inst.id, t.status
                        )));
                    }
                    rules::finish(&mut inst, &mut t, TurnStatus::Cancelled, now);
                    head = head.filter(|h| h.number != n);
                    turns.push(t);
                }
                ControlAction::Wake => {
                    let Some(h) = head
                        .as_mut()
                        .filter(|h| h.status == TurnStatus::Waiting && h.wait.is_some())
                    else {
                        return self.view_instance(inst).await;
                    };
                    h.ready_at_ms = now;
                    h.status = TurnStatus::Queued;
                    if let Some(w) = &mut h.wait {
                        w.until_ms = now;
                    }
                    rules::touch(h, now);
                    upsert(&mut turns, h.clone());
                }
            }
            // A head that moved to history leaves the next one unknown here: look now.
            let head_now = head.filter(|h| inst.pending.first() == Some(&h.number));
            inst.due_at_ms = match (&head_now, inst.pending.is_empty()) {
                (Some(h), _) => rules::due_at(&inst, Some(h), now),
                (None, false) if !inst.paused => Some(now),
                _ => None,
            };
            if self
                .commit(Some(read_rev), &mut inst, turns, Durable)
                .await?
            {
                return self.view_instance(inst).await;
            }
        }
    }

    pub(super) async fn do_delete(&self, req: DeleteRequest) -> Result<DeleteResponse> {
        validate::identifier("workflow_id", &req.workflow_id)?;
        let mut tries = Tries::new();
        loop {
            tries.next(&req.workflow_id)?;
            let loaded = match self
                .inner
                .store
                .load_instance(&self.ns, &req.workflow_id)
                .await
            {
                Err(crate::store::StoreError::Unreadable { .. }) => {
                    // Quarantined: deleting it is how an operator clears it.
                    let deleted = self
                        .inner
                        .store
                        .delete_unreadable(&self.ns, &req.workflow_id)
                        .await?;
                    self.notify();
                    return Ok(DeleteResponse { deleted });
                }
                loaded => loaded?,
            };
            let Some(inst) = loaded else {
                return Ok(DeleteResponse { deleted: false });
            };
            let write = WriteSet {
                ns: self.ns.to_string(),
                id: inst.id.clone(),
                expected_revision: Some(inst.revision),
                instance: None,
                turns: Vec::new(),
                retention: None,
                durability: Durable,
            };
            match self.inner.store.commit(write).await {
                Ok(()) => {
                    self.notify();
                    return Ok(DeleteResponse { deleted: true });
                }
                Err(CommitError::Conflict) => continue,
                Err(CommitError::Store(e)) => return Err(e.into()),
                Err(e @ CommitError::MessageIdTaken { .. }) => {
                    return Err(Error::Store(format!("deleting `{}`: {e}", inst.id)))
                }
            }
        }
    }

    /// The settled view of an instance as of now, reading its head.
    pub(super) async fn view_instance(&self, mut inst: InstanceRecord) -> Result<WorkflowInstance> {
        let now = self.now();
        let mut head = self.load_head(&inst).await?;
        if let Some(h) = head.as_mut() {
            if rules::settle(&mut inst, h, now, &self.inner.config) == Settled::Finished {
                // The head ran out of attempts and would be skipped: show the next one.
                head = self.load_head(&inst).await?;
            }
        }
        Ok(rules::instance_view(&inst, head.as_ref(), now))
    }
}
