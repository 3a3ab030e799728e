//! Chained worker writes: `checkpoint_then_operation` and `checkpoint_then_complete`, which an
//! SDK worker makes when a step is followed at once by the next step or by the turn's end,
//! write exactly what the two calls made apart write, and refuse what they refuse: a refused
//! checkpoint writes nothing (the outer error), and a refusal of the second call leaves the
//! checkpoint saved (the inner error).

use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::{Backend, WorkerBackend};

use crate::support::*;
use crate::Fixture;

/// Two instances run the same turn, one through the chained calls and one through the calls
/// made apart; their turns and instances read the same after every pair.
pub async fn chained_calls_write_as_apart(f: impl Fixture) {
    let b = f.backend();
    for id in ["chained", "apart"] {
        create(&b, id).await;
        send(&b, id, "m1", json!({"n": 1})).await;
    }
    let (mut chained, mut apart) = (None, None);
    for _ in 0..2 {
        let task = claim(&b, "both instances have a ready turn").await;
        match task.turn.workflow_id.as_str() {
            "chained" => chained = Some(lease(&task)),
            _ => apart = Some(lease(&task)),
        }
    }
    let (c, a) = (
        chained.expect("`chained` was claimed"),
        apart.expect("`apart` was claimed"),
    );
    for l in [&c, &a] {
        ok(
            b.operation_cursor(operation_request(l, 0, "first")).await,
            "operation first",
        );
    }

    // A step saved and the next one started.
    let cursor = ok(
        b.checkpoint_then_operation(
            step_request(&c, 0, "first", json!({"v": 1})),
            operation_request(&c, 1, "second"),
        )
        .await,
        "checkpoint_then_operation first → second",
    );
    let cursor = ok(cursor, "the operation of second");
    assert_eq!(cursor, Value::Null, "a first attempt carries no cursor");
    ok(
        b.checkpoint_ack(step_request(&a, 0, "first", json!({"v": 1})))
            .await,
        "checkpoint first",
    );
    ok(
        b.operation_cursor(operation_request(&a, 1, "second")).await,
        "operation second",
    );
    let running = same_turns(&b, "after the first step").await;
    assert_eq!(running.steps.len(), 1, "the first step is saved");
    assert_plain_step(&running.steps[0], "first", &json!({"v": 1}), "step first");
    let op = running.operation.expect("the second step is running");
    assert_eq!(op.key, "second", "the running operation is the second step");

    // The last step saved with the completion, which continues with a new turn.
    let done = |l: &Lease| CompleteRequest {
        continuation: Some(Continuation {
            message: json!({"n": 2}),
        }),
        ..complete_request(l, json!({"count": 1}), json!("done"))
    };
    let completed = ok(
        b.checkpoint_then_complete(step_request(&c, 1, "second", json!({"v": 2})), done(&c))
            .await,
        "checkpoint_then_complete second",
    );
    ok(completed, "the completion");
    ok(
        b.checkpoint_ack(step_request(&a, 1, "second", json!({"v": 2})))
            .await,
        "checkpoint second",
    );
    ok(b.complete_ack(done(&a)).await, "complete");
    let finished = same_turns(&b, "after the completion").await;
    assert_eq!(finished.status, TurnStatus::Completed);
    assert_eq!(finished.steps.len(), 2, "both steps are saved");
    assert_plain_step(
        &finished.steps[1],
        "second",
        &json!({"v": 2}),
        "step second",
    );
    assert_eq!(finished.result, json!("done"));
    assert_eq!(finished.continued_to, Some(2));
    for id in ["chained", "apart"] {
        let inst = instance(&b, id).await;
        assert_eq!(inst.state, json!({"count": 1}), "`{id}` has the new state");
        assert_eq!(
            turn(&b, id, 2).await.message,
            json!({"n": 2}),
            "`{id}` continued with turn 2"
        );
    }
}

/// The chained calls refuse as the calls made apart do: a refused checkpoint is the outer
/// error and writes nothing; a refused operation or completion is the inner error, after the
/// checkpoint was saved.
pub async fn chained_calls_refuse_as_apart(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let task = claim(&b, "m1 is ready").await;
    let l = lease(&task);
    ok(
        b.operation_cursor(operation_request(&l, 0, "a")).await,
        "operation a",
    );
    let mut stale = l.clone();
    stale.token = "wt_not-the-token".into();

    // The checkpoint refused: nothing written.
    let before = snapshot(&b, "inst-1").await;
    expect_lease_lost(
        b.checkpoint_then_operation(
            step_request(&stale, 0, "a", json!(1)),
            operation_request(&stale, 1, "b"),
        )
        .await,
        "checkpoint_then_operation with another token",
    );
    expect_lease_lost(
        b.checkpoint_then_complete(
            step_request(&stale, 0, "a", json!(1)),
            complete_request(&stale, json!(null), json!(null)),
        )
        .await,
        "checkpoint_then_complete with another token",
    );
    expect_invalid(
        b.checkpoint_then_operation(
            step_request(&l, 0, "not a key", json!(1)),
            operation_request(&l, 1, "b"),
        )
        .await,
        "key",
        "checkpoint_then_operation with an invalid step key",
    );
    expect_conflict(
        b.checkpoint_then_complete(
            step_request(&l, 3, "a", json!(1)),
            complete_request(&l, json!(null), json!(null)),
        )
        .await,
        "checkpoint_then_complete at a position that is not the next",
    );
    assert_unchanged(&b, "inst-1", &before, "refused checkpoints").await;

    // The operation refused before anything is read: the checkpoint is saved.
    let refused = ok(
        b.checkpoint_then_operation(
            step_request(&l, 0, "a", json!(1)),
            operation_request(&l, 1, "not a key"),
        )
        .await,
        "checkpoint_then_operation with an invalid operation key: the checkpoint",
    );
    expect_invalid(refused, "key", "the operation with an invalid key");
    let saved = turn(&b, "inst-1", 1).await;
    assert_eq!(saved.steps.len(), 1, "step a was saved");
    assert!(saved.operation.is_none(), "no step is running");

    // The operation refused by the turn as saved (a position that is not the next).
    ok(
        b.operation_cursor(operation_request(&l, 1, "b")).await,
        "operation b",
    );
    let refused = ok(
        b.checkpoint_then_operation(
            step_request(&l, 1, "b", json!(2)),
            operation_request(&l, 5, "c"),
        )
        .await,
        "checkpoint_then_operation of c at position 5: the checkpoint",
    );
    expect_conflict(refused, "the operation of c at position 5");
    let saved = turn(&b, "inst-1", 1).await;
    assert_eq!(saved.steps.len(), 2, "step b was saved");
    assert!(saved.operation.is_none(), "c was not started");
    assert_eq!(saved.status, TurnStatus::Running, "the turn still runs");

    // The completion refused (another lease): the checkpoint is saved, the turn runs on.
    ok(
        b.operation_cursor(operation_request(&l, 2, "c")).await,
        "operation c",
    );
    let refused = ok(
        b.checkpoint_then_complete(
            step_request(&l, 2, "c", json!(3)),
            complete_request(&stale, json!(null), json!(null)),
        )
        .await,
        "checkpoint_then_complete with the completion on another token: the checkpoint",
    );
    expect_lease_lost(refused, "the completion on another token");
    let saved = turn(&b, "inst-1", 1).await;
    assert_eq!(saved.steps.len(), 3, "step c was saved");
    assert_eq!(
        saved.status,
        TurnStatus::Running,
        "the turn was not completed"
    );
}

/// Turn 1 of `chained` and of `apart`, which must read the same but for the instance id, the
/// run and the trace (their ids are drawn at random); answers `chained`'s.
async fn same_turns<B: Backend + ?Sized>(b: &B, when: &str) -> WorkflowTurn {
    let strip = |mut t: WorkflowTurn| {
        t.workflow_id.clear();
        t.run = None;
        t.traceparent = None;
        t
    };
    let chained = strip(turn(b, "chained", 1).await);
    let apart = strip(turn(b, "apart", 1).await);
    assert_eq!(
        chained, apart,
        "{when}: the chained calls must write what the calls made apart write"
    );
    chained
}
