//! Child workflows: a turn's outcome delivered to the parent turn that sent its message.
//!
//! A message whose origin is `{"kind": "workflow", "parent_id", "parent_turn",
//! "reply_signal"}` (a turnwise extension) came from a parent turn that waits for the signal
//! `reply_signal`. When such a turn gets an outcome (completed, failed for good, cancelled),
//! the commit that records it also puts the outcome into the instance's *outbox*
//! ([`OutboxEntry`]): the outcome and the duty to deliver it are written together, and an
//! instance with a non-empty outbox stays due in the schedule index.
//!
//! After that commit, and before answering it, the engine delivers the entry: it signals the parent turn, with
//! the signal's name as its event id, so a repeated delivery is answered as the first one and
//! the parent sees the outcome once; then it removes the entry from the outbox. A process that
//! dies between the two leaves the entry behind, and the first claim scan over the child's
//! workflow (on any node sharing the store) finds the instance due and delivers it again.

use serde_json::{json, Value};

use super::schemas::Sender;
use super::transitions;
use super::*;
use crate::store::Durability::Relaxed;
use crate::store::OutboxEntry;
use turnwise_rules::names;

/// The parent turn an origin names, with the signal it waits on: `None` unless the origin is
/// of kind `workflow` with a valid `parent_id`, `parent_turn` and `reply_signal`.
pub(super) fn parent_of(origin: Option<&MessageOrigin>) -> Option<(String, u64, String)> {
    let origin = origin.filter(|o| o.kind == names::PARENT_ORIGIN_KIND)?;
    let id = origin.fields.get(names::PARENT_ID_FIELD)?.as_str()?;
    let turn = origin.fields.get(names::PARENT_TURN_FIELD)?.as_u64()?;
    let signal = origin.fields.get(names::REPLY_SIGNAL_FIELD)?.as_str()?;
    let valid = turnwise_rules::is_identifier(id) && turnwise_rules::is_identifier(signal);
    valid.then(|| (id.to_owned(), turn, signal.to_owned()))
}

/// The signal value that carries a child turn's outcome.
fn outcome_value(child: &str, turn: &TurnRecord) -> Value {
    let mut value = json!({
        "status": turn.status,
        "workflow_id": child,
        "turn": turn.number,
    });
    match turn.status {
        TurnStatus::Completed => value["reply"] = turn.result.clone(),
        TurnStatus::Failed => {
            value["error"] = json!(turn.error.as_deref().unwrap_or("no error was recorded"));
        }
        _ => {}
    }
    value
}

/// Put the outcome of every turn of `turns` that has one and was sent by a parent turn into
/// `inst`'s outbox (once per turn while it waits there). Whether anything was added.
pub(super) fn queue_outcomes(inst: &mut InstanceRecord, turns: &[TurnRecord]) -> bool {
    let mut queued = false;
    for turn in turns.iter().filter(|t| t.status.is_outcome()) {
        let Some((parent_id, parent_turn, signal)) = parent_of(turn.origin.as_ref()) else {
            continue;
        };
        if inst.outbox.iter().any(|e| e.turn == turn.number) {
            continue;
        }
        let value = outcome_value(&inst.id, turn);
        inst.outbox.push(OutboxEntry {
            parent_id,
            parent_turn,
            signal,
            turn: turn.number,
            value,
        });
        queued = true;
    }
    queued
}

impl Engine {
    /// Hold back (or let go) the deliveries of child turns' outcomes made by this engine and
    /// its clones: the outcomes stay in their instances' outboxes. For crash tests, which kill
    /// a process between a child's completion and the delivery (feature `test-util`).
    #[cfg(feature = "test-util")]
    #[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
    pub fn hold_child_deliveries(&self, hold: bool) {
        self.inner
            .hold_deliveries
            .store(hold, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether a test holds deliveries back; never without the `test-util` feature.
    fn deliveries_held(&self) -> bool {
        #[cfg(feature = "test-util")]
        return self
            .inner
            .hold_deliveries
            .load(std::sync::atomic::Ordering::SeqCst);
        #[cfg(not(feature = "test-util"))]
        false
    }

    /// Deliver instance `id`'s outbox right after the commit that filled it, before that
    /// commit is answered: so the parent turn is ready by the time the child's worker hears
    /// that its turn is done. A delivery that fails is logged and left to a claim scan.
    pub(super) fn deliver_now<'a>(
        &'a self,
        id: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            if let Err(e) = self.deliver_outbox(id).await {
                // The entries stay in the outbox, and the instance due: a claim scan delivers
                // them later.
                tracing::warn!(instance = %id, error = %e, "a child turn's outcome was not delivered yet");
            }
        })
    }

    /// Deliver every outcome waiting in instance `id`'s outbox to its parent turn, then remove
    /// the delivered entries. Repeating it is harmless: a delivery repeats its signal's id.
    pub(super) async fn deliver_outbox(&self, id: &str) -> Result<()> {
        if self.deliveries_held() {
            return Ok(());
        }
        let mut tries = Tries::new();
        loop {
            tries.next(id)?;
            let Some(mut inst) = self.inner.store.load_instance(&self.ns, id).await? else {
                return Ok(());
            };
            if inst.outbox.is_empty() {
                return Ok(());
            }
            for entry in &inst.outbox {
                self.deliver(&inst.id, entry).await?;
            }
            inst.outbox.clear();
            let head = self.load_head(&inst).await?;
            inst.due_at_ms = transitions::due_at(&inst, head.as_ref(), self.now());
            let read_rev = inst.revision;
            // Losing this write loses nothing: the entries would be delivered again.
            if self
                .write(
                    Some(read_rev),
                    Record::Owned(inst),
                    Vec::new(),
                    Vec::new(),
                    Relaxed,
                )
                .await?
                .landed()?
            {
                return Ok(());
            }
        }
    }

    /// Signal the parent turn with one outcome. A parent that is gone, or whose turn is over
    /// or refuses the signal, cannot take it: that is logged and the entry counts as
    /// delivered. A store failure is an error: the entry stays.
    async fn deliver(&self, child: &str, entry: &OutboxEntry) -> Result<()> {
        let mut req = SignalRequest {
            workflow_id: entry.parent_id.clone(),
            turn: entry.parent_turn,
            id: entry.signal.clone(),
            name: entry.signal.clone(),
            value: entry.value.clone(),
        };
        let mut answer = self.put_signal(&req, Sender::Engine).await;
        if let Err(Error::TooLarge { size, limit, .. }) = &answer {
            // The reply does not fit in the parent's turn: tell the parent so instead.
            req.value = json!({
                "status": TurnStatus::Failed,
                "workflow_id": child,
                "turn": entry.turn,
                "error": format!(
                    "the reply of turn {} of `{child}` does not fit in turn {} of `{}` \
                     ({size} bytes with it, the limit is {limit}); return a smaller reply",
                    entry.turn, entry.parent_turn, entry.parent_id
                ),
            });
            answer = self.put_signal(&req, Sender::Engine).await;
        }
        match answer {
            Ok(_) => Ok(()),
            Err(e) if e.is_refusal() || matches!(e, Error::NotFound { .. }) => {
                tracing::warn!(
                    child = %child,
                    turn = entry.turn,
                    parent = %entry.parent_id,
                    parent_turn = entry.parent_turn,
                    error = %e,
                    "a child turn's outcome could not be delivered to its parent turn; dropped"
                );
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}
