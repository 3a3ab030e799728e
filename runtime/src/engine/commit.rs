//! The one commit path: every write of an instance, its turns and run summaries (and its
//! deletion) goes through [`Engine::write`], which commits conditionally on the revision read,
//! records the commit metrics, rings the waiting claims the commit concerns and wakes the
//! outcome waiters. The application routes decide in [`Engine::on_instance`], the loop
//! that reads the instance, decides and commits through it, as the turn routes do in
//! `Engine::on_turn` (worker_routes.rs).

use super::{children, instance_key, schedules, transitions, workflow_key, Engine, Tries};
use std::future::Future;
use std::pin::Pin;

use crate::protocol::error::{Error, Result};
use crate::protocol::{Millis, WorkflowRun};
use crate::store::{CommitError, Durability, InstanceRecord, Retention, TurnRecord, WriteSet};

/// The instance record a commit writes.
#[expect(
    clippy::large_enum_variant,
    reason = "made for one commit and moved into its write set; a box would allocate per commit"
)]
pub(super) enum Record<'a> {
    /// A record the caller is done with: it moves into the write set (the worker routes,
    /// which answer a view made before the commit).
    Owned(InstanceRecord),
    /// A record the caller still reads after the commit: stamped in place, and copied into
    /// the write set.
    Kept(&'a mut InstanceRecord),
    /// The instance of this id goes, with all its turns.
    Deleted(&'a str),
}

/// How [`Engine::write`] ended.
pub(super) enum Committed {
    Done,
    /// A revision conflict: read again and decide again.
    Conflict,
    /// A new turn's message id is already a kept turn's; nothing was written.
    MessageIdTaken(String),
}

impl Committed {
    /// Whether the write landed (`false`: a revision conflict; read again and decide again),
    /// for a write whose new turns' ids the engine made. Only admissions add turns with ids
    /// from outside; every other new turn's id is made to be unique, so a taken one is a
    /// store fault.
    pub(super) fn landed(self) -> Result<bool> {
        match self {
            Committed::Done => Ok(true),
            Committed::Conflict => Ok(false),
            Committed::MessageIdTaken(message_id) => Err(Error::store(format!(
                "a turn made by the engine reused message id `{message_id}`"
            ))),
        }
    }
}

/// What an application route decided, given the instance as it stands.
#[expect(
    clippy::large_enum_variant,
    reason = "made once per decision and moved into the commit; a box would allocate per decision"
)]
pub(super) enum InstanceDecision<T> {
    /// Nothing to write: answer this (an exact repeat, or nothing to change).
    Answer(T),
    /// Commit this record (changed) with these turns, durably, and answer this once it lands.
    Write(InstanceRecord, Vec<TurnRecord>, T),
}

/// A decision on an instance, made by [`Engine::on_instance`]'s `decide`.
pub(super) type Deciding<'a, T> =
    Pin<Box<dyn Future<Output = Result<InstanceDecision<T>>> + Send + 'a>>;

/// What the metrics and wake-ups need after the record has moved into the store.
struct Rings {
    now: Millis,
    /// When the instance is next due, and the key of its workflow: the claims to ring.
    due: Option<(Millis, u64)>,
    /// Whether a turn (or the whole instance) reached an outcome: the waiters to wake.
    settled: bool,
    instance: u64,
    /// The turns this commit finished, by outcome, and their workflow type.
    finishing: Option<(String, Vec<&'static str>)>,
    /// The instance whose child outcomes this commit queued for delivery.
    deliver: Option<String>,
}

impl Engine {
    /// Commit `record` (read at revision `read_rev`, `None` for a create) with `turns`, then
    /// record the commit's metrics, ring the claims and wake the waiters the commit concerns.
    /// The runs the turns ended are summarized into the same write set, with `runs` (those
    /// that ended in this decision but that no turn of the write set carries any more: a
    /// claim that ends an expired run and starts the next one in one commit).
    pub(super) async fn write(
        &self,
        read_rev: Option<u64>,
        record: Record<'_>,
        turns: Vec<TurnRecord>,
        runs: Vec<WorkflowRun>,
        durability: Durability,
    ) -> Result<Committed> {
        let (write, rings) = match record {
            Record::Owned(mut inst) => {
                self.stamp(read_rev, &mut inst);
                self.write_set(read_rev, inst, turns, runs, durability)
            }
            Record::Kept(inst) => {
                self.stamp(read_rev, inst);
                self.write_set(read_rev, inst.clone(), turns, runs, durability)
            }
            Record::Deleted(id) => self.deletion(read_rev, id, durability),
        };
        let started = std::time::Instant::now();
        let committed = self.inner.store.commit(write).await;
        crate::metrics::store_commit(durability, started.elapsed());
        match committed {
            Ok(()) => {
                self.ring(rings).await;
                Ok(Committed::Done)
            }
            Err(CommitError::Conflict) => Ok(Committed::Conflict),
            Err(CommitError::MessageIdTaken { message_id }) => {
                Ok(Committed::MessageIdTaken(message_id))
            }
            Err(CommitError::Store(e)) => Err(e.into()),
        }
    }

    /// The revision and time a commit gives the instance.
    fn stamp(&self, read_rev: Option<u64>, inst: &mut InstanceRecord) {
        inst.revision = read_rev.map_or(1, |r| r + 1);
        inst.updated_at_ms = self.now();
        // Whatever the decision made the instance due for, its schedules make it due by their
        // next fire time too: every write keeps the schedule index covering them.
        inst.due_at_ms = schedules::with_schedules(inst.due_at_ms, inst);
    }

    /// The write set of `inst` (stamped) with `turns` and `runs`, and what to ring once it
    /// is committed.
    fn write_set(
        &self,
        read_rev: Option<u64>,
        mut inst: InstanceRecord,
        mut turns: Vec<TurnRecord>,
        mut runs: Vec<WorkflowRun>,
        durability: Durability,
    ) -> (WriteSet, Rings) {
        let now = inst.updated_at_ms;
        // A child turn's outcome is queued for its parent in this same commit, and keeps the
        // instance due until it is delivered (children.rs).
        let queued = children::queue_outcomes(&mut inst, &turns);
        if !inst.outbox.is_empty() {
            inst.due_at_ms = Some(inst.due_at_ms.map_or(now, |d| d.min(now)));
        }
        for t in &mut turns {
            if let Some(ending) = t.run_ending.take() {
                runs.extend(transitions::run_summary(&self.ns, &inst, t, ending));
            }
        }
        let keep_runs = self.inner.config.run_retention;
        let prune_runs_before = (!runs.is_empty() && !keep_runs.is_zero())
            .then(|| now.saturating_sub(keep_runs.as_millis() as Millis));
        let finished = turns.iter().any(TurnRecord::is_finished);
        let policy = self.inner.config.retention;
        let retention =
            (finished && policy.keep_turns > 0 && !policy.keep_for.is_zero()).then(|| Retention {
                keep_turns: policy.keep_turns,
                keep_since_ms: now.saturating_sub(policy.keep_for.as_millis() as Millis),
            });
        let finishing = crate::metrics::finishing(&turns);
        let rings = Rings {
            now,
            due: inst
                .due_at_ms
                .map(|at| (at, workflow_key(&inst.workflow_type, &inst.version))),
            settled: turns.iter().any(|t| t.status.is_settled()),
            instance: instance_key(&self.ns, &inst.id),
            finishing: (!finishing.is_empty()).then(|| (inst.workflow_type.clone(), finishing)),
            deliver: queued.then(|| inst.id.clone()),
        };
        let write = WriteSet {
            ns: self.ns.to_string(),
            id: inst.id.clone(),
            expected_revision: read_rev,
            instance: Some(inst),
            turns,
            retention,
            runs,
            prune_runs_before,
            durability,
        };
        (write, rings)
    }

    /// The write set that deletes instance `id`, and what to ring once it is committed: its
    /// outcome waiters, whose turns are gone.
    fn deletion(
        &self,
        read_rev: Option<u64>,
        id: &str,
        durability: Durability,
    ) -> (WriteSet, Rings) {
        let write = WriteSet {
            ns: self.ns.to_string(),
            id: id.to_owned(),
            expected_revision: read_rev,
            instance: None,
            turns: Vec::new(),
            retention: None,
            runs: Vec::new(),
            prune_runs_before: None,
            durability,
        };
        let rings = Rings {
            now: self.now(),
            due: None,
            settled: true,
            instance: instance_key(&self.ns, id),
            finishing: None,
            deliver: None,
        };
        (write, rings)
    }

    /// After a commit: count the turns it finished, ring the claims of its workflow, wake the
    /// waiters of its instance and deliver the child outcomes it queued.
    async fn ring(&self, rings: Rings) {
        if let Some((workflow_type, finishing)) = rings.finishing {
            crate::metrics::turns_finished(&workflow_type, &finishing);
        }
        if let Some((at, workflow)) = rings.due {
            self.inner.wakeups.due(&self.ns, workflow, at, rings.now);
        }
        if rings.settled {
            self.inner.outcomes.settled(rings.instance);
        }
        if let Some(id) = rings.deliver {
            self.deliver_now(&id).await;
        }
    }

    /// The loop the application routes share: read instance `id` (`NotFound` when it is
    /// missing), let `decide` check the request and change the record, and commit it guarded
    /// by the revision, deciding again from a fresh read when another write came first.
    /// `decide` is told the time and whether this is the first read (checks that need the
    /// record but not its revision, such as a message's schema, run once).
    pub(super) async fn on_instance<'a, T>(
        &'a self,
        id: &str,
        mut decide: impl FnMut(InstanceRecord, Millis, bool) -> Deciding<'a, T>,
    ) -> Result<T> {
        let mut tries = Tries::new();
        let mut first = true;
        loop {
            tries.next(id)?;
            let inst = self.load(id).await?;
            let read_rev = inst.revision;
            let now = self.now();
            let (inst, turns, answer) = match decide(inst, now, first).await? {
                InstanceDecision::Answer(answer) => return Ok(answer),
                InstanceDecision::Write(inst, turns, answer) => (inst, turns, answer),
            };
            first = false;
            let write = self.write(
                Some(read_rev),
                Record::Owned(inst),
                turns,
                Vec::new(),
                Durability::Durable,
            );
            if write.await?.landed()? {
                return Ok(answer);
            }
        }
    }
}
