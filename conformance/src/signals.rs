//! Signals: buffering, suspension and resolution, deadlines, dedupe and limits.

use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::Backend;

use crate::support::*;
use crate::{advance_ms, Fixture};

async fn one_message<B: Backend + ?Sized>(b: &B) {
    create(b, "inst-1").await;
    send(b, "inst-1", "m1", json!(null)).await;
}

#[track_caller]
fn assert_signal_step(step: &StepCheckpoint, key: &str, name: &str, timeout: u64, output: &Value) {
    assert_eq!(step.key, key, "signal step key");
    assert_eq!(step.kind, CheckpointKind::Signal, "signal step kind");
    assert_eq!(
        step.signal_name.as_deref(),
        Some(name),
        "signal step signal_name"
    );
    assert_eq!(
        step.delay_ms,
        Some(timeout),
        "signal step delay_ms is the timeout"
    );
    assert_eq!(&step.output, output, "signal step output");
}

/// A signal sent before the wait is buffered and consumed by the wait at once: the turn keeps
/// running and the step holds `{received: true, value}`.
pub async fn buffered_before_wait(f: impl Fixture) {
    let b = f.backend();
    one_message(&b).await;
    let receipt = signal(&b, "inst-1", 1, "s1", "approve", json!({"ok": true})).await;
    assert_eq!(
        receipt.status,
        TurnStatus::Queued,
        "a queued turn buffers the signal"
    );
    let listed = receipt.signals.clone().unwrap_or_default();
    assert_eq!(listed.len(), 1, "the receipt lists the buffered signal");
    assert_eq!(listed[0].id, "s1");
    assert_eq!(listed[0].name, "approve");
    assert_eq!(listed[0].value, json!({"ok": true}));
    assert_eq!(listed[0].consumed_by, None);
    signal(&b, "inst-1", 1, "s2", "other", json!(2)).await;

    let task = claim(&b, "m1 is ready").await;
    let l = lease(&task);
    let waited = ok(
        b.wait_signal(wait_request(&l, 0, "w", "approve", 60_000))
            .await,
        "wait for `approve`",
    );
    assert_eq!(
        waited.status,
        TurnStatus::Running,
        "a wait that consumes a buffered signal keeps the turn running"
    );
    assert_signal_step(
        &waited.steps[0],
        "w",
        "approve",
        60_000,
        &json!({"received": true, "value": {"ok": true}}),
    );
    let signals = waited.signals.unwrap_or_default();
    let s1 = signals.iter().find(|s| s.id == "s1").expect("s1 is listed");
    assert_eq!(
        s1.consumed_by.as_deref(),
        Some("w"),
        "s1 was consumed by wait `w`"
    );
    let s2 = signals.iter().find(|s| s.id == "s2").expect("s2 is listed");
    assert_eq!(
        s2.consumed_by, None,
        "a signal of another name stays buffered"
    );
    heartbeat(&b, &l).await;
    step(&b, &l, 1, "after", json!(1)).await;
    complete(&b, &l, json!(null), json!(null)).await;
}

/// A wait with no signal suspends the turn (waiting, lease released); a matching signal makes
/// it claimable, resumed in the same attempt with the step `{received: true, value}`.
pub async fn wait_suspends_and_resolves(f: impl Fixture) {
    let b = f.backend();
    one_message(&b).await;
    let task = claim(&b, "m1 is ready").await;
    let l = lease(&task);
    let t0 = claimed_at(&task);
    let waited = ok(
        b.wait_signal(wait_request(&l, 0, "w", "approve", 60_000))
            .await,
        "wait for `approve`",
    );
    assert_eq!(
        waited.status,
        TurnStatus::Waiting,
        "a wait with no signal suspends"
    );
    assert!(
        !waited.steps.is_empty(),
        "the wait answer holds the step at its position"
    );
    assert_signal_step(&waited.steps[0], "w", "approve", 60_000, &Value::Null);
    assert_eq!(waited.steps[0].wake_at_ms, Some(t0 + 60_000));
    assert_eq!(instance(&b, "inst-1").await.status, InstanceStatus::Waiting);
    expect_lease_lost(
        b.heartbeat(l.clone()).await,
        "a heartbeat after the wait suspended",
    );
    assert_no_claim(&b, "the turn waits for a signal").await;

    signal(&b, "inst-1", 1, "s1", "approve", json!({"x": 1})).await;
    let again = claim(&b, "the signal resolved the wait").await;
    assert_eq!(again.turn.attempt, 1, "resuming a wait is the same attempt");
    assert_ne!(again.token, task.token);
    assert_signal_step(
        &again.turn.steps[0],
        "w",
        "approve",
        60_000,
        &json!({"received": true, "value": {"x": 1}}),
    );
    let signals = again.turn.signals.clone().unwrap_or_default();
    assert_eq!(signals.len(), 1);
    assert_eq!(signals[0].consumed_by.as_deref(), Some("w"));
    complete(&b, &lease(&again), json!(null), json!(null)).await;
}

/// At the deadline a suspended wait resolves `{received: false, value: null}`; a signal sent
/// at (or after) the deadline stays buffered and a later wait consumes it.
pub async fn wait_deadline(f: impl Fixture) {
    let b = f.backend();
    one_message(&b).await;
    let task = claim(&b, "m1 is ready").await;
    let waited = ok(
        b.wait_signal(wait_request(&lease(&task), 0, "w1", "approve", 5_000))
            .await,
        "wait for `approve` with a 5 s timeout",
    );
    assert_eq!(waited.status, TurnStatus::Waiting);
    advance_ms(&f, 4_999);
    assert_no_claim(&b, "the wait has 1 ms left").await;
    advance_ms(&f, 1);
    signal(&b, "inst-1", 1, "late", "approve", json!({"late": true})).await;

    let again = claim(&b, "the wait reached its deadline").await;
    assert_eq!(
        again.turn.attempt, 1,
        "a timed-out wait resumes in the same attempt"
    );
    assert_signal_step(
        &again.turn.steps[0],
        "w1",
        "approve",
        5_000,
        &json!({"received": false, "value": null}),
    );
    let late = again
        .turn
        .signals
        .clone()
        .unwrap_or_default()
        .into_iter()
        .find(|s| s.id == "late")
        .expect("the late signal is kept on the turn");
    assert_eq!(
        late.consumed_by, None,
        "a signal at the deadline does not resolve the wait"
    );

    let l = lease(&again);
    let second = ok(
        b.wait_signal(wait_request(&l, 1, "w2", "approve", 5_000))
            .await,
        "a second wait for `approve`",
    );
    assert_eq!(
        second.status,
        TurnStatus::Running,
        "the buffered late signal is consumed"
    );
    assert_signal_step(
        &second.steps[1],
        "w2",
        "approve",
        5_000,
        &json!({"received": true, "value": {"late": true}}),
    );
}

/// One signal id is delivered once: an exact repeat answers the same receipt and adds
/// nothing, also after the turn finished; the same id with another name or value conflicts.
pub async fn signal_dedupe(f: impl Fixture) {
    let b = f.backend();
    one_message(&b).await;
    let first = signal(&b, "inst-1", 1, "s1", "approve", json!({"v": 1})).await;
    let before = snapshot(&b, "inst-1").await;
    let again = signal(&b, "inst-1", 1, "s1", "approve", json!({"v": 1})).await;
    assert_eq!(
        again.signals, first.signals,
        "an exact repeat answers the same receipt"
    );
    assert_unchanged(&b, "inst-1", &before, "an exact signal repeat").await;
    expect_conflict(
        b.signal(signal_request(
            "inst-1",
            1,
            "s1",
            "approve",
            json!({"v": 2}),
        ))
        .await,
        "a signal id reused with another value",
    );
    expect_conflict(
        b.signal(signal_request("inst-1", 1, "s1", "reject", json!({"v": 1})))
            .await,
        "a signal id reused with another name",
    );
    assert_unchanged(&b, "inst-1", &before, "conflicting signals").await;

    run_next(&b, json!(null)).await;
    let before = snapshot(&b, "inst-1").await;
    let late = signal(&b, "inst-1", 1, "s1", "approve", json!({"v": 1})).await;
    assert_eq!(late.number, 1);
    assert_unchanged(
        &b,
        "inst-1",
        &before,
        "an exact signal repeat after completion",
    )
    .await;
}

/// Signals to a completed, cancelled or skipped turn are conflicts; a turn failed for good
/// (blocking) still buffers them.
pub async fn signal_to_finished_turn(f: impl Fixture) {
    let b = f.backend();
    one_message(&b).await;
    send(&b, "inst-1", "m2", json!(null)).await;
    send(&b, "inst-1", "m3", json!(null)).await;
    run_next(&b, json!(null)).await;
    let before = snapshot(&b, "inst-1").await;
    expect_conflict(
        b.signal(signal_request("inst-1", 1, "s1", "approve", json!(1)))
            .await,
        "a signal to a completed turn",
    );
    assert_unchanged(&b, "inst-1", &before, "a signal to a completed turn").await;

    control(&b, control_turn("inst-1", ControlAction::CancelTurn, 2)).await;
    let before = snapshot(&b, "inst-1").await;
    expect_conflict(
        b.signal(signal_request("inst-1", 2, "s2", "approve", json!(1)))
            .await,
        "a signal to a cancelled turn",
    );
    assert_unchanged(&b, "inst-1", &before, "a signal to a cancelled turn").await;

    let task = claim(&b, "m3 is the head").await;
    fail_for_good(&b, &lease(&task), "WorkflowError: broken").await;
    let receipt = signal(&b, "inst-1", 3, "s3", "approve", json!(1)).await;
    assert_eq!(
        receipt.status,
        TurnStatus::Failed,
        "a failed turn buffers signals"
    );
    control(&b, control_turn("inst-1", ControlAction::Skip, 3)).await;
    let before = snapshot(&b, "inst-1").await;
    expect_conflict(
        b.signal(signal_request("inst-1", 3, "s4", "approve", json!(1)))
            .await,
        "a signal to a skipped turn",
    );
    assert_unchanged(&b, "inst-1", &before, "a signal to a skipped turn").await;
}

/// A turn takes 64 signals; the 65th is refused with `409 signal_limit` and writes nothing;
/// repeats of delivered ids still answer.
pub async fn signal_limit(f: impl Fixture) {
    let b = f.backend();
    one_message(&b).await;
    let limit = turnwise_rules::limits::SIGNALS_PER_TURN;
    for i in 0..limit {
        signal(&b, "inst-1", 1, &format!("s{i}"), "tick", json!(i)).await;
    }
    let before = snapshot(&b, "inst-1").await;
    expect_limit(
        b.signal(signal_request(
            "inst-1",
            1,
            &format!("s{limit}"),
            "tick",
            json!(limit),
        ))
        .await,
        "signal_limit",
        "the 65th signal to one turn",
    );
    assert_unchanged(&b, "inst-1", &before, "a signal over the limit").await;
    signal(&b, "inst-1", 1, "s5", "tick", json!(5)).await;
    assert_unchanged(&b, "inst-1", &before, "an exact repeat at the limit").await;
}

/// Signals to an unknown instance or turn are `404`.
pub async fn signal_not_found(f: impl Fixture) {
    let b = f.backend();
    expect_not_found(
        b.signal(signal_request("nobody", 1, "s1", "approve", json!(1)))
            .await,
        "a signal to an unknown instance",
    );
    one_message(&b).await;
    let before = snapshot(&b, "inst-1").await;
    expect_not_found(
        b.signal(signal_request("inst-1", 99, "s1", "approve", json!(1)))
            .await,
        "a signal to an unknown turn",
    );
    assert_unchanged(&b, "inst-1", &before, "a signal to an unknown turn").await;
}

/// A schema document for `version` of the conformance type declaring `signals` (each
/// unchecked: a `null` schema).
fn schema_declaring(version: &str, signals: &[&str]) -> SchemaDocument {
    SchemaDocument {
        workflow_type: TYPE.into(),
        version: version.into(),
        message: Value::Null,
        signals: signals
            .iter()
            .map(|n| (n.to_string(), Value::Null))
            .collect(),
        state: Value::Null,
        reply: Value::Null,
        manifest: None,
    }
}

/// With a schema registered for the instance's type and version, a signal whose name the
/// schema does not declare is `400 invalid_request` on `name`, its message listing the declared
/// names, and nothing is written; a declared name is admitted. Without a registered schema
/// (LBB workers register none) any name is admitted.
pub async fn undeclared_name_refused(f: impl Fixture) {
    let b = f.backend();
    one_message(&b).await;
    signal(&b, "inst-1", 1, "s0", "anything", json!(0)).await;

    ok(
        b.register_schema(&schema_declaring(VERSION, &["approve", "cancel"]))
            .await,
        "register a schema declaring `approve` and `cancel`",
    );
    let before = snapshot(&b, "inst-1").await;
    let e = expect_invalid(
        b.signal(signal_request("inst-1", 1, "s1", "aprove", json!(true)))
            .await,
        "name",
        "a signal named `aprove`, which the schema does not declare",
    );
    let said = e.to_string();
    assert!(
        said.contains("`aprove`") && said.contains("`approve`, `cancel`"),
        "the refusal names the signal and lists the declared names: {said}"
    );
    assert_unchanged(&b, "inst-1", &before, "a signal of an undeclared name").await;
    let t = signal(&b, "inst-1", 1, "s1", "approve", json!(true)).await;
    let names: Vec<String> = t
        .signals
        .unwrap_or_default()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(
        names,
        ["anything", "approve"],
        "a declared name is admitted"
    );

    // A schema declaring no signals refuses every name, and says so.
    let mut req = create_request("inst-2");
    req.version = "v2".into();
    create_with(&b, req).await;
    send(&b, "inst-2", "m1", json!(null)).await;
    ok(
        b.register_schema(&schema_declaring("v2", &[])).await,
        "register a schema declaring no signal",
    );
    let before = snapshot(&b, "inst-2").await;
    let e = expect_invalid(
        b.signal(signal_request("inst-2", 1, "s1", "approve", json!(true)))
            .await,
        "name",
        "a signal to a workflow whose schema declares none",
    );
    assert!(
        e.to_string().contains("declares no signals"),
        "the refusal says no signal is declared: {e}"
    );
    assert_unchanged(&b, "inst-2", &before, "a signal no schema declares").await;
}
