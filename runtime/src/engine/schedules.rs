//! Schedules: delayed messages and recurring firings, kept in the instance record.
//!
//! A schedule's next fire time is folded into its instance's `due_at_ms` on every write
//! ([`with_schedules`]), so the schedule index and the wake-ups that already drive sleeps,
//! retries and leases also drive schedules: no timer of its own, no polling. When a claim looks
//! at an instance with a due schedule, it first admits the due firings ([`Engine::fire_due`]):
//! one commit, conditional on the instance's revision, that adds the firings' turns and
//! advances the schedules. Two claims (two engines on one PostgreSQL) that look at once both
//! decide, one commits, the other's commit conflicts, it reads the advanced schedule and admits
//! nothing. A crash before that commit loses nothing (the schedule is still due); after it,
//! the firing and the advance are both durable. The firing's message id
//! (`schedule/<name>/<fire time>`) is a second guard: the message-id index refuses a repeat.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::app_routes::new_turn;
use super::*;
use crate::protocol::firing_id;
use crate::protocol::validate::{self, Times as _};
use crate::store::Durability::Durable;
use turnwise_rules::names;

/// The longest schedule name (a one-off's name is its message id and may be up to 128).
pub(super) const NAME_MAX: usize = 64;

/// `due` with the earliest fire time of the instance's unpaused schedules folded in.
pub(super) fn with_schedules(due: Option<Millis>, inst: &InstanceRecord) -> Option<Millis> {
    let next = inst
        .schedules
        .iter()
        .filter(|s| !s.paused)
        .filter_map(|s| s.next_fire_ms)
        .min();
    match (due, next) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Whether any unpaused schedule of the instance is due at `now`.
pub(super) fn any_due(inst: &InstanceRecord, now: Millis) -> bool {
    inst.schedules
        .iter()
        .any(|s| !s.paused && s.next_fire_ms.is_some_and(|t| t <= now))
}

fn rfc3339(ms: Millis) -> String {
    crate::protocol::fire_time(ms)
}

fn parse_cron(expr: &str) -> Result<croner::Cron> {
    expr.parse::<croner::Cron>().map_err(|e| {
        Error::invalid(
            "spec.expr",
            format_args!(
                "{expr:?} is not a cron expression ({e}); write five fields (minute hour \
                 day-of-month month day-of-week, e.g. `0 3 * * *`) or six with seconds first"
            ),
        )
    })
}

/// The first occurrence of `spec` strictly after `after`; `None` when there is none.
fn next_after(spec: &ScheduleSpec, after: Millis) -> Option<Millis> {
    match spec {
        ScheduleSpec::Once { at_ms } => (*at_ms > after).then_some(*at_ms),
        ScheduleSpec::After { .. } => None,
        ScheduleSpec::Every {
            every_ms,
            anchor_ms,
        } => {
            let every = i64::try_from(*every_ms).ok()?.max(1);
            let anchor = anchor_ms.unwrap_or(0);
            if after < anchor {
                return Some(anchor);
            }
            let k = (after - anchor) / every + 1;
            anchor.checked_add(k.checked_mul(every)?)
        }
        ScheduleSpec::Cron { expr } => {
            let cron = parse_cron(expr).ok()?;
            let t = DateTime::<Utc>::from_timestamp_millis(after)?;
            cron.find_next_occurrence(&t, false)
                .ok()
                .map(|t| t.timestamp_millis())
        }
    }
}

/// The occurrence of a recurring `spec` at or before `at`, the newest; `None` when none.
fn latest_at_or_before(spec: &ScheduleSpec, at: Millis) -> Option<Millis> {
    match spec {
        ScheduleSpec::Once { at_ms } => (*at_ms <= at).then_some(*at_ms),
        ScheduleSpec::After { .. } => None,
        ScheduleSpec::Every {
            every_ms,
            anchor_ms,
        } => {
            let every = i64::try_from(*every_ms).ok()?.max(1);
            let anchor = anchor_ms.unwrap_or(0);
            (at >= anchor).then(|| anchor + (at - anchor) / every * every)
        }
        ScheduleSpec::Cron { expr } => {
            let cron = parse_cron(expr).ok()?;
            let t = DateTime::<Utc>::from_timestamp_millis(at)?;
            cron.find_previous_occurrence(&t, true)
                .ok()
                .map(|t| t.timestamp_millis())
        }
    }
}

/// Which occurrences of a due schedule to admit at `now`, oldest first, how many to count
/// as skipped, and the next fire time after them.
fn plan(s: &WorkflowSchedule, now: Millis) -> (Vec<Millis>, u64, Option<Millis>) {
    let Some(first) = s.next_fire_ms.filter(|t| *t <= now) else {
        return (Vec::new(), 0, s.next_fire_ms);
    };
    if let ScheduleSpec::Once { .. } | ScheduleSpec::After { .. } = s.spec {
        return (vec![first], 0, None);
    }
    let newest = latest_at_or_before(&s.spec, now)
        .unwrap_or(first)
        .max(first);
    let next = next_after(&s.spec, now);
    // The occurrences from `first` to `newest`, newest first, at most MAX_ALL + 1 of them
    // (enough to know whether some were left out).
    let mut due = vec![newest];
    let mut t = newest;
    while due.len() <= CatchUp::MAX_ALL && t > first {
        match previous(&s.spec, t) {
            Some(p) if p >= first => {
                due.push(p);
                t = p;
            }
            _ => break,
        }
    }
    let known = due.len() as u64;
    let total = count_between(&s.spec, first, newest)
        .unwrap_or(known)
        .max(known);
    let admit: Vec<Millis> = match s.catch_up {
        CatchUp::Skip if now - newest <= CatchUp::LATE_MS => vec![newest],
        CatchUp::Skip => Vec::new(),
        CatchUp::One => vec![newest],
        CatchUp::All => {
            due.truncate(CatchUp::MAX_ALL);
            due.reverse();
            due
        }
    };
    let skipped = total.saturating_sub(admit.len() as u64);
    (admit, skipped, next)
}

/// The occurrence of a recurring `spec` strictly before `at`.
fn previous(spec: &ScheduleSpec, at: Millis) -> Option<Millis> {
    latest_at_or_before(spec, at.checked_sub(1)?)
}

/// How many occurrences lie in `[from, to]`, where that is cheap to know (intervals);
/// `None` for cron, whose count would need a walk.
fn count_between(spec: &ScheduleSpec, from: Millis, to: Millis) -> Option<u64> {
    match spec {
        ScheduleSpec::Every { every_ms, .. } if *every_ms > 0 && to >= from => {
            Some(((to - from) as u64) / every_ms + 1)
        }
        _ => None,
    }
}

/// The schedule's name, checked: an identifier, at most 64 characters for a recurring one.
fn check_name(name: &str, once: bool) -> Result<()> {
    validate::identifier("name", name)?;
    if !once && name.len() > NAME_MAX {
        return Err(Error::invalid(
            "name",
            format_args!(
                "a recurring schedule's name is at most {NAME_MAX} characters ({} given)",
                name.len()
            ),
        ));
    }
    if once && name.starts_with(names::CONTINUATION_ID_PREFIX) {
        return Err(Error::invalid(
            "name",
            "a delayed message's id may not start with the reserved `continue-`",
        ));
    }
    Ok(())
}

/// Check a spec and fill in what the engine decides (an interval's anchor); answers its first
/// fire time.
fn check_spec(spec: &mut ScheduleSpec, now: Millis) -> Result<Millis> {
    match spec {
        ScheduleSpec::Once { at_ms } => Ok(*at_ms),
        ScheduleSpec::After { delay_ms } => {
            let at = i64::try_from(*delay_ms)
                .ok()
                .and_then(|d| now.checked_add(d))
                .ok_or_else(|| Error::invalid("spec.delay_ms", "the delay is too long"))?;
            *spec = ScheduleSpec::Once { at_ms: at };
            Ok(at)
        }
        // `every_ms` and `anchor_ms` are in range (`Times::check_times`).
        ScheduleSpec::Every { anchor_ms, .. } => {
            let anchor = *anchor_ms.get_or_insert(now);
            let first = if anchor > now {
                Some(anchor)
            } else {
                next_after(spec, now)
            };
            first.ok_or_else(|| Error::invalid("spec", "the interval has no future occurrence"))
        }
        ScheduleSpec::Cron { expr } => {
            parse_cron(expr)?;
            let expr = expr.clone();
            next_after(spec, now).ok_or_else(|| {
                Error::invalid(
                    "spec.expr",
                    format_args!("{expr:?} names no time after now; it would never fire"),
                )
            })
        }
    }
}

impl Engine {
    /// Admit the due firings of `inst`'s schedules at `now` in one commit; answers whether it
    /// committed (read again) or lost to another commit (read again too). Message ids in
    /// `taken` are already kept turns' and are not admitted again.
    pub(super) async fn fire_due(
        &self,
        mut inst: InstanceRecord,
        now: Millis,
        taken: &mut Vec<String>,
    ) -> Result<()> {
        let read_rev = inst.revision;
        let limits = &self.inner.config.limits;
        let mut turns = Vec::new();
        let mut schedules = std::mem::take(&mut inst.schedules);
        // The occurrences to admit, of every due schedule, in fire-time order (then by name).
        let mut firings: Vec<(Millis, usize)> = Vec::new();
        for (i, s) in schedules.iter_mut().enumerate().filter(|(_, s)| !s.paused) {
            let (admit, skipped, next) = plan(s, now);
            if admit.is_empty() && skipped == 0 && next == s.next_fire_ms {
                continue;
            }
            firings.extend(admit.into_iter().map(|at| (at, i)));
            s.skipped += skipped;
            s.next_fire_ms = next;
            s.updated_at_ms = now;
        }
        firings.sort_by(|a, b| (a.0, &schedules[a.1].name).cmp(&(b.0, &schedules[b.1].name)));
        for (at, i) in firings {
            let s = &mut schedules[i];
            let message_id = match s.spec {
                ScheduleSpec::Once { .. } | ScheduleSpec::After { .. } => s.name.clone(),
                _ => firing_id(&s.name, at),
            };
            if taken.contains(&message_id) {
                continue;
            }
            if inst.pending.len() >= limits.pending_messages {
                // A full inbox cannot take the firing: it is counted as skipped, and the
                // schedule moves on rather than piling up.
                s.skipped += 1;
                continue;
            }
            let mut origin = MessageOrigin::new("schedule");
            origin
                .fields
                .insert("schedule".into(), Value::String(s.name.clone()));
            origin
                .fields
                .insert("fire_time".into(), Value::String(rfc3339(at)));
            let number = inst.next_turn;
            let turn = new_turn(
                &inst,
                number,
                message_id,
                s.message.clone(),
                Some(origin),
                now,
            );
            inst.next_turn += 1;
            inst.pending.push(number);
            turns.push(turn);
            s.fired += 1;
            s.last_fire_ms = Some(at);
        }
        // A one-off that fired is gone.
        schedules.retain(|s| s.next_fire_ms.is_some());
        inst.schedules = schedules;
        if !turns.is_empty() {
            inst.due_at_ms = transitions::due_at(&inst, None, now);
        }
        match self
            .write(
                Some(read_rev),
                Record::Owned(inst),
                turns,
                Vec::new(),
                Durable,
            )
            .await?
        {
            Committed::Done | Committed::Conflict => Ok(()),
            Committed::MessageIdTaken(id) => {
                // Admitted already (a message sent directly under a delayed message's id, or
                // a firing kept from before): never twice.
                taken.push(id);
                Ok(())
            }
        }
    }

    async fn load_for_schedule(&self, workflow_id: &str) -> Result<InstanceRecord> {
        validate::identifier("workflow_id", workflow_id)?;
        self.load(workflow_id).await
    }

    /// Create a schedule (the [`Backend::create_schedule`] route).
    pub(super) async fn create_schedule_impl(
        &self,
        req: CreateScheduleRequest,
    ) -> Result<WorkflowSchedule> {
        let limits = &self.inner.config.limits;
        let once = matches!(
            req.spec,
            ScheduleSpec::Once { .. } | ScheduleSpec::After { .. }
        );
        check_name(&req.name, once)?;
        req.check_times()?;
        validate::size("message", &req.message, limits.message_bytes)?;
        validate::identifier("workflow_id", &req.workflow_id)?;
        let req = &req;
        self.on_instance(&req.workflow_id, |mut inst, now, first| {
            Box::pin(async move {
                if first {
                    // Each firing admits the message as it is: it is checked as a message is
                    // when it is sent, against the registered schema, before anything is written.
                    self.check_message_schema(&inst, &req.message).await?;
                }
                if let Some(s) = inst.schedules.iter().find(|s| s.name == req.name) {
                    if repeats(s, req) {
                        return Ok(InstanceDecision::Answer(s.clone()));
                    }
                    return Err(Error::conflict(format_args!(
                    "instance `{}` already has a schedule named `{}` with another spec, message \
                     or catch-up; delete it first or use another name",
                    inst.id, req.name
                )));
                }
                if once {
                    // A delayed message admitted already (it fired and left, or was sent directly).
                    if let Some(t) = self
                        .inner
                        .store
                        .find_message(&self.ns, &inst.id, &req.name)
                        .await?
                    {
                        if t.message == req.message {
                            return Err(Error::conflict(format_args!(
                                "message id `{}` was already admitted as turn {} of `{}`; a \
                             delayed message is admitted once",
                                req.name, t.number, inst.id
                            )));
                        }
                        return Err(Error::conflict(format_args!(
                            "message id `{}` was already admitted as turn {} of `{}` with a \
                         different message; use a new id for a new message",
                            req.name, t.number, inst.id
                        )));
                    }
                }
                if inst.schedules.len() >= limits.schedules_per_instance {
                    return Err(Error::LimitReached {
                        limit: "schedules",
                        message: format!(
                            "instance `{}` already has {} schedules (the limit); delete one first",
                            inst.id,
                            inst.schedules.len()
                        ),
                    });
                }
                let mut spec = req.spec.clone();
                let first = check_spec(&mut spec, now)?;
                let schedule = WorkflowSchedule {
                    workflow_id: inst.id.clone(),
                    name: req.name.clone(),
                    spec,
                    message: req.message.clone(),
                    catch_up: req.catch_up,
                    paused: false,
                    next_fire_ms: Some(first),
                    fired: 0,
                    skipped: 0,
                    last_fire_ms: None,
                    created_at_ms: now,
                    updated_at_ms: now,
                };
                inst.schedules.push(schedule.clone());
                inst.schedules.sort_by(|a, b| a.name.cmp(&b.name));
                let size = validate::serialized_len(&inst.schedules);
                if size > limits.schedule_bytes {
                    return Err(Error::TooLarge {
                        what: format!("schedules of `{}`", inst.id),
                        size,
                        limit: limits.schedule_bytes,
                    });
                }
                Ok(InstanceDecision::Write(inst, Vec::new(), schedule))
            })
        })
        .await
    }

    /// Read one schedule.
    pub(super) async fn get_schedule_impl(
        &self,
        workflow_id: &str,
        name: &str,
    ) -> Result<WorkflowSchedule> {
        let inst = self.load_for_schedule(workflow_id).await?;
        find(&inst, name).cloned()
    }

    /// List schedules of one instance, or of a page of instances.
    pub(super) async fn list_schedules_impl(&self, q: ListSchedulesQuery) -> Result<ScheduleList> {
        if let Some(id) = &q.workflow_id {
            let inst = self.load_for_schedule(id).await?;
            return Ok(ScheduleList {
                schedules: inst.schedules,
                next_after: None,
            });
        }
        let limit = match q.limit {
            None => 50,
            Some(n @ 1..=500) => n as usize,
            Some(n) => {
                return Err(Error::invalid(
                    "limit",
                    format_args!("{n} is outside 1-500"),
                ))
            }
        };
        let filter = crate::store::InstanceFilter {
            after: q.after,
            limit,
            ..Default::default()
        };
        let records = self.inner.store.list_instances(&self.ns, filter).await?;
        let next_after = (records.len() == limit)
            .then(|| records.last().map(|i| i.id.clone()))
            .flatten();
        let schedules = records.into_iter().flat_map(|i| i.schedules).collect();
        Ok(ScheduleList {
            schedules,
            next_after,
        })
    }

    /// Pause, resume or delete one schedule.
    pub(super) async fn control_schedule_impl(
        &self,
        req: ScheduleControlRequest,
    ) -> Result<ScheduleControlResponse> {
        validate::identifier("workflow_id", &req.workflow_id)?;
        let req = &req;
        self.on_instance(&req.workflow_id, |mut inst, now, _| {
            Box::pin(async move {
                let Some(i) = inst.schedules.iter().position(|s| s.name == req.name) else {
                    if req.action == ScheduleAction::Delete {
                        return Ok(InstanceDecision::Answer(ScheduleControlResponse {
                            schedule: None,
                            deleted: false,
                        }));
                    }
                    return Err(not_found(&inst.id, &req.name));
                };
                let answer = match req.action {
                    ScheduleAction::Delete => {
                        inst.schedules.remove(i);
                        None
                    }
                    ScheduleAction::Pause | ScheduleAction::Resume => {
                        let pause = req.action == ScheduleAction::Pause;
                        let s = &mut inst.schedules[i];
                        if s.paused == pause {
                            return Ok(InstanceDecision::Answer(ScheduleControlResponse {
                                schedule: Some(s.clone()),
                                deleted: false,
                            }));
                        }
                        s.paused = pause;
                        s.updated_at_ms = now;
                        Some(s.clone())
                    }
                };
                let answer = ScheduleControlResponse {
                    deleted: answer.is_none(),
                    schedule: answer,
                };
                Ok(InstanceDecision::Write(inst, Vec::new(), answer))
            })
        })
        .await
    }
}

/// Whether `req` repeats the request that made schedule `s` (of the same name).
fn repeats(s: &WorkflowSchedule, req: &CreateScheduleRequest) -> bool {
    s.message == req.message
        && s.catch_up == req.catch_up
        && match (&s.spec, &req.spec) {
            // The engine filled in the anchor; a repeat without one is the same.
            (
                ScheduleSpec::Every { every_ms: a, .. },
                ScheduleSpec::Every {
                    every_ms: b,
                    anchor_ms: None,
                },
            ) => a == b,
            // A delay is measured from each request: any one-off repeats it.
            (ScheduleSpec::Once { .. }, ScheduleSpec::After { .. }) => true,
            (a, b) => a == b,
        }
}

fn find<'a>(inst: &'a InstanceRecord, name: &str) -> Result<&'a WorkflowSchedule> {
    inst.schedules
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| not_found(&inst.id, name))
}

fn not_found(id: &str, name: &str) -> Error {
    Error::not_found(format_args!("schedule `{name}` of instance `{id}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every(every_ms: u64, anchor: Millis, catch_up: CatchUp, next: Millis) -> WorkflowSchedule {
        WorkflowSchedule {
            workflow_id: "w".into(),
            name: "tick".into(),
            spec: ScheduleSpec::Every {
                every_ms,
                anchor_ms: Some(anchor),
            },
            message: Value::Null,
            catch_up,
            paused: false,
            next_fire_ms: Some(next),
            fired: 0,
            skipped: 0,
            last_fire_ms: None,
            created_at_ms: anchor,
            updated_at_ms: anchor,
        }
    }

    #[test]
    fn intervals_count_from_their_anchor() {
        let spec = ScheduleSpec::Every {
            every_ms: 1000,
            anchor_ms: Some(500),
        };
        assert_eq!(next_after(&spec, 0), Some(500));
        assert_eq!(next_after(&spec, 500), Some(1500));
        assert_eq!(next_after(&spec, 1499), Some(1500));
        assert_eq!(latest_at_or_before(&spec, 2600), Some(2500));
        assert_eq!(latest_at_or_before(&spec, 499), None);
    }

    #[test]
    fn cron_is_evaluated_in_utc_with_five_or_six_fields() {
        // 2026-01-01T00:00:00Z
        let midnight = 1_767_225_600_000;
        let daily = ScheduleSpec::Cron {
            expr: "0 3 * * *".into(),
        };
        assert_eq!(next_after(&daily, midnight), Some(midnight + 3 * 3_600_000));
        let secs = ScheduleSpec::Cron {
            expr: "*/15 * * * * *".into(),
        };
        assert_eq!(next_after(&secs, midnight), Some(midnight + 15_000));
        assert_eq!(
            latest_at_or_before(&secs, midnight + 16_000),
            Some(midnight + 15_000)
        );
        assert!(parse_cron("not a cron").is_err());
    }

    #[test]
    fn catch_up_policies_after_ten_missed_occurrences() {
        // Due at 1000 and every second; looked at only at 10_500: 1000..=10_000 are due.
        let now = 10_500;
        let (admit, skipped, next) = plan(&every(1000, 0, CatchUp::One, 1000), now);
        assert_eq!((admit, skipped, next), (vec![10_000], 9, Some(11_000)));
        let (admit, skipped, _) = plan(&every(1000, 0, CatchUp::All, 1000), now);
        assert_eq!(admit, (1..=10).map(|k| k * 1000).collect::<Vec<_>>());
        assert_eq!(skipped, 0);
        // 10_000 is 500 ms late: on time for `skip`, which drops the nine before it.
        let (admit, skipped, _) = plan(&every(1000, 0, CatchUp::Skip, 1000), now);
        assert_eq!((admit, skipped), (vec![10_000], 9));
        // An hourly schedule looked at 10 minutes late: `skip` admits nothing.
        let (admit, skipped, next) =
            plan(&every(3_600_000, 0, CatchUp::Skip, 3_600_000), 4_200_000);
        assert_eq!((admit, skipped, next), (vec![], 1, Some(7_200_000)));
    }

    #[test]
    fn all_is_bounded() {
        let (admit, skipped, _) = plan(&every(1000, 0, CatchUp::All, 1000), 100_000);
        assert_eq!(admit.len(), CatchUp::MAX_ALL);
        assert_eq!(*admit.last().unwrap(), 100_000);
        assert_eq!(skipped, 100 - CatchUp::MAX_ALL as u64);
    }

    #[test]
    fn firing_ids_name_the_schedule_and_the_time() {
        assert_eq!(
            firing_id("nightly", 1_767_225_600_000),
            "schedule/nightly/2026-01-01T00:00:00.000Z"
        );
    }
}
