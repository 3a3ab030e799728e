//! The writer thread: group commit of batches of write sets, the journal's flushes, and the
//! sync levels; the SQL of each write set's rows is in `rows.rs`.

use std::collections::HashSet;

use super::rows::*;
use super::*;

/// How long the writer polls for the next request before it sleeps.
const WRITER_SPIN: Duration = Duration::from_micros(200);

pub(super) struct Request {
    pub(super) write: WriteSet,
    /// The instance's and turns' JSON, encoded on the caller's thread so the single writer
    /// thread spends its time on SQLite only.
    pub(super) bodies: Bodies,
    pub(super) reply: oneshot::Sender<Result<(), CommitError>>,
}

/// Pre-encoded bodies of a write set: the instance (absent for a delete) and each turn.
pub(super) struct Bodies {
    pub(super) instance: Option<String>,
    pub(super) turns: Vec<String>,
    pub(super) runs: Vec<String>,
}

impl Bodies {
    pub(super) fn of(write: &WriteSet) -> Result<Self, StoreError> {
        Ok(Self {
            instance: write
                .instance
                .as_ref()
                .map(|i| encode(i, "an instance"))
                .transpose()?,
            turns: write
                .turns
                .iter()
                .map(|t| encode(t, "a turn"))
                .collect::<Result<_, _>>()?,
            runs: write
                .runs
                .iter()
                .map(|r| encode(r, "a run summary"))
                .collect::<Result<_, _>>()?,
        })
    }
}

/// How the writer is set up, from [`SqliteOptions`].
pub(super) struct WriterConfig {
    /// The connection's level for durable batches (`NORMAL` when a syncer syncs the log).
    pub(super) synchronous: Synchronous,
    pub(super) max_batch: usize,
    pub(super) journal_rows: usize,
    /// The syncer's inbox and thread, when the log is synced off the writer's path.
    pub(super) syncer: Option<(mpsc::Sender<SyncJob>, JoinHandle<()>)>,
    pub(super) unsynced: Arc<Unsynced>,
    pub(super) health: Arc<Health>,
}

pub(super) struct Writer {
    conn: Connection,
    rx: mpsc::Receiver<Request>,
    cache: Arc<Cache>,
    schedule: Arc<Schedule>,
    stats: Arc<StatsCounters>,
    configured: Synchronous,
    /// The level the connection is at now.
    current: Synchronous,
    /// Where durable answers go to wait for the log's sync; `None`: the `COMMIT` syncs.
    syncer: Option<mpsc::Sender<SyncJob>>,
    syncer_thread: Option<JoinHandle<()>>,
    unsynced: Arc<Unsynced>,
    /// The files' identities and the last transaction's outcome.
    health: Arc<Health>,
    /// Relaxed write sets committed since the last durable batch or checkpoint.
    relaxed_writes: usize,
    max_batch: usize,
    /// The rows of the journaled (dirty) instances, newer than the tables: what a flush writes.
    dirty: HashMap<Key, DirtyRows>,
    /// Journal rows appended since the last flush.
    journal_rows: usize,
    /// The instances with rows in the journal since the last flush.
    in_journal: HashSet<Key>,
    /// Flush when this many journal rows were appended; 0 never journals.
    journal_limit: usize,
}

/// The rows of one dirty instance as the journal has them: its instance row and the turns
/// journaled since its rows were last written, each with the revision that wrote it.
pub(super) struct DirtyRows {
    pub(super) revision: u64,
    pub(super) pending_count: i64,
    pub(super) due_at_ms: Option<Millis>,
    pub(super) instance: String,
    pub(super) turns: HashMap<u64, OwnedTurnRow>,
}

/// A journaled turn's row.
pub(super) struct OwnedTurnRow {
    pub(super) message_id: String,
    pub(super) finished_at_ms: Option<Millis>,
    pub(super) body: String,
}

impl DirtyRows {
    fn new(instance: &InstanceRecord, body: String) -> Self {
        Self {
            revision: instance.revision,
            pending_count: clamp(instance.pending.len()),
            due_at_ms: instance.due_at_ms,
            instance: body,
            turns: HashMap::new(),
        }
    }

    /// Take in a later journaled write of the same instance.
    fn update(&mut self, instance: &InstanceRecord, body: String) {
        self.revision = instance.revision;
        self.pending_count = clamp(instance.pending.len());
        self.due_at_ms = instance.due_at_ms;
        self.instance = body;
    }
}

/// A batch's relaxed and durable write sets apart, when it has both and no instance has write
/// sets of both kinds; otherwise the batch whole.
fn split_relaxed(batch: Vec<Request>) -> Result<(Vec<Request>, Vec<Request>), Vec<Request>> {
    let is_relaxed = |r: &Request| r.write.durability == Durability::Relaxed;
    let relaxed = batch.iter().filter(|r| is_relaxed(r)).count();
    if relaxed == 0 || relaxed == batch.len() {
        return Err(batch);
    }
    let relaxed_keys: HashSet<(&str, &str)> = batch
        .iter()
        .filter(|r| is_relaxed(r))
        .map(|r| (r.write.ns.as_str(), r.write.id.as_str()))
        .collect();
    let entangled = batch.iter().any(|r| {
        !is_relaxed(r) && relaxed_keys.contains(&(r.write.ns.as_str(), r.write.id.as_str()))
    });
    if entangled {
        return Err(batch);
    }
    Ok(batch.into_iter().partition(is_relaxed))
}

/// Flush before the journal holds this many dirty instances, whatever the row count.
const MAX_DIRTY: usize = 1024;

/// With dirty instances, a writer that has had nothing to do for this long flushes them.
const IDLE_FLUSH: Duration = Duration::from_millis(50);

/// Where a write set's answer goes.
type Reply = oneshot::Sender<Result<(), CommitError>>;

/// What a committed batch changed and owes, sorted by who answers.
struct BatchEffects {
    /// What each write set did to its instance, for the cache and the schedule.
    changes: Vec<(Key, CacheUpdate)>,
    /// The answers to send now.
    answers: Vec<(Reply, Result<(), CommitError>)>,
    /// The durable answers the syncer sends after its sync.
    to_sync: Vec<Reply>,
    /// How many write sets went to the journal.
    journaled: usize,
}

/// Answer every request of a batch with the same store error.
fn fail_all(batch: Vec<Request>, e: &StoreError) {
    for request in batch {
        let _ = request.reply.send(Err(CommitError::Store(e.clone())));
    }
}

/// How a write set was applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WrittenTo {
    /// To the tables.
    Direct,
    /// To the journal only.
    Journaled,
}

/// What one write set did, before the batch's `COMMIT`: the instance's stored
/// `history_pruned_through` (0 for a delete) and how it was applied, or why nothing of it was.
type Outcome = Result<(u64, WrittenTo), CommitError>;

/// What an earlier write set of the same batch did to an instance.
#[derive(Clone, Copy)]
enum Touch {
    /// Journaled by the write set at this index of the batch.
    Journaled(usize),
    /// Applied directly (or refused after its rows were brought up to date): the tables hold
    /// the instance's latest rows.
    Current,
}

impl Writer {
    pub(super) fn new(
        conn: Connection,
        rx: mpsc::Receiver<Request>,
        cache: Arc<Cache>,
        schedule: Arc<Schedule>,
        stats: Arc<StatsCounters>,
        config: WriterConfig,
    ) -> Self {
        let (syncer, syncer_thread) = config.syncer.unzip();
        Self {
            conn,
            rx,
            journal_limit: if cache.enabled() {
                config.journal_rows
            } else {
                0
            },
            cache,
            schedule,
            stats,
            configured: config.synchronous,
            current: config.synchronous,
            syncer,
            syncer_thread,
            unsynced: config.unsynced,
            health: config.health,
            relaxed_writes: 0,
            max_batch: config.max_batch.max(1),
            dirty: HashMap::new(),
            journal_rows: 0,
            in_journal: HashSet::new(),
        }
    }

    pub(super) fn run(mut self) {
        // Ends when every sender is gone (the last handle was dropped).
        let mut lone = true;
        while let Some(first) = self.next_request(lone) {
            let mut batch = vec![first];
            while batch.len() < self.max_batch {
                match self.rx.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(_) => break,
                }
            }
            lone = batch.len() == 1;
            self.run_batch(batch);
        }
        // Write the journaled rows into the tables and close at the configured level (closing
        // checkpoints the WAL).
        let closing = self
            .set_level(self.configured)
            .and_then(|()| self.flush_alone());
        if let Err(e) = closing {
            tracing::warn!("turnwise sqlite store: before closing: {e}");
        }
        // The syncer answers what it holds and stops; closing the connection afterwards
        // checkpoints the log, synced.
        drop(self.syncer.take());
        if let Some(thread) = self.syncer_thread.take() {
            let _ = thread.join();
        }
    }

    /// The next request: after a lone write set, poll briefly before sleeping. A worker's
    /// next call usually follows its previous answer within tens of microseconds, and waking
    /// a sleeping thread costs about as much again, on every call; a short spin saves that at
    /// the price of a little CPU right after each batch. After a batch of several there is no
    /// poll: the callers are many, their next requests queue up while the writer sleeps, and
    /// the poll's yields would take the CPU from the threads making them (docs/performance.md
    /// has the measurement). With dirty instances,
    /// an idle writer flushes them. `None` when every handle is gone.
    fn next_request(&mut self, poll: bool) -> Option<Request> {
        let spin = if poll { WRITER_SPIN } else { Duration::ZERO };
        match poll_for(&self.rx, spin) {
            Ok(r) => return Some(r),
            Err(mpsc::TryRecvError::Disconnected) => return None,
            Err(mpsc::TryRecvError::Empty) => {}
        }
        while !self.dirty.is_empty() {
            match self.rx.recv_timeout(IDLE_FLUSH) {
                Ok(r) => return Some(r),
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    // The journal already made these rows durable: no sync needed.
                    let flushed = self
                        .set_level(self.relaxed_level())
                        .and_then(|()| self.flush_alone());
                    self.health.wrote(flushed.as_ref().copied());
                    if let Err(e) = flushed {
                        tracing::warn!("turnwise sqlite store: flushing the journal: {e}");
                        break;
                    }
                    self.after_relaxed(true, 1);
                }
            }
        }
        self.rx.recv().ok()
    }

    /// The level for batches of only relaxed write sets: `OFF`, or with a syncer the
    /// configured level, which then syncs nothing in the `COMMIT` (so there is no switching).
    fn relaxed_level(&self) -> Synchronous {
        if self.syncer.is_some() {
            self.configured
        } else {
            Synchronous::Off
        }
    }

    /// Write every dirty instance into the tables and empty the journal, in a transaction of
    /// its own at the current level.
    fn flush_alone(&mut self) -> Result<(), StoreError> {
        if self.dirty.is_empty() && self.journal_rows == 0 {
            return Ok(());
        }
        exec(&self.conn, "BEGIN IMMEDIATE").map_err(db("begin a transaction"))?;
        let done = self.flush_rows().and_then(|()| {
            self.cache.tables_changing();
            exec(&self.conn, "COMMIT").map_err(db("commit"))
        });
        if let Err(e) = done {
            let _ = self.conn.execute_batch("ROLLBACK");
            self.cache.tables_settled();
            return Err(e);
        }
        self.flushed();
        self.cache.tables_settled();
        Ok(())
    }

    /// Inside a transaction: write every dirty instance's rows, and empty the journal.
    fn flush_rows(&self) -> Result<(), StoreError> {
        for ((ns, id), rows) in &self.dirty {
            put_dirty(&self.conn, ns, id, rows)?;
        }
        // No `WHERE`: SQLite drops the table's pages at once instead of row by row.
        exec(&self.conn, "DELETE FROM journal").map_err(db("empty the journal"))?;
        Ok(())
    }

    /// After the `COMMIT` of a flush.
    fn flushed(&mut self) {
        self.dirty.clear();
        self.in_journal.clear();
        self.journal_rows = 0;
        self.cache.flushed();
        self.stats.flushes.fetch_add(1, Ordering::Release);
    }

    /// Whether the batch about to run flushes the journal first.
    fn flush_due(&self) -> bool {
        self.journal_limit > 0
            && (self.journal_rows >= self.journal_limit || self.dirty.len() >= MAX_DIRTY)
    }

    /// Switch `PRAGMA synchronous` if it differs from `want`.
    ///
    /// A checkpoint syncs the database file only at a level above `OFF`; a checkpoint left
    /// unsynced and followed by a WAL restart could lose earlier durable commits on power
    /// loss. So automatic checkpoints are suspended while relaxed batches run at `OFF`, and
    /// happen at the next durable commit (or in [`Writer::after_relaxed`]).
    fn set_level(&mut self, want: Synchronous) -> Result<(), StoreError> {
        if want == self.current {
            return Ok(());
        }
        let relaxed_only = want == Synchronous::Off && self.configured != Synchronous::Off;
        let checkpoints = if relaxed_only { 0 } else { WAL_AUTOCHECKPOINT };
        self.conn
            .execute_batch(&format!(
                "{}; PRAGMA wal_autocheckpoint = {checkpoints};",
                want.sql()
            ))
            .map_err(db("set synchronous"))?;
        self.current = want;
        Ok(())
    }

    /// After a batch: keep the WAL bounded when only relaxed batches come, by checkpointing
    /// at the configured level every so often.
    fn after_relaxed(&mut self, relaxed: bool, writes: usize) {
        if !relaxed || self.relaxed_level() == self.configured {
            self.relaxed_writes = 0;
            return;
        }
        self.relaxed_writes += writes;
        if self.relaxed_writes < RELAXED_CHECKPOINT_EVERY {
            return;
        }
        self.relaxed_writes = 0;
        let done = self.set_level(self.configured).and_then(|()| {
            self.conn
                .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                .map_err(db("checkpoint"))
        });
        if let Err(e) = done {
            tracing::warn!("turnwise sqlite store: {e}");
        }
    }

    /// Run one batch of requests.
    ///
    /// A batch that mixes relaxed and durable write sets of different instances runs as two
    /// transactions: the relaxed ones first, without a sync, answered at once; then the
    /// durable ones, synced. Otherwise a claim or an operation start that happened to share a
    /// batch with a checkpoint would wait for that checkpoint's sync, which it does not need.
    /// Write sets in one batch were all in flight at once, so none depends on another's answer;
    /// an instance with write sets of both kinds keeps them in order in one transaction.
    ///
    /// With a syncer there is nothing to gain: relaxed answers go out right after the
    /// `COMMIT`, and only the durable ones wait for the syncer.
    fn run_batch(&mut self, batch: Vec<Request>) {
        if self.syncer.is_some() {
            return self.run_transaction(batch);
        }
        match split_relaxed(batch) {
            Ok((relaxed, durable)) => {
                self.run_transaction(relaxed);
                self.run_transaction(durable);
            }
            Err(batch) => self.run_transaction(batch),
        }
    }

    /// Run one batch as one transaction and answer every request of it: check the files, number
    /// a durable batch for the syncer, write, record what each write set changed, count, answer
    /// (or hand the durable answers to the syncer).
    fn run_transaction(&mut self, batch: Vec<Request>) {
        let relaxed = batch
            .iter()
            .all(|r| r.write.durability == Durability::Relaxed);
        if let Err(why) = self.files_before(relaxed) {
            fail_all(batch, &StoreError::new(why.to_string()));
            return;
        }
        let count = batch.len();
        let sync_number = self.sync_number(&batch, relaxed);
        let mut to_sync = Vec::new();
        let done = self.transact(&batch, relaxed);
        self.health.wrote(done.as_ref().map(|_| ()));
        match done {
            Ok((outcomes, flushed)) => {
                if flushed {
                    self.flushed();
                }
                let settled = self.settle(batch, outcomes, sync_number.is_some());
                to_sync = settled.to_sync;
                self.publish(settled.changes, settled.journaled);
                self.count_and_answer(settled.answers, to_sync.len(), settled.journaled, relaxed);
            }
            Err(e) => {
                self.cache.tables_settled();
                fail_all(batch, &e);
            }
        }
        if let Some(number) = sync_number {
            // Also after a failed transaction, so that the number counts as done.
            self.hand_to_syncer(number, to_sync);
        }
        self.after_relaxed(relaxed, count);
    }

    /// Whether the store's files may be written. Nothing is written to a file that is no longer
    /// the one at the store's path: it would be lost when the process stops. The paths are
    /// compared (a few `stat` calls) before a durable batch is answered: by the syncer after its
    /// sync when there is one, else here before the batch. Otherwise only the verdict already
    /// reached is read, with no system call: a relaxed answer may be lost anyway, and the next
    /// durable one notices.
    fn files_before(&self, relaxed: bool) -> Result<(), Arc<str>> {
        if relaxed || self.syncer.is_some() {
            self.health.verdict()
        } else {
            self.health.check_files()
        }
    }

    /// The syncer's number for a durable batch when there is a syncer, taken before anything
    /// of the batch is visible (see `Unsynced`).
    fn sync_number(&self, batch: &[Request], relaxed: bool) -> Option<u64> {
        if relaxed || self.syncer.is_none() {
            return None;
        }
        Some(
            self.unsynced.begin(
                batch
                    .iter()
                    .filter(|r| r.write.durability == Durability::Durable)
                    .map(|r| (r.write.ns.as_str(), r.write.id.as_str())),
            ),
        )
    }

    /// After the `COMMIT`: what each write set changed (for the cache and the schedule), the
    /// answers to send now, and the durable answers the syncer sends after its sync.
    fn settle(
        &mut self,
        batch: Vec<Request>,
        outcomes: Vec<Outcome>,
        syncing: bool,
    ) -> BatchEffects {
        let mut settled = BatchEffects {
            changes: Vec::with_capacity(outcomes.len()),
            answers: Vec::with_capacity(outcomes.len()),
            to_sync: Vec::new(),
            journaled: 0,
        };
        for (request, outcome) in batch.into_iter().zip(outcomes) {
            let Request {
                write,
                bodies,
                reply,
            } = request;
            let key = (write.ns, write.id);
            let change = match outcome {
                Ok((pruned_through, how)) => {
                    if syncing && write.durability == Durability::Durable {
                        settled.to_sync.push(reply);
                    } else {
                        settled.answers.push((reply, Ok(())));
                    }
                    match write.instance {
                        None => {
                            self.dirty.remove(&key);
                            CacheUpdate::Deleted
                        }
                        Some(mut instance) => {
                            instance.history_pruned_through = pruned_through;
                            if how == WrittenTo::Journaled {
                                settled.journaled += 1;
                                if !self.in_journal.contains(&key) {
                                    self.in_journal.insert(key.clone());
                                }
                                self.remember(&key, &instance, &write.turns, bodies);
                                CacheUpdate::Dirty(instance, write.turns)
                            } else {
                                self.dirty.remove(&key);
                                CacheUpdate::Clean(instance, write.turns)
                            }
                        }
                    }
                }
                Err(e) => {
                    // A conflict is someone else's write: forget what we believed.
                    let forget = e == CommitError::Conflict;
                    settled.answers.push((reply, Err(e)));
                    if !forget {
                        continue;
                    }
                    CacheUpdate::Forget
                }
            };
            settled.changes.push((key, change));
        }
        settled
    }

    /// Tell the journal count, the schedule index and the cache what the batch changed.
    fn publish(&mut self, changes: Vec<(Key, CacheUpdate)>, journaled: usize) {
        self.journal_rows += journaled;
        self.schedule
            .committed(changes.iter().filter_map(|(key, change)| match change {
                CacheUpdate::Clean(i, _) | CacheUpdate::Dirty(i, _) => Some((key, Some(i))),
                CacheUpdate::Deleted => Some((key, None)),
                CacheUpdate::Forget => None,
            }));
        self.cache.committed(changes);
    }

    /// Count the batch, then send the answers due now.
    fn count_and_answer(
        &self,
        answers: Vec<(Reply, Result<(), CommitError>)>,
        syncing: usize,
        journaled: usize,
        relaxed: bool,
    ) {
        // Count before answering, so a caller that saw its commit sees it counted.
        let applied = (answers.iter().filter(|(_, a)| a.is_ok()).count() + syncing) as u64;
        let stats = &self.stats;
        stats.write_sets.fetch_add(applied, Ordering::Release);
        stats
            .journaled
            .fetch_add(journaled as u64, Ordering::Release);
        if !relaxed {
            stats.durable_batches.fetch_add(1, Ordering::Release);
        }
        stats.batches.fetch_add(1, Ordering::Release);
        for (reply, answer) in answers {
            // The caller may have given up waiting; that is fine.
            let _ = reply.send(answer);
        }
    }

    /// Give the syncer a numbered batch's durable answers; if it has stopped, fail them.
    fn hand_to_syncer(&self, number: u64, answers: Vec<Reply>) {
        let Some(syncer) = &self.syncer else {
            return;
        };
        if let Err(mpsc::SendError(job)) = syncer.send(SyncJob { number, answers }) {
            let stopped = "sqlite: the syncer thread has stopped; close the store and open \
                           the file again";
            self.unsynced.failed(Arc::from(stopped));
            for reply in job.answers {
                let _ = reply.send(Err(CommitError::Store(StoreError::new(stopped))));
            }
        }
    }

    /// After the `COMMIT`: keep the rows of a journaled write set for the next flush.
    fn remember(
        &mut self,
        key: &Key,
        instance: &InstanceRecord,
        turns: &[TurnRecord],
        bodies: Bodies,
    ) {
        let Some(body) = bodies.instance else { return };
        let rows = match self.dirty.get_mut(key) {
            Some(rows) => {
                rows.update(instance, body);
                rows
            }
            None => self
                .dirty
                .entry(key.clone())
                .or_insert(DirtyRows::new(instance, body)),
        };
        for (t, body) in turns.iter().zip(bodies.turns) {
            let row = OwnedTurnRow {
                message_id: t.message_id.clone(),
                finished_at_ms: t.finished_at_ms,
                body,
            };
            rows.turns.insert(t.number, row);
        }
    }

    /// Apply the batch in one transaction. `Err` means nothing of it was written. The flag
    /// says whether the journal was flushed first.
    ///
    /// Write sets are applied back to back without savepoints: almost every refusal (a revision
    /// conflict) happens at a write set's first statement and leaves nothing behind, and a
    /// savepoint per write set makes SQLite fill and free a statement journal every time. When
    /// a write set fails after writing rows (an invalid turn, a full disk), the transaction is
    /// rolled back and the batch applied again with a savepoint around each write set.
    fn transact(
        &mut self,
        batch: &[Request],
        relaxed: bool,
    ) -> Result<(Vec<Outcome>, bool), StoreError> {
        self.set_level(if relaxed {
            self.relaxed_level()
        } else {
            self.configured
        })?;
        let flush = self.flush_due();
        exec(&self.conn, "BEGIN IMMEDIATE").map_err(db("begin a transaction"))?;
        let first = if flush { self.flush_rows() } else { Ok(()) };
        let result = first.and_then(|()| match self.apply_all(batch, false, flush) {
            Ok(None) => {
                self.stats.guarded_retries.fetch_add(1, Ordering::Relaxed);
                exec(&self.conn, "ROLLBACK")
                    .and_then(|_| exec(&self.conn, "BEGIN IMMEDIATE"))
                    .map_err(db("restart a transaction"))?;
                if flush {
                    self.flush_rows()?;
                }
                self.apply_all(batch, true, flush)
            }
            other => other,
        });
        let result = result.and_then(|applied| {
            // Guarded application always answers every write set.
            let (outcomes, materialized) =
                applied.ok_or_else(|| StoreError::new("sqlite: a batch was left half-applied"))?;
            if flush || materialized {
                // Readers that merge the tables with dirty entries must not mix the two
                // sides of this commit.
                self.cache.tables_changing();
            }
            exec(&self.conn, "COMMIT").map_err(db("commit"))?;
            Ok((outcomes, flush))
        });
        if result.is_err() && !self.conn.is_autocommit() {
            // Best effort: if even ROLLBACK fails, SQLite rolls back when the connection or
            // the next BEGIN finds the transaction broken.
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        result
    }

    /// Apply every write set of the batch, each inside its own savepoint when `guarded`.
    /// `Ok(None)`: unguarded, a write set failed after changing rows, so the transaction must
    /// be rolled back and the batch applied again guarded. `flushed`: the dirty instances'
    /// rows were written at the start of this transaction.
    ///
    /// A running turn's write on an instance the cache knows goes to the journal (one row
    /// appended) when the cache shows it may ([`Cache::verdict`]); anything else goes to the
    /// tables, after the instance's journaled rows, if any, were written there.
    fn apply_all(
        &self,
        batch: &[Request],
        guarded: bool,
        flushed: bool,
    ) -> Result<Option<(Vec<Outcome>, bool)>, StoreError> {
        let conn = &self.conn;
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut materialized = false;
        let mut touched: HashMap<(&str, &str), Touch> = HashMap::with_capacity(batch.len());
        for (i, Request { write, bodies, .. }) in batch.iter().enumerate() {
            let at = (write.ns.as_str(), write.id.as_str());
            let prior = touched.get(&at).copied();
            let key = (write.ns.clone(), write.id.clone());
            if prior.is_none() && self.journal_limit > 0 {
                match self.cache.verdict(&key, write) {
                    Verdict::Journal {
                        new_turns,
                        retention_since,
                    } if tables_agree(conn, write, &new_turns, retention_since)? => {
                        let outcome = journal(conn, write, bodies)
                            .map(|pruned| (pruned, WrittenTo::Journaled))
                            .map_err(CommitError::Store);
                        if outcome.is_err() && conn.is_autocommit() {
                            return Err(StoreError::new("sqlite: the transaction was rolled back"));
                        }
                        if outcome.is_ok() {
                            touched.insert(at, Touch::Journaled(i));
                        }
                        outcomes.push(outcome);
                        continue;
                    }
                    Verdict::Conflict => {
                        outcomes.push(Err(CommitError::Conflict));
                        continue;
                    }
                    Verdict::Journal { .. } | Verdict::Direct => {}
                }
            }
            // Bring the instance's rows up to date first (outside any savepoint, so that they
            // stay written whatever becomes of this write set).
            if !matches!(prior, Some(Touch::Current)) {
                if !flushed {
                    if let Some(rows) = self.dirty.get(&key) {
                        put_dirty(conn, &write.ns, &write.id, rows)?;
                        materialized = true;
                    }
                }
                if let Some(Touch::Journaled(j)) = prior {
                    put_journaled(conn, &batch[j].write, &batch[j].bodies)?;
                    materialized = true;
                }
            }
            // A deleted instance's journal rows go with it, or a replay after a crash could
            // write them over a new instance of the same id.
            let journaled_before =
                matches!(prior, Some(Touch::Journaled(_))) || self.in_journal.contains(&key);
            if write.instance.is_none() && journaled_before {
                conn.prepare_cached("DELETE FROM journal WHERE ns = ?1 AND id = ?2")
                    .and_then(|mut s| s.execute(params![write.ns, write.id]))
                    .map_err(db(format_args!("drop the journal rows of `{}`", write.id)))?;
            }
            touched.insert(at, Touch::Current);
            if guarded {
                exec(conn, "SAVEPOINT write_set").map_err(db("open a savepoint"))?;
            }
            let outcome = match apply(conn, write, bodies) {
                Err(refusal) if conn.is_autocommit() => {
                    // SQLite rolled back the whole transaction (I/O error, disk full…): the
                    // batch's earlier write sets are gone too.
                    return Err(match refusal.error {
                        CommitError::Store(e) => e,
                        CommitError::Conflict | CommitError::MessageIdTaken { .. } => {
                            StoreError::new("sqlite: the transaction was rolled back")
                        }
                    });
                }
                Err(refusal) if refusal.wrote && !guarded => return Ok(None),
                result => result
                    .map(|pruned| (pruned, WrittenTo::Direct))
                    .map_err(|refusal| refusal.error),
            };
            if guarded && outcome.is_err() {
                exec(conn, "ROLLBACK TO write_set").map_err(db("roll back a savepoint"))?;
            }
            if guarded {
                exec(conn, "RELEASE write_set").map_err(db("release a savepoint"))?;
            }
            outcomes.push(outcome);
        }
        Ok(Some((outcomes, materialized)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(id: &str, durability: Durability) -> Request {
        let write = WriteSet {
            ns: "ns".into(),
            id: id.into(),
            expected_revision: Some(1),
            instance: None,
            turns: Vec::new(),
            retention: None,
            runs: Vec::new(),
            prune_runs_before: None,
            durability,
        };
        Request {
            bodies: Bodies::of(&write).unwrap(),
            write,
            reply: oneshot::channel().0,
        }
    }

    fn ids(batch: &[Request]) -> Vec<&str> {
        batch.iter().map(|r| r.write.id.as_str()).collect()
    }

    #[test]
    fn a_batch_of_one_kind_stays_whole() {
        for kind in [Durability::Relaxed, Durability::Durable] {
            let batch = vec![request("a", kind), request("b", kind)];
            let whole = split_relaxed(batch).map(|_| ()).unwrap_err();
            assert_eq!(ids(&whole), ["a", "b"]);
        }
    }

    #[test]
    fn a_mixed_batch_splits_relaxed_first_keeping_the_order_within_each_part() {
        let batch = vec![
            request("a", Durability::Durable),
            request("b", Durability::Relaxed),
            request("c", Durability::Durable),
            request("d", Durability::Relaxed),
        ];
        let Ok((relaxed, durable)) = split_relaxed(batch) else {
            panic!("a batch of distinct instances splits");
        };
        assert_eq!(ids(&relaxed), ["b", "d"]);
        assert_eq!(ids(&durable), ["a", "c"]);
    }

    #[test]
    fn an_instance_with_write_sets_of_both_kinds_keeps_the_batch_whole() {
        let batch = vec![
            request("a", Durability::Durable),
            request("b", Durability::Relaxed),
            request("a", Durability::Relaxed),
        ];
        let whole = split_relaxed(batch).map(|_| ()).unwrap_err();
        assert_eq!(ids(&whole), ["a", "b", "a"]);
    }
}
