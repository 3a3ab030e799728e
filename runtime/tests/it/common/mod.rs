//! Helpers shared by the runtime's test files.

#![allow(dead_code)]

use std::time::Duration;

use turnwise::protocol::OnExhausted;
use turnwise::store::InstanceRecord;

/// Bounds every real-time wait of these tests.
pub const GUARD: Duration = Duration::from_secs(10);

/// Poll `check` until it returns `Some`, for at most [`GUARD`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let give_up = tokio::time::Instant::now() + GUARD;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The instance record the store tests start from: type `order` version `v1`, at `revision`,
/// with no turns yet.
pub fn instance_record(ns: &str, id: &str, revision: u64) -> InstanceRecord {
    InstanceRecord {
        ns: ns.into(),
        id: id.into(),
        workflow_type: "order".into(),
        version: "v1".into(),
        state: serde_json::json!({"revision": revision}),
        lease_ms: 60_000,
        max_attempts: 3,
        on_exhausted: OnExhausted::Block,
        paused: false,
        created_at_ms: 1_000,
        updated_at_ms: 1_000 + revision as i64,
        revision,
        next_turn: 1,
        pending: Vec::new(),
        completed_turns: 0,
        history_through: 0,
        history_pruned_through: 0,
        due_at_ms: None,
        epoch: "e1".into(),
        outbox: Vec::new(),
        schedules: Vec::new(),
    }
}

/// The name the test harness lists test `name` of the module at `module` (its
/// `module_path!()`) under: the path without the binary's crate name, e.g. `crash::crash_child`.
/// A test that re-runs this binary as a child selects the child with
/// `--exact <this name> --ignored`.
pub fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{name}"),
        None => name.to_owned(),
    }
}
