//! Helpers of `claim` (the route is in `backend.rs`): checking the request and leasing one
//! ready inbox head.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::app_routes::reserved_type;
use super::transitions::{self, Transitioned};
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

/// What [`Engine::prepare_claim`] found on a due instance.
#[expect(
    clippy::large_enum_variant,
    reason = "made once per look at an instance and taken apart at once; a box would allocate"
)]
enum Prepared {
    /// It delivered, admitted or committed something first: read the instance again.
    Again,
    /// Nothing to lease (a settled state or a corrected due time is committed if it changed).
    Nothing,
    /// The head is ready and the claim lists its workflow: lease it at `now`.
    Ready {
        inst: InstanceRecord,
        head: TurnRecord,
        now: Millis,
    },
}

impl Engine {
    /// Settle one due instance and claim its head if it is ready.
    pub(super) async fn try_claim(&self, id: &str, req: &ClaimRequest) -> Result<Option<TurnTask>> {
        let mut tries = Tries::new();
        let mut outbox_tried = false;
        let mut taken = Vec::new();
        loop {
            tries.next(id)?;
            let prepared = self.prepare_claim(id, req, &mut outbox_tried, &mut taken);
            let (mut inst, mut head, now) = match prepared.await? {
                Prepared::Again => continue,
                Prepared::Nothing => return Ok(None),
                Prepared::Ready { inst, head, now } => (inst, head, now),
            };
            let read_rev = inst.revision;
            let (token, ended) =
                transitions::lease(&self.ns, &mut inst, &mut head, &req.worker, now);
            let task = self.task(&inst, &head, token);
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

    /// Everything a claim does on due instance `id` before it leases the head: deliver a
    /// child outcome left in its outbox (once per claim), admit due schedule firings, clear a
    /// stale schedule entry, and settle the head, committing what changed. `taken` collects
    /// the firings' message ids found admitted already.
    async fn prepare_claim(
        &self,
        id: &str,
        req: &ClaimRequest,
        outbox_tried: &mut bool,
        taken: &mut Vec<String>,
    ) -> Result<Prepared> {
        let Some(mut inst) = self.inner.store.load_instance(&self.ns, id).await? else {
            return Ok(Prepared::Nothing);
        };
        if !inst.outbox.is_empty() && !*outbox_tried {
            // A child turn's outcome not yet delivered (its process died after the commit,
            // say): deliver it, then decide on the instance as it is now.
            *outbox_tried = true;
            match self.deliver_outbox(id).await {
                Ok(()) => return Ok(Prepared::Again),
                Err(e) => tracing::warn!(instance = %id, error = %e,
                    "a child turn's outcome was not delivered yet"),
            }
        }
        let read_rev = inst.revision;
        let now = self.now();
        if super::schedules::any_due(&inst, now) {
            // Admit the due firings first (one conditional commit), then decide on the
            // inbox as it is with them.
            self.fire_due(inst, now, taken).await?;
            return Ok(Prepared::Again);
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
            return Ok(Prepared::Nothing);
        };
        let settled = transitions::settle(&mut inst, &mut head, now, &self.inner.config);
        if settled == Transitioned::Finished {
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
            return Ok(Prepared::Again);
        }
        let listed = req
            .workflows
            .iter()
            .any(|w| w.workflow_type == inst.workflow_type && w.version == inst.version);
        let ready = !inst.paused && head.status == TurnStatus::Queued && head.ready_at_ms <= now;
        if ready && listed {
            return Ok(Prepared::Ready { inst, head, now });
        }
        let due = transitions::due_at(&inst, Some(&head), now);
        if settled == Transitioned::Changed || due != inst.due_at_ms {
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
        Ok(Prepared::Nothing)
    }

    /// The task a claim answers for `head`, leased with `token`.
    fn task(&self, inst: &InstanceRecord, head: &TurnRecord, token: String) -> TurnTask {
        TurnTask {
            workflow_type: inst.workflow_type.clone(),
            state: inst.state.clone(),
            token,
            lease_ms: inst.lease_ms,
            effect_prefix: head.effect_prefix.clone(),
            turn: transitions::turn_view(inst, head),
            steps_max: Some(self.inner.config.limits.steps_per_turn as u64),
            results_max: Some(RunResultsReport::MAX_INPUTS as u64),
        }
    }
}
