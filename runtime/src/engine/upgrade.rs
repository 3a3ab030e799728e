//! Moving instances to another version (turnwise extensions): the live compatibility check
//! (`compat_live`) and the upgrade (`upgrade_instances`). The verdicts are `compat.rs`'s; this
//! reads the instances a page at a time and, for an upgrade, checks each one again and moves
//! it in its own conditional commit.

use std::sync::Arc;

use tokio::task::JoinSet;

use super::app_routes::{due_after_control, settle_head, upsert};
use super::compat::{Judge, Judged, Manifests};
use super::*;
use crate::protocol::validate;
use crate::store::Durability::Durable;
use crate::store::InstanceFilter;

/// Instances read from the store per page.
const PAGE: usize = 256;
/// Instances a bulk upgrade moves at once, each in its own commit.
const PARALLEL: usize = 16;
/// The longest `by`, in characters.
const BY_CHARS: usize = 128;

/// What an upgrade did with one instance.
enum Moved {
    Upgraded(Upgraded),
    Unchanged(String),
    Refused(Refused),
}

impl Moved {
    fn record(self, out: &mut UpgradeResponse) {
        match self {
            Moved::Upgraded(u) => out.upgraded.push(u),
            Moved::Unchanged(id) => out.unchanged.push(id),
            Moved::Refused(r) => out.refused.push(r),
        }
    }
}

/// What an upgrade request names.
enum Target<'r> {
    /// One instance, of this type when one is given.
    One(&'r str, Option<&'r str>),
    /// Every instance of this type that can move.
    All(&'r str),
}

/// Check an upgrade request's fields and tell what it names.
fn check_upgrade(req: &UpgradeRequest) -> Result<Target<'_>> {
    validate::identifier("to_version", &req.to_version)?;
    if let Some(by) = &req.by {
        if by.trim().is_empty() || by.chars().count() > BY_CHARS || by.chars().any(char::is_control)
        {
            return Err(Error::invalid(
                "by",
                format_args!(
                    "who asks must be 1-{BY_CHARS} characters without control characters, or absent"
                ),
            ));
        }
    }
    let both = "name one instance (`workflow_id`) or every instance of a type that can move \
                (`workflow_type` with `all_upgradable: true`), not both";
    match (req.workflow_id.as_deref(), req.workflow_type.as_deref()) {
        (Some(_), _) if req.all_upgradable => Err(Error::invalid("all_upgradable", both)),
        (Some(id), t) => {
            validate::identifier("workflow_id", id)?;
            if let Some(t) = t {
                validate::identifier("workflow_type", t)?;
            }
            Ok(Target::One(id, t))
        }
        (None, Some(t)) if req.all_upgradable => {
            validate::identifier("workflow_type", t)?;
            Ok(Target::All(t))
        }
        (None, Some(_)) => Err(Error::invalid(
            "all_upgradable",
            "to move every instance of `workflow_type` that can move, set `all_upgradable: \
             true`; to move one instance, name it with `workflow_id`",
        )),
        (None, None) => Err(Error::invalid(
            "workflow_id",
            "name the instance to move (`workflow_id`), or a type whose instances that can \
             move should (`workflow_type` with `all_upgradable: true`)",
        )),
    }
}

/// Why an upgrade leaves `inst` where it is, given its verdict: pinned, or held by a worker.
fn refusal(inst: &InstanceRecord, judged: &Judged) -> Option<Refused> {
    let refused = |reason: CompatReason, retryable| Refused {
        workflow_id: inst.id.clone(),
        version: inst.version.clone(),
        verdict: judged.verdict,
        reason,
        retryable,
    };
    if let Some(reason) = &judged.reason {
        return Some(refused(reason.clone(), false));
    }
    let (worker, until) = judged.held.as_ref()?;
    let message = format!(
        "turn {} is held by worker `{worker}` under a lease (until {until} ms); retry the \
         upgrade once that attempt ends (a sleep, a signal wait, a failure or the turn's end \
         releases it)",
        judged.turn.unwrap_or_default()
    );
    Some(refused(CompatReason::new(ReasonCode::Held, message), true))
}

/// The answer for an instance already on `to_version`: the upgrade that moved it there, when
/// its newest move was one (a repeat answers it and records nothing), else unchanged.
fn already_on(inst: &InstanceRecord, to_version: &str) -> Moved {
    let last_move = inst
        .events
        .iter()
        .rev()
        .find(|e| e.action == "upgrade" || e.action == "resume");
    match last_move {
        Some(e) if e.to_version.as_deref() == Some(to_version) => Moved::Upgraded(Upgraded {
            workflow_id: inst.id.clone(),
            from_version: e.from_version.clone().unwrap_or_default(),
            to_version: to_version.to_owned(),
            action: e.action.clone(),
            verdict: e
                .detail
                .as_deref()
                .and_then(Verdict::parse)
                .unwrap_or(Verdict::Unknown),
            turn: e.turn,
            at_ms: e.at_ms,
            by: e.by.clone(),
        }),
        _ => Moved::Unchanged(inst.id.clone()),
    }
}

/// Move `inst` (and its unfinished turns, which run on the instance's version) to
/// `to_version` (which may be its own version, to resume a suspended head): a suspended head
/// is resumed, queued again with its report cleared. Records the event and answers it.
fn move_to(
    inst: &mut InstanceRecord,
    head: Option<&mut TurnRecord>,
    turns: &mut Vec<TurnRecord>,
    judged: &Judged,
    to_version: &str,
    by: Option<&str>,
    now: Millis,
) -> Upgraded {
    let from = std::mem::replace(&mut inst.version, to_version.to_owned());
    let mut action = "upgrade";
    if let Some(h) = head.filter(|h| judged.suspended && h.status == TurnStatus::Suspended) {
        h.status = TurnStatus::Queued;
        h.mismatch = None;
        h.ready_at_ms = now;
        h.resume = false;
        transitions::touch(h, now);
        upsert(turns, h.clone());
        action = "resume";
    }
    inst.record_event(InstanceEvent {
        at_ms: now,
        action: action.to_owned(),
        by: by.map(str::to_owned),
        from_version: Some(from.clone()),
        to_version: Some(to_version.to_owned()),
        turn: judged.turn,
        detail: Some(judged.verdict.as_str().to_owned()),
    });
    Upgraded {
        workflow_id: inst.id.clone(),
        from_version: from,
        to_version: to_version.to_owned(),
        action: action.to_owned(),
        verdict: judged.verdict,
        turn: judged.turn,
        at_ms: now,
        by: by.map(str::to_owned),
    }
}

impl Engine {
    /// `compat_live`: every instance of the type not on the target, judged as it is now.
    pub(super) async fn compat_live_impl(&self, q: LiveCompatQuery) -> Result<LiveCompat> {
        validate::identifier("workflow_type", &q.workflow_type)?;
        validate::identifier("to_version", &q.to_version)?;
        let manifests = self.manifests(&q.workflow_type).await?;
        let mut judge = Judge::new(&q.workflow_type, &q.to_version, manifests);
        let mut out = LiveCompat {
            workflow_type: q.workflow_type.clone(),
            to_version: q.to_version.clone(),
            checked: 0,
            on_target: 0,
            counts: VerdictCounts::default(),
            instances: Vec::new(),
            checked_at_ms: self.now(),
        };
        let mut after = None;
        loop {
            let page = self.type_page(&q.workflow_type, after.take()).await?;
            let full = page.len() == PAGE;
            after = page.last().map(|i| i.id.clone());
            let (on_target, others): (Vec<_>, Vec<_>) =
                page.into_iter().partition(|i| i.version == q.to_version);
            out.on_target += on_target.len() as u64;
            for (inst, head) in self.settled_page(others).await? {
                let status = transitions::instance_status(&inst, head.as_ref(), self.now());
                let entry = judge.judge(&inst, head.as_ref()).entry(&inst, status);
                out.counts.add(entry.verdict);
                out.instances.push(entry);
            }
            if !full {
                break;
            }
        }
        out.checked = out.instances.len() as u64;
        Ok(out)
    }

    /// One page of the instances of `workflow_type`, by id, after `after`.
    async fn type_page(
        &self,
        workflow_type: &str,
        after: Option<String>,
    ) -> Result<Vec<InstanceRecord>> {
        let filter = InstanceFilter {
            workflow_type: Some(workflow_type.to_owned()),
            version: None,
            after,
            limit: PAGE,
        };
        Ok(self.inner.store.list_instances(&self.ns, filter).await?)
    }

    /// `inst` with its head as of now: settled (an expired lease ended, a due sleep woken),
    /// and the turns settling changed, to write if the caller commits.
    async fn settled(
        &self,
        mut inst: InstanceRecord,
    ) -> Result<(InstanceRecord, Option<TurnRecord>, Vec<TurnRecord>)> {
        let now = self.now();
        let mut head = self.load_head(&inst).await?;
        let turns = settle_head(&mut inst, &mut head, now, &self.inner.config);
        if head.is_none() && !inst.pending.is_empty() {
            // The head ran out of attempts and was skipped: the next one is the head now.
            head = self.load_head(&inst).await?;
        }
        Ok((inst, head, turns))
    }

    /// [`settled`](Self::settled) for each of `page`, in order, the heads read concurrently
    /// (a store several processes share answers each read in a round trip).
    async fn settled_page(
        &self,
        page: Vec<InstanceRecord>,
    ) -> Result<Vec<(InstanceRecord, Option<TurnRecord>)>> {
        let mut reads = JoinSet::new();
        let mut out: Vec<Option<(InstanceRecord, Option<TurnRecord>)>> = Vec::new();
        for (i, inst) in page.into_iter().enumerate() {
            if inst.pending.is_empty() {
                out.push(Some((inst, None)));
                continue;
            }
            out.push(None);
            let engine = self.clone();
            reads.spawn(async move {
                let (inst, head, _) = engine.settled(inst).await?;
                Ok::<_, Error>((i, inst, head))
            });
        }
        while let Some(read) = reads.join_next().await {
            let (i, inst, head) =
                read.map_err(|e| Error::store(format!("a read of an instance failed: {e}")))??;
            out[i] = Some((inst, head));
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// `upgrade_instances`.
    pub(super) async fn upgrade_impl(&self, req: UpgradeRequest) -> Result<UpgradeResponse> {
        let target = check_upgrade(&req)?;
        let mut out = UpgradeResponse {
            to_version: req.to_version.clone(),
            ..UpgradeResponse::default()
        };
        match target {
            Target::One(id, workflow_type) => {
                let inst = self.load(id).await?;
                if let Some(t) = workflow_type.filter(|t| *t != inst.workflow_type) {
                    return Err(Error::conflict(format_args!(
                        "instance `{id}` is a `{}`, not a `{t}`; an upgrade moves an instance to \
                         another version of its own workflow, never to another workflow",
                        inst.workflow_type
                    )));
                }
                let manifests = self.manifests(&inst.workflow_type).await?;
                let mut judge = Judge::new(&inst.workflow_type, &req.to_version, manifests);
                let by = req.by.as_deref();
                self.upgrade_one(id, &mut judge, &req.to_version, by)
                    .await?
                    .record(&mut out);
            }
            Target::All(workflow_type) => self.upgrade_all(workflow_type, &req, &mut out).await?,
        }
        Ok(out)
    }

    /// Move instance `id` to `to_version` if, read again now, it can move: decided on the
    /// record as it stands and committed on the condition that it still stands so, else read
    /// and decided again.
    async fn upgrade_one(
        &self,
        id: &str,
        judge: &mut Judge,
        to_version: &str,
        by: Option<&str>,
    ) -> Result<Moved> {
        let mut tries = Tries::new();
        loop {
            tries.next(id)?;
            let inst = self.load(id).await?;
            if inst.workflow_type != judge.workflow_type() {
                return Err(Error::conflict(format_args!(
                    "instance `{id}` is a `{}` now, not a `{}` (it was deleted and created \
                     again); check it again",
                    inst.workflow_type,
                    judge.workflow_type()
                )));
            }
            let read_rev = inst.revision;
            let now = self.now();
            let on_target = inst.version == to_version;
            let (mut inst, mut head, mut turns) = self.settled(inst).await?;
            let suspended = head
                .as_ref()
                .is_some_and(|h| h.status == TurnStatus::Suspended);
            // On the target already: done, unless its head is suspended, which an upgrade to
            // its own version resumes when the version's manifest (as registered now, after
            // a fix deployed under the same version) accepts the saved steps.
            if on_target && !suspended {
                return Ok(already_on(&inst, to_version));
            }
            let judged = judge.judge(&inst, head.as_ref());
            if let Some(refused) = refusal(&inst, &judged) {
                return Ok(Moved::Refused(refused));
            }
            let moved = move_to(
                &mut inst,
                head.as_mut(),
                &mut turns,
                &judged,
                to_version,
                by,
                now,
            );
            inst.due_at_ms = due_after_control(&inst, head, now);
            let write = self.write(
                Some(read_rev),
                Record::Kept(&mut inst),
                turns,
                Vec::new(),
                Durable,
            );
            if write.await?.landed()? {
                return Ok(Moved::Upgraded(moved));
            }
        }
    }

    /// Move every instance of `workflow_type` not on the target that can move: each is judged
    /// from the page it was read in (the pinned and held ones are refused there), then checked
    /// again and moved in its own commit, [`PARALLEL`] at a time.
    async fn upgrade_all(
        &self,
        workflow_type: &str,
        req: &UpgradeRequest,
        out: &mut UpgradeResponse,
    ) -> Result<()> {
        let to = &req.to_version;
        let manifests = self.manifests(workflow_type).await?;
        let mut judge = Judge::new(workflow_type, to, manifests.clone());
        let mut after = None;
        loop {
            let page = self.type_page(workflow_type, after.take()).await?;
            let full = page.len() == PAGE;
            after = page.last().map(|i| i.id.clone());
            let mut movable = Vec::new();
            let others = page.into_iter().filter(|i| &i.version != to).collect();
            for (inst, head) in self.settled_page(others).await? {
                match refusal(&inst, &judge.judge(&inst, head.as_ref())) {
                    Some(refused) => out.refused.push(refused),
                    None => movable.push(inst.id),
                }
            }
            for moved in self
                .upgrade_each(movable, &manifests, workflow_type, req)
                .await?
            {
                moved.record(out);
            }
            if !full {
                break;
            }
        }
        out.upgraded
            .sort_by(|a, b| a.workflow_id.cmp(&b.workflow_id));
        out.refused
            .sort_by(|a, b| a.workflow_id.cmp(&b.workflow_id));
        Ok(())
    }

    /// [`upgrade_one`](Self::upgrade_one) for each of `ids`, [`PARALLEL`] at a time. An
    /// instance deleted in the meantime (or created again as another type) is left out.
    async fn upgrade_each(
        &self,
        ids: Vec<String>,
        manifests: &Manifests,
        workflow_type: &str,
        req: &UpgradeRequest,
    ) -> Result<Vec<Moved>> {
        let mut running = JoinSet::new();
        let mut done = Vec::with_capacity(ids.len());
        let collect = |joined: Option<std::result::Result<Result<Moved>, _>>,
                       done: &mut Vec<Moved>|
         -> Result<()> {
            match joined {
                Some(Ok(Ok(moved))) => done.push(moved),
                // Deleted since it was listed (and perhaps created again as another type).
                Some(Ok(Err(Error::NotFound { .. } | Error::Conflict { .. }))) | None => {}
                Some(Ok(Err(e))) => return Err(e),
                Some(Err(e)) => return Err(Error::store(format!("an upgrade task failed: {e}"))),
            }
            Ok(())
        };
        let (to, by): (Arc<str>, Option<Arc<str>>) = (
            Arc::from(req.to_version.as_str()),
            req.by.as_deref().map(Arc::from),
        );
        for id in ids {
            if running.len() >= PARALLEL {
                collect(running.join_next().await, &mut done)?;
            }
            let engine = self.clone();
            let mut judge = Judge::new(workflow_type, &to, manifests.clone());
            let (to, by) = (to.clone(), by.clone());
            running.spawn(async move {
                engine
                    .upgrade_one(&id, &mut judge, &to, by.as_deref())
                    .await
            });
        }
        while !running.is_empty() {
            collect(running.join_next().await, &mut done)?;
        }
        Ok(done)
    }
}
