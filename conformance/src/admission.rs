//! Instances and inbox admission: creation, oldest-first order, only the head runs, message-id
//! dedupe.

use serde_json::json;
use turnwise::protocol::*;
use turnwise::Backend;

use crate::support::*;
use crate::{advance_ms, Fixture};

/// A new instance is idle, empty and reads back as created.
pub async fn create_instance(f: impl Fixture) {
    let b = f.backend();
    let created = create(&b, "inst-1").await;
    assert_eq!(created.id, "inst-1");
    assert_eq!(created.workflow_type, TYPE);
    assert_eq!(created.version, VERSION);
    assert_eq!(
        created.state,
        json!({"count": 0}),
        "the initial state is kept"
    );
    assert_eq!(
        created.status,
        InstanceStatus::Idle,
        "a new instance is idle"
    );
    assert_eq!(created.pending_messages, 0);
    assert_eq!(created.completed_turns, 0);
    assert_eq!(created.history_through, 0);
    assert_eq!(
        created.history_pruned_through,
        Some(0),
        "a new instance reports history_pruned_through 0"
    );
    assert!(
        created.current_turn.is_none(),
        "a new instance has no head turn"
    );
    let got = instance(&b, "inst-1").await;
    assert_eq!(
        got, created,
        "get_instance reads the instance as create answered it"
    );

    // Absent state means null.
    let mut req = create_request("inst-null");
    req.state = serde_json::Value::Null;
    let created = create_with(&b, req).await;
    assert_eq!(created.state, serde_json::Value::Null);
}

/// An identical create repeats harmlessly and answers the existing instance unchanged; another
/// type or version under the same id is a conflict that writes nothing.
pub async fn create_is_idempotent(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!({"add": 1})).await;
    let before = snapshot(&b, "inst-1").await;

    let again = create_with(&b, create_request("inst-1")).await;
    assert_eq!(
        Some(&again),
        before.instance.as_ref(),
        "an identical create answers the existing instance as it is"
    );
    assert_unchanged(&b, "inst-1", &before, "an identical repeat of create").await;

    let mut other_state = create_request("inst-1");
    other_state.state = json!({"count": 99});
    let again = create_with(&b, other_state).await;
    assert_eq!(
        again.state,
        json!({"count": 0}),
        "a repeat with the same type and version answers the existing instance unchanged"
    );
    assert_unchanged(&b, "inst-1", &before, "a create repeat with another state").await;

    let mut other_version = create_request("inst-1");
    other_version.version = "v2".into();
    expect_conflict(
        b.create_instance(other_version).await,
        "create of an existing id with another version",
    );
    let mut other_type = create_request("inst-1");
    other_type.workflow_type = "other-type".into();
    expect_conflict(
        b.create_instance(other_type).await,
        "create of an existing id with another workflow_type",
    );
    assert_unchanged(&b, "inst-1", &before, "a conflicting create").await;
}

/// One turn per message, numbered 1, 2, 3…, oldest first; only the inbox head is claimable,
/// also while it runs or sleeps.
pub async fn inbox_order(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    for n in 1..=3u64 {
        let t = send(&b, "inst-1", &format!("m{n}"), json!({"n": n})).await;
        assert_eq!(
            t.number, n,
            "turns are numbered 1, 2, 3… in admission order"
        );
        assert_eq!(t.message_id, format!("m{n}"));
        assert_eq!(t.message, json!({"n": n}));
        assert_eq!(t.status, TurnStatus::Queued, "a new turn is queued");
        assert_eq!(t.attempt, 0, "a new turn has attempt 0");
        assert!(t.steps.is_empty(), "a new turn has no steps");
        assert_eq!(t.result, serde_json::Value::Null);
        assert_eq!(t.state_after, serde_json::Value::Null);
        assert_eq!(t.version, VERSION);
    }
    let listed = inbox(&b, "inst-1").await;
    assert_eq!(
        inbox_numbers(&listed),
        vec![1, 2, 3],
        "the inbox lists oldest first"
    );

    let task = claim(&b, "message 1 is the ready inbox head").await;
    assert_eq!(task.turn.number, 1, "the oldest message is claimed first");
    assert_eq!(task.turn.message, json!({"n": 1}));
    assert_no_claim(&b, "turn 1 runs, and only the inbox head may be claimed").await;
    complete(&b, &lease(&task), json!({"count": 1}), json!(null)).await;

    let task = claim(&b, "turn 2 is the new head").await;
    assert_eq!(
        task.turn.number, 2,
        "after turn 1 finished, turn 2 is the head"
    );
    sleep(&b, &lease(&task), 0, "nap", 60_000).await;
    assert_no_claim(&b, "the head (turn 2) sleeps, and turn 3 is not the head").await;
    advance_ms(&f, 60_000);
    let task = claim(&b, "turn 2's sleep is due").await;
    assert_eq!(
        task.turn.number, 2,
        "the sleeping head resumes before turn 3"
    );
    complete(&b, &lease(&task), json!({"count": 2}), json!(null)).await;
    let task = claim(&b, "turn 3 is the new head").await;
    assert_eq!(task.turn.number, 3);
}

/// A message id is admitted once: the same payload answers the same turn (with its first
/// origin) and adds nothing; a changed payload is a conflict.
pub async fn message_dedupe(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    let mut first = message_request("inst-1", "m1", json!({"a": 1}));
    first.origin = Some(MessageOrigin::new("app"));
    let t1 = ok(b.send_message(first).await, "send m1");
    send(&b, "inst-1", "m2", json!({"a": 2})).await;
    let before = snapshot(&b, "inst-1").await;

    let again = send(&b, "inst-1", "m1", json!({"a": 1})).await;
    assert_eq!(
        again.number, t1.number,
        "a repeated message id answers the first turn"
    );
    assert_eq!(again.message_id, "m1");
    assert_eq!(
        again.origin.as_ref().map(|o| o.kind.as_str()),
        Some("app"),
        "a repeated message id answers the first turn with its first origin"
    );
    let mut other_origin = message_request("inst-1", "m1", json!({"a": 1}));
    other_origin.origin = Some(MessageOrigin::new("console"));
    let again = ok(
        b.send_message(other_origin).await,
        "repeat m1 with another origin",
    );
    assert_eq!(
        again.number, 1,
        "a repeat with the same message answers the first turn"
    );
    assert_eq!(
        again.origin.as_ref().map(|o| o.kind.as_str()),
        Some("app"),
        "the first origin is kept"
    );
    assert_unchanged(&b, "inst-1", &before, "a repeated message id").await;

    expect_conflict(
        b.send_message(message_request("inst-1", "m1", json!({"a": 9})))
            .await,
        "a repeated message id with a changed payload",
    );
    assert_unchanged(&b, "inst-1", &before, "a conflicting message").await;
}

/// Message-id dedupe also holds after the turn completed and moved to history.
pub async fn message_dedupe_after_history(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!({"a": 1})).await;
    run_next(&b, json!({"count": 1})).await;
    let before = snapshot(&b, "inst-1").await;

    let again = send(&b, "inst-1", "m1", json!({"a": 1})).await;
    assert_eq!(again.number, 1, "a repeat answers the turn kept in history");
    assert_eq!(
        again.status,
        TurnStatus::Completed,
        "the repeat answers the turn as it is now"
    );
    assert_unchanged(&b, "inst-1", &before, "a repeat of a completed message").await;

    expect_conflict(
        b.send_message(message_request("inst-1", "m1", json!({"a": 2})))
            .await,
        "a changed payload under a message id kept in history",
    );
    assert_unchanged(&b, "inst-1", &before, "a conflicting message").await;
}

/// A claim only hands out turns of the (type, version) pairs it lists.
pub async fn claim_only_listed_workflows(f: impl Fixture) {
    let b = f.backend();
    let mut other = create_request("other-1");
    other.workflow_type = "other-type".into();
    create_with(&b, other).await;
    let mut v2 = create_request("v2-1");
    v2.version = "v2".into();
    create_with(&b, v2).await;
    send(&b, "other-1", "m1", json!(1)).await;
    send(&b, "v2-1", "m1", json!(2)).await;

    assert_no_claim(&b, "no instance of (conformance, v1) has a message").await;

    let task = try_claim_as(&b, WORKER, vec![WorkflowRef::new("other-type", VERSION)])
        .await
        .expect("a claim listing (other-type, v1) gets that instance's turn");
    assert_eq!(task.workflow_type, "other-type");
    assert_eq!(task.turn.workflow_id, "other-1");
    assert_eq!(task.turn.version, VERSION);

    let task = try_claim_as(&b, WORKER, vec![WorkflowRef::new(TYPE, "v2")])
        .await
        .expect("a claim listing (conformance, v2) gets that instance's turn");
    assert_eq!(task.turn.workflow_id, "v2-1");
    assert_eq!(task.turn.version, "v2");
}
