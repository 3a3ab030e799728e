//! Helpers of the application-side writes (create, admit a message, deliver a signal, control,
//! delete): reserved names, new turns, sizes, the instance view, and the steps of an operator
//! action. The routes themselves are in `backend.rs`.

use serde_json::Value;

use super::transitions::{self, Transitioned};
use super::*;
use crate::protocol::validate;
use turnwise_rules::names;

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
    let effect_prefix = transitions::effect_prefix(inst, number, &message_id);
    TurnRecord::queued(number, message_id, message, origin, now, effect_prefix)
}

/// Insert or replace a turn in a write list.
pub(super) fn upsert(turns: &mut Vec<TurnRecord>, t: TurnRecord) {
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
    /// The settled view of an instance as of now, reading its head.
    pub(super) async fn view_instance(&self, mut inst: InstanceRecord) -> Result<WorkflowInstance> {
        let now = self.now();
        let mut head = self.load_head(&inst).await?;
        if let Some(h) = head.as_mut() {
            if transitions::settle(&mut inst, h, now, &self.inner.config) == Transitioned::Finished
            {
                // The head ran out of attempts and would be skipped: show the next one.
                head = self.load_head(&inst).await?;
            }
        }
        Ok(transitions::instance_view(&inst, head.as_ref(), now))
    }
}

// Operator actions (`control`), in the order the route takes them.

/// The turn number an action names: `retry`, `skip` and `cancel_turn` need one.
pub(super) fn control_turn_number(req: &ControlRequest) -> Result<Option<u64>> {
    let needs_turn = matches!(
        req.action,
        ControlAction::Retry | ControlAction::Skip | ControlAction::CancelTurn
    );
    if needs_turn && req.turn.is_none() {
        return Err(Error::invalid(
            "turn",
            format_args!("`{}` needs the turn number", req.action),
        ));
    }
    Ok(req.turn)
}

/// Settle the head as it stands now (an expired lease may have exhausted it). Answers the
/// turns to write; a head that finished is taken out of `head`.
pub(super) fn settle_head(
    inst: &mut InstanceRecord,
    head: &mut Option<TurnRecord>,
    now: Millis,
    cfg: &EngineConfig,
) -> Vec<TurnRecord> {
    let mut turns = Vec::new();
    let mut finished = false;
    if let Some(h) = head.as_mut() {
        match transitions::settle(inst, h, now, cfg) {
            Transitioned::Unchanged => {}
            Transitioned::Changed => turns.push(h.clone()),
            Transitioned::Finished => {
                turns.push(h.clone());
                finished = true;
            }
        }
    }
    if finished {
        *head = None;
    }
    turns
}

/// What an operator action works on: the instance, its head, and the turns to write.
pub(super) struct ControlChanges<'a> {
    pub(super) inst: &'a mut InstanceRecord,
    pub(super) head: &'a mut Option<TurnRecord>,
    pub(super) turns: &'a mut Vec<TurnRecord>,
    pub(super) now: Millis,
}

/// Whether an operator action changed anything to commit.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ControlEffect {
    /// Records changed: commit them.
    Changes,
    /// Nothing to do (`wake` with no waiting head): answer the instance as it is.
    Nothing,
}

/// When the instance is next due after an action: a head that moved to history leaves the
/// next one unknown here, so an unpaused instance with pending turns is due now.
pub(super) fn due_after_control(
    inst: &InstanceRecord,
    head: Option<TurnRecord>,
    now: Millis,
) -> Option<Millis> {
    let head_now = head.filter(|h| inst.pending.first() == Some(&h.number));
    match (&head_now, inst.pending.is_empty()) {
        (Some(h), _) => transitions::due_at(inst, Some(h), now),
        (None, false) if !inst.paused => Some(now),
        _ => None,
    }
}

impl Engine {
    /// Apply one operator action to the records in `c`.
    pub(super) async fn apply_control(
        &self,
        req: &ControlRequest,
        number: Option<u64>,
        mut c: ControlChanges<'_>,
    ) -> Result<ControlEffect> {
        let now = c.now;
        match req.action {
            ControlAction::Pause => c.inst.paused = true,
            ControlAction::Resume => {
                c.inst.paused = false;
                if let Some(h) = c.head.as_mut().filter(|h| {
                    h.status == TurnStatus::Queued && h.ready_at_ms > now && h.error.is_some()
                }) {
                    h.ready_at_ms = now;
                    transitions::touch(h, now);
                    upsert(c.turns, h.clone());
                }
            }
            ControlAction::Retry | ControlAction::Skip => {
                let n = number.unwrap_or_default();
                let mut t = self.control_target(n, &mut c).await?;
                if t.status != TurnStatus::Failed || t.is_finished() {
                    return Err(Error::conflict(format_args!(
                        "turn {n} of `{}` is {}; only a turn that failed for good can be {}",
                        c.inst.id,
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
                    transitions::touch(&mut t, now);
                } else {
                    transitions::finish(c.inst, &mut t, TurnStatus::Failed, now);
                }
                c.head.take_if(|h| h.number == n);
                c.turns.push(t);
            }
            ControlAction::CancelTurn => {
                let n = number.unwrap_or_default();
                let mut t = self.control_target(n, &mut c).await?;
                // A suspended turn's cancellation is recorded, and its exact repeat answered.
                let Ok(event) = Engine::cancel_event(c.inst, &t, req.by.as_ref(), now) else {
                    return Ok(ControlEffect::Nothing);
                };
                if let Some(event) = event {
                    c.inst.record_event(event);
                }
                if t.is_finished() {
                    return Err(Error::conflict(format_args!(
                        "turn {n} of `{}` is already {}; only unfinished turns can be cancelled",
                        c.inst.id, t.status
                    )));
                }
                transitions::finish(c.inst, &mut t, TurnStatus::Cancelled, now);
                c.head.take_if(|h| h.number == n);
                c.turns.push(t);
            }
            ControlAction::Wake => {
                let Some(h) = c
                    .head
                    .as_mut()
                    .filter(|h| h.status == TurnStatus::Waiting && h.wait.is_some())
                else {
                    return Ok(ControlEffect::Nothing);
                };
                h.ready_at_ms = now;
                h.status = TurnStatus::Queued;
                if let Some(w) = &mut h.wait {
                    w.until_ms = now;
                }
                transitions::touch(h, now);
                upsert(c.turns, h.clone());
            }
        }
        Ok(ControlEffect::Changes)
    }

    /// The turn `n` an action targets: taken out of the turns already changed, else a copy of
    /// the head, else loaded from the store.
    async fn control_target(&self, n: u64, c: &mut ControlChanges<'_>) -> Result<TurnRecord> {
        let i = c.turns.iter().position(|t| t.number == n);
        let taken = i
            .map(|i| c.turns.remove(i))
            .or_else(|| c.head.as_ref().filter(|h| h.number == n).cloned());
        match taken {
            Some(t) => Ok(t),
            None => self.load_turn(c.inst, n).await,
        }
    }
}
