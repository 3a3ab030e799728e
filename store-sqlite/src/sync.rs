//! The WAL sync, off the writer's path.
//!
//! With [`Synchronous::Full`] and [`SqliteOptions::sync_thread`] (the defaults), the writer
//! commits at `PRAGMA synchronous=NORMAL`, which in WAL mode writes a commit's frames to the
//! log without syncing it, and hands the batch's durable answers to the *syncer* thread. The
//! syncer `fdatasync`s the log, which makes every frame written before it durable at once, and
//! only then answers. Meanwhile the writer is already applying the next batch: the disk's sync
//! latency and the writer's CPU work overlap instead of adding up, and relaxed write sets
//! (claims, operation starts) are answered while a sync is in flight.
//!
//! Checkpoints are unchanged: at `NORMAL` SQLite syncs the log before copying it into the
//! database file and syncs the file afterwards, so a checkpoint never makes an unsynced commit
//! depend on the database file alone.
//!
//! A commit is visible to readers as soon as its `COMMIT` returns, before the syncer has
//! synced it. So that no read reports a durable write that a power loss could still take back
//! (a repeated request answered from it would acknowledge a write that is then lost), every
//! read of an instance waits until the durable transactions that last wrote that instance are
//! synced, and reads across instances wait for every durable transaction committed so far.
//! [`Unsynced`] keeps what those waits need.

use std::collections::hash_map::DefaultHasher;
use std::fs::File;
use std::hash::{BuildHasher, BuildHasherDefault};
use std::sync::atomic::{AtomicU64, Ordering};

use super::*;

/// How long the syncer polls for the next job before it sleeps (see the writer's spin).
const SYNCER_SPIN: Duration = Duration::from_micros(200);

/// Where the durable transactions stand: which are committed and which are synced.
pub(super) struct Unsynced {
    /// The number of the latest durable transaction, set before its `COMMIT`.
    committed: AtomicU64,
    /// Every durable transaction up to this number is on stable storage.
    synced: AtomicU64,
    /// Instances written by durable transactions that may not be synced yet, by a hash of
    /// their key (a collision only makes a read wait for a sync it did not need), with the
    /// number of the latest such transaction.
    writes: Mutex<HashMap<u64, u64>>,
    /// What waiting reads watch.
    state: watch::Sender<SyncState>,
}

#[derive(Clone, Debug, Default)]
struct SyncState {
    synced: u64,
    /// Set once a sync failed; nothing after it is durable.
    failed: Option<Arc<str>>,
}

fn key_hash(ns: &str, id: &str) -> u64 {
    BuildHasherDefault::<DefaultHasher>::default().hash_one((ns, id))
}

impl Unsynced {
    pub(super) fn new() -> Self {
        Self {
            committed: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            writes: Mutex::new(HashMap::new()),
            state: watch::Sender::new(SyncState::default()),
        }
    }

    /// The writer, before the `COMMIT` of a transaction holding durable write sets of these
    /// instances: its number. Everything a read can see of the transaction is visible only
    /// after this returns.
    pub(super) fn begin<'a>(&self, instances: impl Iterator<Item = (&'a str, &'a str)>) -> u64 {
        let number = self.committed.load(Ordering::Relaxed) + 1;
        {
            let mut writes = lock(&self.writes);
            for (ns, id) in instances {
                writes.insert(key_hash(ns, id), number);
            }
        }
        self.committed.store(number, Ordering::Release);
        number
    }

    /// The syncer: every durable transaction up to `number` is synced.
    fn synced(&self, number: u64) {
        self.synced.store(number, Ordering::Release);
        lock(&self.writes).retain(|_, n| *n > number);
        self.state.send_modify(|s| s.synced = number);
    }

    /// A sync failed (or the syncer is gone), so nothing committed from now on is known
    /// durable.
    pub(super) fn failed(&self, why: Arc<str>) {
        self.state.send_modify(|s| s.failed = Some(why));
    }

    /// Why a sync failed, once one did.
    pub(super) fn failure(&self) -> Option<Arc<str>> {
        self.state.borrow().failed.clone()
    }

    /// After a read of one instance: wait until the durable transactions that wrote it are
    /// synced.
    pub(super) async fn settle_instance(&self, ns: &str, id: &str) -> Result<(), StoreError> {
        if self.all_synced() {
            return Ok(());
        }
        let number = lock(&self.writes).get(&key_hash(ns, id)).copied();
        match number {
            Some(number) => self.settle_through(number).await,
            None => Ok(()),
        }
    }

    /// After a read across instances: wait until every durable transaction committed so far
    /// is synced.
    pub(super) async fn settle_all(&self) -> Result<(), StoreError> {
        let number = self.committed.load(Ordering::Acquire);
        self.settle_through(number).await
    }

    fn all_synced(&self) -> bool {
        // `synced` first: it never passes `committed`, so a stale `committed` only errs
        // towards the slow path.
        let synced = self.synced.load(Ordering::Acquire);
        synced >= self.committed.load(Ordering::Acquire)
    }

    async fn settle_through(&self, number: u64) -> Result<(), StoreError> {
        if self.synced.load(Ordering::Acquire) >= number {
            return Ok(());
        }
        let mut state = self.state.subscribe();
        let state = state
            .wait_for(|s| s.synced >= number || s.failed.is_some())
            .await
            .map_err(|_| StoreError::new("sqlite: the syncer thread has stopped"))?;
        match &state.failed {
            Some(why) if state.synced < number => Err(StoreError::new(why.to_string())),
            _ => Ok(()),
        }
    }
}

/// The durable answers of one transaction, to send once the log is synced.
pub(super) struct SyncJob {
    pub(super) number: u64,
    pub(super) answers: Vec<oneshot::Sender<Result<(), CommitError>>>,
}

/// The syncer thread's state.
pub(super) struct Syncer {
    rx: mpsc::Receiver<SyncJob>,
    /// The write-ahead log (`<db>-wal`), opened at the first sync.
    wal_path: PathBuf,
    wal: Option<File>,
    unsynced: Arc<Unsynced>,
    stats: Arc<StatsCounters>,
    failed: Option<Arc<str>>,
    /// Taken from before each sync, when set: how tests hold syncs back.
    #[cfg(test)]
    gate: Option<mpsc::Receiver<()>>,
    /// The store's files, checked after each sync: a sync of a log that no longer has a name
    /// makes nothing durable.
    health: Option<Arc<Health>>,
}

impl Syncer {
    pub(super) fn new(
        rx: mpsc::Receiver<SyncJob>,
        db_path: &Path,
        unsynced: Arc<Unsynced>,
        stats: Arc<StatsCounters>,
    ) -> Self {
        // An absolute path, so that a change of the working directory cannot misdirect it.
        let db_path = std::path::absolute(db_path).unwrap_or_else(|_| db_path.to_path_buf());
        let mut wal_path = db_path.into_os_string();
        wal_path.push("-wal");
        Self {
            rx,
            wal_path: PathBuf::from(wal_path),
            wal: None,
            unsynced,
            stats,
            failed: None,
            #[cfg(test)]
            gate: None,
            health: None,
        }
    }

    /// Check the store's files after each sync.
    pub(super) fn watching(mut self, health: Arc<Health>) -> Self {
        self.health = Some(health);
        self
    }

    /// Take one message from `gate` before each sync.
    #[cfg(test)]
    pub(super) fn gated(mut self, gate: mpsc::Receiver<()>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Sync and answer until the writer is gone, then once more for what it left.
    pub(super) fn run(mut self) {
        let mut lone = true;
        while let Some(first) = self.next_job(lone) {
            let mut jobs = vec![first];
            while let Ok(job) = self.rx.try_recv() {
                jobs.push(job);
            }
            lone = jobs.len() == 1 && jobs[0].answers.len() <= 1;
            let through = jobs.last().map_or(0, |j| j.number);
            #[cfg(test)]
            if let Some(gate) = &self.gate {
                let _ = gate.recv();
            }
            let started = std::time::Instant::now();
            let synced = self.sync();
            turnwise_core::metrics::sqlite_sync(started.elapsed());
            match &synced {
                Ok(()) => self.unsynced.synced(through),
                Err(why) => self.unsynced.failed(why.clone()),
            }
            // Counted before answering, so a caller that saw its commit sees it counted.
            self.stats.syncs.fetch_add(1, Ordering::Release);
            for job in jobs {
                for reply in job.answers {
                    let answer = match &synced {
                        Ok(()) => Ok(()),
                        Err(why) => Err(CommitError::Store(StoreError::new(why.to_string()))),
                    };
                    // The caller may have given up waiting; that is fine.
                    let _ = reply.send(answer);
                }
            }
        }
    }

    /// The next job: after a job of one answer, poll briefly before sleeping, as the writer
    /// does after a lone write set (and for the same reasons, not after a larger job). `None`
    /// when the writer is gone and every job is done.
    fn next_job(&self, poll: bool) -> Option<SyncJob> {
        let spin = if poll { SYNCER_SPIN } else { Duration::ZERO };
        match poll_for(&self.rx, spin) {
            Ok(job) => Some(job),
            Err(mpsc::TryRecvError::Disconnected) => None,
            Err(mpsc::TryRecvError::Empty) => self.rx.recv().ok(),
        }
    }

    /// `fdatasync` the log. After one failure every later sync fails too: the kernel may have
    /// dropped the pages that failed to write, so a later success would prove nothing.
    fn sync(&mut self) -> Result<(), Arc<str>> {
        if let Some(why) = &self.failed {
            return Err(why.clone());
        }
        let synced = match &self.wal {
            Some(file) => file.sync_data(),
            None => File::open(&self.wal_path).and_then(|file| {
                file.sync_data()?;
                self.wal = Some(file);
                Ok(())
            }),
        };
        synced.map_err(|e| {
            let why: Arc<str> = Arc::from(format!(
                "sqlite: syncing the write-ahead log {} failed: {e}; the latest writes may not \
                 be on stable storage, and the store accepts no more durable writes: close it \
                 and open the file again",
                self.wal_path.display()
            ));
            tracing::error!("turnwise sqlite store: {why}");
            self.failed = Some(why.clone());
            why
        })?;
        // Synced, but to the file at the path? (`check_files` logs what it finds.)
        if let Some(health) = &self.health {
            health.check_files().inspect_err(|why| {
                self.failed = Some(why.clone());
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `settle` is still waiting after the runtime had every chance to finish it.
    async fn pending<F: std::future::Future>(settle: F) -> bool {
        tokio::time::timeout(Duration::from_millis(50), settle)
            .await
            .is_err()
    }

    #[tokio::test]
    async fn a_read_waits_for_the_sync_of_the_durable_writes_of_its_instance_only() {
        let unsynced = Unsynced::new();
        assert!(
            !pending(unsynced.settle_all()).await,
            "nothing committed yet"
        );
        let first = unsynced.begin([("ns", "a")].into_iter());
        assert!(pending(unsynced.settle_instance("ns", "a")).await);
        assert!(pending(unsynced.settle_all()).await);
        assert!(!pending(unsynced.settle_instance("ns", "b")).await);
        assert!(!pending(unsynced.settle_instance("other", "a")).await);

        let second = unsynced.begin([("ns", "b")].into_iter());
        unsynced.synced(first);
        assert_eq!(unsynced.settle_instance("ns", "a").await, Ok(()));
        assert!(pending(unsynced.settle_instance("ns", "b")).await);
        assert!(pending(unsynced.settle_all()).await);
        unsynced.synced(second);
        assert_eq!(unsynced.settle_all().await, Ok(()));
        assert!(
            lock(&unsynced.writes).is_empty(),
            "synced writes are forgotten"
        );
    }

    #[tokio::test]
    async fn a_waiting_read_is_woken_by_the_sync() {
        let unsynced = Arc::new(Unsynced::new());
        let number = unsynced.begin([("ns", "a")].into_iter());
        let waiting = tokio::spawn({
            let unsynced = unsynced.clone();
            async move { unsynced.settle_instance("ns", "a").await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        unsynced.synced(number);
        assert_eq!(waiting.await.unwrap(), Ok(()));
    }

    #[tokio::test]
    async fn after_a_failed_sync_reads_of_unsynced_writes_fail() {
        let unsynced = Unsynced::new();
        let first = unsynced.begin([("ns", "a")].into_iter());
        unsynced.synced(first);
        unsynced.begin([("ns", "b")].into_iter());
        unsynced.failed(Arc::from("the disk is gone"));
        let err = unsynced.settle_instance("ns", "b").await.unwrap_err();
        assert_eq!(err.to_string(), "the disk is gone");
        // What was synced before stays readable.
        assert_eq!(unsynced.settle_instance("ns", "a").await, Ok(()));
    }

    fn create(id: &str) -> turnwise_core::protocol::CreateInstanceRequest {
        turnwise_core::protocol::CreateInstanceRequest {
            id: id.into(),
            workflow_type: "t".into(),
            version: "v1".into(),
            state: serde_json::Value::Null,
            lease_ms: None,
            max_attempts: None,
            on_exhausted: None,
        }
    }

    /// Through the engine, with the store's syncer held back by a gate.
    #[tokio::test]
    async fn a_durable_write_is_answered_and_read_only_once_synced() {
        use turnwise::{Backend, Engine, EngineConfig};
        use turnwise_core::protocol::*;

        let dir = tempfile::tempdir().unwrap();
        let (gate, held) = mpsc::channel();
        let store =
            SqliteStore::open_gated(&dir.path().join("store.db"), SqliteOptions::default(), held)
                .await
                .unwrap();
        let engine = Engine::new(
            store.clone(),
            turnwise_core::clock::SystemClock,
            EngineConfig::default(),
        );
        // Bound after the store, so dropped before it if an assertion fails: closing the store
        // waits for the syncer, which must not be left waiting at the gate.
        let gate = gate;
        for _ in 0..2 {
            gate.send(()).unwrap();
        }
        engine.create_instance(create("synced")).await.unwrap();
        let message = MessageRequest {
            workflow_id: "synced".into(),
            id: "m-1".into(),
            message: serde_json::json!(1),
            origin: None,
        };
        engine.send_message(message).await.unwrap();

        // The next sync is held: the create is committed and visible to SQLite, unanswered.
        let creating = tokio::spawn({
            let engine = engine.clone();
            async move { engine.create_instance(create("held")).await }
        });
        while store.stats().write_sets < 3 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(!creating.is_finished(), "answered before its sync");
        assert!(pending(engine.get_instance("held")).await);
        assert!(pending(engine.list_instances(ListInstancesQuery::default())).await);
        // Other instances read at once, and a claim (a relaxed write) is answered at once.
        assert_eq!(engine.get_instance("synced").await.unwrap().id, "synced");
        let claim = ClaimRequest {
            worker: "w".into(),
            workflows: vec![WorkflowRef::new("t", "v1")],
            wait_ms: 0,
            include_execution_credential: None,
        };
        assert!(engine.claim(claim).await.unwrap().task.is_some());

        // The sync lets the answer and the reads through.
        let reading = tokio::spawn({
            let engine = engine.clone();
            async move { engine.get_instance("held").await }
        });
        drop(gate); // this sync and every later one go through
        assert_eq!(creating.await.unwrap().unwrap().id, "held");
        assert_eq!(reading.await.unwrap().unwrap().id, "held");
        let listed = engine
            .list_instances(ListInstancesQuery::default())
            .await
            .unwrap();
        assert_eq!(listed.instances.len(), 2);
    }

    /// Start a syncer for the database at `db`: its inbox, its state and its counters.
    fn syncer(db: &Path) -> (mpsc::Sender<SyncJob>, Arc<Unsynced>, Arc<StatsCounters>) {
        let (tx, rx) = mpsc::channel();
        let unsynced = Arc::new(Unsynced::new());
        let stats = Arc::new(StatsCounters::default());
        let syncer = Syncer::new(rx, db, unsynced.clone(), stats.clone());
        std::thread::spawn(move || syncer.run());
        (tx, unsynced, stats)
    }

    fn job(unsynced: &Unsynced) -> (SyncJob, oneshot::Receiver<Result<(), CommitError>>) {
        let number = unsynced.begin([("ns", "a")].into_iter());
        let (reply, answer) = oneshot::channel();
        let job = SyncJob {
            number,
            answers: vec![reply],
        };
        (job, answer)
    }

    #[tokio::test]
    async fn the_syncer_syncs_the_log_then_answers() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("store.db");
        std::fs::write(dir.path().join("store.db-wal"), b"frames").unwrap();
        let (tx, unsynced, stats) = syncer(&db);
        let (first, answer) = job(&unsynced);
        tx.send(first).unwrap();
        assert_eq!(answer.await.unwrap(), Ok(()));
        assert_eq!(stats.syncs.load(Ordering::Acquire), 1);
        assert_eq!(unsynced.settle_all().await, Ok(()));
    }

    #[tokio::test]
    async fn a_failed_sync_fails_its_answers_and_every_later_one() {
        let dir = tempfile::tempdir().unwrap();
        // No log file: opening it fails.
        let (tx, unsynced, _) = syncer(&dir.path().join("store.db"));
        let (first, answer) = job(&unsynced);
        tx.send(first).unwrap();
        let Err(CommitError::Store(e)) = answer.await.unwrap() else {
            panic!("a sync of a missing log succeeded");
        };
        assert!(e.to_string().contains("store.db-wal"), "{e}");
        assert!(e.to_string().contains("open the file again"), "{e}");
        assert!(unsynced.settle_all().await.is_err());

        // The log appears; the syncer still refuses, since what failed earlier is not durable.
        std::fs::write(dir.path().join("store.db-wal"), b"frames").unwrap();
        let (second, answer) = job(&unsynced);
        tx.send(second).unwrap();
        assert!(matches!(answer.await.unwrap(), Err(CommitError::Store(_))));
    }
}
