//! `SqliteStore::stats`: the writer's cumulative batch and write-set counters.

#![cfg(feature = "sqlite")]

use serde_json::json;
use turnwise::clock::SystemClock;
use turnwise::protocol::*;
use turnwise::store::{
    CommitError, Durability, SqliteOptions, SqliteStats, SqliteStore, Store, WriteSet,
};
use turnwise::{Backend, Engine, EngineConfig};

/// Create instance `s-1` of `stats v1`.
async fn create(engine: &Engine) {
    engine
        .create_instance(CreateInstanceRequest {
            id: "s-1".into(),
            workflow_type: "stats".into(),
            version: "v1".into(),
            state: json!(null),
            lease_ms: None,
            max_attempts: None,
            on_exhausted: None,
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn stats_count_batches_durable_batches_and_write_sets() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("stats.db"))
        .await
        .unwrap();
    assert_eq!(store.stats(), SqliteStats::default());
    let engine = Engine::new(store.clone(), SystemClock, EngineConfig::default());

    // One call at a time, so each commit is a batch of its own.
    create(&engine).await; // durable
    engine
        .send_message(MessageRequest {
            workflow_id: "s-1".into(),
            id: "m-1".into(),
            message: json!(1),
            origin: None,
        })
        .await
        .unwrap(); // durable
    let claimed = engine
        .claim(ClaimRequest {
            worker: "w".into(),
            workflows: vec![WorkflowRef::new("stats", "v1")],
            wait_ms: 0,
            include_execution_credential: None,
        })
        .await
        .unwrap(); // relaxed
    assert!(claimed.task.is_some());
    let after_engine = store.stats();
    assert_eq!(
        after_engine,
        SqliteStats {
            batches: 3,
            durable_batches: 2,
            write_sets: 3,
            guarded_retries: 0,
            // The admission and the claim went to the journal (the create did not).
            journaled: 2,
            flushes: 0,
            // The sync thread (the default) synced the log once per durable commit: each came
            // alone, after the previous one was answered.
            syncs: 2,
        }
    );

    // A conflicting write set is rolled back: its batch commits (empty), but it is not counted
    // as applied.
    let mut inst = store
        .load_instance("default", "s-1")
        .await
        .unwrap()
        .unwrap();
    let stale = inst.revision - 1;
    inst.revision = stale + 1;
    let write = WriteSet {
        ns: "default".into(),
        id: "s-1".into(),
        expected_revision: Some(stale),
        instance: Some(inst),
        turns: Vec::new(),
        retention: None,
        runs: Vec::new(),
        prune_runs_before: None,
        durability: Durability::Durable,
    };
    assert_eq!(store.commit(write).await, Err(CommitError::Conflict));
    let s = store.stats();
    assert_eq!(s.write_sets, after_engine.write_sets);
    assert_eq!(s.batches, after_engine.batches + 1);
    assert_eq!(s.durable_batches, after_engine.durable_batches + 1);

    // Clones share the counters. (Not `syncs`: the refused write set was answered at once,
    // and the syncer may still be syncing its batch.)
    let same = |s: SqliteStats| SqliteStats { syncs: 0, ..s };
    assert_eq!(same(store.clone().stats()), same(s));
}

#[tokio::test]
async fn without_the_sync_thread_each_durable_batch_syncs_in_its_commit() {
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions::default().with_sync_thread(false);
    let store = SqliteStore::open_with(&dir.path().join("inline.db"), options)
        .await
        .unwrap();
    let engine = Engine::new(store.clone(), SystemClock, EngineConfig::default());
    create(&engine).await;
    let s = store.stats();
    assert_eq!((s.batches, s.durable_batches, s.syncs), (1, 1, 0));
    assert_eq!(engine.get_instance("s-1").await.unwrap().id, "s-1");
}
