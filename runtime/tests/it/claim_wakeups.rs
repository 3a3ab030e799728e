//! Many claims waiting on one workflow type: an admission rings one of them, not all, and
//! claims scanning at once do not race each other for the same instance.
//!
//! The engine runs over a store that counts its schedule scans (`due`) and the commits it
//! refused for a stale revision, and yields before every read so that concurrent claims really
//! interleave. It can also hold the first scans until all of them have begun ([`Gate`]), so
//! that claims really scan at once.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::json;
use turnwise::clock::SystemClock;
use turnwise::protocol::*;
use turnwise::store::{
    CommitError, InstanceFilter, InstanceRecord, MemoryStore, RunCount, RunFilter, Store,
    StoreError, TurnRange, TurnRecord, WriteSet,
};
use turnwise::{Backend, Engine, EngineConfig};

#[derive(Default)]
struct Counts {
    scans: AtomicU64,
    conflicts: AtomicU64,
    /// Holds the first scans until they have all begun, when set.
    gate: Option<Gate>,
}

/// The first `n` scans each wait until all `n` have begun, so that `n` claims scan at once.
/// Claims that cannot scan at once (a serialised engine) open it after [`Gate::BOUND`], and
/// `opened_by_timeout` tells, with how many scans had begun by then (`begun_by_timeout`).
struct Gate {
    n: u64,
    arrived: AtomicU64,
    opened_by_timeout: AtomicBool,
    begun_by_timeout: AtomicU64,
}

impl Gate {
    /// Eight spawned claims begin their scans within milliseconds.
    const BOUND: Duration = Duration::from_secs(5);

    fn new(n: u64) -> Self {
        Self {
            n,
            arrived: AtomicU64::new(0),
            opened_by_timeout: AtomicBool::new(false),
            begun_by_timeout: AtomicU64::new(0),
        }
    }

    async fn pass(&self) {
        let arrived = self.arrived.fetch_add(1, Ordering::SeqCst) + 1;
        if arrived > self.n {
            return;
        }
        let started = Instant::now();
        while self.arrived.load(Ordering::SeqCst) < self.n
            && !self.opened_by_timeout.load(Ordering::SeqCst)
        {
            if started.elapsed() > Self::BOUND {
                let begun = self.arrived.load(Ordering::SeqCst);
                self.begun_by_timeout.store(begun, Ordering::SeqCst);
                self.opened_by_timeout.store(true, Ordering::SeqCst);
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// A [`MemoryStore`] that counts scans and refused commits, and yields before each read.
struct Counting {
    inner: MemoryStore,
    counts: Arc<Counts>,
}

#[async_trait]
impl Store for Counting {
    async fn load_instance(
        &self,
        ns: &str,
        id: &str,
    ) -> Result<Option<InstanceRecord>, StoreError> {
        tokio::task::yield_now().await;
        self.inner.load_instance(ns, id).await
    }
    async fn load_turn(
        &self,
        ns: &str,
        id: &str,
        number: u64,
    ) -> Result<Option<TurnRecord>, StoreError> {
        tokio::task::yield_now().await;
        self.inner.load_turn(ns, id, number).await
    }
    async fn find_message(
        &self,
        ns: &str,
        id: &str,
        message_id: &str,
    ) -> Result<Option<TurnRecord>, StoreError> {
        self.inner.find_message(ns, id, message_id).await
    }
    async fn list_turns(
        &self,
        ns: &str,
        id: &str,
        range: TurnRange,
    ) -> Result<Vec<TurnRecord>, StoreError> {
        self.inner.list_turns(ns, id, range).await
    }
    async fn list_instances(
        &self,
        ns: &str,
        filter: InstanceFilter,
    ) -> Result<Vec<InstanceRecord>, StoreError> {
        self.inner.list_instances(ns, filter).await
    }
    async fn count_instances(
        &self,
        ns: &str,
        workflow_type: &str,
        version: Option<&str>,
    ) -> Result<(u64, u64), StoreError> {
        self.inner.count_instances(ns, workflow_type, version).await
    }
    async fn due(
        &self,
        ns: &str,
        workflows: &[WorkflowRef],
        now: Millis,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.counts.scans.fetch_add(1, Ordering::SeqCst);
        if let Some(gate) = &self.counts.gate {
            gate.pass().await;
        }
        self.inner.due(ns, workflows, now, limit).await
    }
    async fn next_due(
        &self,
        ns: &str,
        workflows: &[WorkflowRef],
    ) -> Result<Option<Millis>, StoreError> {
        self.inner.next_due(ns, workflows).await
    }
    async fn list_runs(&self, ns: &str, filter: RunFilter) -> Result<Vec<WorkflowRun>, StoreError> {
        self.inner.list_runs(ns, filter).await
    }
    async fn load_run(&self, ns: &str, run_id: &str) -> Result<Option<WorkflowRun>, StoreError> {
        self.inner.load_run(ns, run_id).await
    }
    async fn count_runs(&self, ns: &str, since_ms: Millis) -> Result<Vec<RunCount>, StoreError> {
        self.inner.count_runs(ns, since_ms).await
    }
    async fn save_schema(
        &self,
        ns: &str,
        workflow_type: &str,
        version: &str,
        document: &str,
    ) -> Result<(), StoreError> {
        self.inner
            .save_schema(ns, workflow_type, version, document)
            .await
    }
    async fn load_schemas(&self, ns: &str) -> Result<Vec<String>, StoreError> {
        self.inner.load_schemas(ns).await
    }
    async fn commit(&self, write: WriteSet) -> Result<(), CommitError> {
        let r = self.inner.commit(write).await;
        if matches!(r, Err(CommitError::Conflict)) {
            self.counts.conflicts.fetch_add(1, Ordering::SeqCst);
        }
        r
    }
}

fn engine() -> (Engine, Arc<Counts>) {
    engine_with(Counts::default())
}

fn engine_with(counts: Counts) -> (Engine, Arc<Counts>) {
    let counts = Arc::new(counts);
    let store = Counting {
        inner: MemoryStore::new(),
        counts: counts.clone(),
    };
    (
        Engine::new(store, SystemClock, EngineConfig::default()),
        counts,
    )
}

async fn create(engine: &Engine, id: &str) {
    engine
        .create_instance(CreateInstanceRequest {
            id: id.into(),
            workflow_type: "job".into(),
            version: "v1".into(),
            state: json!({}),
            lease_ms: None,
            max_attempts: None,
            on_exhausted: None,
        })
        .await
        .unwrap();
}

async fn admit(engine: &Engine, id: &str) {
    engine
        .send_message(MessageRequest {
            workflow_id: id.into(),
            id: "m-1".into(),
            message: json!(1),
            origin: None,
        })
        .await
        .unwrap();
}

fn claim(engine: &Engine, wait_ms: u64) -> tokio::task::JoinHandle<Option<TurnTask>> {
    let engine = engine.clone();
    tokio::spawn(async move {
        engine
            .claim(ClaimRequest {
                worker: "w".into(),
                workflows: vec![WorkflowRef::new("job", "v1")],
                wait_ms,
                include_execution_credential: None,
            })
            .await
            .unwrap()
            .task
    })
}

/// Wait until `scans` stops changing (every spawned claim has scanned and parked).
async fn settled(counts: &Counts) -> u64 {
    let mut last = counts.scans.load(Ordering::SeqCst);
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = counts.scans.load(Ordering::SeqCst);
        if now == last {
            return now;
        }
        last = now;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_admission_rings_one_of_many_waiting_claims() {
    let (engine, counts) = engine();
    for i in 0..16 {
        create(&engine, &format!("job-{i}")).await;
    }
    let mut waiting: Vec<_> = (0..16).map(|_| claim(&engine, 5_000)).collect();
    let parked = settled(&counts).await;
    assert!(
        parked >= 16,
        "each claim scans once before it waits: {parked}"
    );

    admit(&engine, "job-0").await;
    let (won, _, rest) = tokio::time::timeout(
        Duration::from_secs(3),
        futures_select_first(std::mem::take(&mut waiting)),
    )
    .await
    .expect("an admission must wake a waiting claim");
    let task = won.expect("the woken claim takes the admitted turn");
    assert_eq!(task.turn.workflow_id, "job-0");
    let after = settled(&counts).await;
    assert!(
        after - parked <= 2,
        "one admission set off {} scans among 16 waiting claims; it should ring one",
        after - parked
    );
    // The others still wait, and each further admission is taken by one of them.
    for h in &rest {
        assert!(!h.is_finished(), "a claim not rung returned");
    }
    for i in 1..16 {
        admit(&engine, &format!("job-{i}")).await;
    }
    let mut ids = Vec::new();
    for h in rest {
        let task = tokio::time::timeout(Duration::from_secs(3), h)
            .await
            .expect("every admission is taken by a waiting claim")
            .unwrap()
            .expect("a task");
        ids.push(task.turn.workflow_id);
    }
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        15,
        "each turn went to exactly one claim: {ids:?}"
    );
}

/// The first of `handles` to finish, its index, and the rest.
async fn futures_select_first(
    mut handles: Vec<tokio::task::JoinHandle<Option<TurnTask>>>,
) -> (
    Option<TurnTask>,
    usize,
    Vec<tokio::task::JoinHandle<Option<TurnTask>>>,
) {
    loop {
        if let Some(i) = handles.iter().position(|h| h.is_finished()) {
            let h = handles.swap_remove(i);
            return (h.await.unwrap(), i, handles);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_scanning_at_once_do_not_race_for_one_instance() {
    const N: u64 = 8;
    let (engine, counts) = engine_with(Counts {
        gate: Some(Gate::new(N)),
        ..Counts::default()
    });
    for i in 0..N {
        create(&engine, &format!("job-{i}")).await;
        admit(&engine, &format!("job-{i}")).await;
    }
    // Eight claims scanning at once over eight ready instances (the gate holds each scan
    // until all eight have begun): each takes a different one, and none commits over another's
    // claim.
    let claims: Vec<_> = (0..N).map(|_| claim(&engine, 0)).collect();
    let mut ids = Vec::new();
    for (i, c) in claims.into_iter().enumerate() {
        match c.await.unwrap() {
            Some(task) => ids.push(task.turn.workflow_id),
            // A claim passes over the instances others decide on, and each of those is taken
            // by another claim; with as many ready instances as claims, one is left for each.
            None => panic!(
                "claim {i} of {N} got no task although {N} instances were ready for {N} claims \
                 (taken so far: {ids:?})"
            ),
        }
    }
    let gate = counts.gate.as_ref().expect("the gate is set");
    assert!(
        !gate.opened_by_timeout.load(Ordering::SeqCst),
        "the claims did not scan at once: only {} of {N} scans had begun after {:?} (are \
         claims serialised?), so nothing here shows that concurrent claims do not race",
        gate.begun_by_timeout.load(Ordering::SeqCst),
        Gate::BOUND
    );
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        N as usize,
        "a turn was handed out twice: {ids:?}"
    );
    assert_eq!(
        counts.conflicts.load(Ordering::SeqCst),
        0,
        "claims raced for the same instance"
    );
}
