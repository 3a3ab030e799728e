//! Failed attempts: backoff, attempt counting, exhaustion, permanent failures and waits that
//! count no attempt.

use serde_json::json;
use turnwise::protocol::*;
use turnwise::Backend;

use crate::support::*;
use crate::{advance_ms, Fixture};

/// An ordinary fail counts the attempt and backs off 1 s, then 2 s; saved steps are kept; at
/// `max_attempts` the turn fails for good and blocks the inbox.
pub async fn backoff_and_attempts(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await; // max_attempts defaults to 3
    send(&b, "inst-1", "m1", json!(null)).await;
    send(&b, "inst-1", "m2", json!(null)).await;

    let first = claim(&b, "m1 is ready").await;
    assert_eq!(first.turn.attempt, 1);
    let t0 = claimed_at(&first);
    step(&b, &lease(&first), 0, "a", json!("kept")).await;
    fail(&b, &lease(&first), "RuntimeError: one").await;
    let t = turn(&b, "inst-1", 1).await;
    assert_eq!(
        t.status,
        TurnStatus::Queued,
        "a retryable fail queues the turn again"
    );
    assert_eq!(t.attempt, 1, "attempts so far: 1");
    assert_eq!(t.ready_at_ms, t0 + 1_000, "the first backoff is 1 s");
    assert_eq!(
        t.error.as_deref(),
        Some("RuntimeError: one"),
        "the error is recorded"
    );
    assert_eq!(t.steps.len(), 1, "saved steps are kept");
    expect_lease_lost(b.heartbeat(lease(&first)).await, "a heartbeat after fail");
    assert_no_claim(&b, "turn 1 backs off and still blocks m2").await;
    advance_ms(&f, 999);
    assert_no_claim(&b, "the 1 s backoff has 1 ms left").await;
    advance_ms(&f, 1);

    let second = claim(&b, "the 1 s backoff passed").await;
    assert_eq!(second.turn.number, 1);
    assert_eq!(second.turn.attempt, 2, "the second claim is attempt 2");
    assert_eq!(second.turn.steps.len(), 1, "the saved step is replayed");
    fail(&b, &lease(&second), "RuntimeError: two").await;
    let t = turn(&b, "inst-1", 1).await;
    assert_eq!(
        t.ready_at_ms,
        t0 + 1_000 + 2_000,
        "the second backoff is 2 s"
    );
    advance_ms(&f, 1_999);
    assert_no_claim(&b, "the 2 s backoff has 1 ms left").await;
    advance_ms(&f, 1);

    let third = claim(&b, "the 2 s backoff passed").await;
    assert_eq!(third.turn.attempt, 3);
    fail(&b, &lease(&third), "RuntimeError: three").await;
    let t = turn(&b, "inst-1", 1).await;
    assert_eq!(
        t.status,
        TurnStatus::Failed,
        "out of attempts: failed for good"
    );
    assert_eq!(t.attempt, 3);
    assert_eq!(t.error.as_deref(), Some("RuntimeError: three"));
    let inst = instance(&b, "inst-1").await;
    assert_eq!(
        inst.status,
        InstanceStatus::Failed,
        "a failed head makes the instance failed"
    );
    assert_eq!(
        inst.pending_messages, 2,
        "the failed turn stays in the inbox"
    );
    assert!(
        history(&b, "inst-1").await.is_empty(),
        "a blocking failure is not history"
    );
    advance_ms(&f, 120_000);
    assert_no_claim(&b, "a turn failed for good blocks the inbox").await;
    send(&b, "inst-1", "m3", json!(null)).await;
    assert_no_claim(&b, "new messages queue behind the failed head").await;
}

/// `non_retryable` fails the turn for good at once; the error is kept, cut to 1000 chars.
pub async fn non_retryable_fails_at_once(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    send(&b, "inst-1", "m2", json!(null)).await;
    let task = claim(&b, "m1 is ready").await;
    let long = format!("WorkflowError: {}", "é".repeat(1_500));
    fail_for_good(&b, &lease(&task), &long).await;
    let t = turn(&b, "inst-1", 1).await;
    assert_eq!(
        t.status,
        TurnStatus::Failed,
        "non_retryable fails for good at once"
    );
    assert_eq!(t.attempt, 1);
    let error = t.error.unwrap_or_default();
    assert_eq!(
        error.chars().count(),
        1_000,
        "the error is cut to 1000 characters"
    );
    assert!(
        long.starts_with(&error),
        "the kept error is the start of the sent one"
    );
    assert_eq!(instance(&b, "inst-1").await.status, InstanceStatus::Failed);
    advance_ms(&f, 120_000);
    assert_no_claim(&b, "the failed head blocks the inbox").await;
}

/// `retry_at_ms` parks the turn until then (at least 1 s ahead) without counting an attempt;
/// the next claim is the same attempt with the saved steps.
pub async fn retry_at_waits_without_attempt(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let task = claim(&b, "m1 is ready").await;
    let t0 = claimed_at(&task);
    step(&b, &lease(&task), 0, "a", json!(1)).await;
    let mut req = fail_request(&lease(&task), "WorkflowWait: the turn waits");
    req.retry_at_ms = Some(t0 + 5_000);
    ok(b.fail(req).await, "fail with retry_at_ms");

    let t = turn(&b, "inst-1", 1).await;
    assert_eq!(t.status, TurnStatus::Waiting, "a retry_at fail waits");
    assert_eq!(t.attempt, 1, "a retry_at wait counts no attempt");
    assert_eq!(t.ready_at_ms, t0 + 5_000);
    assert_eq!(t.steps.len(), 1, "saved steps are kept");
    let wait = t.wait.expect("the turn carries its wait");
    assert_eq!(wait.since_ms, t0);
    assert_eq!(wait.until_ms, t0 + 5_000);
    assert_eq!(
        wait.reason, None,
        "a retry wait has no reason (absent means retry)"
    );
    assert_no_claim(&b, "the turn waits until retry_at_ms").await;
    advance_ms(&f, 4_999);
    assert_no_claim(&b, "retry_at_ms is 1 ms away").await;
    advance_ms(&f, 1);
    let again = claim(&b, "retry_at_ms has come").await;
    assert_eq!(
        again.turn.attempt, 1,
        "resuming a retry wait is the same attempt"
    );
    assert_eq!(again.turn.steps.len(), 1);

    let t1 = claimed_at(&again);
    let mut req = fail_request(&lease(&again), "WorkflowWait: soon");
    req.retry_at_ms = Some(t1 + 10);
    ok(b.fail(req).await, "fail with retry_at_ms 10 ms ahead");
    let t = turn(&b, "inst-1", 1).await;
    assert_eq!(
        t.ready_at_ms,
        t1 + 1_000,
        "a retry_at less than 1 s ahead waits 1 s"
    );
    assert_eq!(t.wait.map(|w| w.until_ms), Some(t1 + 1_000));
}

/// Waits for `retry_at_ms` never exhaust a turn, even with `max_attempts` 1.
pub async fn retry_at_does_not_exhaust(f: impl Fixture) {
    let b = f.backend();
    let mut req = create_request("inst-1");
    req.max_attempts = Some(1);
    create_with(&b, req).await;
    send(&b, "inst-1", "m1", json!(null)).await;
    for round in 0..3 {
        let task = claim(&b, "the retry wait is over").await;
        assert_eq!(task.turn.attempt, 1, "round {round}: still attempt 1");
        let mut req = fail_request(&lease(&task), "WorkflowWait: later");
        req.retry_at_ms = Some(claimed_at(&task) + 2_000);
        ok(b.fail(req).await, "fail with retry_at_ms");
        assert_eq!(turn(&b, "inst-1", 1).await.status, TurnStatus::Waiting);
        advance_ms(&f, 2_000);
    }
    let task = claim(&b, "the retry wait is over").await;
    complete(&b, &lease(&task), json!(null), json!(null)).await;
}

/// With `on_exhausted: skip`, a turn out of attempts moves to history as failed and the next
/// message runs.
pub async fn on_exhausted_skip(f: impl Fixture) {
    let b = f.backend();
    let mut req = create_request("inst-1");
    req.max_attempts = Some(1);
    req.on_exhausted = Some(OnExhausted::Skip);
    create_with(&b, req).await;
    send(&b, "inst-1", "m1", json!(null)).await;
    send(&b, "inst-1", "m2", json!(null)).await;
    let task = claim(&b, "m1 is ready").await;
    fail(&b, &lease(&task), "RuntimeError: only chance").await;

    let kept = history(&b, "inst-1").await;
    assert_eq!(
        numbers(&kept),
        vec![1],
        "the exhausted turn moved to history"
    );
    assert_eq!(kept[0].status, TurnStatus::Failed);
    let inst = instance(&b, "inst-1").await;
    assert_eq!(inst.on_exhausted, Some(OnExhausted::Skip));
    assert_eq!(inst.completed_turns, 1, "a skipped turn counts as finished");
    assert_eq!(inst.pending_messages, 1);
    assert_eq!(
        inst.state,
        json!({"count": 0}),
        "a skipped turn leaves state unchanged"
    );
    let next = claim(&b, "the next message runs after the skipped one").await;
    assert_eq!(next.turn.number, 2);
}

/// One run per attempt (wire.md §3.4): a claim that resumes an attempt (after a sleep, a
/// signal wait or a `retry_at_ms` wait) keeps the turn's `run` (its id and start); a new
/// attempt (after an ordinary fail or a lease expiry) gets a new one.
pub async fn one_run_per_attempt(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let run_of = |task: &TurnTask| task.turn.run.clone().expect("a claimed turn has its run");

    let first = claim(&b, "m1 is ready").await;
    let run = run_of(&first);
    sleep(&b, &lease(&first), 0, "nap", 1_000).await;
    advance_ms(&f, 1_000);
    let task = claim(&b, "the sleep is over").await;
    assert_eq!(task.turn.attempt, 1);
    let resumed = run_of(&task);
    assert_eq!(
        (&resumed.id, resumed.started_at_ms),
        (&run.id, run.started_at_ms),
        "a claim after a sleep resumes the attempt's run"
    );
    assert_eq!(
        resumed.ended_at_ms, None,
        "the resumed run is running again"
    );

    ok(
        b.wait_signal(wait_request(&lease(&task), 1, "wait", "go", 1_000))
            .await,
        "a signal wait with no signal",
    );
    advance_ms(&f, 1_000);
    let task = claim(&b, "the signal wait timed out").await;
    assert_eq!(task.turn.attempt, 1);
    assert_eq!(
        run_of(&task).id,
        run.id,
        "a claim after a signal wait resumes the attempt's run"
    );

    let mut req = fail_request(&lease(&task), "WorkflowWait: later");
    req.retry_at_ms = Some(claimed_at(&task) + 2_000);
    ok(b.fail(req).await, "fail with retry_at_ms");
    advance_ms(&f, 2_000);
    let task = claim(&b, "the retry wait is over").await;
    assert_eq!(task.turn.attempt, 1);
    assert_eq!(
        run_of(&task).id,
        run.id,
        "a claim after a retry_at_ms wait resumes the attempt's run"
    );

    fail(&b, &lease(&task), "RuntimeError: boom").await;
    advance_ms(&f, 1_000);
    let second = claim(&b, "the backoff passed").await;
    assert_eq!(second.turn.attempt, 2);
    let run2 = run_of(&second);
    assert_ne!(run2.id, run.id, "a new attempt after a fail has a new run");
    assert_eq!(run2.started_at_ms, claimed_at(&second));

    advance_ms(&f, 60_000);
    let third = claim(&b, "the lease expired").await;
    assert_eq!(third.turn.attempt, 3);
    let run3 = run_of(&third);
    assert_ne!(
        run3.id, run2.id,
        "a new attempt after a lease expiry has a new run"
    );
    assert_ne!(run3.id, run.id);
    complete(&b, &lease(&third), json!(null), json!(null)).await;
}
