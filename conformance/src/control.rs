//! Operator actions: pause, resume, retry, skip, cancel_turn, wake and delete.

use serde_json::json;
use turnwise::protocol::*;
use turnwise::Backend;

use crate::support::*;
use crate::{advance_ms, Fixture};

/// Pause stops claims but still admits messages (a leased turn may finish); resume hands out
/// claims again.
pub async fn pause_resume(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let paused = control(&b, control_request("inst-1", ControlAction::Pause)).await;
    assert_eq!(
        paused.status,
        InstanceStatus::Paused,
        "pause answers a paused instance"
    );
    assert_no_claim(&b, "the instance is paused").await;
    send(&b, "inst-1", "m2", json!(null)).await;
    let inst = instance(&b, "inst-1").await;
    assert_eq!(inst.status, InstanceStatus::Paused);
    assert_eq!(
        inst.pending_messages, 2,
        "a paused instance still admits messages"
    );

    let resumed = control(&b, control_request("inst-1", ControlAction::Resume)).await;
    assert_ne!(
        resumed.status,
        InstanceStatus::Paused,
        "resume lifts the pause"
    );
    let task = claim(&b, "the instance was resumed").await;
    assert_eq!(task.turn.number, 1);

    control(&b, control_request("inst-1", ControlAction::Pause)).await;
    let l = lease(&task);
    heartbeat(&b, &l).await;
    complete(&b, &l, json!({"count": 1}), json!(null)).await;
    assert_eq!(
        instance(&b, "inst-1").await.state,
        json!({"count": 1}),
        "a turn leased before the pause may finish"
    );
    assert_no_claim(&b, "m2 waits while the instance is paused").await;
    control(&b, control_request("inst-1", ControlAction::Resume)).await;
    let task = claim(&b, "the instance was resumed").await;
    assert_eq!(task.turn.number, 2);
}

/// Resume makes a head turn in failure backoff ready at once.
pub async fn resume_clears_backoff(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let task = claim(&b, "m1 is ready").await;
    fail(&b, &lease(&task), "RuntimeError: boom").await;
    assert_no_claim(&b, "the turn backs off 1 s").await;
    control(&b, control_request("inst-1", ControlAction::Pause)).await;
    control(&b, control_request("inst-1", ControlAction::Resume)).await;
    let again = claim(&b, "resume makes a turn in backoff ready now").await;
    assert_eq!(again.turn.attempt, 2);
}

/// Retry runs a turn failed for good again: queued, attempt reset, ready now, steps kept. Any
/// other turn is a conflict that writes nothing.
pub async fn retry_failed_turn(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    send(&b, "inst-1", "m2", json!(null)).await;
    let task = claim(&b, "m1 is ready").await;
    let before = snapshot(&b, "inst-1").await;
    expect_conflict(
        b.control(control_turn("inst-1", ControlAction::Retry, 1))
            .await,
        "retry of a running turn",
    );
    expect_conflict(
        b.control(control_turn("inst-1", ControlAction::Retry, 2))
            .await,
        "retry of a queued turn",
    );
    assert_unchanged(&b, "inst-1", &before, "a refused retry").await;

    step(&b, &lease(&task), 0, "a", json!("kept")).await;
    fail_for_good(&b, &lease(&task), "WorkflowError: broken").await;
    control(&b, control_turn("inst-1", ControlAction::Retry, 1)).await;
    let t = turn(&b, "inst-1", 1).await;
    assert_eq!(t.status, TurnStatus::Queued, "a retried turn is queued");
    assert_eq!(t.attempt, 0, "retry resets the attempts");
    assert_eq!(t.steps.len(), 1, "retry keeps the saved steps");
    let again = claim(&b, "a retried turn is ready now").await;
    assert_eq!(again.turn.number, 1);
    assert_eq!(again.turn.attempt, 1);
    assert_eq!(again.turn.steps.len(), 1);
}

/// Skip moves a turn failed for good to history (as failed) and the next message runs; any
/// other turn is a conflict that writes nothing.
pub async fn skip_failed_turn(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    send(&b, "inst-1", "m2", json!(null)).await;
    let task = claim(&b, "m1 is ready").await;
    fail_for_good(&b, &lease(&task), "WorkflowError: broken").await;
    let before = snapshot(&b, "inst-1").await;
    expect_conflict(
        b.control(control_turn("inst-1", ControlAction::Skip, 2))
            .await,
        "skip of a queued turn",
    );
    assert_unchanged(&b, "inst-1", &before, "a refused skip").await;

    control(&b, control_turn("inst-1", ControlAction::Skip, 1)).await;
    let kept = history(&b, "inst-1").await;
    assert_eq!(numbers(&kept), vec![1], "the skipped turn is in history");
    assert_eq!(
        kept[0].status,
        TurnStatus::Failed,
        "a skipped turn stays failed"
    );
    let inst = instance(&b, "inst-1").await;
    assert_eq!(inst.completed_turns, 1);
    assert_eq!(inst.pending_messages, 1);
    let next = claim(&b, "after skip the next message runs").await;
    assert_eq!(next.turn.number, 2);
}

/// cancel_turn ends any unfinished turn (running or queued) into history as cancelled,
/// leaving state unchanged; its token loses the lease. A finished turn is a conflict.
pub async fn cancel_turn(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    for n in 1..=3 {
        send(&b, "inst-1", &format!("m{n}"), json!(n)).await;
    }
    let task = claim(&b, "m1 is ready").await;
    let l = lease(&task);
    step(&b, &l, 0, "a", json!(1)).await;
    control(&b, control_turn("inst-1", ControlAction::CancelTurn, 1)).await;
    let t = turn(&b, "inst-1", 1).await;
    assert_eq!(t.status, TurnStatus::Cancelled);
    expect_lease_lost(
        b.heartbeat(l.clone()).await,
        "a heartbeat after cancel_turn",
    );
    expect_lease_lost(
        b.complete(complete_request(&l, json!({"count": 9}), json!(null)))
            .await,
        "a completion after cancel_turn",
    );
    let inst = instance(&b, "inst-1").await;
    assert_eq!(
        inst.state,
        json!({"count": 0}),
        "cancel leaves state unchanged"
    );
    assert_eq!(
        inst.completed_turns, 1,
        "a cancelled turn counts as finished"
    );

    control(&b, control_turn("inst-1", ControlAction::CancelTurn, 3)).await;
    assert_eq!(
        inbox_numbers(&inbox(&b, "inst-1").await),
        vec![2],
        "a cancelled queued turn leaves the inbox"
    );
    assert_eq!(numbers(&history(&b, "inst-1").await), vec![1, 3]);
    assert_eq!(turn(&b, "inst-1", 3).await.status, TurnStatus::Cancelled);

    let before = snapshot(&b, "inst-1").await;
    expect_conflict(
        b.control(control_turn("inst-1", ControlAction::CancelTurn, 1))
            .await,
        "cancel_turn of a finished turn",
    );
    assert_unchanged(&b, "inst-1", &before, "a refused cancel_turn").await;
    let next = claim(&b, "m2 is the head").await;
    assert_eq!(next.turn.number, 2);
}

/// wake makes a retry_at wait ready now (same attempt); on a sleep, a signal wait or nothing it
/// is a no-op.
pub async fn wake(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    let before = snapshot(&b, "inst-1").await;
    control(&b, control_request("inst-1", ControlAction::Wake)).await;
    assert_unchanged(&b, "inst-1", &before, "wake with nothing waiting").await;

    send(&b, "inst-1", "m1", json!(null)).await;
    let task = claim(&b, "m1 is ready").await;
    let mut req = fail_request(&lease(&task), "WorkflowWait: later");
    req.retry_at_ms = Some(claimed_at(&task) + 3_600_000);
    ok(b.fail(req).await, "fail with retry_at_ms in an hour");
    assert_no_claim(&b, "the turn waits an hour").await;
    control(&b, control_request("inst-1", ControlAction::Wake)).await;
    let again = claim(&b, "wake made the retry wait ready now").await;
    assert_eq!(
        again.turn.attempt, 1,
        "a woken retry wait is the same attempt"
    );

    sleep(&b, &lease(&again), 0, "nap", 60_000).await;
    let before = snapshot(&b, "inst-1").await;
    control(&b, control_request("inst-1", ControlAction::Wake)).await;
    assert_unchanged(&b, "inst-1", &before, "wake on a sleep (a no-op)").await;
    assert_no_claim(&b, "wake does not cut a sleep short").await;

    advance_ms(&f, 60_000);
    let resumed = claim(&b, "the sleep is due").await;
    let waited = ok(
        b.wait_signal(wait_request(&lease(&resumed), 1, "w", "approve", 60_000))
            .await,
        "wait for `approve`",
    );
    assert_eq!(waited.status, TurnStatus::Waiting);
    let before = snapshot(&b, "inst-1").await;
    control(&b, control_request("inst-1", ControlAction::Wake)).await;
    assert_unchanged(&b, "inst-1", &before, "wake on a signal wait (a no-op)").await;
    assert_no_claim(&b, "wake does not end a signal wait").await;
}

/// retry, skip and cancel_turn need a turn (400 naming `turn`); an unknown instance or turn is
/// 404; nothing is written.
pub async fn control_errors(f: impl Fixture) {
    let b = f.backend();
    expect_not_found(
        b.control(control_request("nobody", ControlAction::Pause))
            .await,
        "pause of an unknown instance",
    );
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let before = snapshot(&b, "inst-1").await;
    for action in [
        ControlAction::Retry,
        ControlAction::Skip,
        ControlAction::CancelTurn,
    ] {
        expect_invalid(
            b.control(control_request("inst-1", action)).await,
            "turn",
            &format!("{action} without a turn"),
        );
        expect_not_found(
            b.control(control_turn("inst-1", action, 99)).await,
            &format!("{action} of an unknown turn"),
        );
    }
    assert_unchanged(&b, "inst-1", &before, "refused control actions").await;
}

/// delete removes the instance with its inbox and history (`deleted: true`), a repeat or an
/// unknown id answers `deleted: false`, and the id can be created afresh.
pub async fn delete_instance(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    run_next(&b, json!({"count": 1})).await;
    send(&b, "inst-1", "m2", json!(null)).await;
    let task = claim(&b, "m2 is ready").await;

    let del = |id: &str| DeleteRequest {
        workflow_id: id.into(),
    };
    let r = ok(b.delete_instance(del("inst-1")).await, "delete inst-1");
    assert!(
        r.deleted,
        "deleting an existing instance answers deleted: true"
    );
    expect_not_found(b.get_instance("inst-1").await, "get after delete");
    expect_not_found(
        b.history(HistoryQuery {
            id: "inst-1".into(),
            ..Default::default()
        })
        .await,
        "history after delete",
    );
    expect_not_found(
        b.turn(TurnQuery {
            id: "inst-1".into(),
            turn: 1,
        })
        .await,
        "a turn after delete",
    );
    expect_lease_lost(
        b.heartbeat(lease(&task)).await,
        "a heartbeat for a deleted instance",
    );
    expect_lease_lost(
        b.complete(complete_request(&lease(&task), json!(null), json!(null)))
            .await,
        "a completion for a deleted instance",
    );
    let r = ok(
        b.delete_instance(del("inst-1")).await,
        "delete inst-1 again",
    );
    assert!(!r.deleted, "a repeated delete answers deleted: false");
    let r = ok(
        b.delete_instance(del("nobody")).await,
        "delete an unknown id",
    );
    assert!(!r.deleted, "deleting an unknown id answers deleted: false");

    let fresh = create(&b, "inst-1").await;
    assert_eq!(fresh.pending_messages, 0);
    assert_eq!(fresh.completed_turns, 0);
    assert_eq!(fresh.history_through, 0);
    let t = send(&b, "inst-1", "m1", json!(null)).await;
    assert_eq!(t.number, 1, "the deleted instance's message ids are gone");
    assert_eq!(t.status, TurnStatus::Queued);
}
