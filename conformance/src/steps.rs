//! Steps, operations, progress, sleeps, completion and continuations.

use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::Backend;
use turnwise_rules::names::{CONTINUATION_ID_PREFIX, CONTINUATION_ORIGIN_KIND};

use crate::support::*;
use crate::{advance_ms, Fixture};

async fn running_turn<B: Backend + ?Sized>(b: &B) -> TurnTask {
    create(b, "inst-1").await;
    send(b, "inst-1", "m1", json!({"add": 1})).await;
    claim(b, "m1 is ready").await
}

/// Saved steps echo exactly what was checkpointed: `{key, kind, output, at_ms}`, `output: null`
/// when it was absent, and no `delay_ms` or `signal_name` keys, on every read and re-claim.
pub async fn step_echo(f: impl Fixture) {
    let b = f.backend();
    let task = running_turn(&b).await;
    let l = lease(&task);
    ok(
        b.operation(operation_request(&l, 0, "a")).await,
        "operation a",
    );
    checkpoint_step(&b, &l, 0, "a", json!({"v": 1})).await;
    let saved = turn(&b, "inst-1", 1).await;
    assert!(
        saved.operation.is_none(),
        "saving a step clears the active operation"
    );
    assert_eq!(saved.steps.len(), 1);
    assert_plain_step(
        &saved.steps[0],
        "a",
        &json!({"v": 1}),
        "step a after checkpoint",
    );
    step(&b, &l, 1, "b", Value::Null).await;
    let saved = turn(&b, "inst-1", 1).await;
    assert_plain_step(&saved.steps[1], "b", &Value::Null, "step b (absent output)");
    let wire = serde_json::to_value(&saved).expect("a turn serializes");
    assert_eq!(
        wire["steps"][1].get("output"),
        Some(&Value::Null),
        "a step's output is always present on the wire, null when absent"
    );

    fail(&b, &l, "RuntimeError: retry me").await;
    advance_ms(&f, 1_000);
    let again = claim(&b, "the backoff of 1 s has passed").await;
    assert_eq!(
        again.turn.steps.len(),
        2,
        "a failed attempt keeps the saved steps"
    );
    assert_plain_step(
        &again.turn.steps[0],
        "a",
        &json!({"v": 1}),
        "step a on re-claim",
    );
    assert_plain_step(
        &again.turn.steps[1],
        "b",
        &Value::Null,
        "step b on re-claim",
    );

    complete(&b, &lease(&again), json!({"count": 1}), json!(1)).await;
    let kept = history(&b, "inst-1").await;
    assert_plain_step(
        &kept[0].steps[0],
        "a",
        &json!({"v": 1}),
        "step a in history",
    );
    assert_plain_step(&kept[0].steps[1], "b", &Value::Null, "step b in history");
}

/// A step's position must equal the number of saved steps and its key must be new in the
/// turn; violations are conflicts that write nothing.
pub async fn step_position_rules(f: impl Fixture) {
    let b = f.backend();
    let task = running_turn(&b).await;
    let l = lease(&task);
    step(&b, &l, 0, "a", json!(1)).await;
    let before = snapshot(&b, "inst-1").await;

    expect_conflict(
        b.checkpoint(step_request(&l, 2, "c", json!(3))).await,
        "a checkpoint that skips a position",
    );
    expect_conflict(
        b.checkpoint(step_request(&l, 0, "z", json!(0))).await,
        "a checkpoint at a taken position with another key",
    );
    expect_conflict(
        b.checkpoint(step_request(&l, 0, "a", json!("other"))).await,
        "a checkpoint at a taken position with another output",
    );
    expect_conflict(
        b.checkpoint(step_request(&l, 1, "a", json!(1))).await,
        "a checkpoint reusing a saved key",
    );
    expect_conflict(
        b.operation(operation_request(&l, 2, "c")).await,
        "an operation that skips a position",
    );
    expect_conflict(
        b.operation(operation_request(&l, 0, "z")).await,
        "an operation at a taken position",
    );
    expect_conflict(
        b.operation(operation_request(&l, 1, "a")).await,
        "an operation reusing a saved key",
    );
    expect_conflict(
        b.checkpoint(sleep_request(&l, 1, "a", 1_000)).await,
        "a sleep reusing a saved key",
    );
    assert_unchanged(&b, "inst-1", &before, "refused step positions").await;
    step(&b, &l, 1, "b", json!(2)).await;
}

/// An operation records key, kind, attempt, start, timeout, deadline, heartbeat, sequence 0 and
/// null details/checkpoint; saving the step clears it.
pub async fn operation_fields(f: impl Fixture) {
    let b = f.backend();
    let task = running_turn(&b).await;
    let l = lease(&task);
    let t0 = claimed_at(&task);
    advance_ms(&f, 10);
    let mut req = operation_request(&l, 0, "fetch");
    req.kind = OperationKind::Tool;
    req.timeout_ms = 5_000;
    req.heartbeat_timeout_ms = Some(1_000);
    let answered = ok(b.operation(req).await, "operation fetch");
    let op = answered
        .operation
        .clone()
        .expect("the operation answer carries `operation`");
    assert_eq!(op.key, "fetch");
    assert_eq!(op.kind, OperationKind::Tool);
    assert_eq!(op.attempt, 1, "the operation belongs to attempt 1");
    assert_eq!(op.started_at_ms, t0 + 10);
    assert_eq!(op.timeout_ms, 5_000);
    assert_eq!(
        op.deadline_ms,
        t0 + 10 + 5_000,
        "deadline = start + timeout_ms"
    );
    assert_eq!(op.last_heartbeat_ms, t0 + 10);
    assert_eq!(op.sequence, 0);
    assert_eq!(op.details, Value::Null);
    assert_eq!(
        op.checkpoint,
        Value::Null,
        "no earlier attempt: no resume cursor"
    );
    assert_eq!(op.heartbeat_timeout_ms, Some(1_000));
    assert_eq!(
        turn(&b, "inst-1", 1).await.operation,
        Some(op),
        "the turn read shows the operation"
    );

    checkpoint_step(&b, &l, 0, "fetch", json!("page")).await;
    assert!(
        turn(&b, "inst-1", 1).await.operation.is_none(),
        "saving the step clears the operation"
    );
}

/// An operation past its deadline ends the attempt like a fail: the token loses the turn, an
/// attempt is counted with backoff, the error names the step. Lease heartbeats do not extend it.
pub async fn operation_deadline_expiry(f: impl Fixture) {
    let b = f.backend();
    let task = running_turn(&b).await;
    let l = lease(&task);
    let mut req = operation_request(&l, 0, "fetch-page");
    req.timeout_ms = 1_000;
    ok(b.operation(req).await, "operation fetch-page");

    advance_ms(&f, 500);
    heartbeat(&b, &l).await;
    advance_ms(&f, 500);
    expect_lease_lost(
        b.heartbeat(l.clone()).await,
        "a heartbeat at the operation deadline (lease heartbeats do not extend it)",
    );
    expect_lease_lost(
        b.checkpoint(step_request(&l, 0, "fetch-page", json!(1)))
            .await,
        "a checkpoint of the expired operation",
    );
    assert_no_claim(&b, "the expired attempt backs off 1 s like a fail").await;
    let t = turn(&b, "inst-1", 1).await;
    assert_ne!(t.status, TurnStatus::Running, "the expired attempt ended");
    assert_eq!(
        t.attempt, 1,
        "the expired attempt is counted (the next claim is 2)"
    );
    let error = t.error.unwrap_or_default();
    assert!(
        error.contains("fetch-page"),
        "the error names the step that timed out: {error:?}"
    );
    advance_ms(&f, 1_000);
    let again = claim(&b, "the backoff after the expired operation passed").await;
    assert_eq!(again.turn.attempt, 2);
    let op = ok(
        b.operation(operation_request(&lease(&again), 0, "fetch-page"))
            .await,
        "operation fetch-page, attempt 2",
    )
    .operation
    .expect("the operation answer carries `operation`");
    assert_eq!(op.attempt, 2);
    assert_eq!(op.sequence, 0);
}

/// With `heartbeat_timeout_ms`, no progress for that long ends the attempt; progress extends
/// it, lease heartbeats do not.
pub async fn operation_heartbeat_timeout(f: impl Fixture) {
    let b = f.backend();
    let task = running_turn(&b).await;
    let l = lease(&task);
    let mut req = operation_request(&l, 0, "crawl");
    req.timeout_ms = 60_000;
    req.heartbeat_timeout_ms = Some(1_000);
    ok(b.operation(req).await, "operation crawl");

    advance_ms(&f, 900);
    ok(
        b.progress(progress_request(
            &l,
            "crawl",
            1,
            json!({"page": 1}),
            json!(1),
        ))
        .await,
        "progress 1 before the heartbeat timeout",
    );
    advance_ms(&f, 500);
    heartbeat(&b, &l).await; // past the first 1 s, alive only because progress moved it
    advance_ms(&f, 500);
    expect_lease_lost(
        b.progress(progress_request(
            &l,
            "crawl",
            2,
            json!({"page": 2}),
            json!(2),
        ))
        .await,
        "progress 1 s after the last progress (a lease heartbeat does not extend it)",
    );
    expect_lease_lost(
        b.heartbeat(l.clone()).await,
        "a heartbeat of the timed-out attempt",
    );
    assert_no_claim(&b, "the timed-out attempt backs off like a fail").await;
    let t = turn(&b, "inst-1", 1).await;
    assert_eq!(t.attempt, 1);
    assert_ne!(t.status, TurnStatus::Running, "the attempt ended");
    let error = t.error.unwrap_or_default();
    assert!(
        error.contains("crawl"),
        "the error names the step: {error:?}"
    );
}

/// A new attempt's operation on the same step carries the resume cursor of the previous
/// attempt's last progress, with the sequence starting again.
pub async fn operation_carries_checkpoint(f: impl Fixture) {
    let b = f.backend();
    let task = running_turn(&b).await;
    let l = lease(&task);
    step(&b, &l, 0, "setup", json!(true)).await;
    ok(
        b.operation(operation_request(&l, 1, "scan")).await,
        "operation scan",
    );
    ok(
        b.progress(progress_request(
            &l,
            "scan",
            1,
            json!({"page": 0}),
            Value::Null,
        ))
        .await,
        "progress 1",
    );
    ok(
        b.progress(progress_request(
            &l,
            "scan",
            2,
            json!({"page": 1}),
            json!({"cursor": 7}),
        ))
        .await,
        "progress 2",
    );
    fail(&b, &l, "RuntimeError: crashed mid-scan").await;
    advance_ms(&f, 1_000);

    let again = claim(&b, "the backoff passed").await;
    let l2 = lease(&again);
    assert_eq!(again.turn.attempt, 2);
    let op = ok(
        b.operation(operation_request(&l2, 1, "scan")).await,
        "operation scan, attempt 2",
    )
    .operation
    .expect("the operation answer carries `operation`");
    assert_eq!(
        op.checkpoint,
        json!({"cursor": 7}),
        "the operation carries the previous attempt's last cursor"
    );
    assert_eq!(op.attempt, 2);
    assert_eq!(
        op.sequence, 0,
        "the sequence restarts for the new operation"
    );
    ok(
        b.progress(progress_request(
            &l2,
            "scan",
            1,
            json!({"page": 2}),
            json!({"cursor": 8}),
        ))
        .await,
        "progress sequence 1 again in the new operation",
    );
}

/// Progress sequences rise: an exact repeat of the last write is accepted and changes nothing;
/// a lower or equal sequence with other content, or another key, is a conflict.
pub async fn progress_sequences(f: impl Fixture) {
    let b = f.backend();
    let task = running_turn(&b).await;
    let l = lease(&task);
    ok(
        b.operation(operation_request(&l, 0, "a")).await,
        "operation a",
    );
    ok(
        b.progress(progress_request(&l, "a", 1, json!({"p": 1}), json!("c1")))
            .await,
        "progress 1",
    );
    let op = turn(&b, "inst-1", 1)
        .await
        .operation
        .expect("the operation runs");
    assert_eq!(op.sequence, 1);
    assert_eq!(op.details, json!({"p": 1}), "progress replaces the details");
    assert_eq!(op.checkpoint, json!("c1"), "progress replaces the cursor");

    let before = snapshot(&b, "inst-1").await;
    ok(
        b.progress(progress_request(&l, "a", 1, json!({"p": 1}), json!("c1")))
            .await,
        "an exact repeat of progress 1",
    );
    assert_unchanged(&b, "inst-1", &before, "an exact repeat of progress").await;
    expect_conflict(
        b.progress(progress_request(&l, "a", 1, json!({"p": 2}), json!("c1")))
            .await,
        "sequence 1 again with other details",
    );
    expect_conflict(
        b.progress(progress_request(&l, "b", 2, json!({"p": 2}), json!("c2")))
            .await,
        "progress for a key that is not the running operation",
    );
    assert_unchanged(&b, "inst-1", &before, "refused progress").await;

    ok(
        b.progress(progress_request(&l, "a", 3, json!({"p": 3}), json!("c3")))
            .await,
        "progress 3 (sequences need only rise)",
    );
    let before = snapshot(&b, "inst-1").await;
    expect_conflict(
        b.progress(progress_request(&l, "a", 2, json!({"p": 2}), json!("c2")))
            .await,
        "a lower sequence",
    );
    expect_conflict(
        b.progress(progress_request(
            &l,
            "a",
            3,
            json!({"p": 3}),
            json!("other"),
        ))
        .await,
        "the last sequence with another cursor",
    );
    assert_unchanged(&b, "inst-1", &before, "refused progress").await;

    checkpoint_step(&b, &l, 0, "a", json!("done")).await;
    expect_conflict(
        b.progress(progress_request(&l, "a", 4, json!({"p": 4}), json!("c4")))
            .await,
        "progress after the step was saved (no running operation)",
    );
}

/// Details with a `phase` key must follow the progress convention (else 400, nothing
/// written); free JSON is accepted; convention details fill the progress views.
pub async fn progress_validation(f: impl Fixture) {
    let b = f.backend();
    let task = running_turn(&b).await;
    let l = lease(&task);
    ok(
        b.operation(operation_request(&l, 0, "a")).await,
        "operation a",
    );
    let before = snapshot(&b, "inst-1").await;
    let bad = [
        json!({"phase": "fetch"}),
        json!({"phase": "", "done": 0}),
        json!({"phase": "x".repeat(81), "done": 0}),
        json!({"phase": "a\nb", "done": 0}),
        json!({"phase": "fetch", "done": -1}),
        json!({"phase": "fetch", "done": 1.5}),
        json!({"phase": "fetch", "done": "1"}),
        json!({"phase": "fetch", "done": 9_007_199_254_740_992u64}),
        json!({"phase": "fetch", "done": 1, "total": "3"}),
        json!({"phase": "fetch", "done": 1, "total": -3}),
        json!({"phase": "fetch", "done": 1, "unit": ""}),
        json!({"phase": "fetch", "done": 1, "unit": "pages!"}),
        json!({"phase": "fetch", "done": 1, "unit": "u".repeat(33)}),
        json!({"phase": 7, "done": 1}),
    ];
    for details in bad {
        expect_bad_request(
            b.progress(progress_request(&l, "a", 1, details.clone(), Value::Null))
                .await,
            &format!("progress details breaking the convention: {details}"),
        );
    }
    assert_unchanged(&b, "inst-1", &before, "refused progress details").await;

    ok(
        b.progress(progress_request(
            &l,
            "a",
            1,
            json!({"page": 3}),
            Value::Null,
        ))
        .await,
        "free JSON details without `phase`",
    );
    ok(
        b.progress(progress_request(
            &l,
            "a",
            2,
            json!({"phase": "fetch", "done": 2, "total": 10, "unit": "pages"}),
            Value::Null,
        ))
        .await,
        "convention details",
    );
    let t = turn(&b, "inst-1", 1).await;
    let p = t.progress.expect("convention details fill turn.progress");
    assert_eq!(p.phase, "fetch");
    assert_eq!(p.done, 2);
    assert_eq!(p.total, Some(10));
    assert_eq!(p.unit.as_deref(), Some("pages"));
    assert!(!p.started_at.is_empty() && !p.heartbeat_at.is_empty());
    let inst = instance(&b, "inst-1").await;
    assert!(
        inst.progress.is_some(),
        "instance.progress is shown while the head runs"
    );
}

/// A sleep releases the lease without counting an attempt; the turn waits until due, then is
/// claimable with a new token, the same attempt and the saved steps, echoed exactly.
pub async fn sleep_releases_and_resumes(f: impl Fixture) {
    let b = f.backend();
    let task = running_turn(&b).await;
    let l = lease(&task);
    let t0 = claimed_at(&task);
    step(&b, &l, 0, "a", json!("before")).await;
    sleep(&b, &l, 1, "nap", 5_000).await;

    let t = turn(&b, "inst-1", 1).await;
    assert_eq!(t.status, TurnStatus::Waiting, "a sleeping turn waits");
    assert_eq!(t.ready_at_ms, t0 + 5_000, "ready when the sleep is due");
    assert_eq!(t.attempt, 1, "a sleep counts no attempt");
    let nap = &t.steps[1];
    assert_eq!(nap.key, "nap");
    assert_eq!(nap.kind, CheckpointKind::Sleep);
    assert_eq!(nap.output, Value::Null);
    assert_eq!(nap.delay_ms, Some(5_000));
    assert_eq!(nap.wake_at_ms, Some(t0 + 5_000));
    assert_eq!(
        wire_keys(nap),
        keys(&["key", "kind", "output", "at_ms", "delay_ms", "wake_at_ms"]),
        "a sleep step has no signal_name: {nap:?}"
    );
    assert_eq!(instance(&b, "inst-1").await.status, InstanceStatus::Waiting);
    expect_lease_lost(
        b.heartbeat(l.clone()).await,
        "a heartbeat after the sleep released the turn",
    );
    assert_no_claim(&b, "the sleep is not due").await;
    advance_ms(&f, 4_999);
    assert_no_claim(&b, "the sleep is due in 1 ms").await;
    advance_ms(&f, 1);

    let again = claim(&b, "the sleep is due").await;
    assert_eq!(
        again.turn.attempt, 1,
        "resuming after a sleep is the same attempt"
    );
    assert_ne!(again.token, task.token, "the resumed claim has a new token");
    assert_eq!(again.effect_prefix, task.effect_prefix);
    assert_eq!(
        again.turn.steps, t.steps,
        "the saved steps are echoed exactly"
    );
    assert_plain_step(
        &again.turn.steps[0],
        "a",
        &json!("before"),
        "step a after the sleep",
    );
    assert_eq!(
        wire_keys(&again.turn.steps[1]),
        keys(&["key", "kind", "output", "at_ms", "delay_ms", "wake_at_ms"])
    );
    complete(&b, &lease(&again), json!({"count": 1}), json!(null)).await;
}

/// Completion commits state, reply, `state_after` and moves the turn to history; the next
/// turn's task sees the new state; a `null` state is kept.
pub async fn complete_commits(f: impl Fixture) {
    let b = f.backend();
    let task = running_turn(&b).await;
    send(&b, "inst-1", "m2", json!({"add": 3})).await;
    let l = lease(&task);
    step(&b, &l, 0, "add", json!(1)).await;
    complete(&b, &l, json!({"count": 1}), json!({"total": 1})).await;

    let t = turn(&b, "inst-1", 1).await;
    assert_eq!(t.status, TurnStatus::Completed);
    assert_eq!(t.result, json!({"total": 1}));
    assert_eq!(t.state_after, json!({"count": 1}));
    assert!(
        t.finished_at_ms.is_some(),
        "a completed turn has finished_at_ms"
    );
    assert_eq!(t.steps.len(), 1);
    let inst = instance(&b, "inst-1").await;
    assert_eq!(inst.state, json!({"count": 1}));
    assert_eq!(inst.completed_turns, 1);
    assert_eq!(inst.history_through, 1);
    assert_eq!(inst.pending_messages, 1);
    assert_eq!(
        inst.status,
        InstanceStatus::Queued,
        "the next head is ready"
    );
    assert_eq!(numbers(&history(&b, "inst-1").await), vec![1]);
    assert_eq!(inbox_numbers(&inbox(&b, "inst-1").await), vec![2]);

    let next = claim(&b, "m2 is the head").await;
    assert_eq!(
        next.state,
        json!({"count": 1}),
        "the next task sees the new state"
    );
    complete(&b, &lease(&next), Value::Null, Value::Null).await;
    let inst = instance(&b, "inst-1").await;
    assert_eq!(inst.state, Value::Null, "a null state is kept");
    assert_eq!(inst.status, InstanceStatus::Idle);
    assert_eq!(inst.pending_messages, 0);
    assert!(inst.current_turn.is_none(), "an idle instance has no head");
    expect_lease_lost(
        b.heartbeat(lease(&next)).await,
        "a heartbeat of a completed turn",
    );
}

/// A continuation is appended at the inbox tail, behind queued messages, as `continue-<n>` with
/// origin `{kind: continuation, turn: n, message_id}`, and the completed turn records
/// `continued_to`.
pub async fn continuation_queues_behind(f: impl Fixture) {
    let b = f.backend();
    let task = running_turn(&b).await;
    send(&b, "inst-1", "m2", json!("second")).await;
    send(&b, "inst-1", "m3", json!("third")).await;
    let mut req = complete_request(&lease(&task), json!({"count": 1}), json!("r1"));
    req.continuation = Some(Continuation {
        message: json!({"next": true}),
    });
    ok(b.complete(req).await, "complete with a continuation");

    let done = turn(&b, "inst-1", 1).await;
    assert_eq!(
        done.continued_to,
        Some(4),
        "the completed turn records continued_to"
    );
    assert_eq!(inbox_numbers(&inbox(&b, "inst-1").await), vec![2, 3, 4]);
    let cont = turn(&b, "inst-1", 4).await;
    assert_eq!(cont.message_id, format!("{CONTINUATION_ID_PREFIX}1"));
    assert_eq!(cont.message, json!({"next": true}));
    assert_eq!(cont.status, TurnStatus::Queued);
    let origin = cont.origin.expect("a continuation has an origin");
    assert_eq!(origin.kind, CONTINUATION_ORIGIN_KIND);
    assert_eq!(origin.fields.get("turn"), Some(&json!(1)));
    assert_eq!(origin.fields.get("message_id"), Some(&json!("m1")));
    assert_eq!(
        instance(&b, "inst-1").await.state,
        json!({"count": 1}),
        "state and continuation commit together"
    );

    for expected in [2u64, 3, 4] {
        let t = claim(&b, "the inbox still has messages").await;
        assert_eq!(
            t.turn.number, expected,
            "the continuation runs behind the messages queued before it"
        );
        complete(&b, &lease(&t), json!({"count": expected}), Value::Null).await;
    }
}
