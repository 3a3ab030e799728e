//! Exact repeats: a worker resends identical bodies after a lost answer, and each must answer
//! 2xx and change nothing (no timestamps, sequences or counters move).

use serde_json::json;
use turnwise::protocol::*;
use turnwise::Backend;

use crate::support::*;
use crate::{advance_ms, Fixture};

async fn running<B: Backend + ?Sized>(b: &B) -> (TurnTask, Lease) {
    create(b, "inst-1").await;
    send(b, "inst-1", "m1", json!(null)).await;
    let task = claim(b, "m1 is ready").await;
    let l = lease(&task);
    (task, l)
}

/// An exact repeat of a step checkpoint answers 2xx and writes nothing.
pub async fn checkpoint_step_repeat(f: impl Fixture) {
    let b = f.backend();
    let (_, l) = running(&b).await;
    step(&b, &l, 0, "a", json!({"v": 1})).await;
    let before = snapshot(&b, "inst-1").await;
    advance_ms(&f, 10);
    ok(
        b.checkpoint(step_request(&l, 0, "a", json!({"v": 1})))
            .await,
        "an exact repeat of checkpoint a",
    );
    assert_unchanged(&b, "inst-1", &before, "an exact checkpoint repeat").await;
    step(&b, &l, 1, "b", json!(2)).await;
    ok(
        b.checkpoint(step_request(&l, 0, "a", json!({"v": 1})))
            .await,
        "a late exact repeat of checkpoint a",
    );
    assert_eq!(turn(&b, "inst-1", 1).await.steps.len(), 2);
}

/// An exact repeat of a sleep answers 2xx after the sleep released the turn, and writes
/// nothing (the turn still sleeps until the same time).
pub async fn checkpoint_sleep_repeat(f: impl Fixture) {
    let b = f.backend();
    let (_, l) = running(&b).await;
    sleep(&b, &l, 0, "nap", 5_000).await;
    let before = snapshot(&b, "inst-1").await;
    advance_ms(&f, 10);
    ok(
        b.checkpoint(sleep_request(&l, 0, "nap", 5_000)).await,
        "an exact repeat of the sleep",
    );
    assert_unchanged(&b, "inst-1", &before, "an exact sleep repeat").await;
    assert_no_claim(&b, "the repeated sleep is not due").await;
    advance_ms(&f, 4_990);
    let again = claim(&b, "the sleep is due").await;
    assert_eq!(again.turn.steps.len(), 1);
}

/// An exact repeat of an operation resets nothing: same start, deadline and sequence.
pub async fn operation_repeat(f: impl Fixture) {
    let b = f.backend();
    let (_, l) = running(&b).await;
    let mut req = operation_request(&l, 0, "a");
    req.timeout_ms = 10_000;
    req.heartbeat_timeout_ms = Some(5_000);
    let first = ok(b.operation(req.clone()).await, "operation a");
    ok(
        b.progress(progress_request(&l, "a", 1, json!({"p": 1}), json!("c")))
            .await,
        "progress 1",
    );
    let before = snapshot(&b, "inst-1").await;
    advance_ms(&f, 10);
    let again = ok(b.operation(req).await, "an exact repeat of operation a");
    let op = again.operation.expect("the repeat answers the operation");
    let first_op = first.operation.expect("the operation answer carries it");
    assert_eq!(
        op.started_at_ms, first_op.started_at_ms,
        "the repeat keeps the start"
    );
    assert_eq!(
        op.deadline_ms, first_op.deadline_ms,
        "the repeat keeps the deadline"
    );
    assert_eq!(op.sequence, 1, "the repeat keeps the progress sequence");
    assert_eq!(op.checkpoint, json!("c"), "the repeat keeps the cursor");
    assert_unchanged(&b, "inst-1", &before, "an exact operation repeat").await;
}

/// An exact repeat of the last progress write answers 2xx without extending any deadline.
pub async fn progress_repeat(f: impl Fixture) {
    let b = f.backend();
    let (_, l) = running(&b).await;
    let mut req = operation_request(&l, 0, "a");
    req.heartbeat_timeout_ms = Some(1_000);
    ok(b.operation(req).await, "operation a");
    let p = progress_request(
        &l,
        "a",
        1,
        json!({"phase": "scan", "done": 1}),
        json!({"cursor": 1}),
    );
    ok(b.progress(p.clone()).await, "progress 1");
    let before = snapshot(&b, "inst-1").await;
    advance_ms(&f, 600);
    ok(b.progress(p.clone()).await, "an exact repeat of progress 1");
    assert_unchanged(&b, "inst-1", &before, "an exact progress repeat").await;
    advance_ms(&f, 400);
    expect_lease_lost(
        b.progress(progress_request(&l, "a", 2, json!({"page": 2}), json!(2)))
            .await,
        "progress 1 s after the last accepted write (the repeat must not extend it)",
    );
}

/// An exact repeat of a wait-signal answers the turn as it is: a suspended wait stays
/// suspended; a consumed wait does not consume a second signal.
pub async fn wait_signal_repeat(f: impl Fixture) {
    let b = f.backend();
    let (_, l) = running(&b).await;
    signal(&b, "inst-1", 1, "s1", "approve", json!(1)).await;
    signal(&b, "inst-1", 1, "s2", "approve", json!(2)).await;
    let w = wait_request(&l, 0, "w1", "approve", 60_000);
    let first = ok(b.wait_signal(w.clone()).await, "wait w1");
    assert_eq!(first.status, TurnStatus::Running);
    assert_eq!(
        first.steps[0].output,
        json!({"received": true, "value": 1}),
        "the oldest buffered signal is consumed first"
    );
    let before = snapshot(&b, "inst-1").await;
    advance_ms(&f, 10);
    let again = ok(b.wait_signal(w).await, "an exact repeat of wait w1");
    assert_eq!(again.status, TurnStatus::Running);
    assert_eq!(again.steps[0].output, json!({"received": true, "value": 1}));
    assert_unchanged(&b, "inst-1", &before, "an exact repeat of a consuming wait").await;

    let w2 = ok(
        b.wait_signal(wait_request(&l, 1, "w2", "approve", 60_000))
            .await,
        "wait w2",
    );
    assert_eq!(w2.steps[1].output, json!({"received": true, "value": 2}));
    let w3 = wait_request(&l, 2, "w3", "approve", 60_000);
    let suspended = ok(b.wait_signal(w3.clone()).await, "wait w3");
    assert_eq!(suspended.status, TurnStatus::Waiting);
    let before = snapshot(&b, "inst-1").await;
    advance_ms(&f, 10);
    let again = ok(
        b.wait_signal(w3).await,
        "an exact repeat of the suspended wait w3",
    );
    assert_eq!(
        again.status,
        TurnStatus::Waiting,
        "the repeat answers the turn as it is"
    );
    assert!(
        again.steps.len() > 2,
        "the repeat answers the step at its position"
    );
    assert_unchanged(&b, "inst-1", &before, "an exact repeat of a suspended wait").await;
}

/// An exact repeat of a completion answers 2xx while the turn is kept and writes nothing (no
/// second continuation); anything else from that token is `turn_lease_lost`.
pub async fn complete_repeat(f: impl Fixture) {
    let b = f.backend();
    let (_, l) = running(&b).await;
    let mut req = complete_request(&l, json!({"count": 1}), json!("r"));
    req.continuation = Some(Continuation {
        message: json!({"again": true}),
    });
    ok(
        b.complete(req.clone()).await,
        "complete with a continuation",
    );
    let before = snapshot(&b, "inst-1").await;
    advance_ms(&f, 10);
    ok(b.complete(req).await, "an exact repeat of the completion");
    assert_unchanged(&b, "inst-1", &before, "an exact completion repeat").await;
    expect_lease_lost(
        b.complete(complete_request(&l, json!({"count": 2}), json!("r")))
            .await,
        "a different completion from the finished turn's token",
    );
    assert_unchanged(&b, "inst-1", &before, "a refused completion").await;
}
