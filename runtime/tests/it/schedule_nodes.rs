//! Schedules on PostgreSQL with two engines on one schema (two nodes): each occurrence is
//! admitted once whichever engine looks first, and an engine learns of a schedule another one
//! created from the store's change notices.

#![cfg(feature = "postgres")]

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::json;
use turnwise::clock::ManualClock;
use turnwise::protocol::*;
use turnwise::testing::TestPostgres;
use turnwise::{Backend, Engine, EngineConfig};

const ANCHOR: i64 = 1_767_225_600_000;

async fn node(db: &TestPostgres, clock: &ManualClock) -> Engine {
    Engine::new(db.store().await, clock.clone(), EngineConfig::default())
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
    let (a, b) = (node(&db, &clock).await, node(&db, &clock).await);
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
        // Both nodes look at once, each claiming and completing what it can.
        let (from_a, from_b) = tokio::join!(drain(&a, "node-a"), drain(&b, "node-b"));
        seen.extend(from_a);
        seen.extend(from_b);
    }
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
