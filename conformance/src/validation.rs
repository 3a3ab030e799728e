//! Bad input: invalid identifiers and ranges (times and durations among them) are
//! `400 invalid_request` naming the parameter, reserved names are `403`; nothing is written.

use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::Backend;

use turnwise_rules::durations::{
    HEARTBEAT_TIMEOUT_MIN_MS, LEASE, OPERATION_TIMEOUT, RETRY_AT_AHEAD, SCHEDULE_DELAY,
    SCHEDULE_EVERY, SLEEP_DELAY, TIME, WAIT_TIMEOUT,
};
use turnwise_rules::ident::MAX_LEN;
use turnwise_rules::limits::{MAX_ATTEMPTS_MAX, MAX_ATTEMPTS_MIN};
use turnwise_rules::names::{
    CONTINUATION_ID_PREFIX, CONTINUATION_ORIGIN_KIND, ORIGIN_KINDS, RESERVED_INSTANCE_IDS,
    RESERVED_TYPE_PREFIX,
};

use crate::support::*;
use crate::{advance_ms, Fixture};

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

/// `max_attempts` is 1–100 (the time and duration fields are [`time_ranges`]'s).
pub async fn numeric_ranges(f: impl Fixture) {
    let b = f.backend();
    for max_attempts in [MAX_ATTEMPTS_MIN - 1, MAX_ATTEMPTS_MAX + 1] {
        let mut req = create_request("inst-range");
        req.max_attempts = Some(max_attempts);
        expect_invalid(
            b.create_instance(req).await,
            "max_attempts",
            &format!("create with max_attempts {max_attempts}"),
        );
    }
    expect_not_found(b.get_instance("inst-range").await, "refused creates");
    for (id, max_attempts) in [("inst-lo", MAX_ATTEMPTS_MIN), ("inst-hi", MAX_ATTEMPTS_MAX)] {
        let mut req = create_request(id);
        req.max_attempts = Some(max_attempts);
        create_with(&b, req).await;
    }
}

/// A schedule request on `workflow_id` named `name` firing by `spec`.
fn schedule_request(workflow_id: &str, name: &str, spec: ScheduleSpec) -> CreateScheduleRequest {
    CreateScheduleRequest {
        workflow_id: workflow_id.into(),
        name: name.into(),
        spec,
        message: json!(null),
        catch_up: CatchUp::Skip,
    }
}

/// Every time and duration field of the requests (the table of `turnwise::validate::Times`)
/// refuses a value outside its range with `400 invalid_request` naming the field, and nothing
/// is written; the ends of each range are accepted. `lease_ms` 100–86 400 000; an operation's
/// `timeout_ms` 100–86 400 000 and `heartbeat_timeout_ms` 100–`timeout_ms`; a sleep's
/// `delay_ms` at most 365 days; a wait's `timeout_ms` 1 ms–365 days; `retry_at_ms` and a
/// schedule's `spec.at_ms` and `spec.anchor_ms` a time from 1970 to 9999 (Unix ms
/// 0–253 402 300 799 999); a delayed message's `spec.delay_ms` at most 365 days; an interval's
/// `spec.every_ms` 1 s–365 days.
pub async fn time_ranges(f: impl Fixture) {
    let b = f.backend();
    for lease_ms in [LEASE.min - 1, LEASE.max + 1] {
        let mut req = create_request("inst-range");
        req.lease_ms = Some(lease_ms);
        expect_invalid(
            b.create_instance(req).await,
            "lease_ms",
            &format!("create with lease_ms {lease_ms}"),
        );
    }
    expect_not_found(b.get_instance("inst-range").await, "refused creates");

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
    let past_last = TIME.max as Millis + 1;
    for at in [-1, Millis::MIN, past_last] {
        let mut req = fail_request(&l, "WorkflowWait: later");
        req.retry_at_ms = Some(at);
        expect_invalid(
            b.fail(req).await,
            "retry_at_ms",
            &format!("a fail with retry_at_ms {at}"),
        );
    }
    let every = |every_ms, anchor_ms| ScheduleSpec::Every {
        every_ms,
        anchor_ms,
    };
    for (spec, param) in [
        (ScheduleSpec::Once { at_ms: -1 }, "spec.at_ms"),
        (ScheduleSpec::Once { at_ms: past_last }, "spec.at_ms"),
        (
            ScheduleSpec::After {
                delay_ms: SCHEDULE_DELAY.max + 1,
            },
            "spec.delay_ms",
        ),
        (every(SCHEDULE_EVERY.min - 1, None), "spec.every_ms"),
        (every(SCHEDULE_EVERY.max + 1, None), "spec.every_ms"),
        (every(60_000, Some(-1)), "spec.anchor_ms"),
        (every(60_000, Some(past_last)), "spec.anchor_ms"),
    ] {
        let what = format!("a schedule firing by {spec:?}");
        expect_invalid(
            b.create_schedule(schedule_request("inst-1", "s", spec))
                .await,
            param,
            &what,
        );
    }
    assert_unchanged(&b, "inst-1", &before, "times and durations out of range").await;
    let listed = ok(
        b.list_schedules(ListSchedulesQuery {
            workflow_id: Some("inst-1".into()),
            ..Default::default()
        })
        .await,
        "list schedules",
    );
    assert_eq!(listed.schedules, vec![], "no refused schedule was kept");

    // The ends of each range.
    for (id, lease_ms) in [("inst-lo", LEASE.min), ("inst-hi", LEASE.max)] {
        let mut req = create_request(id);
        req.lease_ms = Some(lease_ms);
        create_with(&b, req).await;
    }
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
    for (position, timeout) in [(2, WAIT_TIMEOUT.min), (3, WAIT_TIMEOUT.max)] {
        let id = format!("s{position}");
        signal(&b, "inst-1", 1, &id, "approve", json!(1)).await;
        let t = ok(
            b.wait_signal(wait_request(&l, position, &id, "approve", timeout))
                .await,
            &format!("a wait with timeout_ms {timeout}"),
        );
        assert_eq!(
            t.status,
            TurnStatus::Running,
            "the buffered signal is consumed"
        );
    }
    sleep(&b, &l, 4, "long-nap", SLEEP_DELAY.max).await;
    for (spec, name) in [
        (
            ScheduleSpec::Once {
                at_ms: TIME.max as Millis,
            },
            "at-last",
        ),
        (
            ScheduleSpec::After {
                delay_ms: SCHEDULE_DELAY.max,
            },
            "after-longest",
        ),
        (every(SCHEDULE_EVERY.max, Some(0)), "every-year"),
        (
            every(SCHEDULE_EVERY.min, Some(TIME.max as Millis)),
            "every-second",
        ),
    ] {
        let what = format!("a schedule firing by {spec:?}");
        ok(
            b.create_schedule(schedule_request("inst-1", name, spec))
                .await,
            &what,
        );
    }

    create(&b, "inst-2").await;
    send(&b, "inst-2", "m1", json!(null)).await;
    for (at, why) in [
        (0, "the first attempt"),
        (TIME.max as Millis, "after a second"),
    ] {
        let l = lease(&claim(&b, why).await);
        let mut req = fail_request(&l, "WorkflowWait: later");
        req.retry_at_ms = Some(at);
        let t = ok(b.fail(req).await, &format!("a fail with retry_at_ms {at}"));
        assert_eq!(t.status, TurnStatus::Waiting, "retry_at_ms {at} waits");
        advance_ms(&f, RETRY_AT_AHEAD.min);
    }
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
