//! The paths a user imports from `turnwise` with its default features, whichever crate below
//! the facade defines the item (`turnwise-core`, `turnwise-sqlite`): they compile from a
//! user's own crate, and the items behind them work.

use std::path::Path;

use turnwise::backend::Backend as BackendTrait;
use turnwise::clock::{Clock, ManualClock, SystemClock};
use turnwise::error::{Error, Result};
use turnwise::protocol::schema_check::{violations, SchemaPart};
use turnwise::protocol::{firing_id, CreateInstanceRequest, TurnStatus, WorkflowRef};
use turnwise::store::{
    Backup, BackupError, Change, CommitError, Durability, InstanceRecord, MemoryStore, Notice,
    SqliteOptions, SqliteStats, SqliteStore, Store, StoreError, Synchronous, TurnRecord, Watcher,
    WriteSet,
};
use turnwise::testing::{in_ci, TestEnv};
use turnwise::trace::TraceContext;
use turnwise::{engine, Backend, Engine, EngineConfig, WorkerBackend};

/// Names every imported item, so an import that no longer resolves fails to compile.
#[allow(dead_code)]
fn named(
    _: &dyn Clock,
    _: &dyn Store,
    _: Option<(
        Backup,
        BackupError,
        Change,
        CommitError,
        Durability,
        InstanceRecord,
    )>,
    _: Option<(
        Notice,
        SqliteOptions,
        SqliteStats,
        StoreError,
        Synchronous,
        TurnRecord,
    )>,
    _: Option<(Watcher, WriteSet, Error, SchemaPart, TraceContext, TestEnv)>,
    _: Option<(TurnStatus, WorkflowRef, engine::RetentionPolicy)>,
) -> Result<()> {
    fn worker_backend<B: WorkerBackend + Backend + BackendTrait>() {}
    worker_backend::<Engine>();
    let _ = (in_ci, violations);
    Ok(())
}

#[test]
fn the_facade_paths_reach_the_crates_below() {
    assert_eq!(
        firing_id("nightly", 1_767_225_600_000),
        "schedule/nightly/2026-01-01T00:00:00.000Z"
    );
    let clock = ManualClock::new(5);
    assert_eq!(clock.now_ms(), 5);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let engine = Engine::new(MemoryStore::new(), SystemClock, EngineConfig::default());
        let create = CreateInstanceRequest {
            id: "paths-1".into(),
            workflow_type: "t".into(),
            version: "v1".into(),
            state: serde_json::json!({}),
            lease_ms: None,
            max_attempts: None,
            on_exhausted: None,
        };
        engine.create_instance(create).await.unwrap();
        assert_eq!(engine.get_instance("paths-1").await.unwrap().id, "paths-1");
    });
    let refused = SqliteStore::backup(Path::new("no/such/file.db"), Path::new("copy.db"));
    assert!(
        matches!(refused, Err(BackupError::NoSource(_))),
        "{refused:?}"
    );
}
