//! Commits: a write set as one call of the commit function (`schema.rs`), and **group commit**,
//! which sends the write sets that wait at the same moment to the database in one transaction.
//!
//! Each commit is queued; while fewer than [`PostgresOptions::commit_pipelines`] batches are in
//! flight, a task takes everything queued (at most [`PostgresOptions::max_commit_batch`]) and
//! commits it. A lone write set is one statement in its own transaction, as before group
//! commit; several go as `BEGIN`, one call of the commit function each and `COMMIT`, all
//! pipelined in one round trip, so that they share a transaction, its `COMMIT` record and its
//! WAL flush. Each write set keeps its own conditional check: a call that answers `conflict`
//! (or `taken:…`) has written nothing, and the others commit.
//!
//! A batch is answered only after its `COMMIT`, so nothing is acknowledged before it is written.
//! Its write sets are sorted by instance, so two batches in flight lock rows in the same order
//! and cannot deadlock each other. If any call of a batch is refused with an `ERROR` (a
//! unique-key race between two processes creating one instance, a deadlock with another kind of
//! statement), the database has rolled the whole transaction back, and each write set of it is
//! committed again alone, which gives each its own answer. If the connection fails, or the
//! session is ended (`FATAL`), whether the batch was committed is unknown, and every write set
//! of it answers that error, as a lone commit would.
//!
//! The batch runs in a task of its own, so a caller that stops waiting (its future dropped)
//! never leaves a transaction half sent on a pooled connection.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, PoisonError};
use std::task::Poll;

use tokio::sync::oneshot;
use tokio_postgres::error::{Severity, SqlState};

use super::*;
use turnwise_core::store::support::{
    check_message_id, check_record, message_id_changed, turn_in_history,
};

/// The commit function (`schema.rs`), with its 29 parameters.
const COMMIT: &str = "SELECT turnwise_commit_v3($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, \
     $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29)";

/// At most this many run summaries are pruned by one write set.
const PRUNE_LIMIT: i64 = RUN_PRUNE_BATCH as i64;

/// A write set as the commit function's parameters, owned so that it can wait in the queue.
pub(super) struct Encoded {
    ns: String,
    id: String,
    expected: Option<i64>,
    delete: bool,
    workflow_type: Option<String>,
    version: Option<String>,
    revision: Option<i64>,
    pending: Option<i64>,
    due: Option<i64>,
    body: Option<String>,
    numbers: Vec<i64>,
    message_ids: Vec<String>,
    finished: Vec<bool>,
    finished_at: Vec<Option<i64>>,
    bodies: Vec<String>,
    keep_turns: Option<i64>,
    keep_since: Option<i64>,
    /// It settles a turn (or deletes the instance): the function sends a notice.
    settled: bool,
    run_ids: Vec<String>,
    run_instances: Vec<String>,
    run_started: Vec<i64>,
    run_ended: Vec<i64>,
    run_outcomes: Vec<&'static str>,
    run_bodies: Vec<String>,
    prune_runs_before: Option<i64>,
    durability: Durability,
    joined: bool,
}

fn encoding(what: &str) -> impl FnOnce(serde_json::Error) -> StoreError + '_ {
    move |e| StoreError::new(format!("postgres: encode {what}: {e}"))
}

/// Check `write` and encode it; `joined` when it is written inside a transactional step's
/// transaction (never relaxed: the step's `COMMIT` decides).
pub(super) fn encode(write: WriteSet, joined: bool) -> Result<Encoded, CommitError> {
    // Two turns of one write set under one message id: refused before anything is sent (the
    // database's unique index sees to the kept turns).
    for i in 0..write.turns.len() {
        check_message_id(&write.turns, i, None)?;
    }
    check_record(&write)?;
    let settled = Change::settles(&write);
    let n = write.turns.len();
    let mut numbers = Vec::with_capacity(n);
    let mut bodies = Vec::with_capacity(n);
    let mut finished = Vec::with_capacity(n);
    let mut finished_at = Vec::with_capacity(n);
    for t in &write.turns {
        numbers.push(INTS.int(t.number, "turn number")?);
        bodies.push(serde_json::to_string(t).map_err(encoding("a turn"))?);
        finished.push(t.is_finished());
        finished_at.push(t.finished_at_ms);
    }
    let message_ids = write.turns.into_iter().map(|t| t.message_id).collect();
    let expected = write
        .expected_revision
        .map(|r| INTS.int(r, "revision"))
        .transpose()?;
    let delete = write.instance.is_none();
    let (workflow_type, version, revision, pending, due, body) = match write.instance {
        Some(inst) => {
            let body = Some(serde_json::to_string(&inst).map_err(encoding("an instance"))?);
            let revision = Some(INTS.int(inst.revision, "revision")?);
            let pending = Some(INTS.int(inst.pending.len() as u64, "pending count")?);
            let due = inst.due_at_ms;
            (
                Some(inst.workflow_type),
                Some(inst.version),
                revision,
                pending,
                due,
                body,
            )
        }
        None => (None, None, None, None, None, None),
    };
    let (keep_turns, keep_since) = match write.retention {
        Some(r) => (Some(clamp(r.keep_turns.max(1))), Some(r.keep_since_ms)),
        None => (None, None),
    };
    let m = write.runs.len();
    let mut run_ids = Vec::with_capacity(m);
    let mut run_instances = Vec::with_capacity(m);
    let mut run_started = Vec::with_capacity(m);
    let mut run_ended = Vec::with_capacity(m);
    let mut run_outcomes = Vec::with_capacity(m);
    let mut run_bodies = Vec::with_capacity(m);
    for r in write.runs {
        run_bodies.push(serde_json::to_string(&r).map_err(encoding("a run"))?);
        run_started.push(r.started_at_ms);
        run_ended.push(r.ended_at_ms);
        run_outcomes.push(r.outcome.as_str());
        run_ids.push(r.id);
        run_instances.push(r.workflow_id);
    }
    Ok(Encoded {
        ns: write.ns,
        id: write.id,
        expected,
        delete,
        workflow_type,
        version,
        revision,
        pending,
        due,
        body,
        numbers,
        message_ids,
        finished,
        finished_at,
        bodies,
        keep_turns,
        keep_since,
        settled,
        run_ids,
        run_instances,
        run_started,
        run_ended,
        run_outcomes,
        run_bodies,
        prune_runs_before: write.prune_runs_before,
        durability: write.durability,
        joined,
    })
}

impl Encoded {
    /// Its own transaction may skip the WAL flush (`synchronous_commit = off`).
    fn relaxed(&self) -> bool {
        !self.joined && self.durability == Durability::Relaxed
    }

    /// The commit function's parameters; `relaxed` is this write set's own, or `false` when it
    /// shares a transaction with a durable one.
    fn params<'a>(
        &'a self,
        relaxed: &'a bool,
        notices: &'a notices::Notices,
    ) -> [&'a (dyn ToSql + Sync); 29] {
        [
            &self.ns,
            &self.id,
            &self.expected,
            relaxed,
            &self.delete,
            &self.workflow_type,
            &self.version,
            &self.revision,
            &self.pending,
            &self.due,
            &self.body,
            &self.numbers,
            &self.message_ids,
            &self.finished,
            &self.finished_at,
            &self.bodies,
            &self.keep_turns,
            &self.keep_since,
            &notices.channel,
            &notices.node,
            &self.settled,
            &self.run_ids,
            &self.run_instances,
            &self.run_started,
            &self.run_ended,
            &self.run_outcomes,
            &self.run_bodies,
            &self.prune_runs_before,
            &PRUNE_LIMIT,
        ]
    }
}

/// A write set waiting for a batch, with where its answer goes.
struct Waiting {
    write: Encoded,
    answer: oneshot::Sender<Result<(), CommitError>>,
}

/// The queue of write sets waiting to be committed, shared by a store's clones.
pub(super) struct Group {
    state: Mutex<Queue>,
    max_batch: usize,
    pipelines: usize,
}

struct Queue {
    waiting: VecDeque<Waiting>,
    /// Tasks committing batches now (at most `pipelines`).
    leaders: usize,
}

impl Group {
    pub(super) fn new(options: &PostgresOptions) -> Self {
        Self {
            state: Mutex::new(Queue {
                waiting: VecDeque::new(),
                leaders: 0,
            }),
            max_batch: options.max_commit_batch.max(1),
            pipelines: options.commit_pipelines.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queue `w`; `true` when the caller must start a task to commit (a pipeline is free).
    fn push(&self, w: Waiting) -> bool {
        let mut q = self.lock();
        q.waiting.push_back(w);
        if q.leaders < self.pipelines {
            q.leaders += 1;
            true
        } else {
            false
        }
    }

    /// The next batch for a leader; `None` (and the leader's place given up) when nothing
    /// waits.
    fn take(&self, slot: &mut Slot<'_>) -> Option<Vec<Waiting>> {
        let mut q = self.lock();
        if q.waiting.is_empty() {
            q.leaders -= 1;
            slot.held = false;
            return None;
        }
        let n = q.waiting.len().min(self.max_batch);
        Some(q.waiting.drain(..n).collect())
    }
}

/// A leader's place among the pipelines, given back if its task ends early (a panic).
struct Slot<'a> {
    group: &'a Group,
    held: bool,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if self.held {
            self.group.lock().leaders -= 1;
        }
    }
}

/// How a batch of several write sets ended.
enum Together {
    /// Committed: each write set's answer (a written one, or a refusal that wrote nothing).
    Committed(Vec<Row>),
    /// The database rolled the transaction back (one call failed): nothing was written.
    RolledBack,
    /// The connection failed: whether anything was written is unknown.
    Unknown(StoreError),
}

type Step<'a> =
    Pin<Box<dyn Future<Output = Result<Option<Row>, tokio_postgres::Error>> + Send + 'a>>;

/// Drive `steps` to completion, polling them in order, so that each sends its request before
/// the next (tokio-postgres sends a request when its future is first polled): `BEGIN`, the
/// calls and `COMMIT` reach the connection in that order, in one round trip.
async fn in_order(mut steps: Vec<Step<'_>>) -> Vec<Result<Option<Row>, tokio_postgres::Error>> {
    let mut done: Vec<Option<Result<Option<Row>, tokio_postgres::Error>>> =
        steps.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (step, out) in steps.iter_mut().zip(done.iter_mut()) {
            if out.is_none() {
                match step.as_mut().poll(cx) {
                    Poll::Ready(r) => *out = Some(r),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    done.into_iter().flatten().collect()
}

impl PostgresStore {
    /// Commit `write` through the group (see the module's docs).
    pub(super) async fn commit_grouped(&self, write: Encoded) -> Result<(), CommitError> {
        let (answer, answered) = oneshot::channel();
        if self.inner.group.push(Waiting { write, answer }) {
            tokio::spawn(self.clone().lead());
        }
        answered.await.unwrap_or_else(|_| {
            Err(StoreError::new(
                "postgres: the task committing this write set ended without an answer; whether \
                 it was written is unknown: read the instance again",
            )
            .into())
        })
    }

    /// Commit batches while write sets wait.
    async fn lead(self) {
        let group = &self.inner.group;
        let mut slot = Slot { group, held: true };
        while let Some(batch) = group.take(&mut slot) {
            self.commit_batch(batch).await;
        }
    }

    async fn commit_batch(&self, mut batch: Vec<Waiting>) {
        let client = match self.client().await {
            Ok(c) => c,
            Err(e) => {
                for w in batch {
                    let _ = w.answer.send(Err(e.clone().into()));
                }
                return;
            }
        };
        if batch.len() == 1 {
            let w = batch.remove(0);
            let r = self.call(&client, &w.write).await;
            let _ = w.answer.send(r);
            return;
        }
        // One lock order for every batch (stable: one instance's write sets keep theirs).
        batch.sort_by(|a, b| (&a.write.ns, &a.write.id).cmp(&(&b.write.ns, &b.write.id)));
        // Relaxed only if all are: the transaction's flush is the durable ones' too.
        let relaxed = batch.iter().all(|w| w.write.relaxed());
        match self.together(&client, &batch, relaxed).await {
            Together::Committed(rows) => {
                self.count_transaction(relaxed);
                let c = &self.inner.stats;
                c.group_commits.fetch_add(1, Ordering::Relaxed);
                c.grouped.fetch_add(rows.len() as u64, Ordering::Relaxed);
                for (w, row) in batch.into_iter().zip(rows) {
                    let r = self.conclude(&w.write, Ok(row));
                    let _ = w.answer.send(r);
                }
            }
            Together::RolledBack => {
                self.inner
                    .stats
                    .group_retries
                    .fetch_add(1, Ordering::Relaxed);
                for w in batch {
                    let r = self.call(&client, &w.write).await;
                    let _ = w.answer.send(r);
                }
            }
            Together::Unknown(e) => {
                for w in batch {
                    let _ = w.answer.send(Err(e.clone().into()));
                }
            }
        }
    }

    /// Several write sets in one transaction, pipelined.
    async fn together(&self, c: &Object, batch: &[Waiting], relaxed: bool) -> Together {
        let statement = match c.prepare_cached(COMMIT).await {
            Ok(s) => s,
            Err(e) => return Together::Unknown(failed("prepare the commit", e)),
        };
        let notices = &*self.inner.notices;
        let params: Vec<_> = batch
            .iter()
            .map(|w| w.write.params(&relaxed, notices))
            .collect();
        let mut steps: Vec<Step<'_>> = Vec::with_capacity(batch.len() + 2);
        steps.push(Box::pin(async {
            c.batch_execute("BEGIN").await.map(|()| None)
        }));
        for p in &params {
            let statement = &statement;
            steps.push(Box::pin(async move {
                c.query_one(statement, p).await.map(Some)
            }));
        }
        steps.push(Box::pin(async {
            c.batch_execute("COMMIT").await.map(|()| None)
        }));
        let mut results = in_order(steps).await;
        let commit = results.pop();
        let begin = results.remove(0);
        let first_failure = std::iter::once(&begin)
            .chain(&results)
            .chain(&commit)
            .find_map(|r| r.as_ref().err());
        match first_failure {
            None => Together::Committed(results.into_iter().flatten().flatten().collect()),
            // The database refused a statement: it rolled the transaction back (its answer to
            // `COMMIT` is `ROLLBACK`), and the connection is usable. (A `FATAL` error ends the
            // session instead, at any point, even during the `COMMIT`.)
            Some(e)
                if e.as_db_error().is_some_and(|db| {
                    // The unlocalized severity (servers since 9.6), else the message's.
                    db.parsed_severity()
                        .map_or(db.severity() == "ERROR", |s| s == Severity::Error)
                }) && !c.is_closed() =>
            {
                Together::RolledBack
            }
            Some(e) => Together::Unknown(failed(
                format_args!(
                    "commit {} write sets together (instance `{}` among them)",
                    batch.len(),
                    batch[0].write.id
                ),
                CommitFailure(e.to_string()),
            )),
        }
    }

    /// One write set as one statement: its own transaction, or, `joined`, a part of the
    /// transactional step's.
    pub(super) async fn call(&self, c: &Object, write: &Encoded) -> Result<(), CommitError> {
        let statement = c
            .prepare_cached(COMMIT)
            .await
            .map_err(pg("prepare the commit"))?;
        let relaxed = write.relaxed();
        let answer = c
            .query_one(&statement, &write.params(&relaxed, &self.inner.notices))
            .await;
        if answer.is_ok() && !write.joined {
            self.count_transaction(relaxed);
        }
        self.conclude(write, answer)
    }

    /// What the commit function's answer (or failure) means.
    fn conclude(
        &self,
        write: &Encoded,
        answer: Result<Row, tokio_postgres::Error>,
    ) -> Result<(), CommitError> {
        let id = &write.id;
        let row = match answer {
            Ok(row) => row,
            // Another process created the instance (or a turn of it) first.
            Err(e) if write.expected.is_none() && is_unique_violation(&e) => {
                return Err(CommitError::Conflict)
            }
            Err(e) => return Err(pg(format_args!("commit instance `{id}`"))(e).into()),
        };
        let answer: &str = row.get(0);
        match answer.split_once(':') {
            None if answer == "ok" || answer == "notified" => {
                self.count(write, answer == "notified");
                Ok(())
            }
            None if answer == "conflict" => Err(CommitError::Conflict),
            Some(("taken", message_id)) => Err(CommitError::MessageIdTaken {
                message_id: message_id.to_owned(),
            }),
            Some(("history", turn)) => Err(turn_in_history(id, turn)),
            Some(("message-id", turn)) => Err(message_id_changed(turn)),
            _ => Err(
                StoreError::new(format!("postgres: the commit function answered `{answer}`"))
                    .into(),
            ),
        }
    }

    /// A transaction of the store's own ended with its `COMMIT`.
    fn count_transaction(&self, relaxed: bool) {
        let c = &self.inner.stats;
        c.transactions.fetch_add(1, Ordering::Relaxed);
        if !relaxed {
            c.durable_transactions.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn count(&self, write: &Encoded, notified: bool) {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &self.inner.stats;
        let counter = match (write.joined, write.durability) {
            (true, _) => &c.joined,
            (false, Durability::Relaxed) => &c.relaxed,
            (false, _) => &c.durable,
        };
        counter.fetch_add(1, Relaxed);
        if notified {
            c.notices.fetch_add(1, Relaxed);
        }
    }
}

/// A connection failure shared by a batch's write sets (the driver's error is not `Clone`).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct CommitFailure(String);

fn is_unique_violation(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&SqlState::UNIQUE_VIOLATION)
}
