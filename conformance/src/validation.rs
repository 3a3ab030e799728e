//! Bad input: invalid identifiers and ranges are `400 invalid_request` naming the parameter,
//! reserved names are `403`; nothing is written.

use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::Backend;

use turnwise_rules::durations::{
    HEARTBEAT_TIMEOUT_MIN_MS, LEASE, OPERATION_TIMEOUT, SLEEP_DELAY, WAIT_TIMEOUT,
};
use turnwise_rules::ident::MAX_LEN;
use turnwise_rules::limits::{MAX_ATTEMPTS_MAX, MAX_ATTEMPTS_MIN};
use turnwise_rules::names::{
    CONTINUATION_ID_PREFIX, CONTINUATION_ORIGIN_KIND, ORIGIN_KINDS, RESERVED_INSTANCE_IDS,
    RESERVED_TYPE_PREFIX,
};

use crate::support::*;
use crate::Fixture;

/// Identifiers that break the rule (1–128 of `A-Z a-z 0-9 _ - .`).
fn bad_ids() -> Vec<String> {
    vec![
        String::new(),
        "has space".into(),
        "a/b".into(),
        "ünï".into(),
        "semi;colon".into(),
        "x".repeat(MAX_LEN + 1),
    ]
}

/// Invalid instance ids, types, versions, message ids, signal ids and names, step keys, wait
/// names, workers and claim workflows are refused with 400 naming the parameter; 128
/// characters are accepted.
pub async fn invalid_identifiers(f: impl Fixture) {
    let b = f.backend();
    for bad in bad_ids() {
        let mut req = create_request(&bad);
        req.id = bad.clone();
        expect_invalid(
            b.create_instance(req).await,
            "id",
            &format!("create with id {bad:?}"),
        );
        let mut req = create_request("inst-bad");
        req.workflow_type = bad.clone();
        expect_invalid(
            b.create_instance(req).await,
            "workflow_type",
            &format!("create with workflow_type {bad:?}"),
        );
        let mut req = create_request("inst-bad");
        req.version = bad.clone();
        expect_invalid(
            b.create_instance(req).await,
            "version",
            &format!("create with version {bad:?}"),
        );
    }
    expect_not_found(
        b.get_instance("inst-bad").await,
        "an instance refused at creation",
    );
    let long = "i".repeat(MAX_LEN);
    create(&b, &long).await;

    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let task = claim(&b, "m1 is ready").await;
    let l = lease(&task);
    let before = snapshot(&b, "inst-1").await;
    for bad in bad_ids() {
        let what = |call: &str| format!("{call} with {bad:?}");
        expect_invalid(
            b.send_message(message_request("inst-1", &bad, json!(null)))
                .await,
            "id",
            &what("message id"),
        );
        expect_invalid(
            b.signal(signal_request("inst-1", 1, &bad, "approve", json!(1)))
                .await,
            "id",
            &what("signal id"),
        );
        expect_invalid(
            b.signal(signal_request("inst-1", 1, "s1", &bad, json!(1)))
                .await,
            "name",
            &what("signal name"),
        );
        expect_invalid(
            b.operation(operation_request(&l, 0, &bad)).await,
            "key",
            &what("operation key"),
        );
        expect_invalid(
            b.checkpoint(step_request(&l, 0, &bad, json!(1))).await,
            "key",
            &what("checkpoint key"),
        );
        expect_invalid(
            b.wait_signal(wait_request(&l, 0, &bad, "approve", 1_000))
                .await,
            "key",
            &what("wait key"),
        );
        expect_invalid(
            b.wait_signal(wait_request(&l, 0, "w", &bad, 1_000)).await,
            "name",
            &what("wait name"),
        );
        expect_invalid_about(
            b.claim(claim_request(
                WORKER,
                vec![WorkflowRef::new(bad.clone(), VERSION)],
            ))
            .await,
            "workflow_type",
            &what("claim workflow_type"),
        );
        expect_invalid_about(
            b.claim(claim_request(
                WORKER,
                vec![WorkflowRef::new(TYPE, bad.clone())],
            ))
            .await,
            "version",
            &what("claim version"),
        );
    }
    expect_invalid(
        b.claim(claim_request("", workflows())).await,
        "worker",
        "a claim with an empty worker",
    );
    expect_invalid(
        b.claim(claim_request(&"w".repeat(129), workflows())).await,
        "worker",
        "a claim with a 129-character worker",
    );
    expect_invalid(
        b.claim(claim_request(WORKER, vec![])).await,
        "workflows",
        "a claim listing no workflows",
    );
    assert_unchanged(&b, "inst-1", &before, "requests with invalid identifiers").await;
    step(&b, &l, 0, &"k".repeat(128), json!(1)).await;
}

/// `lbb.*` types and the reserved instance ids are `403`; a claim naming an `lbb.*` type is
/// refused whole.
pub async fn reserved_names(f: impl Fixture) {
    let b = f.backend();
    let reserved_type = format!("{RESERVED_TYPE_PREFIX}agent");
    let mut req = create_request("inst-lbb");
    req.workflow_type = reserved_type.clone();
    expect_reserved(
        b.create_instance(req).await,
        "reserved_workflow_type",
        "create with type lbb.agent",
    );
    expect_not_found(
        b.get_instance("inst-lbb").await,
        "a reserved type is not created",
    );
    for id in RESERVED_INSTANCE_IDS {
        expect_reserved(
            b.create_instance(create_request(id)).await,
            "reserved_workflow_id",
            &format!("create with the reserved id {id}"),
        );
        expect_not_found(b.get_instance(id).await, "a reserved id is not created");
    }

    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let before = snapshot(&b, "inst-1").await;
    expect_reserved(
        b.claim(claim_request(
            WORKER,
            vec![
                WorkflowRef::new(TYPE, VERSION),
                WorkflowRef::new(reserved_type, "v1"),
            ],
        ))
        .await,
        "reserved_workflow_type",
        "a claim naming an lbb.* type",
    );
    assert_unchanged(&b, "inst-1", &before, "a refused claim").await;
}

/// A claim asking for an execution credential is refused (400) and claims nothing.
pub async fn execution_credential_refused(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let before = snapshot(&b, "inst-1").await;
    let mut req = claim_request(WORKER, workflows());
    req.include_execution_credential = Some(true);
    expect_bad_request(
        b.claim(req).await,
        "a claim with include_execution_credential",
    );
    assert_unchanged(&b, "inst-1", &before, "a refused claim").await;
    claim(&b, "the message is still ready").await;
}

/// Numeric ranges: lease_ms 100–86 400 000, max_attempts 1–100, operation timeout_ms
/// 100–86 400 000, heartbeat_timeout_ms 100–timeout_ms, wait timeout_ms 1 ms–365 days, sleep
/// delay ≤ 365 days.
pub async fn numeric_ranges(f: impl Fixture) {
    let b = f.backend();
    for (lease_ms, max_attempts, param) in [
        (Some(LEASE.min - 1), None, "lease_ms"),
        (Some(LEASE.max + 1), None, "lease_ms"),
        (None, Some(MAX_ATTEMPTS_MIN - 1), "max_attempts"),
        (None, Some(MAX_ATTEMPTS_MAX + 1), "max_attempts"),
    ] {
        let mut req = create_request("inst-range");
        req.lease_ms = lease_ms;
        req.max_attempts = max_attempts;
        expect_invalid(
            b.create_instance(req).await,
            param,
            &format!("create with lease_ms {lease_ms:?}, max_attempts {max_attempts:?}"),
        );
    }
    expect_not_found(b.get_instance("inst-range").await, "refused creates");
    let mut req = create_request("inst-lo");
    req.lease_ms = Some(LEASE.min);
    req.max_attempts = Some(MAX_ATTEMPTS_MIN);
    create_with(&b, req).await;
    let mut req = create_request("inst-hi");
    req.lease_ms = Some(LEASE.max);
    req.max_attempts = Some(MAX_ATTEMPTS_MAX);
    create_with(&b, req).await;

    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let l = lease(&claim_as(&b, WORKER, "m1 is ready").await);
    let before = snapshot(&b, "inst-1").await;
    for (timeout_ms, heartbeat_timeout_ms, param) in [
        (OPERATION_TIMEOUT.min - 1, None, "timeout_ms"),
        (OPERATION_TIMEOUT.max + 1, None, "timeout_ms"),
        (
            10_000,
            Some(HEARTBEAT_TIMEOUT_MIN_MS - 1),
            "heartbeat_timeout_ms",
        ),
        (10_000, Some(10_001), "heartbeat_timeout_ms"),
    ] {
        let mut req = operation_request(&l, 0, "a");
        req.timeout_ms = timeout_ms;
        req.heartbeat_timeout_ms = heartbeat_timeout_ms;
        expect_invalid(
            b.operation(req).await,
            param,
            &format!("operation with timeout_ms {timeout_ms}, heartbeat {heartbeat_timeout_ms:?}"),
        );
    }
    for timeout in [WAIT_TIMEOUT.min - 1, WAIT_TIMEOUT.max + 1] {
        expect_invalid(
            b.wait_signal(wait_request(&l, 0, "w", "approve", timeout))
                .await,
            "timeout_ms",
            &format!("a wait with timeout_ms {timeout}"),
        );
    }
    expect_invalid(
        b.checkpoint(sleep_request(&l, 0, "nap", SLEEP_DELAY.max + 1))
            .await,
        "delay_ms",
        "a sleep longer than 365 days",
    );
    assert_unchanged(&b, "inst-1", &before, "requests out of range").await;

    let mut req = operation_request(&l, 0, "a");
    req.timeout_ms = OPERATION_TIMEOUT.max;
    req.heartbeat_timeout_ms = Some(OPERATION_TIMEOUT.max);
    ok(
        b.operation(req).await,
        "an operation at the top of both ranges",
    );
    checkpoint_step(&b, &l, 0, "a", json!(1)).await;
    let mut req = operation_request(&l, 1, "b");
    req.timeout_ms = OPERATION_TIMEOUT.min;
    req.heartbeat_timeout_ms = Some(HEARTBEAT_TIMEOUT_MIN_MS);
    ok(
        b.operation(req).await,
        "an operation at the bottom of both ranges",
    );
    checkpoint_step(&b, &l, 1, "b", json!(2)).await;
    sleep(&b, &l, 2, "long-nap", SLEEP_DELAY.max).await;
}

/// Checkpoint kinds: `signal` is not a checkpoint kind, steps take no `delay_ms`, sleeps need
/// one and take no output.
pub async fn checkpoint_kind_rules(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let l = lease(&claim(&b, "m1 is ready").await);
    let before = snapshot(&b, "inst-1").await;
    let mut signal_kind = step_request(&l, 0, "a", Value::Null);
    signal_kind.kind = CheckpointKind::Signal;
    expect_bad_request(
        b.checkpoint(signal_kind).await,
        "a checkpoint of kind signal",
    );
    let mut step_with_delay = step_request(&l, 0, "a", json!(1));
    step_with_delay.delay_ms = Some(1_000);
    expect_bad_request(b.checkpoint(step_with_delay).await, "a step with delay_ms");
    let mut sleep_without_delay = sleep_request(&l, 0, "nap", 1_000);
    sleep_without_delay.delay_ms = None;
    expect_bad_request(
        b.checkpoint(sleep_without_delay).await,
        "a sleep without delay_ms",
    );
    let mut sleep_with_output = sleep_request(&l, 0, "nap", 1_000);
    sleep_with_output.output = json!("zzz");
    expect_bad_request(
        b.checkpoint(sleep_with_output).await,
        "a sleep with an output",
    );
    assert_unchanged(&b, "inst-1", &before, "malformed checkpoints").await;
    step(&b, &l, 0, "a", json!(1)).await;
}

/// `non_retryable` together with `retry_at_ms` is refused; the attempt goes on.
pub async fn fail_rules(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let task = claim(&b, "m1 is ready").await;
    let l = lease(&task);
    let before = snapshot(&b, "inst-1").await;
    let mut req = fail_request(&l, "WorkflowError: both");
    req.non_retryable = true;
    req.retry_at_ms = Some(claimed_at(&task) + 5_000);
    expect_bad_request(b.fail(req).await, "fail with non_retryable and retry_at_ms");
    assert_unchanged(&b, "inst-1", &before, "a refused fail").await;
    heartbeat(&b, &l).await;
    let mut req = fail_request(&l, "WorkflowWait: later");
    req.retry_at_ms = Some(claimed_at(&task) + 5_000);
    ok(
        b.fail(req).await,
        "retry_at_ms with non_retryable false is accepted",
    );
}

/// Origin kinds are the listed ones; anything else (including server-made `continuation`) is
/// refused.
pub async fn origin_kind(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    for (i, kind) in ORIGIN_KINDS.iter().enumerate() {
        let mut req = message_request("inst-1", &format!("m{i}"), json!(i));
        let mut origin = MessageOrigin::new(*kind);
        origin.fields.insert("actor".into(), json!("tester"));
        req.origin = Some(origin);
        let t = ok(
            b.send_message(req).await,
            &format!("a message with origin kind {kind}"),
        );
        let o = t.origin.expect("the origin is kept");
        assert_eq!(o.kind, *kind);
        assert_eq!(
            o.fields.get("actor"),
            Some(&json!("tester")),
            "origin fields are kept"
        );
    }
    let before = snapshot(&b, "inst-1").await;
    for kind in ["martian", CONTINUATION_ORIGIN_KIND, ""] {
        let mut req = message_request("inst-1", "bad-origin", json!(null));
        req.origin = Some(MessageOrigin::new(kind));
        expect_invalid_about(
            b.send_message(req).await,
            "origin",
            &format!("a message with origin kind {kind:?}"),
        );
    }
    assert_unchanged(&b, "inst-1", &before, "messages with invalid origins").await;
}

/// Message ids starting `continue-` are reserved for continuations.
pub async fn continue_prefix_reserved(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    let before = snapshot(&b, "inst-1").await;
    expect_invalid(
        b.send_message(message_request(
            "inst-1",
            &format!("{CONTINUATION_ID_PREFIX}1"),
            json!(null),
        ))
        .await,
        "id",
        "a message id with the reserved continue- prefix",
    );
    assert_unchanged(&b, "inst-1", &before, "a reserved message id").await;
    send(&b, "inst-1", "continued-1", json!(null)).await;
}
