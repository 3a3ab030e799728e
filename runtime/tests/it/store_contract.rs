//! The store contract: every case runs against every [`Store`] through the trait only.
//!
//! Each case is written once as `async fn case(s: &dyn Store)`; `contract!` instantiates it
//! as a `#[tokio::test]` per store (memory, SQLite, and SQLite without cache and batching).
//! SQLite-only cases (reopening, group commit, durability levels) follow at the end.

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::store::*;

use crate::common;

const NS: &str = "default";

// ---------------------------------------------------------------------------------------------
// Record builders

fn inst(id: &str, revision: u64) -> InstanceRecord {
    inst_in(NS, id, revision)
}

fn inst_in(ns: &str, id: &str, revision: u64) -> InstanceRecord {
    common::instance_record(ns, id, revision)
}

fn typed(id: &str, revision: u64, workflow_type: &str, version: &str) -> InstanceRecord {
    InstanceRecord {
        workflow_type: workflow_type.into(),
        version: version.into(),
        ..inst(id, revision)
    }
}

fn due_at(id: &str, workflow_type: &str, version: &str, due: Option<Millis>) -> InstanceRecord {
    InstanceRecord {
        due_at_ms: due,
        ..typed(id, 1, workflow_type, version)
    }
}

/// An unfinished turn.
fn turn(number: u64, message_id: &str) -> TurnRecord {
    TurnRecord::queued(
        number,
        message_id.into(),
        json!({"n": number}),
        Some(MessageOrigin::new("app")),
        2_000,
        format!("e1-{number}"),
    )
}

/// A turn in history, finished at `at`.
fn finished(number: u64, message_id: &str, at: Millis) -> TurnRecord {
    TurnRecord {
        status: TurnStatus::Completed,
        attempt: 1,
        result: json!({"ok": number}),
        finished_at_ms: Some(at),
        ..turn(number, message_id)
    }
}

fn write(instance: InstanceRecord, expected: Option<u64>, turns: Vec<TurnRecord>) -> WriteSet {
    WriteSet {
        ns: instance.ns.clone(),
        id: instance.id.clone(),
        expected_revision: expected,
        instance: Some(instance),
        turns,
        retention: None,
        runs: Vec::new(),
        prune_runs_before: None,
        durability: Durability::Durable,
    }
}

fn create(instance: InstanceRecord, turns: Vec<TurnRecord>) -> WriteSet {
    write(instance, None, turns)
}

fn delete(ns: &str, id: &str, expected: u64) -> WriteSet {
    WriteSet {
        ns: ns.into(),
        id: id.into(),
        expected_revision: Some(expected),
        instance: None,
        turns: Vec::new(),
        retention: None,
        runs: Vec::new(),
        prune_runs_before: None,
        durability: Durability::Durable,
    }
}

fn turns_range(finished: bool, after: Option<u64>, limit: usize) -> TurnRange {
    TurnRange {
        finished,
        after,
        limit,
    }
}

fn all(finished: bool) -> TurnRange {
    turns_range(finished, None, usize::MAX)
}

fn wf(workflow_type: &str, version: &str) -> WorkflowRef {
    WorkflowRef::new(workflow_type, version)
}

fn numbers(turns: &[TurnRecord]) -> Vec<u64> {
    turns.iter().map(|t| t.number).collect()
}

fn ids(instances: &[InstanceRecord]) -> Vec<&str> {
    instances.iter().map(|i| i.id.as_str()).collect()
}

fn filter(
    workflow_type: Option<&str>,
    version: Option<&str>,
    after: Option<&str>,
    limit: usize,
) -> InstanceFilter {
    InstanceFilter {
        workflow_type: workflow_type.map(Into::into),
        version: version.map(Into::into),
        after: after.map(Into::into),
        limit,
    }
}

async fn ok(s: &dyn Store, w: WriteSet) {
    if let Err(e) = s.commit(w.clone()).await {
        panic!("commit of `{}` failed: {e:?}", w.id);
    }
}

async fn refused(s: &dyn Store, w: WriteSet) -> StoreError {
    match s.commit(w).await {
        Err(CommitError::Store(e)) => e,
        other => panic!("expected a store error, got {other:?}"),
    }
}

async fn taken(s: &dyn Store, w: WriteSet, message_id: &str) {
    assert_eq!(
        s.commit(w).await,
        Err(CommitError::MessageIdTaken {
            message_id: message_id.into()
        })
    );
}

async fn conflict(s: &dyn Store, w: WriteSet) {
    assert_eq!(s.commit(w).await, Err(CommitError::Conflict));
}

async fn load(s: &dyn Store, id: &str) -> Option<InstanceRecord> {
    s.load_instance(NS, id).await.unwrap()
}

async fn load_turn(s: &dyn Store, id: &str, n: u64) -> Option<TurnRecord> {
    s.load_turn(NS, id, n).await.unwrap()
}

// ---------------------------------------------------------------------------------------------
// Instantiation

async fn open_sqlite(dir: &Path, options: SqliteOptions) -> SqliteStore {
    SqliteStore::open_with(&dir.join("store.db"), options)
        .await
        .expect("open the sqlite store")
}

macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test]
                async fn $case() {
                    super::$case(&turnwise::store::MemoryStore::new()).await;
                }
            )*
        }

        mod sqlite {
            use turnwise::store::SqliteOptions;
            $(
                #[tokio::test]
                async fn $case() {
                    let dir = tempfile::tempdir().unwrap();
                    let store = super::open_sqlite(dir.path(), SqliteOptions::default()).await;
                    super::$case(&store).await;
                }
            )*
        }

        /// SQLite syncing the log in each `COMMIT` rather than on the sync thread.
        mod sqlite_sync_in_commit {
            use turnwise::store::SqliteOptions;
            $(
                #[tokio::test]
                async fn $case() {
                    let dir = tempfile::tempdir().unwrap();
                    let options = SqliteOptions::default().with_sync_thread(false);
                    let store = super::open_sqlite(dir.path(), options).await;
                    super::$case(&store).await;
                }
            )*
        }

        /// PostgreSQL, each case in a schema of its own (skipped with a printed line when
        /// there is no database to use, except in CI).
        #[cfg(feature = "postgres")]
        mod postgres {
            $(
                #[tokio::test]
                async fn $case() {
                    let name = concat!("store_contract_", stringify!($case));
                    let Some(db) = turnwise::testing::TestPostgres::start(name).await else {
                        return;
                    };
                    super::$case(&db.store().await).await;
                }
            )*
        }

        /// SQLite with the instance cache off and one write set per transaction.
        mod sqlite_uncached {
            use turnwise::store::{SqliteOptions, Synchronous};
            $(
                #[tokio::test]
                async fn $case() {
                    let dir = tempfile::tempdir().unwrap();
                    let options = SqliteOptions::default()
                        .with_cache_instances(0)
                        .with_max_batch(1)
                        .with_synchronous(Synchronous::Normal);
                    let store = super::open_sqlite(dir.path(), options).await;
                    super::$case(&store).await;
                }
            )*
        }
    };
}

contract!(
    create_expects_no_revision,
    conflicting_create,
    revision_advances_by_one,
    stale_revision_conflicts_and_writes_nothing,
    type_and_version_can_change,
    delete_removes_instance_and_turns,
    turn_upsert_and_load,
    find_message,
    load_instance_turn_reads_both,
    list_turns_finished_and_unfinished,
    list_instances_filters_and_order,
    count_instances,
    due_ordering_limit_and_filter,
    next_due,
    finished_turn_is_immutable,
    message_id_cannot_change,
    duplicate_message_id_refused,
    retention_keeps_newest_and_recent,
    retention_is_noop_within_limits,
    numbers_round_trip,
    records_deeper_than_serde_jsons_limit_read_back,
    namespaces_are_isolated,
    runs_are_written_with_the_commit,
    runs_list_newest_first_with_cursor,
    runs_count_by_hour,
    runs_pruned_in_bounded_batches,
    schedules_advance_with_their_firing,
    suspended_turns_and_instance_events_read_back,
);

// ---------------------------------------------------------------------------------------------
// The cases

async fn create_expects_no_revision(s: &dyn Store) {
    // Creating with an expected revision means "it exists": it does not.
    conflict(s, write(inst("a", 2), Some(1), vec![])).await;
    assert_eq!(load(s, "a").await, None);
    // A new instance starts at revision 1.
    refused(s, create(inst("a", 2), vec![turn(1, "m1")])).await;
    assert_eq!(load(s, "a").await, None);
    assert_eq!(load_turn(s, "a", 1).await, None);
    // A record for another id is refused.
    let mut other = create(inst("b", 1), vec![]);
    other.id = "a".into();
    refused(s, other).await;
    assert_eq!(load(s, "a").await, None);

    ok(s, create(inst("a", 1), vec![turn(1, "m1")])).await;
    assert_eq!(load(s, "a").await, Some(inst("a", 1)));
    assert_eq!(load_turn(s, "a", 1).await, Some(turn(1, "m1")));
}

async fn conflicting_create(s: &dyn Store) {
    ok(s, create(inst("a", 1), vec![])).await;
    let mut other = typed("a", 1, "other", "v9");
    other.state = json!("second");
    conflict(s, create(other, vec![turn(1, "m1")])).await;
    assert_eq!(load(s, "a").await, Some(inst("a", 1)));
    assert_eq!(load_turn(s, "a", 1).await, None);
}

async fn revision_advances_by_one(s: &dyn Store) {
    ok(s, create(inst("a", 1), vec![])).await;
    refused(s, write(inst("a", 1), Some(1), vec![])).await;
    refused(s, write(inst("a", 3), Some(1), vec![turn(1, "m1")])).await;
    assert_eq!(load(s, "a").await, Some(inst("a", 1)));
    assert_eq!(load_turn(s, "a", 1).await, None);
    ok(s, write(inst("a", 2), Some(1), vec![])).await;
    ok(s, write(inst("a", 3), Some(2), vec![])).await;
    assert_eq!(load(s, "a").await.unwrap().revision, 3);
}

/// Never done by the engine, allowed by the contract: a write that moves an instance to
/// another type and version; the filters follow it, and a stale one still conflicts.
async fn type_and_version_can_change(s: &dyn Store) {
    ok(s, create(typed("a", 1, "order", "v1"), vec![])).await;
    ok(s, write(typed("a", 2, "invoice", "v2"), Some(1), vec![])).await;
    assert_eq!(load(s, "a").await, Some(typed("a", 2, "invoice", "v2")));
    let moved = s
        .list_instances(NS, filter(Some("invoice"), Some("v2"), None, 10))
        .await
        .unwrap();
    assert_eq!(ids(&moved), ["a"]);
    let left = s
        .list_instances(NS, filter(Some("order"), None, None, 10))
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
    conflict(s, write(typed("a", 2, "order", "v1"), Some(1), vec![])).await;
    assert_eq!(load(s, "a").await, Some(typed("a", 2, "invoice", "v2")));
}

async fn stale_revision_conflicts_and_writes_nothing(s: &dyn Store) {
    ok(s, create(inst("a", 1), vec![])).await;
    ok(s, write(inst("a", 2), Some(1), vec![turn(1, "m1")])).await;
    let mut stale = inst("a", 2);
    stale.state = json!("stale");
    conflict(
        s,
        write(stale, Some(1), vec![turn(1, "m1x"), turn(2, "m2")]),
    )
    .await;
    conflict(s, write(inst("a", 4), Some(3), vec![turn(2, "m2")])).await;
    conflict(s, delete(NS, "a", 1)).await;
    assert_eq!(load(s, "a").await, Some(inst("a", 2)));
    assert_eq!(load_turn(s, "a", 1).await, Some(turn(1, "m1")));
    assert_eq!(load_turn(s, "a", 2).await, None);
    assert_eq!(s.find_message(NS, "a", "m2").await.unwrap(), None);
}

async fn delete_removes_instance_and_turns(s: &dyn Store) {
    let mut a = due_at("a", "order", "v1", Some(5));
    a.pending = vec![2];
    ok(s, create(a, vec![finished(1, "m1", 10), turn(2, "m2")])).await;
    ok(s, create(inst("b", 1), vec![turn(1, "m1")])).await;
    ok(s, delete(NS, "a", 1)).await;

    assert_eq!(load(s, "a").await, None);
    assert_eq!(load_turn(s, "a", 1).await, None);
    assert_eq!(load_turn(s, "a", 2).await, None);
    assert_eq!(s.find_message(NS, "a", "m1").await.unwrap(), None);
    assert!(s.list_turns(NS, "a", all(true)).await.unwrap().is_empty());
    assert!(s.list_turns(NS, "a", all(false)).await.unwrap().is_empty());
    let listed = s.list_instances(NS, filter(None, None, None, 10)).await;
    assert_eq!(ids(&listed.unwrap()), ["b"]);
    assert_eq!(s.count_instances(NS, "order", None).await.unwrap(), (1, 0));
    assert!(s
        .due(NS, &[wf("order", "v1")], 100, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(s.next_due(NS, &[wf("order", "v1")]).await.unwrap(), None);
    // The neighbour is untouched.
    assert_eq!(load_turn(s, "b", 1).await, Some(turn(1, "m1")));

    // Re-created from scratch: the old message ids are free again.
    ok(s, create(inst("a", 1), vec![turn(5, "m1")])).await;
    assert_eq!(
        s.find_message(NS, "a", "m1").await.unwrap(),
        Some(turn(5, "m1"))
    );
    assert_eq!(load_turn(s, "a", 1).await, None);
}

async fn turn_upsert_and_load(s: &dyn Store) {
    ok(s, create(inst("a", 1), vec![turn(1, "m1"), turn(2, "m2")])).await;
    assert_eq!(load_turn(s, "a", 1).await, Some(turn(1, "m1")));
    assert_eq!(load_turn(s, "a", 3).await, None);
    assert_eq!(load_turn(s, "b", 1).await, None);
    assert_eq!(s.load_turn(NS, "a", u64::MAX).await.unwrap(), None);

    // Replace an unfinished turn, then finish it.
    let mut running = turn(1, "m1");
    running.status = TurnStatus::Running;
    running.attempt = 1;
    running.token = Some("t1".into());
    ok(s, write(inst("a", 2), Some(1), vec![running.clone()])).await;
    assert_eq!(load_turn(s, "a", 1).await, Some(running));
    ok(s, write(inst("a", 3), Some(2), vec![finished(1, "m1", 50)])).await;
    assert_eq!(load_turn(s, "a", 1).await, Some(finished(1, "m1", 50)));
    assert_eq!(load_turn(s, "a", 2).await, Some(turn(2, "m2")));
    // A write without turns leaves them alone.
    ok(s, write(inst("a", 4), Some(3), vec![])).await;
    assert_eq!(load_turn(s, "a", 2).await, Some(turn(2, "m2")));
}

async fn load_instance_turn_reads_both(s: &dyn Store) {
    assert_eq!(s.load_instance_turn(NS, "a", 1).await.unwrap(), None);
    ok(
        s,
        create(inst("a", 1), vec![turn(1, "m1"), finished(2, "m2", 5_000)]),
    )
    .await;
    let (i, t) = s.load_instance_turn(NS, "a", 1).await.unwrap().unwrap();
    assert_eq!(i, load(s, "a").await.unwrap());
    assert_eq!(t, Some(turn(1, "m1")));
    let (_, t) = s.load_instance_turn(NS, "a", 2).await.unwrap().unwrap();
    assert_eq!(t, Some(finished(2, "m2", 5_000)));
    let (i, t) = s.load_instance_turn(NS, "a", 3).await.unwrap().unwrap();
    assert_eq!((i.id.as_str(), t), ("a", None));
    assert_eq!(s.load_instance_turn("other", "a", 1).await.unwrap(), None);
}

async fn find_message(s: &dyn Store) {
    ok(
        s,
        create(inst("a", 1), vec![turn(1, "m1"), finished(2, "m2", 9)]),
    )
    .await;
    ok(s, create(inst("b", 1), vec![turn(1, "only-b")])).await;
    assert_eq!(
        s.find_message(NS, "a", "m1").await.unwrap(),
        Some(turn(1, "m1"))
    );
    assert_eq!(
        s.find_message(NS, "a", "m2").await.unwrap(),
        Some(finished(2, "m2", 9))
    );
    assert_eq!(s.find_message(NS, "a", "nope").await.unwrap(), None);
    assert_eq!(s.find_message(NS, "a", "only-b").await.unwrap(), None);
    assert_eq!(s.find_message(NS, "zzz", "m1").await.unwrap(), None);
}

async fn list_turns_finished_and_unfinished(s: &dyn Store) {
    // Written out of order on purpose.
    let turns = vec![
        turn(6, "m6"),
        finished(4, "m4", 40),
        turn(3, "m3"),
        finished(1, "m1", 10),
        turn(5, "m5"),
        finished(2, "m2", 20),
    ];
    ok(s, create(inst("a", 1), turns)).await;
    ok(
        s,
        create(inst("b", 1), vec![finished(1, "b1", 1), turn(2, "b2")]),
    )
    .await;

    let list = |finished, after, limit| s.list_turns(NS, "a", turns_range(finished, after, limit));
    assert_eq!(numbers(&list(true, None, 10).await.unwrap()), [1, 2, 4]);
    assert_eq!(numbers(&list(false, None, 10).await.unwrap()), [3, 5, 6]);
    assert_eq!(numbers(&list(true, None, 2).await.unwrap()), [1, 2]);
    assert_eq!(numbers(&list(true, Some(1), 1).await.unwrap()), [2]);
    assert_eq!(numbers(&list(true, Some(2), 10).await.unwrap()), [4]);
    assert_eq!(
        numbers(&list(true, Some(4), 10).await.unwrap()),
        [] as [u64; 0]
    );
    assert_eq!(numbers(&list(false, Some(3), 1).await.unwrap()), [5]);
    assert_eq!(numbers(&list(false, Some(0), 10).await.unwrap()), [3, 5, 6]);
    assert!(list(false, None, 0).await.unwrap().is_empty());
    assert!(list(false, Some(u64::MAX), 10).await.unwrap().is_empty());
    // Full records come back.
    assert_eq!(
        list(true, Some(3), 1).await.unwrap(),
        [finished(4, "m4", 40)]
    );
    // Another instance's turns never mix in.
    let none = s.list_turns(NS, "zzz", all(false)).await.unwrap();
    assert!(none.is_empty());
}

async fn list_instances_filters_and_order(s: &dyn Store) {
    for (id, t, v) in [
        ("d", "order", "v1"),
        ("b", "order", "v2"),
        ("e", "invoice", "v1"),
        ("a", "order", "v1"),
        ("c", "invoice", "v2"),
        ("B", "order", "v1"),
    ] {
        ok(s, create(typed(id, 1, t, v), vec![])).await;
    }
    ok(s, create(inst_in("other", "a0", 1), vec![])).await;

    let list = |t, v, after, limit| s.list_instances(NS, filter(t, v, after, limit));
    // Ascending by id, byte order (upper case first).
    assert_eq!(
        ids(&list(None, None, None, 100).await.unwrap()),
        ["B", "a", "b", "c", "d", "e"]
    );
    assert_eq!(
        ids(&list(Some("order"), None, None, 100).await.unwrap()),
        ["B", "a", "b", "d"]
    );
    assert_eq!(
        ids(&list(None, Some("v2"), None, 100).await.unwrap()),
        ["b", "c"]
    );
    assert_eq!(
        ids(&list(Some("order"), Some("v1"), None, 100).await.unwrap()),
        ["B", "a", "d"]
    );
    assert_eq!(
        ids(&list(None, None, Some("b"), 100).await.unwrap()),
        ["c", "d", "e"]
    );
    assert_eq!(
        ids(&list(Some("order"), Some("v1"), Some("a"), 1).await.unwrap()),
        ["d"]
    );
    assert_eq!(ids(&list(None, None, None, 2).await.unwrap()), ["B", "a"]);
    assert!(list(None, None, None, 0).await.unwrap().is_empty());
    assert!(list(Some("nope"), None, None, 10).await.unwrap().is_empty());
    assert!(list(None, None, Some("e"), 10).await.unwrap().is_empty());
    // Full records.
    let got = list(Some("invoice"), Some("v2"), None, 10).await.unwrap();
    assert_eq!(got, [typed("c", 1, "invoice", "v2")]);
}

async fn count_instances(s: &dyn Store) {
    let mut pending = typed("a", 1, "order", "v1");
    pending.pending = vec![1];
    ok(s, create(pending, vec![turn(1, "m1")])).await;
    ok(s, create(typed("b", 1, "order", "v1"), vec![])).await;
    let mut pending2 = typed("c", 1, "order", "v2");
    pending2.pending = vec![1, 2];
    ok(s, create(pending2, vec![turn(1, "m1"), turn(2, "m2")])).await;
    ok(s, create(typed("d", 1, "invoice", "v1"), vec![])).await;
    let mut elsewhere = inst_in("other", "e", 1);
    elsewhere.pending = vec![1];
    ok(s, create(elsewhere, vec![turn(1, "m1")])).await;

    assert_eq!(s.count_instances(NS, "order", None).await.unwrap(), (3, 2));
    assert_eq!(
        s.count_instances(NS, "order", Some("v1")).await.unwrap(),
        (2, 1)
    );
    assert_eq!(
        s.count_instances(NS, "order", Some("v2")).await.unwrap(),
        (1, 1)
    );
    assert_eq!(
        s.count_instances(NS, "order", Some("v3")).await.unwrap(),
        (0, 0)
    );
    assert_eq!(
        s.count_instances(NS, "invoice", None).await.unwrap(),
        (1, 0)
    );
    assert_eq!(s.count_instances(NS, "nope", None).await.unwrap(), (0, 0));
    assert_eq!(
        s.count_instances("other", "order", None).await.unwrap(),
        (1, 1)
    );

    // Emptying the inbox changes the second count.
    ok(s, write(typed("a", 2, "order", "v1"), Some(1), vec![])).await;
    assert_eq!(s.count_instances(NS, "order", None).await.unwrap(), (3, 1));
}

async fn due_ordering_limit_and_filter(s: &dyn Store) {
    for i in [
        due_at("late", "order", "v1", Some(30)),
        due_at("early", "order", "v1", Some(10)),
        due_at("tie-b", "order", "v1", Some(20)),
        due_at("tie-a", "order", "v1", Some(20)),
        due_at("now", "order", "v1", Some(50)),
        due_at("future", "order", "v1", Some(51)),
        due_at("never", "order", "v1", None),
        due_at("negative", "order", "v1", Some(-5)),
        due_at("other-version", "order", "v2", Some(1)),
        due_at("other-type", "invoice", "v1", Some(2)),
        due_at("crossed", "invoice", "v2", Some(3)),
    ] {
        ok(s, create(i, vec![])).await;
    }
    let mut elsewhere = inst_in("other", "elsewhere", 1);
    elsewhere.due_at_ms = Some(0);
    ok(s, create(elsewhere, vec![])).await;

    let order = [wf("order", "v1")];
    assert_eq!(
        s.due(NS, &order, 50, 100).await.unwrap(),
        ["negative", "early", "tie-a", "tie-b", "late", "now"]
    );
    assert_eq!(
        s.due(NS, &order, 50, 3).await.unwrap(),
        ["negative", "early", "tie-a"]
    );
    assert_eq!(
        s.due(NS, &order, 19, 100).await.unwrap(),
        ["negative", "early"]
    );
    assert!(s.due(NS, &order, -6, 100).await.unwrap().is_empty());
    assert!(s.due(NS, &order, 50, 0).await.unwrap().is_empty());
    assert!(s.due(NS, &[], 1_000, 100).await.unwrap().is_empty());
    // Several workflows merge by due time; pairs match on both type and version.
    assert_eq!(
        s.due(NS, &[wf("invoice", "v1"), wf("order", "v2")], 100, 100)
            .await
            .unwrap(),
        ["other-version", "other-type"]
    );
    assert_eq!(
        s.due(NS, &[wf("order", "v1"), wf("invoice", "v1")], 15, 100)
            .await
            .unwrap(),
        ["negative", "other-type", "early"]
    );
    // A repeated workflow does not repeat ids.
    assert_eq!(
        s.due(NS, &[wf("order", "v2"), wf("order", "v2")], 100, 100)
            .await
            .unwrap(),
        ["other-version"]
    );
    assert!(s
        .due(NS, &[wf("nope", "v1")], 1_000, 100)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        s.due("other", &order, 100, 100).await.unwrap(),
        ["elsewhere"]
    );

    // Moving the due time moves the instance.
    let mut moved = due_at("early", "order", "v1", None);
    moved.revision = 2;
    ok(s, write(moved, Some(1), vec![])).await;
    assert_eq!(s.due(NS, &order, 19, 100).await.unwrap(), ["negative"]);
}

/// A schedule of an instance, due at `next`, as an engine keeps it in the instance record.
fn schedule(name: &str, next: Option<Millis>, fired: u64) -> WorkflowSchedule {
    serde_json::from_value(json!({
        "workflow_id": "a", "name": name,
        "spec": {"kind": "every", "every_ms": 1000, "anchor_ms": 0},
        "message": {"tick": true}, "catch_up": "one", "paused": false,
        "next_fire_ms": next, "fired": fired, "skipped": 0,
        "created_at_ms": 0, "updated_at_ms": 0,
    }))
    .unwrap()
}

/// Schedules live in the instance record: a firing's turn and the schedule's advance are
/// one write set, so two engines deciding the same firing from one revision admit it once,
/// and the record (with the due index) comes back as written, after a reopen too.
async fn schedules_advance_with_their_firing(s: &dyn Store) {
    let before = InstanceRecord {
        schedules: vec![schedule("tick", Some(1000), 0)],
        due_at_ms: Some(1000),
        ..inst("a", 1)
    };
    ok(s, create(before.clone(), vec![])).await;
    assert_eq!(load(s, "a").await, Some(before));
    assert_eq!(
        s.due(NS, &[wf("order", "v1")], 1000, 10).await.unwrap(),
        ["a"]
    );
    // Two deciders fire the 1000 occurrence from revision 1: the first commit wins.
    let fired = |n| InstanceRecord {
        schedules: vec![schedule("tick", Some(2000), 1)],
        pending: vec![1],
        next_turn: 2,
        due_at_ms: Some(n),
        ..inst("a", 2)
    };
    let firing = || turn(1, "schedule/tick/1970-01-01T00:00:01.000Z");
    ok(s, write(fired(1000), Some(1), vec![firing()])).await;
    conflict(s, write(fired(1001), Some(1), vec![firing()])).await;
    let after = load(s, "a").await.unwrap();
    assert_eq!(after, fired(1000));
    assert_eq!(after.schedules[0].next_fire_ms, Some(2000));
    assert_eq!(
        numbers(&s.list_turns(NS, "a", all(false)).await.unwrap()),
        [1]
    );
    // The same firing again, from the new revision, is refused by the message-id index.
    let mut again = fired(1000);
    again.revision = 3;
    again.pending = vec![1, 2];
    let mut twice = firing();
    twice.number = 2;
    taken(
        s,
        write(again, Some(2), vec![twice]),
        "schedule/tick/1970-01-01T00:00:01.000Z",
    )
    .await;
    // Listings carry the schedules too.
    let listed = s
        .list_instances(NS, filter(None, None, None, 10))
        .await
        .unwrap();
    assert_eq!(listed[0].schedules, fired(1000).schedules);
}

async fn next_due(s: &dyn Store) {
    let order = [wf("order", "v1")];
    assert_eq!(s.next_due(NS, &order).await.unwrap(), None);
    ok(s, create(due_at("never", "order", "v1", None), vec![])).await;
    assert_eq!(s.next_due(NS, &order).await.unwrap(), None);
    for i in [
        due_at("a", "order", "v1", Some(300)),
        due_at("b", "order", "v1", Some(200)),
        due_at("c", "order", "v2", Some(100)),
        due_at("d", "invoice", "v1", Some(150)),
    ] {
        ok(s, create(i, vec![])).await;
    }
    let mut elsewhere = inst_in("other", "e", 1);
    elsewhere.due_at_ms = Some(1);
    ok(s, create(elsewhere, vec![])).await;

    assert_eq!(s.next_due(NS, &order).await.unwrap(), Some(200));
    assert_eq!(
        s.next_due(NS, &[wf("order", "v1"), wf("invoice", "v1")])
            .await
            .unwrap(),
        Some(150)
    );
    assert_eq!(
        s.next_due(NS, &[wf("order", "v2"), wf("order", "v1")])
            .await
            .unwrap(),
        Some(100)
    );
    assert_eq!(s.next_due(NS, &[wf("invoice", "v2")]).await.unwrap(), None);
    assert_eq!(s.next_due(NS, &[]).await.unwrap(), None);
    assert_eq!(s.next_due("other", &order).await.unwrap(), Some(1));
}

async fn finished_turn_is_immutable(s: &dyn Store) {
    ok(s, create(inst("a", 1), vec![finished(1, "m1", 10)])).await;
    // The identical record may be written again.
    ok(s, write(inst("a", 2), Some(1), vec![finished(1, "m1", 10)])).await;

    // Any change is refused, and the whole write set with it.
    let mut changed = finished(1, "m1", 10);
    changed.result = json!("rewritten");
    let mut next = inst("a", 3);
    next.state = json!("should not land");
    refused(
        s,
        write(next.clone(), Some(2), vec![turn(2, "m2"), changed]),
    )
    .await;
    let mut unfinished = turn(1, "m1");
    unfinished.status = TurnStatus::Queued;
    refused(s, write(next, Some(2), vec![turn(2, "m2"), unfinished])).await;

    assert_eq!(load(s, "a").await, Some(inst("a", 2)));
    assert_eq!(load_turn(s, "a", 1).await, Some(finished(1, "m1", 10)));
    assert_eq!(load_turn(s, "a", 2).await, None);
    assert_eq!(s.find_message(NS, "a", "m2").await.unwrap(), None);
    // The revision did not move: the next writer still expects 2.
    ok(s, write(inst("a", 3), Some(2), vec![turn(2, "m2")])).await;
}

async fn message_id_cannot_change(s: &dyn Store) {
    ok(s, create(inst("a", 1), vec![turn(1, "m1")])).await;
    refused(s, write(inst("a", 2), Some(1), vec![turn(1, "renamed")])).await;
    assert_eq!(load(s, "a").await, Some(inst("a", 1)));
    assert_eq!(load_turn(s, "a", 1).await, Some(turn(1, "m1")));
    assert_eq!(s.find_message(NS, "a", "renamed").await.unwrap(), None);
}

async fn duplicate_message_id_refused(s: &dyn Store) {
    ok(
        s,
        create(inst("a", 1), vec![turn(1, "m1"), finished(2, "m2", 5)]),
    )
    .await;
    // Taken by an unfinished turn, by a finished one, and by an earlier turn of the same
    // write set: each refused by name, nothing written.
    taken(
        s,
        write(inst("a", 2), Some(1), vec![turn(3, "m3"), turn(4, "m1")]),
        "m1",
    )
    .await;
    taken(s, write(inst("a", 2), Some(1), vec![turn(4, "m2")]), "m2").await;
    taken(
        s,
        write(inst("a", 2), Some(1), vec![turn(3, "m5"), turn(4, "m5")]),
        "m5",
    )
    .await;
    assert_eq!(load(s, "a").await, Some(inst("a", 1)));
    assert_eq!(load_turn(s, "a", 3).await, None);
    assert_eq!(load_turn(s, "a", 4).await, None);
    assert_eq!(s.find_message(NS, "a", "m5").await.unwrap(), None);
    assert_eq!(
        s.find_message(NS, "a", "m1").await.unwrap(),
        Some(turn(1, "m1"))
    );
    // The same message id in another instance is fine.
    ok(s, create(inst("b", 1), vec![turn(1, "m1")])).await;
}

async fn retention_keeps_newest_and_recent(s: &dyn Store) {
    ok(s, create(inst("a", 1), vec![])).await;
    // Turns 1..=6 finished at 10, 50, 20, 60, 70, 80; turn 7 unfinished.
    let history = vec![
        finished(1, "m1", 10),
        finished(2, "m2", 50),
        finished(3, "m3", 20),
        finished(4, "m4", 60),
        finished(5, "m5", 70),
        finished(6, "m6", 80),
        turn(7, "m7"),
    ];
    let mut next = inst("a", 2);
    next.history_pruned_through = 999; // ignored: the store maintains it
    let mut w = write(next, Some(1), history);
    // Keep the newest 2 (5, 6) and anything finished at or after 50 (2, 4).
    w.retention = Some(Retention {
        keep_turns: 2,
        keep_since_ms: 50,
    });
    ok(s, w).await;

    let kept = s.list_turns(NS, "a", all(true)).await.unwrap();
    assert_eq!(numbers(&kept), [2, 4, 5, 6]);
    assert_eq!(
        numbers(&s.list_turns(NS, "a", all(false)).await.unwrap()),
        [7]
    );
    assert_eq!(load_turn(s, "a", 1).await, None);
    assert_eq!(load_turn(s, "a", 3).await, None);
    let stored = load(s, "a").await.unwrap();
    assert_eq!(stored.history_pruned_through, 3);
    assert_eq!(
        stored,
        InstanceRecord {
            history_pruned_through: 3,
            ..inst("a", 2)
        }
    );
    // Pruned message ids are free again.
    assert_eq!(s.find_message(NS, "a", "m1").await.unwrap(), None);

    // A write without retention keeps the stored value whatever the record says.
    ok(s, write(inst("a", 3), Some(2), vec![turn(8, "m1")])).await;
    assert_eq!(load(s, "a").await.unwrap().history_pruned_through, 3);
    assert_eq!(
        s.find_message(NS, "a", "m1").await.unwrap(),
        Some(turn(8, "m1"))
    );

    // Everything but the newest turn goes once nothing is recent; the mark only rises.
    let mut w = write(inst("a", 4), Some(3), vec![]);
    w.retention = Some(Retention {
        keep_turns: 1,
        keep_since_ms: 1_000,
    });
    ok(s, w).await;
    assert_eq!(
        numbers(&s.list_turns(NS, "a", all(true)).await.unwrap()),
        [6]
    );
    assert_eq!(load(s, "a").await.unwrap().history_pruned_through, 5);
    assert_eq!(
        numbers(&s.list_turns(NS, "a", all(false)).await.unwrap()),
        [7, 8]
    );
}

async fn retention_is_noop_within_limits(s: &dyn Store) {
    let mut first = inst("a", 1);
    first.history_pruned_through = 7; // ignored on create too
    let mut w = create(first, vec![finished(1, "m1", 10), finished(2, "m2", 20)]);
    w.retention = Some(Retention {
        keep_turns: 5,
        keep_since_ms: 1_000,
    });
    ok(s, w).await;
    assert_eq!(load(s, "a").await, Some(inst("a", 1)));
    // Old enough, but among the newest kept.
    let mut w = write(inst("a", 2), Some(1), vec![]);
    w.retention = Some(Retention {
        keep_turns: 2,
        keep_since_ms: 1_000,
    });
    ok(s, w).await;
    // Not among the newest, but recent.
    let mut w = write(inst("a", 3), Some(2), vec![]);
    w.retention = Some(Retention {
        keep_turns: 1,
        keep_since_ms: 10,
    });
    ok(s, w).await;
    assert_eq!(
        numbers(&s.list_turns(NS, "a", all(true)).await.unwrap()),
        [1, 2]
    );
    assert_eq!(load(s, "a").await.unwrap().history_pruned_through, 0);
}

/// With `exact-numbers`, numbers come back exactly as written: integers beyond 64 bits,
/// `1.10` with its zero, tiny decimals, `1e400`.
#[cfg(feature = "exact-numbers")]
mod numbers {
    pub const BIG: &str = "123456789012345678901234567890";
    pub const DEC: &str = "1.10";
    pub const REST: &str = r#""neg": -0.000000000000000000000000001, "exp": 1e400,
        "list": [1.0, 2.50, 18446744073709551616]"#;
}

/// Without `exact-numbers`, every number serde_json holds natively comes back the same: the
/// ends of u64 and i64, and f64 values down to the last bit.
#[cfg(not(feature = "exact-numbers"))]
mod numbers {
    pub const BIG: &str = "18446744073709551615";
    pub const DEC: &str = "0.1";
    pub const REST: &str = r#""neg": -9223372036854775808, "exp": 1.7976931348623157e308,
        "list": [5e-324, 2.5, -0.0, 0.30000000000000004]"#;
}

async fn numbers_round_trip(s: &dyn Store) {
    use numbers::{BIG, DEC, REST};
    let numbers_json = format!(r#"{{"big": {BIG}, "dec": {DEC}, {REST}}}"#);
    let exact: Value = serde_json::from_str(&numbers_json).unwrap();
    let mut i = inst("a", 1);
    i.state = exact.clone();
    let mut t = finished(1, "m1", 5);
    t.message = exact.clone();
    t.result = json!({"total": exact["big"].clone()});
    t.state_after = exact.clone();
    let mut origin = MessageOrigin::new("app");
    origin.fields.insert("amount".into(), exact["dec"].clone());
    t.origin = Some(origin);
    ok(s, create(i.clone(), vec![t.clone()])).await;

    let text = |v: &Value| serde_json::to_string(v).unwrap();
    let back = load(s, "a").await.unwrap();
    assert_eq!(back, i);
    assert_eq!(text(&back.state), text(&exact));
    assert!(text(&back.state).contains(BIG));
    assert!(text(&back.state).contains(DEC));
    let listed = s
        .list_instances(NS, filter(None, None, None, 1))
        .await
        .unwrap();
    assert_eq!(text(&listed[0].state), text(&exact));

    let turn_back = load_turn(s, "a", 1).await.unwrap();
    assert_eq!(turn_back, t);
    assert_eq!(text(&turn_back.message), text(&exact));
    assert_eq!(text(&turn_back.origin.unwrap().fields["amount"]), DEC);
    let found = s.find_message(NS, "a", "m1").await.unwrap().unwrap();
    assert_eq!(text(&found.result), format!(r#"{{"total":{BIG}}}"#));
    let history = s.list_turns(NS, "a", all(true)).await.unwrap();
    assert_eq!(text(&history[0].state_after), text(&exact));
    // A finished turn with these numbers is still "the same" when written again.
    ok(s, write(inst("a", 2), Some(1), vec![t])).await;
}

/// A value nesting `levels` arrays deep around the number 1, built without recursion.
fn nested(levels: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..levels {
        v = Value::Array(vec![v]);
    }
    v
}

/// Records nesting deeper than serde_json's default recursion limit (128), as versions before
/// the engine's nesting limit could write them, read back whole from every read.
async fn records_deeper_than_serde_jsons_limit_read_back(s: &dyn Store) {
    let deep = nested(140);
    let mut i = inst("a", 1);
    i.state = deep.clone();
    let mut queued = turn(2, "m2");
    queued.message = deep.clone();
    let mut done = finished(1, "m1", 5);
    done.result = deep.clone();
    ok(s, create(i.clone(), vec![done.clone(), queued.clone()])).await;

    assert_eq!(load(s, "a").await, Some(i.clone()));
    assert_eq!(load_turn(s, "a", 1).await, Some(done.clone()));
    assert_eq!(load_turn(s, "a", 2).await, Some(queued.clone()));
    let both = s.load_instance_turn(NS, "a", 2).await.unwrap();
    assert_eq!(both, Some((i.clone(), Some(queued.clone()))));
    let found = s.find_message(NS, "a", "m1").await.unwrap();
    assert_eq!(found, Some(done.clone()));
    let listed = s
        .list_instances(NS, filter(None, None, None, 10))
        .await
        .unwrap();
    assert_eq!(listed, vec![i]);
    assert_eq!(s.list_turns(NS, "a", all(true)).await.unwrap(), vec![done]);
    assert_eq!(
        s.list_turns(NS, "a", all(false)).await.unwrap(),
        vec![queued]
    );
}

/// A turn suspended by a replay mismatch keeps its status and report, and an instance its
/// events, through every read.
async fn suspended_turns_and_instance_events_read_back(s: &dyn Store) {
    use turnwise::manifest::grammar::Saved;
    use turnwise::manifest::CallKind;
    let mut i = inst("a", 1);
    i.pending = vec![1, 2];
    i.record_event(InstanceEvent {
        at_ms: 3_000,
        action: InstanceEvent::SUSPEND.into(),
        by: None,
        from_version: Some("v1".into()),
        to_version: None,
        turn: Some(1),
        detail: Some("position 1: step order changed".into()),
    });
    let mut suspended = turn(1, "m1");
    suspended.status = TurnStatus::Suspended;
    suspended.attempt = 2;
    suspended.mismatch = Some(MismatchReport {
        version: "v1".into(),
        position: 1,
        saved: vec![
            Saved::new(CallKind::Step, "charge"),
            Saved::new(CallKind::Signal, "ok").signal("approval"),
        ],
        found: Some(Saved::new(CallKind::Sleep, "nap")),
        at: Some("src/order.rs:12".into()),
        message: "position 1: step order changed".into(),
    });
    let queued = turn(2, "m2");
    ok(
        s,
        create(i.clone(), vec![suspended.clone(), queued.clone()]),
    )
    .await;
    assert_eq!(load(s, "a").await, Some(i.clone()));
    assert_eq!(load_turn(s, "a", 1).await, Some(suspended.clone()));
    let both = s.load_instance_turn(NS, "a", 1).await.unwrap();
    assert_eq!(both, Some((i.clone(), Some(suspended.clone()))));
    assert_eq!(
        s.list_turns(NS, "a", all(false)).await.unwrap(),
        vec![suspended, queued]
    );
    // Events are bounded: the oldest go first.
    for n in 0..40 {
        i.record_event(InstanceEvent {
            at_ms: 4_000 + n,
            action: InstanceEvent::RESTART_TURN.into(),
            by: Some("ops".into()),
            from_version: None,
            to_version: None,
            turn: Some(1),
            detail: None,
        });
    }
    assert_eq!(i.events.len(), turnwise_rules::limits::INSTANCE_EVENTS);
    assert_eq!(i.events[0].at_ms, 4_008, "the oldest were dropped");
    i.revision = 2;
    ok(s, write(i.clone(), Some(1), vec![])).await;
    assert_eq!(load(s, "a").await, Some(i));
}

async fn namespaces_are_isolated(s: &dyn Store) {
    let mut x = due_at("same", "order", "v1", Some(10));
    x.pending = vec![1];
    ok(s, create(x, vec![turn(1, "m1")])).await;
    conflict(s, create(inst("same", 1), vec![])).await;
    // The same id in another namespace is another instance, created from scratch.
    let other = |rev| inst_in("blue", "same", rev);
    ok(s, create(other(1), vec![turn(1, "m1"), turn(2, "m2")])).await;
    ok(s, write(other(2), Some(1), vec![])).await;
    ok(s, write(other(3), Some(2), vec![])).await;

    assert_eq!(load(s, "same").await.unwrap().revision, 1);
    assert_eq!(
        s.load_instance("blue", "same").await.unwrap(),
        Some(other(3))
    );
    assert_eq!(load_turn(s, "same", 2).await, None);
    assert_eq!(
        s.find_message("blue", "same", "m2").await.unwrap(),
        Some(turn(2, "m2"))
    );
    assert_eq!(s.find_message(NS, "same", "m2").await.unwrap(), None);
    assert_eq!(s.count_instances(NS, "order", None).await.unwrap(), (1, 1));
    assert_eq!(
        s.count_instances("blue", "order", None).await.unwrap(),
        (1, 0)
    );
    let order = [wf("order", "v1")];
    assert_eq!(
        s.due("blue", &order, 100, 10).await.unwrap(),
        [] as [String; 0]
    );
    assert_eq!(s.next_due("blue", &order).await.unwrap(), None);
    assert_eq!(s.due(NS, &order, 100, 10).await.unwrap(), ["same"]);
    let listed = s.list_instances("blue", filter(None, None, None, 10)).await;
    assert_eq!(listed.unwrap(), [other(3)]);
    assert!(s
        .list_instances("nowhere", filter(None, None, None, 10))
        .await
        .unwrap()
        .is_empty());

    // Deleting in one namespace leaves the other alone.
    ok(s, delete("blue", "same", 3)).await;
    assert_eq!(s.load_instance("blue", "same").await.unwrap(), None);
    assert_eq!(load(s, "same").await.unwrap().revision, 1);
    assert_eq!(load_turn(s, "same", 1).await, Some(turn(1, "m1")));
}

// ---------------------------------------------------------------------------------------------
// SQLite only

#[tokio::test]
async fn sqlite_data_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    {
        let s = SqliteStore::open(&path).await.unwrap();
        ok(&s, create(inst("a", 1), vec![])).await;
        let mut w = write(
            due_at("a", "order", "v1", Some(7)),
            Some(1),
            vec![finished(1, "m1", 1), finished(2, "m2", 2), turn(3, "m3")],
        );
        if let Some(i) = w.instance.as_mut() {
            i.revision = 2;
        }
        w.retention = Some(Retention {
            keep_turns: 1,
            keep_since_ms: 100,
        });
        ok(&s, w).await;
        ok(&s, create(inst_in("blue", "b", 1), vec![])).await;
    }
    let s = SqliteStore::open(&path).await.unwrap();
    let a = load(&s, "a").await.unwrap();
    assert_eq!(a.revision, 2);
    assert_eq!(a.history_pruned_through, 1);
    assert_eq!(a.due_at_ms, Some(7));
    assert_eq!(load_turn(&s, "a", 2).await, Some(finished(2, "m2", 2)));
    assert_eq!(load_turn(&s, "a", 1).await, None);
    assert_eq!(
        s.find_message(NS, "a", "m3").await.unwrap(),
        Some(turn(3, "m3"))
    );
    assert_eq!(
        s.due(NS, &[wf("order", "v1")], 10, 10).await.unwrap(),
        ["a"]
    );
    assert_eq!(
        s.load_instance("blue", "b").await.unwrap(),
        Some(inst_in("blue", "b", 1))
    );
    // Writing goes on from the stored revision.
    conflict(&s, create(inst("a", 1), vec![])).await;
    ok(&s, write(inst("a", 3), Some(2), vec![])).await;
    assert_eq!(load(&s, "a").await.unwrap().history_pruned_through, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_group_commit_isolates_failures() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(open_sqlite(dir.path(), SqliteOptions::default()).await);
    commit_a_mixed_crowd(s.clone(), 400).await;
    // The write sets refused after writing rows sent their batches down the guarded path.
    assert!(s.stats().guarded_retries >= 1, "{:?}", s.stats());
}

/// `n` write sets committed at once from as many tasks, half relaxed, with one in 40 of each
/// kind refused: a stale revision, a taken message id, and one message id for two new turns
/// (which SQLite refuses only after writing rows). Each refusal is its own, the rest are
/// written, the refused ones leave nothing behind. Answers how many were written.
async fn commit_a_mixed_crowd(s: Arc<dyn Store>, n: usize) -> usize {
    assert_eq!(n % 40, 0, "a whole number of 40s");
    ok(&*s, create(inst("hot", 1), vec![turn(1, "taken")])).await;
    let mut tasks = Vec::new();
    for i in 0..n {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let id = format!("i{i:04}");
            let w = match i % 40 {
                // Stale: `hot` is at revision 1.
                1 => write(inst("hot", 5), Some(4), vec![turn(2, "x")]),
                // Refused: the message id is taken.
                2 => write(inst("hot", 2), Some(1), vec![turn(9, "taken")]),
                // Refused: one message id for two new turns.
                3 => create(inst(&id, 1), vec![turn(1, "twice"), turn(2, "twice")]),
                _ => create(inst(&id, 1), vec![turn(1, &id)]),
            };
            let durability = if i % 2 == 0 {
                Durability::Relaxed
            } else {
                Durability::Durable
            };
            (i, s.commit(WriteSet { durability, ..w }).await)
        }));
    }
    let mut landed = 0;
    for t in tasks {
        let (i, result) = t.await.unwrap();
        match i % 40 {
            1 => assert_eq!(result, Err(CommitError::Conflict), "task {i}"),
            2 | 3 => assert!(
                matches!(result, Err(CommitError::MessageIdTaken { .. })),
                "task {i}: {result:?}"
            ),
            _ => {
                assert_eq!(result, Ok(()), "task {i}");
                landed += 1;
            }
        }
    }
    assert_eq!(landed, n - 3 * n / 40);
    for i in (0..n).filter(|i| matches!(i % 40, 3)) {
        let id = format!("i{i:04}");
        assert_eq!(load(&*s, &id).await, None, "{id}");
        assert_eq!(load_turn(&*s, &id, 1).await, None, "{id}");
    }
    for i in (0..n).filter(|i| !matches!(i % 40, 1..=3)) {
        let id = format!("i{i:04}");
        assert_eq!(load(&*s, &id).await, Some(inst(&id, 1)), "{id}");
        assert_eq!(load_turn(&*s, &id, 1).await, Some(turn(1, &id)));
    }
    assert_eq!(load(&*s, "hot").await, Some(inst("hot", 1)));
    assert_eq!(load_turn(&*s, "hot", 9).await, None);
    let all = s.list_instances(NS, filter(None, None, None, 10_000)).await;
    assert_eq!(all.unwrap().len(), landed + 1);
    landed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_relaxed_and_durable_commits_persist() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    {
        let s = Arc::new(SqliteStore::open(&path).await.unwrap());
        let mut tasks = Vec::new();
        for i in 0..100u64 {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                let id = format!("r{i}");
                let mut w = create(inst(&id, 1), vec![turn(1, "m")]);
                // A run of relaxed-only commits, then mixed ones.
                if i < 50 || i % 3 == 0 {
                    w.durability = Durability::Relaxed;
                }
                s.commit(w).await
            }));
        }
        for t in tasks {
            assert_eq!(t.await.unwrap(), Ok(()));
        }
        // A relaxed commit after the last durable one, with nothing after it.
        let mut last = write(inst("r0", 2), Some(1), vec![finished(1, "m", 3)]);
        last.durability = Durability::Relaxed;
        ok(&*s, last).await;
    }
    let s = SqliteStore::open(&path).await.unwrap();
    for i in 0..100u64 {
        let id = format!("r{i}");
        let want = if i == 0 { 2 } else { 1 };
        assert_eq!(load(&s, &id).await.unwrap().revision, want, "{id}");
    }
    assert_eq!(load_turn(&s, "r0", 1).await, Some(finished(1, "m", 3)));
}

/// Files written by schema versions 1 (two full indexes over `finished`), 2 (no journal), 3
/// (no quarantine table), 4 (no runs and schemas tables, no schedules or outbox in instance
/// bodies) and 5 (no suspended turns or instance events in bodies) open: they are moved to
/// version 6, and their instances and turns read as before.
#[tokio::test]
async fn sqlite_migrates_older_schema_versions() {
    // Turn 2 is the instance's one unfinished turn.
    let busy = |revision| InstanceRecord {
        pending: vec![2],
        ..inst("a", revision)
    };
    for old in [1, 2, 3, 4, 5] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        {
            let s = open_sqlite(dir.path(), SqliteOptions::default()).await;
            ok(&s, create(inst("a", 1), vec![turn(1, "m1"), turn(2, "m2")])).await;
            ok(&s, write(busy(2), Some(1), vec![finished(1, "m1", 5_000)])).await;
        }
        {
            // Put the file back as that version wrote it.
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.execute_batch("PRAGMA user_version = 5;").unwrap();
            if old <= 4 {
                conn.execute_batch("DROP TABLE runs; DROP TABLE schemas; PRAGMA user_version = 4;")
                    .unwrap();
            }
            if old <= 3 {
                conn.execute_batch("DROP TABLE quarantine; PRAGMA user_version = 3;")
                    .unwrap();
            }
            if old <= 2 {
                conn.execute_batch("DROP TABLE journal; PRAGMA user_version = 2;")
                    .unwrap();
            }
            if old == 1 {
                conn.execute_batch(
                    "DROP INDEX turns_unfinished; DROP INDEX turns_finished_by_age;
                     CREATE INDEX turns_by_finished ON turns (ns, id, finished, number);
                     CREATE INDEX turns_by_age ON turns (ns, id, finished, finished_at_ms, number);
                     PRAGMA user_version = 1;",
                )
                .unwrap();
            }
        }
        let s = open_sqlite(dir.path(), SqliteOptions::default()).await;
        assert_eq!(
            numbers(&s.list_turns(NS, "a", all(false)).await.unwrap()),
            [2]
        );
        assert_eq!(
            numbers(&s.list_turns(NS, "a", all(true)).await.unwrap()),
            [1]
        );
        assert_eq!(load(&s, "a").await, Some(busy(2)));
        // Journaled writes (a running turn's) work on the migrated file.
        ok(&s, write(busy(3), Some(2), vec![turn(2, "m2")])).await;
        ok(&s, write(busy(4), Some(3), vec![turn(2, "m2")])).await;
        assert!(s.stats().journaled >= 1, "from version {old}");
        drop(s);
        let conn = rusqlite::Connection::open(&path).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, 6);
        let runs: i64 = conn
            .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))
            .expect("the runs table exists after the migration");
        assert_eq!(runs, 0);
        let quarantined: i64 = conn
            .query_row("SELECT COUNT(*) FROM quarantine", [], |r| r.get(0))
            .expect("the quarantine table exists after the migration");
        assert_eq!(quarantined, 0);
        let mut indexes: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'turns' AND sql IS NOT NULL ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        indexes.sort();
        assert_eq!(
            indexes,
            [
                "turns_by_message",
                "turns_finished_by_age",
                "turns_unfinished"
            ]
        );
        let (body, journal): (String, i64) = conn
            .query_row(
                "SELECT body, (SELECT COUNT(*) FROM journal) FROM instances WHERE id = 'a'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert!(
            body.contains("\"revision\":4"),
            "the journal was written into the tables on close: {body}"
        );
        assert_eq!(journal, 0);
    }
}

#[tokio::test]
async fn sqlite_refuses_newer_schema_and_foreign_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    drop(SqliteStore::open(&path).await.unwrap());
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("PRAGMA user_version = 99").unwrap();
    }
    let err = SqliteStore::open(&path).await.unwrap_err();
    assert!(err.to_string().contains("schema version 99"), "{err}");

    let foreign = dir.path().join("foreign.db");
    {
        let conn = rusqlite::Connection::open(&foreign).unwrap();
        conn.execute_batch("CREATE TABLE t (x); PRAGMA user_version = 3")
            .unwrap();
    }
    let err = SqliteStore::open(&foreign).await.unwrap_err();
    assert!(err.to_string().contains("not a turnwise store"), "{err}");

    let missing = dir.path().join("no-such-dir").join("store.db");
    let err = SqliteStore::open(&missing).await.unwrap_err();
    assert!(err.to_string().starts_with("sqlite: open"), "{err}");
}

#[tokio::test]
async fn sqlite_cache_follows_commits() {
    // Reads between writes must never see an older record than the last acknowledged commit.
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions::default().with_cache_instances(2);
    let s = open_sqlite(dir.path(), options).await;
    for id in ["a", "b", "c", "d"] {
        ok(&s, create(inst(id, 1), vec![])).await;
    }
    for rev in 2..20u64 {
        for id in ["a", "b", "c", "d"] {
            assert_eq!(load(&s, id).await.unwrap().revision, rev - 1);
            ok(&s, write(inst(id, rev), Some(rev - 1), vec![])).await;
            assert_eq!(load(&s, id).await.unwrap().revision, rev);
        }
    }
    ok(&s, delete(NS, "a", 19)).await;
    assert_eq!(load(&s, "a").await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_long_relaxed_runs_persist() {
    // Enough relaxed-only commits (5120) to make the writer checkpoint among them (it does after
    // every 4096). Without the sync thread, relaxed batches commit at `synchronous=OFF` with
    // SQLite's automatic checkpoints off, so only the writer's own checkpoint moves them from
    // the write-ahead log into the database file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    const TASKS: u64 = 64;
    const REVISIONS: u64 = 80;
    {
        let options = SqliteOptions::default().with_sync_thread(false);
        let s = Arc::new(SqliteStore::open_with(&path, options).await.unwrap());
        let mut tasks = Vec::new();
        for k in 0..TASKS {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                let id = format!("k{k}");
                for rev in 1..=REVISIONS {
                    let mut w = write(inst(&id, rev), (rev > 1).then(|| rev - 1), vec![]);
                    w.durability = Durability::Relaxed;
                    s.commit(w).await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let stats = s.stats();
        assert_eq!(
            (stats.write_sets, stats.durable_batches),
            (TASKS * REVISIONS, 0),
            "relaxed write sets only: {stats:?}"
        );

        // The checkpoint ran while the store was open (the writer checkpoints right after the
        // batch that crossed 4096, long before the last commit was answered): the database file
        // alone, copied without its log, holds every instance, at the revision it had then.
        let copy = dir.path().join("without-the-log.db");
        std::fs::copy(&path, &copy).unwrap();
        let conn = rusqlite::Connection::open(&copy).unwrap();
        let instances: i64 = conn
            .query_row("SELECT count(*) FROM instances", [], |r| r.get(0))
            .unwrap_or_else(|e| panic!("the database file alone has no instances table: {e}"));
        assert_eq!(
            instances, TASKS as i64,
            "the database file alone holds {instances} of the {TASKS} instances: no checkpoint \
             moved the relaxed commits out of the log"
        );
    }
    let s = SqliteStore::open(&path).await.unwrap();
    for k in 0..TASKS {
        assert_eq!(
            load(&s, &format!("k{k}")).await.unwrap().revision,
            REVISIONS
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Run summaries

/// A run summary of instance `id`, started at `started`, ended at `ended`.
fn run(id: &str, turn: u64, started: Millis, ended: Millis, outcome: &str) -> WorkflowRun {
    serde_json::from_value(json!({
        "id": format!("{started:013}-{id}-{turn}"),
        "workflow_id": id,
        "workflow_type": "wf",
        "version": "v1",
        "namespace": NS,
        "turn": turn,
        "attempt": 1,
        "message_id": format!("m{turn}"),
        "started_at_ms": started,
        "ended_at_ms": ended,
        "outcome": outcome,
        "turn_status": "completed",
        "queue_before": 1,
        "queue_after": 0,
        "counters": {"pages": 1},
        "steps": [{"key": "s", "kind": "step", "at_ms": started}],
        "phases": [],
        "results": {"counts": {"written": 1}}
    }))
    .unwrap()
}

fn run_filter(instance: Option<&str>, before: Option<&str>, limit: usize) -> RunFilter {
    RunFilter {
        instance: instance.map(Into::into),
        before: before.map(Into::into),
        limit,
    }
}

fn run_ids(runs: &[WorkflowRun]) -> Vec<&str> {
    runs.iter().map(|r| r.id.as_str()).collect()
}

async fn runs_are_written_with_the_commit(s: &dyn Store) {
    ok(s, create(inst("a", 1), vec![])).await;
    let r1 = run("a", 1, 1_000, 2_000, "completed");
    // A refused commit writes none of its runs.
    let mut stale = write(inst("a", 8), Some(7), vec![]);
    stale.runs = vec![r1.clone()];
    conflict(s, stale).await;
    assert_eq!(s.load_run(NS, &r1.id).await.unwrap(), None);
    assert!(s
        .list_runs(NS, run_filter(None, None, 10))
        .await
        .unwrap()
        .is_empty());

    let mut w = write(inst("a", 2), Some(1), vec![turn(1, "m1")]);
    w.runs = vec![r1.clone()];
    ok(s, w).await;
    assert_eq!(s.load_run(NS, &r1.id).await.unwrap(), Some(r1.clone()));
    assert_eq!(
        s.load_run("other", &r1.id).await.unwrap(),
        None,
        "runs are per namespace"
    );

    // The same run id again replaces the summary (a resumed run that ended again).
    let mut again = run("a", 1, 1_000, 3_000, "failed");
    again.error = Some("boom".into());
    let mut w = write(inst("a", 3), Some(2), vec![]);
    w.runs = vec![again.clone()];
    ok(s, w).await;
    assert_eq!(s.load_run(NS, &r1.id).await.unwrap(), Some(again));
    assert_eq!(
        s.list_runs(NS, run_filter(None, None, 10))
            .await
            .unwrap()
            .len(),
        1
    );
}

async fn runs_list_newest_first_with_cursor(s: &dyn Store) {
    ok(s, create(inst("a", 1), vec![])).await;
    ok(s, create(inst("b", 1), vec![])).await;
    let mut w = write(inst("a", 2), Some(1), vec![]);
    w.runs = vec![
        run("a", 1, 1_000, 1_100, "completed"),
        run("a", 2, 3_000, 3_100, "completed"),
        run("a", 3, 5_000, 5_100, "failed"),
    ];
    ok(s, w).await;
    let mut w = write(inst("b", 2), Some(1), vec![]);
    w.runs = vec![run("b", 1, 4_000, 4_100, "lease_lost")];
    ok(s, w).await;

    let all = s.list_runs(NS, run_filter(None, None, 10)).await.unwrap();
    assert_eq!(
        run_ids(&all),
        [
            "0000000005000-a-3",
            "0000000004000-b-1",
            "0000000003000-a-2",
            "0000000001000-a-1"
        ]
    );
    let page = s.list_runs(NS, run_filter(None, None, 2)).await.unwrap();
    assert_eq!(run_ids(&page), ["0000000005000-a-3", "0000000004000-b-1"]);
    let next = s
        .list_runs(NS, run_filter(None, Some("0000000004000-b-1"), 2))
        .await
        .unwrap();
    assert_eq!(run_ids(&next), ["0000000003000-a-2", "0000000001000-a-1"]);
    let of_a = s
        .list_runs(NS, run_filter(Some("a"), Some("0000000005000-a-3"), 10))
        .await
        .unwrap();
    assert_eq!(run_ids(&of_a), ["0000000003000-a-2", "0000000001000-a-1"]);
    assert!(s
        .list_runs("other", run_filter(None, None, 10))
        .await
        .unwrap()
        .is_empty());
    assert!(s
        .list_runs(NS, run_filter(None, None, 0))
        .await
        .unwrap()
        .is_empty());
}

async fn runs_count_by_hour(s: &dyn Store) {
    const H: Millis = HOUR_MS;
    ok(s, create(inst("a", 1), vec![])).await;
    let mut w = write(inst("a", 2), Some(1), vec![]);
    w.runs = vec![
        run("a", 1, H - 1, H, "completed"),
        run("a", 2, H, H + 5, "completed"),
        run("a", 3, H + 10, H + 20, "failed"),
        run("a", 4, 2 * H + 1, 2 * H + 2, "completed"),
    ];
    ok(s, w).await;
    let counts = s.count_runs(NS, H).await.unwrap();
    let got: Vec<(Millis, &str, u64)> = counts
        .iter()
        .map(|c| (c.hour_ms, c.outcome.as_str(), c.runs))
        .collect();
    assert_eq!(
        got,
        [
            (H, "completed", 1),
            (H, "failed", 1),
            (2 * H, "completed", 1)
        ],
        "runs since the hour, by the hour they started and their outcome"
    );
    assert!(s.count_runs("other", 0).await.unwrap().is_empty());
}

async fn runs_pruned_in_bounded_batches(s: &dyn Store) {
    ok(s, create(inst("a", 1), vec![])).await;
    let many = RUN_PRUNE_BATCH as u64 + 6;
    let mut w = write(inst("a", 2), Some(1), vec![]);
    w.runs = (1..=many)
        .map(|n| run("a", n, n as Millis, 100 + n as Millis, "completed"))
        .collect();
    w.runs.push(run("a", many + 1, 5_000, 9_000, "completed"));
    ok(s, w).await;

    let mut w = write(inst("a", 3), Some(2), vec![]);
    w.prune_runs_before = Some(1_000);
    ok(s, w).await;
    let left = s
        .list_runs(NS, run_filter(None, None, 1_000))
        .await
        .unwrap();
    assert_eq!(
        left.len(),
        7,
        "one commit deletes at most RUN_PRUNE_BATCH expired runs"
    );
    let mut w = write(inst("a", 4), Some(3), vec![]);
    w.prune_runs_before = Some(1_000);
    ok(s, w).await;
    let left = s
        .list_runs(NS, run_filter(None, None, 1_000))
        .await
        .unwrap();
    assert_eq!(
        run_ids(&left),
        [format!("0000000005000-a-{}", many + 1)],
        "runs that ended at or after the limit are kept"
    );
}

/// A PostgreSQL schema of version 1 (no runs and schemas tables) is moved to version 2 when a
/// store connects, keeping its rows; a version newer than this turnwise knows is refused.
#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_migrates_version_1_and_refuses_newer() {
    let Some(db) = turnwise::testing::TestPostgres::start("store_contract_pg_migrates").await
    else {
        return;
    };
    {
        let s = db.store().await;
        ok(&s, create(inst("a", 1), vec![turn(1, "m1")])).await;
    }
    let (client, conn) = tokio_postgres::connect(&db.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .batch_execute(
            "DROP TABLE runs; DROP TABLE schemas; \
             UPDATE turnwise_meta SET value = 1 WHERE name = 'schema_version'",
        )
        .await
        .unwrap();
    let s = db.store().await;
    assert_eq!(load(&s, "a").await, Some(inst("a", 1)), "rows are kept");
    let mut w = write(inst("a", 2), Some(1), vec![]);
    w.runs = vec![run("a", 1, 1_000, 2_000, "completed")];
    ok(&s, w).await;
    assert_eq!(
        s.list_runs(NS, run_filter(None, None, 10))
            .await
            .unwrap()
            .len(),
        1,
        "the runs table exists after the migration"
    );
    let version: i64 = client
        .query_one(
            "SELECT value FROM turnwise_meta WHERE name = 'schema_version'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, 3);
    drop(s);
    client
        .batch_execute("UPDATE turnwise_meta SET value = 99 WHERE name = 'schema_version'")
        .await
        .unwrap();
    let refused = turnwise::store::PostgresStore::connect_with(&db.url(), db.options()).await;
    let err = refused.expect_err("a newer schema is refused");
    assert!(err.to_string().contains("version 99"), "{err}");
}

/// Group commit on PostgreSQL: write sets committed at the same moment share transactions, and
/// each keeps its own answer: a stale revision conflicts and a taken message id is refused,
/// without keeping the others of its transaction from being written (the crowd of
/// `commit_a_mixed_crowd`, as SQLite's group commit is tested).
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_group_commit_isolates_refusals() {
    let Some(db) = turnwise::testing::TestPostgres::start("store_contract_pg_group").await else {
        return;
    };
    let s = one_pipeline(&db).await;
    const N: usize = 200;
    commit_a_mixed_crowd(s.clone(), N).await;
    let stats = s.stats();
    assert!(
        stats.group_commits >= 1 && stats.grouped_write_sets > stats.group_commits,
        "write sets waiting together shared a transaction: {stats:?}"
    );
    assert_eq!(stats.group_retries, 0, "{stats:?}");
    // One transaction per lone write set and one per group. The write sets with one message
    // id for two turns are refused before anything is sent.
    let sent = (N + 1 - N / 40) as u64;
    assert_eq!(
        stats.transactions,
        sent - stats.grouped_write_sets + stats.group_commits,
        "{stats:?}"
    );
    assert!(stats.durable_transactions <= stats.transactions);
}

/// A PostgreSQL store with one pipeline of group commits, so that write sets queued together
/// go as one batch.
#[cfg(feature = "postgres")]
async fn one_pipeline(db: &turnwise::testing::TestPostgres) -> Arc<PostgresStore> {
    let options = db.options().with_commit_pipelines(1);
    Arc::new(
        PostgresStore::connect_with(&db.url(), options)
            .await
            .unwrap(),
    )
}

/// Another session in an open transaction (`other`), which the test makes hold a row, and a
/// session watching whom it blocks: inside a transaction `pg_stat_activity` is a snapshot taken
/// at its first read, so the watcher has a connection of its own.
#[cfg(feature = "postgres")]
struct Holder {
    other: tokio_postgres::Client,
    watcher: tokio_postgres::Client,
    pid: i32,
}

#[cfg(feature = "postgres")]
impl Holder {
    async fn begin(db: &turnwise::testing::TestPostgres) -> Self {
        let connect = || async {
            let (client, conn) = tokio_postgres::connect(&db.url(), tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(conn);
            client
        };
        let (other, watcher) = (connect().await, connect().await);
        let pid: i32 = other
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .unwrap()
            .get(0);
        // Should the test fail while a row is held, the server ends the transaction by itself,
        // so that dropping the test's schema does not wait for it.
        other
            .batch_execute("SET idle_in_transaction_session_timeout = '30s'; BEGIN")
            .await
            .unwrap();
        Holder {
            other,
            watcher,
            pid,
        }
    }

    /// The backend of the first session that waits on the held row (at most 20 s).
    async fn blocked(&self, row: &str) -> i32 {
        use std::time::{Duration, Instant};
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let found = self
                .watcher
                .query_opt(
                    "SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
                    &[&self.pid],
                )
                .await
                .unwrap();
            if let Some(found) = found {
                return found.get(0);
            }
            assert!(
                Instant::now() < deadline,
                "the batch never waited on the {row} row"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A batch the database refuses as a whole is rolled back and its write sets are committed
/// again one by one. Here another process creates one of the batch's instances first: the
/// batch's insert waits on that process's uncommitted row and then fails on the unique key,
/// which aborts the whole transaction. The raced creation answers `Conflict`; every other
/// write set of the batch is written.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "current_thread")]
async fn postgres_group_commit_retries_a_refused_batch_one_by_one() {
    let Some(db) = turnwise::testing::TestPostgres::start("store_contract_pg_regroup").await else {
        return;
    };
    let s = one_pipeline(&db).await;
    let holder = Holder::begin(&db).await;
    let raced = inst("raced", 1);
    holder
        .other
        .execute(
            "INSERT INTO instances (ns, id, workflow_type, version, revision, pending_count, \
             history_pruned_through, body) VALUES ($1, $2, $3, $4, 1, 0, 0, $5)",
            &[
                &NS,
                &"raced",
                &raced.workflow_type,
                &raced.version,
                &serde_json::to_string(&raced).unwrap(),
            ],
        )
        .await
        .unwrap();

    // Spawned on this one thread, the commits all queue before the committing task runs, so
    // they go as one batch.
    let ids: Vec<String> = (0..8)
        .map(|i| format!("b{i}"))
        .chain(["raced".into()])
        .collect();
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| {
            let (s, w) = (s.clone(), create(inst(id, 1), vec![turn(1, id)]));
            tokio::spawn(async move { s.commit(w).await })
        })
        .collect();
    // Commit the other process's row once the batch waits on it.
    holder.blocked("raced").await;
    holder.other.batch_execute("COMMIT").await.unwrap();

    for (id, task) in ids.iter().zip(tasks) {
        let result = task.await.unwrap();
        if id == "raced" {
            assert_eq!(result, Err(CommitError::Conflict), "{id}");
        } else {
            assert_eq!(result, Ok(()), "{id}");
            assert_eq!(load(&*s, id).await, Some(inst(id, 1)), "{id}");
            assert_eq!(load_turn(&*s, id, 1).await, Some(turn(1, id)), "{id}");
        }
    }
    assert_eq!(
        load(&*s, "raced").await,
        Some(raced),
        "the other process's row"
    );
    let stats = s.stats();
    assert_eq!(stats.group_retries, 1, "{stats:?}");
    assert_eq!(stats.durable_commits, 8, "{stats:?}");
    // The rolled-back group is not counted; each write set then had a transaction of its own.
    assert_eq!(
        (stats.transactions, stats.group_commits),
        (9, 0),
        "{stats:?}"
    );
}

/// A batch whose connection dies before its `COMMIT` answers an error to every write set in it,
/// and none of them is written: the database rolled the transaction back. The store then goes
/// on with a new connection. (The batch is held on a lock, as above, while its connection is
/// terminated from another session.)
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "current_thread")]
async fn postgres_group_commit_answers_errors_when_its_connection_dies() {
    let Some(db) = turnwise::testing::TestPostgres::start("store_contract_pg_cut").await else {
        return;
    };
    let s = one_pipeline(&db).await;
    ok(&*s, create(inst("held", 1), vec![turn(1, "m1")])).await;
    // Hold `held`'s row, so that the batch waits on it with its transaction open.
    let holder = Holder::begin(&db).await;
    holder
        .other
        .batch_execute("SELECT 1 FROM instances WHERE id = 'held' FOR UPDATE")
        .await
        .unwrap();

    let mut writes: Vec<(String, WriteSet)> = (0..6)
        .map(|i| format!("c{i}"))
        .map(|id| (id.clone(), create(inst(&id, 1), vec![turn(1, &id)])))
        .collect();
    writes.push((
        "held".into(),
        write(inst("held", 2), Some(1), vec![turn(2, "m2")]),
    ));
    let tasks: Vec<_> = writes
        .into_iter()
        .map(|(id, w)| {
            let s = s.clone();
            (id, tokio::spawn(async move { s.commit(w).await }))
        })
        .collect();
    let waiting = holder.blocked("held").await;
    let cut: bool = holder
        .watcher
        .query_one("SELECT pg_terminate_backend($1)", &[&waiting])
        .await
        .unwrap()
        .get(0);
    assert!(cut);
    for (id, task) in tasks {
        let err = task.await.unwrap().expect_err(&id);
        let CommitError::Store(err) = err else {
            panic!("{id}: {err:?}")
        };
        assert!(
            err.to_string().contains("together"),
            "{id}: the error says the batch failed: {err}"
        );
    }
    holder.other.batch_execute("COMMIT").await.unwrap();
    for i in 0..6 {
        let id = format!("c{i}");
        assert_eq!(load(&*s, &id).await, None, "{id} was not written");
    }
    assert_eq!(load(&*s, "held").await, Some(inst("held", 1)));
    // A new connection serves the next commits.
    ok(&*s, create(inst("c0", 1), vec![turn(1, "c0")])).await;
    ok(&*s, write(inst("held", 2), Some(1), vec![turn(2, "m2")])).await;
    assert_eq!(load(&*s, "held").await, Some(inst("held", 2)));
    let stats = s.stats();
    assert_eq!(
        (
            stats.transactions,
            stats.durable_commits,
            stats.group_commits
        ),
        (3, 3, 0),
        "the cut batch counts for nothing: {stats:?}"
    );
}
