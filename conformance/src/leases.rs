//! Leases and fencing: expiry, re-claim, heartbeats, and refusal of a stale token's writes.

use serde_json::json;
use turnwise::protocol::*;
use turnwise::Backend;

use crate::support::*;
use crate::{advance_ms, Fixture};

async fn create_short_lease<B: Backend + ?Sized>(b: &B, id: &str, lease_ms: u64) {
    let mut req = create_request(id);
    req.lease_ms = Some(lease_ms);
    create_with(b, req).await;
}

/// After worker A's lease expires and worker B re-claims the turn, every write of A's token is
/// refused with `409 turn_lease_lost` and changes nothing, while B's writes succeed.
pub async fn fencing_two_claimants(f: impl Fixture) {
    let b = f.backend();
    create_short_lease(&b, "inst-1", 1_000).await;
    send(&b, "inst-1", "m1", json!({"add": 1})).await;

    let a = claim_as(&b, WORKER, "m1 is ready").await;
    let la = lease(&a);
    step(&b, &la, 0, "first", json!("a-was-here")).await;
    ok(
        b.operation(operation_request(&la, 1, "second")).await,
        "A starts operation `second`",
    );
    advance_ms(&f, 1_000);

    let bb = claim_as(&b, OTHER_WORKER, "A's lease expired (now >= deadline_ms)").await;
    let lb = lease(&bb);
    assert_eq!(bb.turn.number, 1);
    assert_ne!(bb.token, a.token, "the re-claim has a new token");
    assert_eq!(bb.turn.attempt, 2, "the expired attempt counts");
    assert_eq!(bb.turn.worker.as_deref(), Some(OTHER_WORKER));

    let before = snapshot(&b, "inst-1").await;
    expect_lease_lost(
        b.heartbeat(la.clone()).await,
        "A's heartbeat after B's claim",
    );
    expect_lease_lost(
        b.operation(operation_request(&la, 1, "second")).await,
        "A's operation after B's claim",
    );
    expect_lease_lost(
        b.progress(progress_request(
            &la,
            "second",
            1,
            json!({"n": 1}),
            json!(null),
        ))
        .await,
        "A's progress after B's claim",
    );
    expect_lease_lost(
        b.checkpoint(step_request(&la, 1, "second", json!("stale")))
            .await,
        "A's checkpoint after B's claim",
    );
    expect_lease_lost(
        b.checkpoint(sleep_request(&la, 1, "nap", 1_000)).await,
        "A's sleep after B's claim",
    );
    expect_lease_lost(
        b.wait_signal(wait_request(&la, 1, "w", "approve", 1_000))
            .await,
        "A's wait-signal after B's claim",
    );
    expect_lease_lost(
        b.complete(complete_request(&la, json!({"count": -1}), json!("stale")))
            .await,
        "A's complete after B's claim",
    );
    expect_lease_lost(
        b.fail(fail_request(&la, "stale failure")).await,
        "A's fail after B's claim",
    );
    assert_unchanged(&b, "inst-1", &before, "writes of a stale token").await;

    heartbeat(&b, &lb).await;
    step(&b, &lb, 1, "second", json!("b-was-here")).await;
    complete(&b, &lb, json!({"count": 1}), json!("done")).await;
    let inst = instance(&b, "inst-1").await;
    assert_eq!(
        inst.state,
        json!({"count": 1}),
        "B's completion is committed"
    );
    let done = turn(&b, "inst-1", 1).await;
    assert_eq!(done.status, TurnStatus::Completed);
    assert_eq!(done.steps.len(), 2);
    assert_eq!(done.steps[0].output, json!("a-was-here"));
    assert_eq!(done.steps[1].output, json!("b-was-here"));
    expect_lease_lost(
        b.heartbeat(la).await,
        "A's heartbeat after the turn finished",
    );
}

/// An expired lease makes the turn claimable at once: the attempt rises, the effect prefix and
/// saved steps stay, the token is new.
pub async fn lease_expiry_reclaim(f: impl Fixture) {
    let b = f.backend();
    create_short_lease(&b, "inst-1", 1_000).await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let first = claim(&b, "m1 is ready").await;
    step(&b, &lease(&first), 0, "a", json!({"v": 1})).await;

    advance_ms(&f, 999);
    assert_no_claim(&b, "the lease has 1 ms left").await;
    advance_ms(&f, 1);
    let second = claim(&b, "the lease expired: the turn is claimable again at once").await;
    assert_eq!(second.turn.number, 1);
    assert_eq!(
        second.turn.attempt, 2,
        "an expired lease counts the attempt"
    );
    assert_eq!(
        second.effect_prefix, first.effect_prefix,
        "same effect prefix"
    );
    assert_ne!(second.token, first.token, "new token");
    assert_eq!(second.turn.steps.len(), 1, "the saved step is returned");
    assert_plain_step(
        &second.turn.steps[0],
        "a",
        &json!({"v": 1}),
        "the re-claimed step",
    );
    assert_eq!(second.turn.status, TurnStatus::Running);
}

/// Heartbeats extend a live lease (now + lease_ms) and keep the turn; an expired lease's
/// heartbeat is refused with `turn_lease_lost`.
pub async fn heartbeat_extends_live_lease(f: impl Fixture) {
    let b = f.backend();
    create_short_lease(&b, "inst-1", 1_000).await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let task = claim(&b, "m1 is ready").await;
    let l = lease(&task);
    let t0 = claimed_at(&task);

    advance_ms(&f, 999);
    heartbeat(&b, &l).await;
    assert_eq!(
        turn(&b, "inst-1", 1).await.deadline_ms,
        Some(t0 + 999 + 1_000),
        "a heartbeat sets deadline_ms = now + lease_ms"
    );
    advance_ms(&f, 999);
    assert_no_claim(&b, "the heartbeat extended the lease").await;
    heartbeat(&b, &l).await;
    advance_ms(&f, 999);
    assert_no_claim(&b, "the second heartbeat extended the lease").await;
    heartbeat(&b, &l).await;
    step(&b, &l, 0, "a", json!(1)).await;

    advance_ms(&f, 1_000);
    let before = snapshot(&b, "inst-1").await;
    expect_lease_lost(
        b.heartbeat(l.clone()).await,
        "a heartbeat after the lease expired",
    );
    assert_unchanged(&b, "inst-1", &before, "a refused heartbeat").await;
    let again = claim(&b, "the lease expired").await;
    assert_eq!(again.turn.attempt, 2);
}

/// A lease that expires on the last attempt exhausts the turn: it fails for good and blocks
/// the inbox.
pub async fn lease_expiry_exhausts(f: impl Fixture) {
    let b = f.backend();
    let mut req = create_request("inst-1");
    req.lease_ms = Some(1_000);
    req.max_attempts = Some(1);
    create_with(&b, req).await;
    send(&b, "inst-1", "m1", json!(null)).await;
    send(&b, "inst-1", "m2", json!(null)).await;
    let task = claim(&b, "m1 is ready").await;
    advance_ms(&f, 1_000);
    assert_no_claim(
        &b,
        "turn 1 ran out of attempts when its lease expired and blocks the inbox",
    )
    .await;
    let t1 = turn(&b, "inst-1", 1).await;
    assert_eq!(
        t1.status,
        TurnStatus::Failed,
        "the exhausted turn failed for good"
    );
    assert_eq!(t1.attempt, 1);
    assert_eq!(
        instance(&b, "inst-1").await.status,
        InstanceStatus::Failed,
        "a failed head makes the instance failed"
    );
    expect_lease_lost(b.heartbeat(lease(&task)).await, "the expired token");
}
