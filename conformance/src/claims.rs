//! Claims: the task shape, effect prefixes, long-poll wake-ups and namespaces.

use serde_json::json;
use turnwise::protocol::*;
use turnwise::Backend;

use crate::support::*;
use crate::{advance_ms, Fixture};

/// A claimed task carries the state before the turn, a token, the lease, a stable effect
/// prefix without `/`, and the turn running under the claim.
pub async fn task_shape(f: impl Fixture) {
    let b = f.backend();
    let mut req = create_request("inst-1");
    req.state = json!({"count": 5});
    create_with(&b, req).await;
    let mut msg = message_request("inst-1", "m1", json!({"add": 2}));
    msg.origin = Some(MessageOrigin::new("app"));
    ok(b.send_message(msg).await, "send m1");

    let task = claim(&b, "m1 is ready").await;
    let now = claimed_at(&task);
    assert_eq!(task.workflow_type, TYPE);
    assert_eq!(
        task.state,
        json!({"count": 5}),
        "task.state is the state before the turn"
    );
    assert!(!task.token.is_empty(), "the task carries a token");
    assert_eq!(task.lease_ms, 60_000, "the default lease is 60 000 ms");
    assert!(
        !task.effect_prefix.is_empty(),
        "the task carries an effect prefix"
    );
    assert!(
        !task.effect_prefix.contains('/'),
        "the effect prefix must not contain '/': {}",
        task.effect_prefix
    );
    let t = &task.turn;
    assert_eq!(t.workflow_id, "inst-1");
    assert_eq!(t.number, 1);
    assert_eq!(t.message_id, "m1");
    assert_eq!(t.message, json!({"add": 2}));
    assert_eq!(t.version, VERSION);
    assert_eq!(t.status, TurnStatus::Running, "a claimed turn is running");
    assert_eq!(t.attempt, 1, "the first claim is attempt 1");
    assert_eq!(
        t.worker.as_deref(),
        Some(WORKER),
        "the turn records its worker"
    );
    assert_eq!(
        t.deadline_ms,
        Some(now + 60_000),
        "the lease deadline is now + lease_ms"
    );
    let run = t.run.as_ref().expect("a claimed turn carries its run");
    assert!(!run.id.is_empty(), "the run has an id");
    assert_eq!(
        t.origin.as_ref().map(|o| o.kind.as_str()),
        Some("app"),
        "the turn keeps its origin"
    );

    let inst = instance(&b, "inst-1").await;
    assert_eq!(inst.status, InstanceStatus::Running, "the head runs");
    let head = inst
        .current_turn
        .expect("a running instance has a head turn");
    assert_eq!(head.number, 1);
    assert_eq!(head.status, TurnStatus::Running);

    let mut custom = create_request("inst-2");
    custom.lease_ms = Some(5_000);
    create_with(&b, custom).await;
    send(&b, "inst-2", "m1", json!(null)).await;
    let task = claim(&b, "inst-2's message is ready").await;
    assert_eq!(task.turn.workflow_id, "inst-2");
    assert_eq!(
        task.lease_ms, 5_000,
        "the instance's lease_ms is the task's lease"
    );
    assert_eq!(task.turn.deadline_ms, Some(claimed_at(&task) + 5_000));
}

/// The effect prefix is the same for every claim of a turn, differs between turns, and
/// differs for a deleted and re-created instance; every claim has a new token.
pub async fn effect_prefix_rules(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(1)).await;
    send(&b, "inst-1", "m2", json!(2)).await;

    let first = claim(&b, "m1 is ready").await;
    fail(&b, &lease(&first), "RuntimeError: boom").await;
    advance_ms(&f, 1_000);
    let second = claim(&b, "m1's backoff of 1 s has passed").await;
    assert_eq!(second.turn.number, 1);
    assert_eq!(
        second.effect_prefix, first.effect_prefix,
        "the effect prefix is stable across attempts of a turn"
    );
    assert_ne!(second.token, first.token, "every claim has a new token");
    complete(&b, &lease(&second), json!(null), json!(null)).await;

    let other = claim(&b, "m2 is the head").await;
    assert_eq!(other.turn.number, 2);
    assert_ne!(
        other.effect_prefix, first.effect_prefix,
        "each turn has its own effect prefix"
    );
    complete(&b, &lease(&other), json!(null), json!(null)).await;

    let deleted = ok(
        b.delete_instance(DeleteRequest {
            workflow_id: "inst-1".into(),
        })
        .await,
        "delete inst-1",
    );
    assert!(deleted.deleted);
    create(&b, "inst-1").await;
    let t = send(&b, "inst-1", "m1", json!(1)).await;
    assert_eq!(t.number, 1, "a re-created instance starts at turn 1");
    let again = claim(&b, "the re-created instance's m1 is ready").await;
    assert_ne!(
        again.effect_prefix, first.effect_prefix,
        "a re-created instance must not reuse effect prefixes"
    );
}

/// An idle claim answers `{task: null}` after its wait, never an error.
pub async fn idle_claim_returns_none(f: impl Fixture) {
    let b = f.backend();
    assert!(
        try_claim(&b).await.is_none(),
        "nothing to claim answers no task"
    );
    create(&b, "inst-1").await;
    assert!(
        try_claim(&b).await.is_none(),
        "an idle instance has nothing to claim"
    );

    // A wait long enough that the claim is seen parked before it runs out, even on a slow
    // machine.
    let handle = spawn_claim(&b, 1_000);
    let_claim_park(&f, &handle, "the only instance is idle").await;
    // Whichever clock measures the wait, it has now passed.
    advance_ms(&f, 1_000);
    let task = finish_claim(handle, "an idle claim with wait_ms 1000").await;
    assert!(task.is_none(), "an idle claim answers no task");
}

/// A waiting claim is woken at once by a message admission.
pub async fn long_poll_woken_by_admission(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    let handle = spawn_claim(&b, 10_000);
    let_claim_park(&f, &handle, "the inbox is empty").await;
    send(&b, "inst-1", "m1", json!({"wake": true})).await;
    assert_rung(&f, "admitting a message");
    let task = finish_claim(handle, "a claim waiting while a message is admitted")
        .await
        .expect("the admitted message is handed to the waiting claim");
    assert_eq!(task.turn.message_id, "m1");
}

/// A waiting claim is woken when the clock reaches a sleeping turn's wake time.
pub async fn long_poll_woken_by_due_timer(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let task = claim(&b, "m1 is ready").await;
    sleep(&b, &lease(&task), 0, "nap", 5_000).await;

    let handle = spawn_claim(&b, 10_000);
    let_claim_park(&f, &handle, "the only turn sleeps for 5 s").await;
    // No call rings the claim here: its own timer, set for the wake time, fires when the clock
    // reaches it. The answer's bound (`TIMER_WAKE_BOUND`) is what tells that from its wait
    // running out, or from the server's next slice of it.
    advance_ms(&f, 5_000);
    let resumed = finish_claim_within(
        handle,
        TIMER_WAKE_BOUND,
        "a claim waiting while a sleep becomes due",
    )
    .await
    .expect("the due turn is handed to the waiting claim");
    assert_eq!(resumed.turn.number, 1);
    assert_eq!(
        resumed.turn.attempt, 1,
        "a resumed sleep is the same attempt"
    );
}

/// A waiting claim is woken when a signal resolves a suspended wait.
pub async fn long_poll_woken_by_signal(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let task = claim(&b, "m1 is ready").await;
    let waited = ok(
        b.wait_signal(wait_request(&lease(&task), 0, "w", "approve", 60_000))
            .await,
        "wait for `approve`",
    );
    assert_eq!(waited.status, TurnStatus::Waiting);

    let handle = spawn_claim(&b, 10_000);
    let_claim_park(&f, &handle, "the only turn waits for a signal").await;
    signal(&b, "inst-1", 1, "s1", "approve", json!(true)).await;
    assert_rung(&f, "a signal resolving the wait");
    let resumed = finish_claim(handle, "a claim waiting while a signal arrives")
        .await
        .expect("the resolved turn is handed to the waiting claim");
    assert_eq!(resumed.turn.number, 1);
}

/// A waiting claim is woken when an operator resumes a paused instance.
pub async fn long_poll_woken_by_resume(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    control(&b, control_request("inst-1", ControlAction::Pause)).await;
    send(&b, "inst-1", "m1", json!(null)).await;

    let handle = spawn_claim(&b, 10_000);
    let_claim_park(&f, &handle, "the only instance is paused").await;
    control(&b, control_request("inst-1", ControlAction::Resume)).await;
    assert_rung(&f, "resuming the instance");
    let task = finish_claim(handle, "a claim waiting while the instance is resumed")
        .await
        .expect("the resumed instance's head is handed to the waiting claim");
    assert_eq!(task.turn.number, 1);
}

/// Instances in different namespaces are independent, even with equal ids.
pub async fn namespaces_isolated(f: impl Fixture) {
    let a = f.backend_in("ns-a");
    let c = f.backend_in("ns-b");
    create(&a, "shared").await;
    let mut req = create_request("shared");
    req.version = "v2".into();
    create_with(&c, req).await; // another definition under the same id: no conflict
    let ta = send(&a, "shared", "m1", json!({"ns": "a"})).await;
    let tc = send(&c, "shared", "m1", json!({"ns": "b"})).await;
    assert_eq!(ta.number, 1);
    assert_eq!(tc.number, 1, "message ids are per namespace");
    expect_not_found(
        f.backend().get_instance("shared").await,
        "the default namespace does not see ns-a's or ns-b's instances",
    );

    let both = vec![
        WorkflowRef::new(TYPE, VERSION),
        WorkflowRef::new(TYPE, "v2"),
    ];
    let got_a = try_claim_as(&a, WORKER, both.clone())
        .await
        .expect("ns-a's turn is claimable in ns-a");
    assert_eq!(got_a.turn.message, json!({"ns": "a"}));
    assert!(
        try_claim_as(&a, WORKER, both.clone()).await.is_none(),
        "a claim in ns-a must not see ns-b's turn"
    );
    let got_c = try_claim_as(&c, WORKER, both)
        .await
        .expect("ns-b's turn is claimable in ns-b");
    assert_eq!(got_c.turn.message, json!({"ns": "b"}));
    assert_ne!(
        got_a.effect_prefix, got_c.effect_prefix,
        "effect prefixes differ between namespaces"
    );

    complete(&a, &lease(&got_a), json!({"done": true}), json!(null)).await;
    let ic = instance(&c, "shared").await;
    assert_eq!(
        ic.completed_turns, 0,
        "completing in ns-a does not touch ns-b"
    );
    assert_eq!(ic.state, json!({"count": 0}));
    expect_lease_lost(
        c.heartbeat(lease(&got_a)).await.map(|_| ()),
        "ns-a's token presented in ns-b",
    );

    ok(
        a.delete_instance(DeleteRequest {
            workflow_id: "shared".into(),
        })
        .await,
        "delete in ns-a",
    );
    instance(&c, "shared").await;
}
