//! The protocol's calls on the engine: the one `impl Backend for Engine`, and the
//! [`WorkerBackend`] calls that answer less or chain two writes.
//!
//! Each method is one route of the protocol, read top to bottom: check the input, then load,
//! decide and commit in a loop that retries on a conflicting revision. The decisions themselves
//! are helpers grouped by concern: [`transitions`](super::transitions) (pure rules on records:
//! settling expired leases, finishing turns, leasing, views), `app_routes` (admission: reserved
//! names, new turns, sizes, operator actions), `worker_routes` (the lease checks of worker
//! calls) and `claim` (choosing an inbox head and preparing it for the lease).

use std::time::Duration;

use serde_json::{json, Value};

use super::claim::{check_claim, SCAN};
use super::schemas::Sender;
use super::transitions;
use turnwise_rules::durations::RETRY_AT_AHEAD;
use turnwise_rules::{limits, names};

use super::app_routes::{
    control_turn_number, due_after_control, new_turn, reserved_type, settle_head, turn_size,
    ControlChanges, ControlEffect,
};
use super::worker_routes::{check_results, next_position, steps_limit, Decision};
use super::*;
use crate::protocol::validate::{self, Times as _};
use crate::store::Durability::{Durable, Relaxed};
use crate::store::{InstanceFilter, RunFilter, TurnRange, HOUR_MS};

/// The most hours `run_stats` covers: the 30 days runs are kept by default.
const RUN_STATS_MAX_HOURS: u32 = 720;

/// The page size of a listing: `limit`, else 50 (or `max` when smaller), at most `max`.
fn page_limit(limit: Option<u32>, max: u32) -> Result<usize> {
    let n = limit.unwrap_or(limits::PAGE_DEFAULT.min(max));
    validate::range("limit", n.into(), 1, max.into())?;
    Ok(n as usize)
}

#[async_trait]
impl Backend for Engine {
    async fn create_instance(&self, req: CreateInstanceRequest) -> Result<WorkflowInstance> {
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
        // The default lease is checked as if the request had named it.
        let mut req = req;
        let lease_ms = *req.lease_ms.get_or_insert(cfg.default_lease_ms);
        req.check_times()?;
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
            let new = transitions::NewInstance {
                id: &req.id,
                workflow_type: &req.workflow_type,
                version: &req.version,
                state: &req.state,
                lease_ms,
                max_attempts,
                on_exhausted: req.on_exhausted.unwrap_or(OnExhausted::Block),
            };
            let mut inst = transitions::new_instance(&self.ns, new, now);
            if self
                .write(
                    None,
                    Record::Kept(&mut inst),
                    Vec::new(),
                    Vec::new(),
                    Durable,
                )
                .await?
                .landed()?
            {
                return Ok(transitions::instance_view(&inst, None, now));
            }
        }
    }

    async fn send_message(&self, req: MessageRequest) -> Result<WorkflowTurn> {
        self.send_message_as(req, transitions::turn_view).await
    }

    async fn get_instance(&self, id: &str) -> Result<WorkflowInstance> {
        validate::identifier("id", id)?;
        let inst = self.load(id).await?;
        self.view_instance(inst).await
    }

    async fn list_instances(&self, q: ListInstancesQuery) -> Result<InstanceList> {
        let limit = page_limit(q.limit, limits::PAGE_MAX)?;
        let filter = InstanceFilter {
            after: q.after,
            limit,
            ..Default::default()
        };
        let records = self.inner.store.list_instances(&self.ns, filter).await?;
        let next_after = (records.len() == limit)
            .then(|| records.last().map(|i| i.id.clone()))
            .flatten();
        let mut instances = Vec::with_capacity(records.len());
        for inst in records {
            instances.push(self.view_instance(inst).await?);
        }
        Ok(InstanceList {
            instances,
            next_after,
        })
    }

    async fn instance_inbox(&self, q: InboxQuery) -> Result<InboxResponse> {
        validate::identifier("id", &q.id)?;
        let limit = page_limit(q.limit, limits::PAGE_MAX)?;
        let mut inst = self.load(&q.id).await?;
        let now = self.now();
        let range = TurnRange {
            finished: false,
            after: q.after,
            limit,
        };
        let mut turns = self
            .inner
            .store
            .list_turns(&self.ns, &inst.id, range)
            .await?;
        let mut head = None;
        if let Some(first) = turns
            .first_mut()
            .filter(|t| inst.pending.first() == Some(&t.number))
        {
            transitions::settle(&mut inst, first, now, &self.inner.config);
            head = Some(first.clone());
        }
        turns.retain(|t| !t.is_finished());
        let status = match head {
            Some(_) => transitions::instance_status(&inst, head.as_ref(), now),
            None => self.view_instance(inst.clone()).await?.status,
        };
        let next_after = (turns.len() == limit)
            .then(|| turns.last().map(|t| t.number))
            .flatten();
        let oldest = self.inner.store.list_turns(
            &self.ns,
            &inst.id,
            TurnRange {
                finished: false,
                after: None,
                limit: 1,
            },
        );
        let oldest_received_at_ms = oldest.await?.first().map(|t| t.created_at_ms);
        let newest = match inst.pending.last() {
            Some(&n) => self
                .inner
                .store
                .load_turn(&self.ns, &inst.id, n)
                .await?
                .map(|t| t.created_at_ms),
            None => None,
        };
        Ok(InboxResponse {
            workflow_id: inst.id.clone(),
            workflow_type: inst.workflow_type.clone(),
            version: inst.version.clone(),
            status,
            pending_messages: inst.pending.len() as u64,
            messages: turns
                .iter()
                .map(|t| transitions::inbox_entry(t, q.payloads))
                .collect(),
            next_after,
            oldest_received_at_ms,
            newest_received_at_ms: newest,
        })
    }

    async fn type_inbox(&self, q: TypeInboxQuery) -> Result<TypeInboxResponse> {
        validate::identifier("workflow_type", &q.workflow_type)?;
        if let Some(v) = &q.version {
            validate::identifier("version", v)?;
        }
        let limit = page_limit(q.limit, limits::PAGE_MAX)?;
        let store = &self.inner.store;
        let (identities, with_messages) = store
            .count_instances(&self.ns, &q.workflow_type, q.version.as_deref())
            .await?;
        let filter = InstanceFilter {
            workflow_type: Some(q.workflow_type.clone()),
            version: q.version.clone(),
            after: q.after,
            limit,
        };
        let records = store.list_instances(&self.ns, filter).await?;
        let next_after = (records.len() == limit)
            .then(|| records.last().map(|i| i.id.clone()))
            .flatten();
        let now = self.now();
        let mut instances = Vec::with_capacity(records.len());
        for mut inst in records {
            let mut head = self.load_head(&inst).await?;
            if let Some(h) = head.as_mut() {
                transitions::settle(&mut inst, h, now, &self.inner.config);
            }
            instances.push(TypeInboxEntry {
                workflow_id: inst.id.clone(),
                version: inst.version.clone(),
                status: transitions::instance_status(&inst, head.as_ref(), now),
                pending_messages: inst.pending.len() as u64,
                oldest_received_at_ms: head.as_ref().map(|h| h.created_at_ms),
                head: head.as_ref().map(|h| transitions::inbox_entry(h, false)),
            });
        }
        Ok(TypeInboxResponse {
            workflow_type: q.workflow_type,
            version: q.version,
            identities,
            with_messages,
            instances,
            next_after,
        })
    }

    async fn history(&self, q: HistoryQuery) -> Result<HistoryResponse> {
        validate::identifier("id", &q.id)?;
        let limit = page_limit(q.limit, 50)?;
        let inst = self.load(&q.id).await?;
        let range = TurnRange {
            finished: true,
            after: q.after,
            limit,
        };
        let turns = self
            .inner
            .store
            .list_turns(&self.ns, &inst.id, range)
            .await?;
        let next_after = (turns.len() == limit)
            .then(|| turns.last().map(|t| t.number))
            .flatten();
        Ok(HistoryResponse {
            turns: turns
                .iter()
                .map(|t| transitions::turn_view(&inst, t))
                .collect(),
            next_after,
        })
    }

    /// Keep the document in the store ([`Engine::register_schema_document`]); messages and
    /// signals of that type and version are checked against it from now on (with the
    /// `schema-validation` feature).
    async fn register_schema(&self, schema: &SchemaDocument) -> Result<()> {
        self.register_schema_document(schema.clone())
            .await
            .map(drop)
    }

    async fn runs(&self, q: RunsQuery) -> Result<RunPage> {
        let limit = page_limit(q.limit, 100)?;
        if let Some(id) = &q.id {
            validate::identifier("id", id)?;
        }
        if let Some(cursor) = &q.cursor {
            if cursor.is_empty() || cursor.len() > 512 {
                return Err(Error::invalid(
                    "cursor",
                    "pass the `next_cursor` of the previous page as it was",
                ));
            }
        }
        let filter = RunFilter {
            instance: q.id,
            before: q.cursor,
            limit: limit + 1,
        };
        let mut runs = self.inner.store.list_runs(&self.ns, filter).await?;
        let has_more = runs.len() > limit;
        runs.truncate(limit);
        let next_cursor = has_more
            .then(|| runs.last().map(|r| r.id.clone()))
            .flatten();
        Ok(RunPage {
            runs,
            next_cursor,
            has_more,
        })
    }

    async fn run(&self, run_id: &str) -> Result<WorkflowRun> {
        if run_id.is_empty() || run_id.len() > 512 {
            return Err(Error::invalid(
                "run",
                "name a run by its id (a run's `id`, e.g. from the runs listing)",
            ));
        }
        self.inner
            .store
            .load_run(&self.ns, run_id)
            .await?
            .ok_or_else(|| Error::not_found(format_args!("run `{run_id}`")))
    }

    async fn run_stats(&self, hours: u32) -> Result<RunStats> {
        validate::range("hours", hours.into(), 1, RUN_STATS_MAX_HOURS.into())?;
        let now = self.now();
        let this_hour = now.div_euclid(HOUR_MS) * HOUR_MS;
        let since_ms = this_hour - (Millis::from(hours) - 1) * HOUR_MS;
        let counts = self.inner.store.count_runs(&self.ns, since_ms).await?;
        let by_hour = (0..Millis::from(hours))
            .map(|i| {
                let start_ms = since_ms + i * HOUR_MS;
                let outcomes: std::collections::BTreeMap<String, u64> = counts
                    .iter()
                    .filter(|c| c.hour_ms == start_ms)
                    .map(|c| (c.outcome.clone(), c.runs))
                    .collect();
                RunHour {
                    start_ms,
                    runs: outcomes.values().sum(),
                    outcomes,
                }
            })
            .collect();
        Ok(RunStats {
            hours,
            since_ms,
            by_hour,
        })
    }

    async fn turn(&self, q: TurnQuery) -> Result<WorkflowTurn> {
        let (inst, turn) = self.settled_turn(&q).await?;
        Ok(transitions::turn_view(&inst, &turn))
    }

    async fn await_turn(&self, q: TurnQuery, wait: Duration) -> Result<WorkflowTurn> {
        self.await_turn_as(q, wait, transitions::turn_view).await
    }

    async fn control(&self, req: ControlRequest) -> Result<WorkflowInstance> {
        validate::identifier("workflow_id", &req.workflow_id)?;
        validate::by(req.by.as_deref())?;
        let number = control_turn_number(&req)?;
        let mut tries = Tries::new();
        loop {
            tries.next(&req.workflow_id)?;
            let mut inst = self.load(&req.workflow_id).await?;
            let read_rev = inst.revision;
            let now = self.now();
            let mut head = self.load_head(&inst).await?;
            // Decide on the head as it stands now (an expired lease may have exhausted it).
            let mut turns = settle_head(&mut inst, &mut head, now, &self.inner.config);
            let changes = ControlChanges {
                inst: &mut inst,
                head: &mut head,
                turns: &mut turns,
                now,
            };
            if self.apply_control(&req, number, changes).await? == ControlEffect::Nothing {
                return self.view_instance(inst).await;
            }
            inst.due_at_ms = due_after_control(&inst, head, now);
            if self
                .write(
                    Some(read_rev),
                    Record::Kept(&mut inst),
                    turns,
                    Vec::new(),
                    Durable,
                )
                .await?
                .landed()?
            {
                return self.view_instance(inst).await;
            }
        }
    }

    async fn delete_instance(&self, req: DeleteRequest) -> Result<DeleteResponse> {
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
                    self.inner
                        .outcomes
                        .settled(super::instance_key(&self.ns, &req.workflow_id));
                    return Ok(DeleteResponse { deleted });
                }
                loaded => loaded?,
            };
            let Some(inst) = loaded else {
                return Ok(DeleteResponse { deleted: false });
            };
            let deleted = Record::Deleted(&inst.id);
            match self
                .write(
                    Some(inst.revision),
                    deleted,
                    Vec::new(),
                    Vec::new(),
                    Durable,
                )
                .await?
            {
                Committed::Done => return Ok(DeleteResponse { deleted: true }),
                Committed::Conflict => continue,
                Committed::MessageIdTaken(message_id) => {
                    return Err(Error::store_caused(
                        format_args!("deleting `{}`", inst.id),
                        CommitError::MessageIdTaken { message_id },
                    ))
                }
            }
        }
    }

    async fn claim(&self, req: ClaimRequest) -> Result<ClaimResponse> {
        check_claim(&req)?;
        let wait = Duration::from_millis(req.wait_ms).min(self.inner.config.max_claim_wait);
        let give_up = tokio::time::Instant::now() + wait;
        let store = &self.inner.store;
        let ticket = self.inner.wakeups.join(&self.ns, &req.workflows);
        loop {
            // Armed before scanning, so a ring during the scan makes it look again at once.
            let rung = ticket.bell().notified();
            tokio::pin!(rung);
            rung.as_mut().enable();
            let now = self.now();
            for id in store.due(&self.ns, &req.workflows, now, SCAN).await? {
                let Some(_deciding) = self.inner.claiming.decide(&self.ns, &id) else {
                    continue;
                };
                match self.try_claim(&id, &req).await {
                    Ok(Some(task)) => {
                        crate::metrics::claim_granted(&task.workflow_type, task.turn.attempt);
                        return Ok(ClaimResponse { task: Some(task) });
                    }
                    Ok(None) => {}
                    // A quarantined instance: the store logged it and took it off the
                    // schedule; the claim goes on with the others.
                    Err(Error::Unreadable { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            if tokio::time::Instant::now() >= give_up {
                crate::metrics::claim_empty();
                return Ok(ClaimResponse { task: None });
            }
            let next_due = store.next_due(&self.ns, &req.workflows).await?;
            let until = ticket.sleep(next_due);
            let timer = async {
                match until {
                    Some(at) if at > now => self.inner.clock.sleep_until(at).await,
                    // Something is due but was not claimable (held by a racing claim): look again
                    // after the commits in flight, without spinning.
                    Some(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = rung => {}
                () = timer => {}
                () = tokio::time::sleep_until(give_up) => {}
            }
            ticket.scanning();
        }
    }

    async fn operation(&self, req: OperationRequest) -> Result<WorkflowTurn> {
        self.operation_as(req, transitions::turn_view).await
    }

    async fn progress(&self, req: ProgressRequest) -> Result<WorkflowTurn> {
        self.progress_as(req, transitions::turn_view).await
    }

    async fn checkpoint(&self, req: CheckpointRequest) -> Result<WorkflowTurn> {
        self.checkpoint_as(req, transitions::turn_view).await
    }

    async fn wait_signal(&self, req: WaitSignalRequest) -> Result<WorkflowTurn> {
        let limits = &self.inner.config.limits;
        validate::identifier("key", &req.key)?;
        validate::identifier("name", &req.name)?;
        req.check_times()?;
        steps_limit(req.position, limits.steps_per_turn)?;
        self.on_turn(&req.lease, transitions::turn_view, |inst, turn, now| {
            let repeat = turn.token.as_deref() == Some(req.lease.token.as_str())
                && turn.steps.get(req.position as usize).is_some_and(|s| {
                    s.key == req.key
                        && s.kind == CheckpointKind::Signal
                        && s.signal_name.as_deref() == Some(req.name.as_str())
                        && s.delay_ms == Some(req.timeout_ms)
                });
            if repeat {
                return Ok(Decision::Answer);
            }
            transitions::check_lease(&inst.id, turn, &req.lease.token, now)?;
            next_position(&inst.id, turn, req.position, &req.key)?;
            let mut step = StepCheckpoint {
                key: req.key.clone(),
                kind: CheckpointKind::Signal,
                output: Value::Null,
                at_ms: now,
                delay_ms: Some(req.timeout_ms),
                signal_name: Some(req.name.clone()),
                wake_at_ms: None,
            };
            // Signals are kept in arrival order, so the first unconsumed match is the oldest.
            if let Some(sig) = turn
                .signals
                .iter_mut()
                .find(|s| s.consumed_by.is_none() && s.name == req.name)
            {
                sig.consumed_by = Some(req.key.clone());
                step.output = json!({"received": true, "value": sig.value});
            } else {
                let wake = now.saturating_add(req.timeout_ms as Millis);
                step.wake_at_ms = Some(wake);
                transitions::release(turn, now, RunEnd::WaitingSignal);
                turn.status = TurnStatus::Waiting;
                turn.ready_at_ms = wake;
                turn.resume = true;
            }
            turn.steps.push(step);
            transitions::touch(turn, now);
            turn_size(turn, limits.turn_bytes)?;
            Ok(Decision::Write(Durable, Vec::new()))
        })
        .await
    }

    async fn signal(&self, req: SignalRequest) -> Result<WorkflowTurn> {
        let limits = &self.inner.config.limits;
        validate::identifier("workflow_id", &req.workflow_id)?;
        validate::identifier("id", &req.id)?;
        validate::identifier("name", &req.name)?;
        validate::size("value", &req.value, limits.signal_bytes)?;
        self.put_signal(&req, Sender::Client).await
    }

    async fn complete(&self, req: CompleteRequest) -> Result<WorkflowTurn> {
        self.complete_as(req, transitions::turn_view).await
    }

    async fn fail(&self, req: FailRequest) -> Result<WorkflowTurn> {
        req.check_times()?;
        if req.mismatch.is_some() {
            // Suspend the turn with the report instead (suspend.rs).
            return self.suspend(req).await;
        }
        if req.non_retryable && req.retry_at_ms.is_some() {
            return Err(Error::invalid(
                "retry_at_ms",
                "cannot be combined with non_retryable: true",
            ));
        }
        check_results(req.results.as_ref())?;
        let error: String = req.error.chars().take(limits::ERROR_CHARS).collect();
        let config = &self.inner.config;
        self.on_turn(&req.lease, transitions::turn_view, |inst, turn, now| {
            transitions::check_lease(&inst.id, turn, &req.lease.token, now)?;
            if let (Some(usage), Some(run)) = (&req.usage, turn.run.as_mut()) {
                run.usage = Some(usage.clone());
            }
            if let Some(at) = req.retry_at_ms {
                let at = at.clamp(
                    now.saturating_add(RETRY_AT_AHEAD.min as Millis),
                    now.saturating_add(RETRY_AT_AHEAD.max as Millis),
                );
                transitions::release(turn, now, RunEnd::Waiting);
                turn.status = TurnStatus::Waiting;
                turn.ready_at_ms = at;
                turn.wait = Some(TurnWait {
                    since_ms: now,
                    until_ms: at,
                    reason: None,
                });
                turn.resume = true;
                turn.error = Some(error.clone());
            } else if req.non_retryable {
                turn.error = Some(error.clone());
                turn.resume = false;
                transitions::exhaust(inst, turn, now);
            } else {
                transitions::fail_attempt(inst, turn, now, error.clone(), config);
            }
            if let Some(ending) = turn.run_ending.as_mut() {
                ending.results = req.results.clone();
            }
            transitions::touch(turn, now);
            Ok(Decision::Write(Durable, Vec::new()))
        })
        .await
    }

    async fn create_schedule(&self, req: CreateScheduleRequest) -> Result<WorkflowSchedule> {
        self.create_schedule_impl(req).await
    }

    async fn get_schedule(&self, workflow_id: &str, name: &str) -> Result<WorkflowSchedule> {
        self.get_schedule_impl(workflow_id, name).await
    }

    async fn list_schedules(&self, query: ListSchedulesQuery) -> Result<ScheduleList> {
        self.list_schedules_impl(query).await
    }

    async fn control_schedule(
        &self,
        req: ScheduleControlRequest,
    ) -> Result<ScheduleControlResponse> {
        self.control_schedule_impl(req).await
    }

    async fn compat_live(&self, query: LiveCompatQuery) -> Result<LiveCompat> {
        self.compat_live_impl(query).await
    }

    async fn upgrade_instances(&self, req: UpgradeRequest) -> Result<UpgradeResponse> {
        self.upgrade_impl(req).await
    }

    async fn heartbeat(&self, lease: Lease) -> Result<WorkflowTurn> {
        self.heartbeat_as(lease, transitions::turn_view).await
    }

    async fn restart_turn(&self, req: RestartTurnRequest) -> Result<RestartTurnResponse> {
        self.restart_turn_impl(req).await
    }

    async fn fork_instance(&self, req: ForkInstanceRequest) -> Result<ForkInstanceResponse> {
        self.fork_impl(req).await
    }
}

/// The engine's own answers to the worker's and the handle's calls: each builds only what its
/// caller reads, and a chained write is one commit.
#[async_trait]
impl WorkerBackend for Engine {
    async fn send_message_ack(&self, req: MessageRequest) -> Result<u64> {
        self.send_message_as(req, |_, t| t.number).await
    }

    async fn await_outcome(&self, q: TurnQuery, wait: Duration) -> Result<TurnOutcome> {
        self.await_turn_as(q, wait, transitions::turn_outcome).await
    }

    async fn operation_cursor(&self, req: OperationRequest) -> Result<Value> {
        self.operation_as(req, transitions::operation_cursor).await
    }

    async fn progress_ack(&self, req: ProgressRequest) -> Result<()> {
        self.progress_as(req, transitions::ack).await
    }

    async fn checkpoint_ack(&self, req: CheckpointRequest) -> Result<()> {
        self.checkpoint_as(req, transitions::ack).await
    }

    async fn checkpoint_then_operation(
        &self,
        save: CheckpointRequest,
        next: OperationRequest,
    ) -> Result<Result<Value>> {
        let checked = self.check_operation(&next);
        if checked.is_err() || save.lease != next.lease {
            // Refused before any read, or on another lease: the two calls apart.
            self.checkpoint_as(save, transitions::ack).await?;
            return Ok(match checked {
                Err(e) => Err(e),
                Ok(()) => self.operation_cursor(next).await,
            });
        }
        self.save_then(save, transitions::operation_cursor, |inst, turn, now| {
            decide_operation(&next, inst, turn, now)
        })
        .await
    }

    async fn checkpoint_then_complete(
        &self,
        save: CheckpointRequest,
        done: CompleteRequest,
    ) -> Result<Result<()>> {
        let digest = match self.check_complete(&done) {
            Ok(digest) if save.lease == done.lease => digest,
            checked => {
                self.checkpoint_as(save, transitions::ack).await?;
                return Ok(match checked {
                    Err(e) => Err(e),
                    Ok(_) => self.complete_ack(done).await,
                });
            }
        };
        let limits = &self.inner.config.limits;
        self.save_then(save, transitions::ack, |inst, turn, now| {
            decide_complete(&done, &digest, limits, inst, turn, now)
        })
        .await
    }

    async fn complete_ack(&self, req: CompleteRequest) -> Result<()> {
        self.complete_as(req, transitions::ack).await
    }

    async fn heartbeat_ack(&self, lease: Lease) -> Result<()> {
        self.heartbeat_as(lease, transitions::ack).await
    }

    #[cfg(feature = "postgres")]
    fn step_transactions(&self) -> Option<crate::store::StepTransactions> {
        self.inner.capabilities.step_transactions.clone()
    }
}

impl Engine {
    /// The message route, answering what `answer` takes from the admitted turn.
    async fn send_message_as<T>(
        &self,
        req: MessageRequest,
        answer: fn(&InstanceRecord, &TurnRecord) -> T,
    ) -> Result<T> {
        let limits = &self.inner.config.limits;
        check_message_request(&req, limits)?;

        // Admission is optimistic: the store's message-id index is unique, so the new turn is
        // committed without looking the id up first, and only a commit refused because the id
        // is taken (or a full inbox, which must not hide a repeat) looks for the kept turn.
        let mut look_first = false;
        let mut tries = Tries::new();
        let mut checked = false;
        loop {
            tries.next(&req.workflow_id)?;
            let mut inst = self.load(&req.workflow_id).await?;
            if !checked {
                // Against the registered message schema, before anything is written.
                self.check_message_schema(&inst, &req.message).await?;
                checked = true;
            }
            let full = inst.pending.len() >= limits.pending_messages;
            if look_first || full {
                if let Some(t) = self
                    .inner
                    .store
                    .find_message(&self.ns, &inst.id, &req.id)
                    .await?
                {
                    if t.message == req.message {
                        return Ok(answer(&inst, &t));
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
            let mut turn = new_turn(
                &inst,
                number,
                req.id.clone(),
                req.message.clone(),
                req.origin.clone(),
                now,
            );
            turn.traceparent = crate::trace::TraceContext::current().map(|c| c.traceparent());
            inst.next_turn += 1;
            inst.pending.push(number);
            if inst.pending.len() == 1 && !inst.paused {
                inst.due_at_ms = Some(now);
            }
            let view = answer(&inst, &turn);
            let read_rev = inst.revision;
            match self
                .write(
                    Some(read_rev),
                    Record::Owned(inst),
                    vec![turn],
                    Vec::new(),
                    Durable,
                )
                .await?
            {
                Committed::Done => return Ok(view),
                Committed::Conflict => {}
                // Kept by another turn (or by one committed a moment ago): read again, look.
                Committed::MessageIdTaken(_) => look_first = true,
            }
        }
    }

    /// Turn `q` as it stands: read, and settled if it is the inbox head.
    async fn settled_turn(&self, q: &TurnQuery) -> Result<(InstanceRecord, TurnRecord)> {
        validate::identifier("id", &q.id)?;
        // One read of both where the store can (PostgreSQL: one query instead of two).
        let read = self
            .inner
            .store
            .load_instance_turn(&self.ns, &q.id, q.turn)
            .await?;
        let Some((mut inst, turn)) = read else {
            return Err(Error::not_found(format_args!("instance `{}`", q.id)));
        };
        let Some(mut turn) = turn else {
            return Err(self.turn_not_found(&inst, q.turn));
        };
        if inst.pending.first() == Some(&turn.number) {
            transitions::settle(&mut inst, &mut turn, self.now(), &self.inner.config);
        }
        Ok((inst, turn))
    }

    /// The await-turn route, answering what `answer` takes from the turn.
    async fn await_turn_as<T>(
        &self,
        q: TurnQuery,
        wait: Duration,
        answer: fn(&InstanceRecord, &TurnRecord) -> T,
    ) -> Result<T> {
        let give_up = tokio::time::Instant::now() + wait.min(self.inner.config.max_claim_wait);
        let waiter = self
            .inner
            .outcomes
            .watch(super::instance_key(&self.ns, &q.id));
        loop {
            // Armed before the read, so a commit between the read and the wait still wakes it.
            let settled = waiter.notify().notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            let (inst, turn) = self.settled_turn(&q).await?;
            if turn.status.is_settled() || tokio::time::Instant::now() >= give_up {
                return Ok(answer(&inst, &turn));
            }
            tokio::select! {
                () = settled => {}
                () = tokio::time::sleep_until(give_up) => {}
            }
        }
    }

    /// The operation route, answering what `answer` takes from the turn as decided.
    async fn operation_as<T>(
        &self,
        req: OperationRequest,
        answer: fn(&InstanceRecord, &TurnRecord) -> T,
    ) -> Result<T> {
        self.check_operation(&req)?;
        self.on_turn(&req.lease, answer, |inst, turn, now| {
            decide_operation(&req, inst, turn, now)
        })
        .await
    }

    /// What the operation route checks before it reads anything.
    fn check_operation(&self, req: &OperationRequest) -> Result<()> {
        validate::identifier("key", &req.key)?;
        req.check_times()?;
        steps_limit(req.position, self.inner.config.limits.steps_per_turn)
    }

    /// The progress route, answering what `answer` takes from the turn as decided.
    async fn progress_as<T>(
        &self,
        req: ProgressRequest,
        answer: fn(&InstanceRecord, &TurnRecord) -> T,
    ) -> Result<T> {
        let limits = &self.inner.config.limits;
        validate::identifier("key", &req.key)?;
        validate::range("sequence", req.sequence, 1, u64::MAX)?;
        validate::size("details", &req.details, limits.details_bytes)?;
        validate::size("checkpoint", &req.checkpoint, limits.checkpoint_bytes)?;
        validate::progress_details(&req.details)?;
        self.on_turn(&req.lease, answer, |inst, turn, now| {
            transitions::check_lease(&inst.id, turn, &req.lease.token, now)?;
            let number = turn.number;
            let Some(op) = turn.operation.as_mut().filter(|op| op.key == req.key) else {
                return Err(Error::conflict(format_args!(
                    "no step `{}` is running in turn {number}; start it with an operation first",
                    req.key
                )));
            };
            if op.sequence == req.sequence
                && op.details == req.details
                && op.checkpoint == req.checkpoint
            {
                return Ok(Decision::Answer);
            }
            if req.sequence <= op.sequence {
                return Err(Error::conflict(format_args!(
                    "progress sequence {} of step `{}` is not after the last accepted one ({})",
                    req.sequence, req.key, op.sequence
                )));
            }
            op.sequence = req.sequence;
            op.details = req.details.clone();
            op.checkpoint = req.checkpoint.clone();
            op.last_heartbeat_ms = now;
            transitions::record_phase(turn, &req.details, now);
            transitions::touch(turn, now);
            Ok(Decision::Write(Relaxed, Vec::new()))
        })
        .await
    }

    /// The checkpoint route, answering what `answer` takes from the turn as decided.
    async fn checkpoint_as<T>(
        &self,
        req: CheckpointRequest,
        answer: fn(&InstanceRecord, &TurnRecord) -> T,
    ) -> Result<T> {
        self.check_checkpoint(&req)?;
        let limits = &self.inner.config.limits;
        self.on_turn(&req.lease, answer, |inst, turn, now| {
            decide_checkpoint(&req, limits, inst, turn, now)
        })
        .await
    }

    /// What the checkpoint route checks before it reads anything.
    fn check_checkpoint(&self, req: &CheckpointRequest) -> Result<()> {
        let limits = &self.inner.config.limits;
        validate::identifier("key", &req.key)?;
        match (req.kind, req.delay_ms) {
            (CheckpointKind::Signal, _) => {
                return Err(Error::invalid(
                    "kind",
                    "signal waits are saved through wait-signal; use `step` or `sleep`",
                ))
            }
            (CheckpointKind::Step, Some(_)) => {
                return Err(Error::invalid(
                    "delay_ms",
                    "only a `sleep` checkpoint carries delay_ms",
                ))
            }
            (CheckpointKind::Sleep, None) => {
                return Err(Error::invalid(
                    "delay_ms",
                    "a `sleep` checkpoint needs delay_ms",
                ))
            }
            (CheckpointKind::Sleep, Some(_)) => {
                req.check_times()?;
                if !req.output.is_null() {
                    return Err(Error::invalid(
                        "output",
                        "a `sleep` checkpoint has no output",
                    ));
                }
            }
            (CheckpointKind::Step, None) => {}
        }
        validate::size("output", &req.output, limits.output_bytes)?;
        steps_limit(req.position, limits.steps_per_turn)
    }

    /// The complete route, answering what `answer` takes from the turn as decided.
    async fn complete_as<T>(
        &self,
        req: CompleteRequest,
        answer: fn(&InstanceRecord, &TurnRecord) -> T,
    ) -> Result<T> {
        let digest = self.check_complete(&req)?;
        let limits = &self.inner.config.limits;
        self.on_turn(&req.lease, answer, |inst, turn, now| {
            decide_complete(&req, &digest, limits, inst, turn, now)
        })
        .await
    }

    /// What the complete route checks before it reads anything; the completion's digest.
    fn check_complete(&self, req: &CompleteRequest) -> Result<String> {
        let limits = &self.inner.config.limits;
        validate::size("state", &req.state, limits.state_bytes)?;
        validate::size("result", &req.result, limits.result_bytes)?;
        if let Some(c) = &req.continuation {
            validate::size("continuation.message", &c.message, limits.message_bytes)?;
        }
        check_results(req.results.as_ref())?;
        Ok(transitions::completion_digest(
            &req.state,
            &req.result,
            req.continuation.as_ref().map(|c| &c.message),
        ))
    }

    /// Save step `save` and make one more decision on the same turn, `then`, in one commit,
    /// answering what `answer` takes from the turn as both decided. The outer error is the
    /// checkpoint's (nothing written). Where `then` refuses, the checkpoint is committed alone
    /// and `then`'s refusal is the inner error, as if the two calls were made apart.
    async fn save_then<T>(
        &self,
        save: CheckpointRequest,
        answer: fn(&InstanceRecord, &TurnRecord) -> T,
        mut then: impl FnMut(&mut InstanceRecord, &mut TurnRecord, Millis) -> Result<Decision>,
    ) -> Result<Result<T>> {
        self.check_checkpoint(&save)?;
        let limits = &self.inner.config.limits;
        let mut refused = false;
        let both = self
            .on_turn(&save.lease, answer, |inst, turn, now| {
                refused = false;
                let saved = decide_checkpoint(&save, limits, inst, turn, now)?;
                // `then` may have changed the records before refusing: the whole decision is
                // dropped, and the checkpoint is made again on its own below.
                let then = then(inst, turn, now).inspect_err(|_| refused = true)?;
                Ok(saved.and(then))
            })
            .await;
        match both {
            Ok(answered) => Ok(Ok(answered)),
            Err(e) if refused => {
                self.checkpoint_as(save, transitions::ack).await?;
                Ok(Err(e))
            }
            Err(e) => Err(e),
        }
    }

    /// The heartbeat route, answering what `answer` takes from the turn as decided.
    async fn heartbeat_as<T>(
        &self,
        lease: Lease,
        answer: fn(&InstanceRecord, &TurnRecord) -> T,
    ) -> Result<T> {
        self.on_turn(&lease, answer, |inst, turn, now| {
            transitions::check_lease(&inst.id, turn, &lease.token, now)?;
            turn.deadline_ms = Some(now.saturating_add(inst.lease_ms as Millis));
            transitions::touch(turn, now);
            Ok(Decision::Write(Relaxed, Vec::new()))
        })
        .await
    }

    /// Deliver a checked signal to its turn: buffer it, and resolve the turn's signal wait when
    /// it waits for this name. A repeat of an event id with the same name and value answers the
    /// turn as it stands. The signal route calls it, and so does the delivery of a child turn's
    /// outcome (`children.rs`, the `sender` [`Sender::Engine`]), whose value may be as large as
    /// a reply.
    pub(super) async fn put_signal(
        &self,
        req: &SignalRequest,
        sender: Sender,
    ) -> Result<WorkflowTurn> {
        let limits = &self.inner.config.limits;

        self.on_instance(&req.workflow_id, |mut inst, now, first| {
            Box::pin(async move {
            if first {
                // Against the registered schema, before anything is written.
                self.check_signal_schema(&inst, req, sender).await?;
            }
            let mut turn = self.load_turn(&inst, req.turn).await?;
            if let Some(s) = turn.signals.iter().find(|s| s.id == req.id) {
                if s.name == req.name && s.value == req.value {
                    return Ok(InstanceDecision::Answer(transitions::turn_view(&inst, &turn)));
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
            transitions::touch(&mut turn, now);
            turn_size(&turn, limits.turn_bytes)?;
            let view = transitions::turn_view(&inst, &turn);
            Ok(InstanceDecision::Write(inst, vec![turn], view))
            })
        })
        .await
    }
}

/// The checks of a message request that need no read: its ids, the reserved prefix, the
/// message's size and its origin.
fn check_message_request(req: &MessageRequest, limits: &Limits) -> Result<()> {
    validate::identifier("workflow_id", &req.workflow_id)?;
    validate::identifier("id", &req.id)?;
    if req.id.starts_with(names::CONTINUATION_ID_PREFIX) {
        return Err(Error::invalid(
            "id",
            "the `continue-` prefix is reserved for continuations",
        ));
    }
    validate::size("message", &req.message, limits.message_bytes)?;
    if let Some(origin) = &req.origin {
        if !names::is_client_origin_kind(&origin.kind) {
            return Err(Error::invalid(
                "origin.kind",
                format!(
                    "{:?} is not an origin kind; use one of: {}, {}",
                    origin.kind,
                    names::ORIGIN_KINDS.join(", "),
                    names::PARENT_ORIGIN_KIND
                ),
            ));
        }
        validate::origin_size(origin, limits.origin_bytes)?;
    }
    Ok(())
}

/// The operation route's decision on the leased turn: open step `req.key` at the next
/// position, carrying the cursor an earlier attempt of it saved. Changes nothing when it
/// refuses.
fn decide_operation(
    req: &OperationRequest,
    inst: &mut InstanceRecord,
    turn: &mut TurnRecord,
    now: Millis,
) -> Result<Decision> {
    transitions::check_lease(&inst.id, turn, &req.lease.token, now)?;
    let same = turn.operation.as_ref().is_some_and(|op| {
        op.key == req.key
            && op.kind == req.kind
            && op.timeout_ms == req.timeout_ms
            && op.heartbeat_timeout_ms == req.heartbeat_timeout_ms
    });
    if same && req.position as usize == turn.steps.len() {
        return Ok(Decision::Answer);
    }
    next_position(&inst.id, turn, req.position, &req.key)?;
    let carried = [turn.operation.as_ref(), turn.last_operation.as_ref()]
        .into_iter()
        .flatten()
        .find(|op| op.key == req.key)
        .map_or(Value::Null, |op| op.checkpoint.clone());
    turn.operation = Some(TurnOperation {
        key: req.key.clone(),
        kind: req.kind,
        attempt: turn.attempt,
        started_at_ms: now,
        timeout_ms: req.timeout_ms,
        deadline_ms: now.saturating_add(req.timeout_ms as Millis),
        last_heartbeat_ms: now,
        sequence: 0,
        details: Value::Null,
        checkpoint: carried,
        heartbeat_timeout_ms: req.heartbeat_timeout_ms,
    });
    transitions::touch(turn, now);
    Ok(Decision::Write(Relaxed, Vec::new()))
}

/// The checkpoint route's decision on the leased turn: save the step (or the sleep, releasing
/// the turn until it is due) at the next position.
fn decide_checkpoint(
    req: &CheckpointRequest,
    limits: &Limits,
    inst: &mut InstanceRecord,
    turn: &mut TurnRecord,
    now: Millis,
) -> Result<Decision> {
    let repeat = turn.token.as_deref() == Some(req.lease.token.as_str())
        && turn.steps.get(req.position as usize).is_some_and(|s| {
            s.key == req.key
                && s.kind == req.kind
                && s.output == req.output
                && s.delay_ms == req.delay_ms
        });
    if repeat {
        return Ok(Decision::Answer);
    }
    transitions::check_lease(&inst.id, turn, &req.lease.token, now)?;
    next_position(&inst.id, turn, req.position, &req.key)?;
    let mut step = StepCheckpoint {
        key: req.key.clone(),
        kind: req.kind,
        output: req.output.clone(),
        at_ms: now,
        delay_ms: None,
        signal_name: None,
        wake_at_ms: None,
    };
    if let Some(delay) = req.delay_ms {
        let wake = now.saturating_add(delay as Millis);
        step.delay_ms = Some(delay);
        step.wake_at_ms = Some(wake);
        transitions::release(turn, now, RunEnd::Sleeping);
        turn.status = TurnStatus::Waiting;
        turn.ready_at_ms = wake;
        turn.resume = true;
    }
    turn.steps.push(step);
    turn.operation = None;
    turn.last_operation = None;
    transitions::touch(turn, now);
    turn_size(turn, limits.turn_bytes)?;
    Ok(Decision::Write(Durable, Vec::new()))
}

/// The complete route's decision on the leased turn: finish it with the new state and reply,
/// appending the continuation's turn, if any, as an extra record.
fn decide_complete(
    req: &CompleteRequest,
    digest: &str,
    limits: &Limits,
    inst: &mut InstanceRecord,
    turn: &mut TurnRecord,
    now: Millis,
) -> Result<Decision> {
    if turn.token.as_deref() == Some(req.lease.token.as_str())
        && turn.completion_digest.as_deref() == Some(digest)
    {
        return Ok(Decision::Answer);
    }
    transitions::check_lease(&inst.id, turn, &req.lease.token, now)?;
    let mut extra = Vec::new();
    if let Some(c) = &req.continuation {
        let number = inst.next_turn;
        let mut origin = MessageOrigin::new(names::CONTINUATION_ORIGIN_KIND);
        origin.fields.insert("turn".into(), json!(turn.number));
        origin
            .fields
            .insert("message_id".into(), json!(turn.message_id));
        let mut next = new_turn(
            inst,
            number,
            format!("{}{}", names::CONTINUATION_ID_PREFIX, turn.number),
            c.message.clone(),
            Some(origin),
            now,
        );
        next.traceparent = turn.traceparent.clone();
        inst.next_turn += 1;
        inst.pending.push(number);
        turn.continued_to = Some(number);
        extra.push(next);
    }
    if let (Some(usage), Some(run)) = (&req.usage, turn.run.as_mut()) {
        run.usage = Some(usage.clone());
    }
    turn.result = req.result.clone();
    turn.state_after = req.state.clone();
    turn.completion_digest = Some(digest.to_owned());
    turn.resume = false;
    transitions::finish(inst, turn, TurnStatus::Completed, now);
    if let Some(ending) = turn.run_ending.as_mut() {
        ending.results = req.results.clone();
    }
    turn_size(turn, limits.turn_bytes)?;
    inst.state = req.state.clone();
    Ok(Decision::Write(Durable, extra))
}
