//! Schedules on PostgreSQL with two engines on one schema (two nodes): each occurrence is
//! admitted once whichever engine looks first, and an engine learns of a schedule another one
//! created from the store's change notices.

#![cfg(feature = "postgres")]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use turnwise::clock::ManualClock;
use turnwise::protocol::*;
use turnwise::store::{
    CommitError, InstanceFilter, InstanceRecord, PostgresStore, RunCount, RunFilter, Store,
    StoreError, TurnRange, TurnRecord, Watcher, WriteSet,
};
use turnwise::testing::TestPostgres;
use turnwise::{Backend, Engine, EngineConfig};

const ANCHOR: i64 = 1_767_225_600_000;

async fn node(db: &TestPostgres, clock: &ManualClock) -> Engine {
    Engine::new(db.store().await, clock.clone(), EngineConfig::default())
}

/// A node whose store notes the schedule firings its own commits admitted.
async fn watched_node(db: &TestPostgres, clock: &ManualClock) -> (Engine, Admitted) {
    let admitted = Admitted::default();
    let store = Noting {
        inner: db.store().await,
        admitted: admitted.clone(),
    };
    let engine = Engine::new(store, clock.clone(), EngineConfig::default());
    (engine, admitted)
}

/// The (instance, message id) of each schedule firing a node admitted, in commit order.
type Admitted = Arc<Mutex<Vec<(String, String)>>>;

/// A PostgreSQL store that notes, for one node, each firing its commits admit: a new turn
/// (queued, no attempt yet) whose message came from a schedule, in a commit that succeeded.
struct Noting {
    inner: PostgresStore,
    admitted: Admitted,
}

#[async_trait]
impl Store for Noting {
    async fn load_instance(
        &self,
        ns: &str,
        id: &str,
    ) -> Result<Option<InstanceRecord>, StoreError> {
        self.inner.load_instance(ns, id).await
    }
    async fn load_turn(
        &self,
        ns: &str,
        id: &str,
        number: u64,
    ) -> Result<Option<TurnRecord>, StoreError> {
        self.inner.load_turn(ns, id, number).await
    }
    async fn load_instance_turn(
        &self,
        ns: &str,
        id: &str,
        number: u64,
    ) -> Result<Option<(InstanceRecord, Option<TurnRecord>)>, StoreError> {
        self.inner.load_instance_turn(ns, id, number).await
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
        self.inner.due(ns, workflows, now, limit).await
    }
    async fn next_due(
        &self,
        ns: &str,
        workflows: &[WorkflowRef],
    ) -> Result<Option<Millis>, StoreError> {
        self.inner.next_due(ns, workflows).await
    }
    async fn commit(&self, write: WriteSet) -> Result<(), CommitError> {
        let firings: Vec<(String, String)> = write
            .turns
            .iter()
            .filter(|t| {
                t.status == TurnStatus::Queued
                    && t.attempt == 0
                    && t.origin.as_ref().is_some_and(|o| o.kind == "schedule")
            })
            .map(|t| (write.id.clone(), t.message_id.clone()))
            .collect();
        self.inner.commit(write).await?;
        self.admitted.lock().unwrap().extend(firings);
        Ok(())
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
    async fn delete_unreadable(&self, ns: &str, id: &str) -> Result<bool, StoreError> {
        self.inner.delete_unreadable(ns, id).await
    }
    async fn health(&self) -> Result<(), StoreError> {
        self.inner.health().await
    }
    fn watch(&self, watcher: Watcher) {
        self.inner.watch(watcher)
    }
}

fn claim_request(worker: &str, wait_ms: u64) -> ClaimRequest {
    ClaimRequest {
        worker: worker.into(),
        workflows: vec![WorkflowRef::new("sched", "v1")],
        wait_ms,
        include_execution_credential: None,
    }
}

async fn create(engine: &Engine, id: &str) {
    engine
        .create_instance(CreateInstanceRequest {
            id: id.into(),
            workflow_type: "sched".into(),
            version: "v1".into(),
            state: json!(null),
            lease_ms: None,
            max_attempts: None,
            on_exhausted: None,
        })
        .await
        .unwrap();
}

/// Claim and complete every ready turn; answers the (instance, message id) pairs completed.
async fn drain(engine: &Engine, worker: &str) -> Vec<(String, String)> {
    let mut done = Vec::new();
    while let Some(task) = engine.claim(claim_request(worker, 0)).await.unwrap().task {
        engine
            .complete(CompleteRequest {
                lease: Lease {
                    workflow_id: task.turn.workflow_id.clone(),
                    turn: task.turn.number,
                    token: task.token.clone(),
                },
                state: json!(null),
                result: json!(null),
                continuation: None,
                usage: None,
                results: None,
            })
            .await
            .unwrap();
        done.push((task.turn.workflow_id, task.turn.message_id));
    }
    done
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_fire_each_occurrence_once() {
    let Some(db) = TestPostgres::start("schedule_nodes_once").await else {
        return;
    };
    let clock = ManualClock::new(ANCHOR);
    let (a, admitted_by_a) = watched_node(&db, &clock).await;
    let (b, admitted_by_b) = watched_node(&db, &clock).await;
    for id in ["i-1", "i-2", "i-3"] {
        create(&a, id).await;
        a.create_schedule(CreateScheduleRequest {
            workflow_id: id.into(),
            name: "tick".into(),
            spec: ScheduleSpec::Every {
                every_ms: 1000,
                anchor_ms: Some(ANCHOR),
            },
            message: json!({"id": id}),
            catch_up: CatchUp::All,
        })
        .await
        .unwrap();
    }
    let mut seen = Vec::new();
    for k in 1..=20i64 {
        clock.set(ANCHOR + k * 1000);
        // Both nodes look at once, each claiming and completing what it can (each round
        // another one asks first).
        let (from_a, from_b) = if k % 2 == 0 {
            tokio::join!(drain(&a, "node-a"), drain(&b, "node-b"))
        } else {
            let (from_b, from_a) = tokio::join!(drain(&b, "node-b"), drain(&a, "node-a"));
            (from_a, from_b)
        };
        seen.extend(from_a);
        seen.extend(from_b);
    }
    // Each occurrence was admitted by exactly one node's commit, and both nodes admitted some:
    // the nodes really competed for the firings.
    let by_a = admitted_by_a.lock().unwrap().clone();
    let by_b = admitted_by_b.lock().unwrap().clone();
    let mut admissions: BTreeMap<&(String, String), usize> = BTreeMap::new();
    for firing in by_a.iter().chain(&by_b) {
        *admissions.entry(firing).or_default() += 1;
    }
    let twice: Vec<_> = admissions.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "admitted more than once: {twice:?}");
    assert_eq!(admissions.len(), 60, "A: {by_a:?}\nB: {by_b:?}");
    assert!(
        !by_a.is_empty() && !by_b.is_empty(),
        "both nodes admit firings: {} by A, {} by B",
        by_a.len(),
        by_b.len()
    );

    let unique: BTreeSet<&(String, String)> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "no firing ran twice: {seen:?}");
    assert_eq!(
        seen.len(),
        60,
        "every occurrence of each instance ran: {seen:?}"
    );
    for id in ["i-1", "i-2", "i-3"] {
        let s = b.get_schedule(id, "tick").await.unwrap();
        assert_eq!((s.fired, s.skipped), (20, 0), "{id}");
        let history = b
            .history(HistoryQuery {
                id: id.into(),
                after: None,
                limit: Some(50),
            })
            .await
            .unwrap();
        let ids: Vec<String> = history.turns.iter().map(|t| t.message_id.clone()).collect();
        let want: Vec<String> = (1..=20)
            .map(|k| firing_id("tick", ANCHOR + k * 1000))
            .collect();
        assert_eq!(ids, want, "{id}: each occurrence once, in order");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_learns_of_a_schedule_another_created() {
    let Some(db) = TestPostgres::start("schedule_nodes_notice").await else {
        return;
    };
    let clock = ManualClock::new(ANCHOR);
    let (a, b) = (node(&db, &clock).await, node(&db, &clock).await);
    create(&a, "i-1").await;
    // Node B waits for work with nothing due anywhere: only a ring can wake it.
    let waiting = tokio::spawn({
        let b = b.clone();
        async move { b.claim(claim_request("node-b", 30_000)).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    a.create_schedule(CreateScheduleRequest {
        workflow_id: "i-1".into(),
        name: "soon".into(),
        spec: ScheduleSpec::After { delay_ms: 0 },
        message: json!("hello"),
        catch_up: CatchUp::One,
    })
    .await
    .unwrap();
    let task = waiting
        .await
        .unwrap()
        .unwrap()
        .task
        .expect("node B was woken by node A's schedule and admitted its firing");
    assert_eq!(task.turn.message_id, "soon");
    assert_eq!(task.turn.origin.unwrap().kind, "schedule");
}
