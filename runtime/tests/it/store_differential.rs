//! The stores against the reference: the same inbox life, step by step, through the `Store`
//! API with records shaped the way the engine writes them, must read the same on every store
//! as on `MemoryStore` (the contract's short reference). SQLite runs it in `store_journal.rs`
//! in each of its journal and cache modes; PostgreSQL runs it here.

use serde_json::json;
use turnwise::protocol::*;
use turnwise::store::*;

use crate::common;

pub(crate) const NS: &str = "default";

/// An instance whose unfinished turns are `pending`, as the engine keeps it.
pub(crate) fn inst(
    id: &str,
    revision: u64,
    pending: &[u64],
    due: Option<Millis>,
) -> InstanceRecord {
    InstanceRecord {
        next_turn: pending.iter().max().map_or(1, |n| n + 1),
        pending: pending.to_vec(),
        due_at_ms: due,
        ..common::instance_record(NS, id, revision)
    }
}

pub(crate) fn queued(number: u64) -> TurnRecord {
    TurnRecord::queued(
        number,
        format!("m{number}"),
        json!({"n": number}),
        None,
        2_000,
        format!("e1-{number}"),
    )
}

/// Turn `number` running, with `steps` saved steps.
pub(crate) fn running(number: u64, steps: usize) -> TurnRecord {
    TurnRecord {
        status: TurnStatus::Running,
        attempt: 1,
        token: Some(format!("t{number}")),
        steps: (0..steps)
            .map(|i| StepCheckpoint {
                key: format!("s{i}"),
                kind: CheckpointKind::Step,
                output: json!(i),
                at_ms: 3_000 + i as i64,
                delay_ms: None,
                signal_name: None,
                wake_at_ms: None,
            })
            .collect(),
        ..queued(number)
    }
}

pub(crate) fn done(number: u64, at: Millis) -> TurnRecord {
    TurnRecord {
        status: TurnStatus::Completed,
        result: json!({"turn": number}),
        finished_at_ms: Some(at),
        ..running(number, 2)
    }
}

pub(crate) fn write(instance: InstanceRecord, turns: Vec<TurnRecord>) -> WriteSet {
    WriteSet {
        ns: NS.into(),
        id: instance.id.clone(),
        expected_revision: instance.revision.checked_sub(1).filter(|r| *r > 0),
        instance: Some(instance),
        turns,
        retention: None,
        runs: Vec::new(),
        prune_runs_before: None,
        durability: Durability::Durable,
    }
}

pub(crate) async fn ok(s: &dyn Store, w: WriteSet) {
    if let Err(e) = s.commit(w.clone()).await {
        panic!(
            "commit of `{}` at revision {:?} failed: {e:?}",
            w.id,
            w.instance.map(|i| i.revision)
        );
    }
}

pub(crate) fn all(finished: bool) -> TurnRange {
    TurnRange {
        finished,
        after: None,
        limit: usize::MAX,
    }
}

pub(crate) fn numbers(turns: &[TurnRecord]) -> Vec<u64> {
    turns.iter().map(|t| t.number).collect()
}

/// Everything a reader can see of instance `id`.
#[derive(Debug, PartialEq)]
pub(crate) struct Seen {
    instance: Option<InstanceRecord>,
    turns: Vec<Option<TurnRecord>>,
    by_message: Vec<Option<u64>>,
    unfinished: Vec<TurnRecord>,
    finished: Vec<TurnRecord>,
    second_unfinished_page: Vec<u64>,
    listed: Vec<InstanceRecord>,
    counts: (u64, u64),
    due: Vec<String>,
    next_due: Option<Millis>,
}

pub(crate) async fn seen(s: &dyn Store, id: &str, turns: u64) -> Seen {
    let mut turn = Vec::new();
    let mut by_message = Vec::new();
    for n in 1..=turns {
        turn.push(s.load_turn(NS, id, n).await.unwrap());
        by_message.push(
            s.find_message(NS, id, &format!("m{n}"))
                .await
                .unwrap()
                .map(|t| t.number),
        );
    }
    let page = TurnRange {
        finished: false,
        after: Some(1),
        limit: 1,
    };
    let workflows = [WorkflowRef::new("order", "v1")];
    Seen {
        instance: s.load_instance(NS, id).await.unwrap(),
        turns: turn,
        by_message,
        unfinished: s.list_turns(NS, id, all(false)).await.unwrap(),
        finished: s.list_turns(NS, id, all(true)).await.unwrap(),
        second_unfinished_page: numbers(&s.list_turns(NS, id, page).await.unwrap()),
        listed: s
            .list_instances(
                NS,
                InstanceFilter {
                    limit: 100,
                    ..InstanceFilter::default()
                },
            )
            .await
            .unwrap(),
        counts: s.count_instances(NS, "order", Some("v1")).await.unwrap(),
        due: s.due(NS, &workflows, 50_000, 10).await.unwrap(),
        next_due: s.next_due(NS, &workflows).await.unwrap(),
    }
}

/// One inbox's life, step by step, with what every read shows after each step. The same
/// steps on every store must show the same things.
pub(crate) async fn inbox_life(s: &dyn Store) -> Vec<Seen> {
    let mut views = Vec::new();
    // Another instance, idle, so the lists hold more than one.
    ok(s, write(inst("b", 1, &[], None), vec![])).await;
    // Created with one queued turn.
    ok(s, write(inst("a", 1, &[1], Some(10_000)), vec![queued(1)])).await;
    views.push(seen(s, "a", 3).await);
    // Claimed, then two steps.
    ok(
        s,
        write(inst("a", 2, &[1], Some(70_000)), vec![running(1, 0)]),
    )
    .await;
    ok(
        s,
        write(inst("a", 3, &[1], Some(70_000)), vec![running(1, 1)]),
    )
    .await;
    views.push(seen(s, "a", 3).await);
    // A second message arrives while turn 1 runs.
    ok(
        s,
        write(inst("a", 4, &[1, 2], Some(70_000)), vec![queued(2)]),
    )
    .await;
    ok(
        s,
        write(inst("a", 5, &[1, 2], Some(40_000)), vec![running(1, 2)]),
    )
    .await;
    views.push(seen(s, "a", 3).await);
    // Turn 1 completes; turn 2 is the head now.
    ok(
        s,
        write(inst("a", 6, &[2], Some(20_000)), vec![done(1, 30_000)]),
    )
    .await;
    views.push(seen(s, "a", 3).await);
    // Turn 2 runs and completes with a continuation, turn 3.
    ok(
        s,
        write(inst("a", 7, &[2], Some(80_000)), vec![running(2, 1)]),
    )
    .await;
    ok(
        s,
        write(
            inst("a", 8, &[3], Some(45_000)),
            vec![done(2, 31_000), queued(3)],
        ),
    )
    .await;
    views.push(seen(s, "a", 3).await);
    // Paused: nothing due.
    ok(
        s,
        write(
            InstanceRecord {
                paused: true,
                ..inst("a", 9, &[3], None)
            },
            vec![],
        ),
    )
    .await;
    views.push(seen(s, "a", 3).await);
    views
}

/// PostgreSQL reads every step of the inbox life as the memory store does, and so does a
/// second store opened on the same schema afterwards (nothing was held only in the first).
#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_reads_like_the_memory_store() {
    let Some(db) = turnwise::testing::TestPostgres::start("differential").await else {
        return;
    };
    let expected = inbox_life(&MemoryStore::new()).await;
    let store = db.store().await;
    let views = inbox_life(&store).await;
    assert_eq!(views.len(), expected.len());
    for (i, (got, want)) in views.iter().zip(&expected).enumerate() {
        assert_eq!(got, want, "postgres: after step {i}");
    }
    let again = db.store().await;
    assert_eq!(
        seen(&again, "a", 3).await,
        *expected.last().unwrap(),
        "postgres: a second store"
    );
}
