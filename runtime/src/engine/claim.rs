//! Helpers of `claim` (the route is in `backend.rs`): checking the request and leasing one
//! ready inbox head.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::rules::{self, Settled};
use super::writes::reserved_type;
use super::*;
use crate::protocol::validate;
use crate::store::Durability::{Durable, Relaxed};

/// How many due instances one scan looks at.
pub(super) const SCAN: usize = 32;

/// The instances a claim of this engine is deciding on right now.
///
/// Claims scan the same schedule in the same order, so claims scanning at once (the slots of
/// a worker coming back from their turns together) all went for the first due instance: one
/// won, the others lost the commit, read it again, found it taken and went on to the next, in
/// step. Now a claim passes over an instance another claim is deciding on; that claim either
/// takes it or settles why it is not ready, and a claim that passed it over and found nothing
/// looks again shortly (it is still due, so `next_due` is not later than now).
///
/// Instances are kept by their [`instance_key`](super::instance_key): two instances with one key
/// only mean that a claim passes over one while another claim decides on the other, and
/// looks again shortly.
#[derive(Default)]
pub(super) struct Claiming {
    ids: Mutex<HashSet<u64>>,
}

/// A claim deciding on one instance; dropping it lets others at the instance again.
pub(super) struct Deciding<'a> {
    claiming: &'a Claiming,
    key: u64,
}

impl Claiming {
    fn ids(&self) -> MutexGuard<'_, HashSet<u64>> {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Decide on instance `id` of namespace `ns`, unless another claim is deciding on it.
    pub(super) fn decide(&self, ns: &str, id: &str) -> Option<Deciding<'_>> {
        let key = super::instance_key(ns, id);
        let taken = !self.ids().insert(key);
        if taken {
            return None;
        }
        Some(Deciding {
            claiming: self,
            key,
        })
    }
}

impl Drop for Deciding<'_> {
    fn drop(&mut self) {
        self.claiming.ids().remove(&self.key);
    }
}

pub(super) fn check_claim(req: &ClaimRequest) -> Result<()> {
    let w = req.worker.trim();
    if w.is_empty() || req.worker.chars().count() > 128 || req.worker.chars().any(char::is_control)
    {
        return Err(Error::invalid(
            "worker",
            "the worker id must be 1-128 characters without control characters",
        ));
    }
    if req.workflows.is_empty() {
        return Err(Error::invalid(
            "workflows",
            "list at least one {workflow_type, version} the worker runs",
        ));
    }
    for wf in &req.workflows {
        validate::identifier("workflows.workflow_type", &wf.workflow_type)?;
        validate::identifier("workflows.version", &wf.version)?;
        reserved_type(&wf.workflow_type)?;
    }
    if req.include_execution_credential == Some(true) {
        return Err(Error::invalid(
            "include_execution_credential",
            "execution credentials are not offered by this server; claim without them",
        ));
    }
    Ok(())
}

impl Engine {
    /// Settle one due instance and claim its head if it is ready.
    pub(super) async fn try_claim(&self, id: &str, req: &ClaimRequest) -> Result<Option<TurnTask>> {
        let mut tries = Tries::new();
        let mut outbox_tried = false;
        let mut taken = Vec::new();
        loop {
            tries.next(id)?;
            let Some(mut inst) = self.inner.store.load_instance(&self.ns, id).await? else {
                return Ok(None);
            };
            if !inst.outbox.is_empty() && !outbox_tried {
                // A child turn's outcome not yet delivered (its process died after the commit,
                // say): deliver it, then decide on the instance as it is now.
                outbox_tried = true;
                match self.deliver_outbox(id).await {
                    Ok(()) => continue,
                    Err(e) => tracing::warn!(instance = %id, error = %e,
                        "a child turn's outcome was not delivered yet"),
                }
            }
            let read_rev = inst.revision;
            let now = self.now();
            if super::schedules::any_due(&inst, now) {
                // Admit the due firings first (one conditional commit), then decide on the
                // inbox as it is with them.
                self.fire_due(inst, now, &mut taken).await?;
                continue;
            }
            let Some(mut head) = self.load_head(&inst).await? else {
                // A stale schedule entry: clear it.
                if inst.due_at_ms.is_some() {
                    inst.due_at_ms = None;
                    self.write(
                        Some(read_rev),
                        Record::Owned(inst),
                        Vec::new(),
                        Vec::new(),
                        Relaxed,
                    )
                    .await?
                    .landed()?;
                }
                return Ok(None);
            };
            let settled = rules::settle(&mut inst, &mut head, now, &self.inner.config);
            if settled == Settled::Finished {
                // The head ran out of attempts and was skipped: record it, then look again.
                inst.due_at_ms = (!inst.pending.is_empty() && !inst.paused).then_some(now);
                self.write(
                    Some(read_rev),
                    Record::Owned(inst),
                    vec![head],
                    Vec::new(),
                    Durable,
                )
                .await?
                .landed()?;
                continue;
            }
            let listed = req
                .workflows
                .iter()
                .any(|w| w.workflow_type == inst.workflow_type && w.version == inst.version);
            let ready =
                !inst.paused && head.status == TurnStatus::Queued && head.ready_at_ms <= now;
            if !(ready && listed) {
                let due = rules::due_at(&inst, Some(&head), now);
                if settled == Settled::Changed || due != inst.due_at_ms {
                    inst.due_at_ms = due;
                    // Exhausting a turn is a decision worth keeping; the rest can be re-derived.
                    let durability = if head.status == TurnStatus::Failed {
                        Durable
                    } else {
                        Relaxed
                    };
                    self.write(
                        Some(read_rev),
                        Record::Owned(inst),
                        vec![head],
                        Vec::new(),
                        durability,
                    )
                    .await?
                    .landed()?;
                }
                return Ok(None);
            }
            // A run that ended in this decision (its lease expired just now) is summarized
            // before the next one takes its place on the turn.
            let mut ended = Vec::new();
            if let Some(ending) = head.run_ending.take() {
                ended.extend(rules::run_summary(&self.ns, &inst, &head, ending));
            }
            // A claim after a sleep, a signal wait or a `retry_at_ms` wait resumes the same
            // attempt, and so the same run (wire.md §3.4: one run per attempt); any other
            // claim starts a new attempt with a new run.
            let resumed = head.resume && head.attempt > 0;
            if !resumed {
                head.attempt += 1;
            }
            head.resume = false;
            head.claims += 1;
            let token = rules::new_token(head.claims);
            head.token = Some(token.clone());
            head.status = TurnStatus::Running;
            head.deadline_ms = Some(now.saturating_add(inst.lease_ms as Millis));
            head.worker = Some(req.worker.clone());
            head.wait = None;
            match head.run.as_mut() {
                Some(run) if resumed => {
                    // Running again: the release that suspended it did not end it.
                    run.ended_at_ms = None;
                    run.queue_after = None;
                }
                _ => {
                    // Sized up front: `format!` would grow it two or three times.
                    let mut id = String::with_capacity(inst.id.len() + 36);
                    let _ = write!(id, "{now:013}-{}-{}", inst.id, head.number);
                    if head.run.as_ref().is_some_and(|r| r.id == id) {
                        // The previous run of the turn started in the same millisecond.
                        id = format!("{id}~{}", head.claims);
                    }
                    head.run = Some(TurnRun {
                        id,
                        started_at_ms: now,
                        queue_before: inst.pending.len() as u64,
                        ended_at_ms: None,
                        queue_after: None,
                        usage: None,
                        phases: None,
                    })
                }
            }
            rules::touch(&mut head, now);
            inst.due_at_ms = rules::due_at(&inst, Some(&head), now);
            let task = TurnTask {
                workflow_type: inst.workflow_type.clone(),
                state: inst.state.clone(),
                token,
                lease_ms: inst.lease_ms,
                effect_prefix: head.effect_prefix.clone(),
                turn: rules::turn_view(&inst, &head),
                steps_max: Some(self.inner.config.limits.steps_per_turn as u64),
                results_max: Some(RunResultsReport::MAX_INPUTS as u64),
            };
            if self
                .write(
                    Some(read_rev),
                    Record::Owned(inst),
                    vec![head],
                    ended,
                    Relaxed,
                )
                .await?
                .landed()?
            {
                return Ok(Some(task));
            }
        }
    }
}
