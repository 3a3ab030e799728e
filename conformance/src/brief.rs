//! Brief answers: the calls an SDK worker and `Handle::call` make instead of the full ones
//! (`send_message_ack`, `operation_cursor`, `progress_ack`, `checkpoint_ack`, `complete_ack`,
//! `heartbeat_ack`, `await_outcome`) do exactly what their full counterparts do, refuse
//! exactly what they refuse, and answer the part of the turn they name.

use std::time::Duration;

use serde_json::json;
use turnwise::protocol::*;
use turnwise::WorkerBackend;

use crate::support::*;
use crate::{advance_ms, Fixture};

/// A turn run end to end through the brief calls: each write lands as the full call's would,
/// and the answers are the admitted turn's number, the resume cursor and the outcome.
pub async fn brief_calls_write_as_full_ones(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!("first")).await;
    let number = ok(
        b.send_message_ack(message_request("inst-1", "m2", json!({"n": 2})))
            .await,
        "send_message_ack m2",
    );
    assert_eq!(
        number, 2,
        "send_message_ack answers the admitted turn's number"
    );
    assert_eq!(turn(&b, "inst-1", 2).await.message, json!({"n": 2}));
    let again = ok(
        b.send_message_ack(message_request("inst-1", "m2", json!({"n": 2})))
            .await,
        "an exact repeat of m2",
    );
    assert_eq!(again, 2, "a repeat answers the kept turn's number");
    expect_conflict(
        b.send_message_ack(message_request("inst-1", "m2", json!({"n": 3})))
            .await,
        "m2 again with another message",
    );

    let waiting = ok(
        b.await_outcome(turn_query("inst-1", 1), Duration::ZERO)
            .await,
        "await_outcome of a queued turn without waiting",
    );
    assert!(!waiting.status.is_outcome(), "turn 1 has no outcome yet");
    assert_eq!(
        (waiting.workflow_id.as_str(), waiting.number),
        ("inst-1", 1)
    );

    let task = claim(&b, "m1 is ready").await;
    let l = lease(&task);
    let cursor = ok(
        b.operation_cursor(operation_request(&l, 0, "a")).await,
        "operation_cursor a",
    );
    assert_eq!(cursor, json!(null), "a first attempt carries no cursor");
    ok(
        b.progress_ack(progress_request(
            &l,
            "a",
            1,
            json!({"p": 1}),
            json!({"page": 7}),
        ))
        .await,
        "progress_ack 1",
    );
    let running = turn(&b, "inst-1", 1).await;
    let op = running.operation.expect("the operation is running");
    assert_eq!((op.sequence, op.checkpoint), (1, json!({"page": 7})));
    let cursor = ok(
        b.operation_cursor(operation_request(&l, 0, "a")).await,
        "an exact repeat of operation a",
    );
    assert_eq!(
        cursor,
        json!({"page": 7}),
        "the repeat answers the saved cursor"
    );
    let deadline = turn(&b, "inst-1", 1).await.deadline_ms;
    advance_ms(&f, 1_000);
    ok(b.heartbeat_ack(l.clone()).await, "heartbeat_ack");
    let extended = turn(&b, "inst-1", 1).await.deadline_ms;
    assert_eq!(
        extended,
        deadline.map(|d| d + 1_000),
        "heartbeat_ack extends the lease as heartbeat does"
    );
    ok(
        b.checkpoint_ack(step_request(&l, 0, "a", json!({"v": 1})))
            .await,
        "checkpoint_ack a",
    );
    let saved = turn(&b, "inst-1", 1).await;
    assert_plain_step(
        &saved.steps[0],
        "a",
        &json!({"v": 1}),
        "the step checkpoint_ack saved",
    );
    ok(
        b.complete_ack(complete_request(&l, json!({"count": 1}), json!("done")))
            .await,
        "complete_ack",
    );
    let done = ok(
        b.await_outcome(turn_query("inst-1", 1), Duration::from_millis(10))
            .await,
        "await_outcome of the completed turn",
    );
    assert_eq!(done.status, TurnStatus::Completed);
    assert_eq!(done.result, json!("done"));
    assert_eq!(done.error, None);
    let full = turn(&b, "inst-1", 1).await;
    assert_eq!(
        full.state_after,
        json!({"count": 1}),
        "complete_ack saved the state"
    );
    assert_eq!(instance(&b, "inst-1").await.state, json!({"count": 1}));
}

/// The brief calls refuse what the full ones refuse, with the same error, and write nothing.
pub async fn brief_calls_refuse_as_full_ones(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let task = claim(&b, "m1 is ready").await;
    let l = lease(&task);
    let mut stale = l.clone();
    stale.token = "wt_not-the-token".into();
    let before = snapshot(&b, "inst-1").await;
    expect_lease_lost(
        b.operation_cursor(operation_request(&stale, 0, "a")).await,
        "operation_cursor with another token",
    );
    expect_lease_lost(
        b.checkpoint_ack(step_request(&stale, 0, "a", json!(1)))
            .await,
        "checkpoint_ack with another token",
    );
    expect_lease_lost(
        b.complete_ack(complete_request(&stale, json!(null), json!(null)))
            .await,
        "complete_ack with another token",
    );
    expect_lease_lost(
        b.heartbeat_ack(stale.clone()).await,
        "heartbeat_ack with another token",
    );
    expect_conflict(
        b.progress_ack(progress_request(&l, "a", 1, json!({}), json!(null)))
            .await,
        "progress_ack with no operation running",
    );
    expect_invalid(
        b.operation_cursor(operation_request(&l, 0, "not a key"))
            .await,
        "key",
        "operation_cursor with an invalid key",
    );
    expect_not_found(
        b.await_outcome(turn_query("inst-1", 9), Duration::ZERO)
            .await,
        "await_outcome of a turn that does not exist",
    );
    expect_not_found(
        b.send_message_ack(message_request("nobody", "m1", json!(null)))
            .await,
        "send_message_ack to an instance that does not exist",
    );
    assert_unchanged(&b, "inst-1", &before, "refused brief calls").await;

    // A lease that ran out refuses the brief calls as it refuses the full ones.
    advance_ms(&f, 120_000);
    expect_lease_lost(
        b.checkpoint_ack(step_request(&l, 0, "a", json!(1))).await,
        "checkpoint_ack after the lease ran out",
    );
}

fn turn_query(id: &str, turn: u64) -> TurnQuery {
    TurnQuery {
        id: id.into(),
        turn,
    }
}
