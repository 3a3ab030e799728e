//! Size and count limits: refused with the right error before anything is written; values
//! exactly at a limit are accepted.

use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::Backend;

use crate::support::*;
use crate::Fixture;

use turnwise_rules::limits::{
    CHECKPOINT_BYTES, DETAILS_BYTES, MESSAGE_BYTES, ORIGIN_BYTES, OUTPUT_BYTES, PENDING_MESSAGES,
    RESULT_BYTES, SIGNAL_BYTES, STATE_BYTES, STEPS_PER_TURN, TURN_BYTES,
};

async fn running<B: Backend + ?Sized>(b: &B) -> Lease {
    create(b, "inst-1").await;
    send(b, "inst-1", "m1", json!(null)).await;
    lease(&claim(b, "m1 is ready").await)
}

/// A turn holds 64 steps (positions 0–63); position 64 is `422 step_limit`, for a step, a
/// sleep and a signal wait alike, and the claim's task carries the limit as `steps_max`.
pub async fn steps_per_turn(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let task = claim(&b, "m1 is ready").await;
    assert_eq!(
        task.steps_max,
        Some(STEPS_PER_TURN as u64),
        "the task carries the engine's step limit"
    );
    let l = lease(&task);
    let limit = u32::try_from(STEPS_PER_TURN).expect("the step limit fits a position");
    for i in 0..limit {
        step(&b, &l, i, &format!("s{i}"), json!(i)).await;
    }
    let before = snapshot(&b, "inst-1").await;
    expect_step_limit(
        b.operation(operation_request(&l, limit, "s64")).await,
        "an operation at position 64",
    );
    expect_step_limit(
        b.checkpoint(step_request(&l, limit, "s64", json!(64)))
            .await,
        "a step at position 64",
    );
    expect_step_limit(
        b.checkpoint(sleep_request(&l, limit, "nap", 1_000)).await,
        "a sleep at position 64",
    );
    expect_step_limit(
        b.wait_signal(WaitSignalRequest {
            lease: l.clone(),
            position: limit,
            key: "wait".into(),
            name: "go".into(),
            timeout_ms: 1_000,
        })
        .await,
        "a signal wait at position 64",
    );
    assert_unchanged(&b, "inst-1", &before, "a 65th step").await;
    complete(&b, &l, json!(null), json!(null)).await;
}

/// State is at most 64 KiB, at creation and at completion.
pub async fn state_size(f: impl Fixture) {
    let b = f.backend();
    let mut req = create_request("at-limit");
    req.state = json_of_len(STATE_BYTES);
    create_with(&b, req).await;
    let mut req = create_request("over");
    req.state = json_of_len(STATE_BYTES + 1);
    expect_too_large(
        b.create_instance(req).await,
        None,
        "a 64 KiB + 1 initial state",
    );
    expect_not_found(
        b.get_instance("over").await,
        "an instance refused for its state",
    );

    let l = running(&b).await;
    let before = snapshot(&b, "inst-1").await;
    expect_too_large(
        b.complete(complete_request(
            &l,
            json_of_len(STATE_BYTES + 1),
            json!(null),
        ))
        .await,
        None,
        "a completion with a 64 KiB + 1 state",
    );
    assert_unchanged(&b, "inst-1", &before, "a completion with too large a state").await;
    complete(&b, &l, json_of_len(STATE_BYTES), json!(null)).await;
}

/// A step output is at most 64 KiB.
pub async fn output_size(f: impl Fixture) {
    let b = f.backend();
    let l = running(&b).await;
    ok(
        b.operation(operation_request(&l, 0, "big")).await,
        "operation big",
    );
    let before = snapshot(&b, "inst-1").await;
    expect_too_large(
        b.checkpoint(step_request(&l, 0, "big", json_of_len(OUTPUT_BYTES + 1)))
            .await,
        None,
        "a 64 KiB + 1 step output",
    );
    assert_unchanged(&b, "inst-1", &before, "a too large step output").await;
    checkpoint_step(&b, &l, 0, "big", json_of_len(OUTPUT_BYTES)).await;
}

/// A reply is at most 64 KiB.
pub async fn result_size(f: impl Fixture) {
    let b = f.backend();
    let l = running(&b).await;
    let before = snapshot(&b, "inst-1").await;
    expect_too_large(
        b.complete(complete_request(
            &l,
            json!(null),
            json_of_len(RESULT_BYTES + 1),
        ))
        .await,
        None,
        "a 64 KiB + 1 reply",
    );
    assert_unchanged(&b, "inst-1", &before, "a too large reply").await;
    complete(&b, &l, json!(null), json_of_len(RESULT_BYTES)).await;
}

/// A message (and a continuation's message) is at most 32 KiB.
pub async fn message_size(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    let before = snapshot(&b, "inst-1").await;
    expect_too_large(
        b.send_message(message_request(
            "inst-1",
            "big",
            json_of_len(MESSAGE_BYTES + 1),
        ))
        .await,
        Some("message"),
        "a 32 KiB + 1 message",
    );
    assert_unchanged(&b, "inst-1", &before, "a too large message").await;
    send(&b, "inst-1", "m1", json_of_len(MESSAGE_BYTES)).await;

    let l = lease(&claim(&b, "m1 is ready").await);
    let before = snapshot(&b, "inst-1").await;
    let mut req = complete_request(&l, json!(null), json!(null));
    req.continuation = Some(Continuation {
        message: json_of_len(MESSAGE_BYTES + 1),
    });
    expect_too_large(b.complete(req).await, None, "a 32 KiB + 1 continuation");
    assert_unchanged(&b, "inst-1", &before, "a too large continuation").await;
    let mut req = complete_request(&l, json!(null), json!(null));
    req.continuation = Some(Continuation {
        message: json_of_len(MESSAGE_BYTES),
    });
    ok(b.complete(req).await, "a 32 KiB continuation");
}

/// A stored turn (message, steps, signals, reply) is at most 256 KiB: a step or a completion
/// that would pass it is refused naming `turn`.
pub async fn turn_size(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json_of_len(MESSAGE_BYTES)).await;
    let l = lease(&claim(&b, "m1 is ready").await);
    // Three values of this size fit beside the message; a fourth passes the turn limit.
    const VALUE: usize = 60_000;
    const {
        assert!(VALUE <= OUTPUT_BYTES && MESSAGE_BYTES + 3 * VALUE < TURN_BYTES);
        assert!(MESSAGE_BYTES + 4 * VALUE > TURN_BYTES);
    }
    for i in 0..3u32 {
        step(&b, &l, i, &format!("s{i}"), json_of_len(VALUE)).await;
    }
    // ~212 KB kept; one more 60 000-byte value passes 256 KiB.
    ok(
        b.operation(operation_request(&l, 3, "s3")).await,
        "operation s3",
    );
    let before = snapshot(&b, "inst-1").await;
    expect_too_large(
        b.checkpoint(step_request(&l, 3, "s3", json_of_len(VALUE)))
            .await,
        Some("turn"),
        "a step that takes the turn past 256 KiB",
    );
    expect_too_large(
        b.complete(complete_request(&l, json!(null), json_of_len(VALUE)))
            .await,
        Some("turn"),
        "a reply that takes the turn past 256 KiB",
    );
    assert_unchanged(&b, "inst-1", &before, "writes past the turn size").await;
    checkpoint_step(&b, &l, 3, "s3", json!("small")).await;
    complete(&b, &l, json!(null), json!("small")).await;
}

/// An instance holds 128 unfinished turns; the 129th message is `409 inbox_full`, while
/// repeats of admitted ids still answer.
pub async fn pending_messages(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    for i in 0..PENDING_MESSAGES {
        send(&b, "inst-1", &format!("m{i}"), json!(i)).await;
    }
    let before = snapshot(&b, "inst-1").await;
    assert_eq!(
        before.instance.as_ref().map(|i| i.pending_messages),
        Some(PENDING_MESSAGES as u64)
    );
    expect_limit(
        b.send_message(message_request(
            "inst-1",
            &format!("m{PENDING_MESSAGES}"),
            json!(PENDING_MESSAGES),
        ))
        .await,
        "inbox_full",
        "a 129th pending message",
    );
    assert_unchanged(&b, "inst-1", &before, "a message to a full inbox").await;
    let again = send(&b, "inst-1", "m7", json!(7)).await;
    assert_eq!(
        again.number, 8,
        "a repeat is answered even when the inbox is full"
    );
    assert_unchanged(&b, "inst-1", &before, "a repeat to a full inbox").await;

    run_next(&b, json!(null)).await;
    let t = send(
        &b,
        "inst-1",
        &format!("m{PENDING_MESSAGES}"),
        json!(PENDING_MESSAGES),
    )
    .await;
    assert_eq!(
        t.number,
        PENDING_MESSAGES as u64 + 1,
        "after one turn finished there is room again"
    );
}

/// A signal value is at most 32 KiB.
pub async fn signal_size(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let before = snapshot(&b, "inst-1").await;
    expect_too_large(
        b.signal(signal_request(
            "inst-1",
            1,
            "big",
            "data",
            json_of_len(SIGNAL_BYTES + 1),
        ))
        .await,
        None,
        "a 32 KiB + 1 signal value",
    );
    assert_unchanged(&b, "inst-1", &before, "a too large signal").await;
    signal(&b, "inst-1", 1, "ok", "data", json_of_len(SIGNAL_BYTES)).await;
}

/// Progress details are at most 8 KiB and the resume cursor at most 32 KiB.
pub async fn progress_sizes(f: impl Fixture) {
    let b = f.backend();
    let l = running(&b).await;
    ok(
        b.operation(operation_request(&l, 0, "a")).await,
        "operation a",
    );
    let before = snapshot(&b, "inst-1").await;
    expect_too_large(
        b.progress(progress_request(
            &l,
            "a",
            1,
            json_of_len(DETAILS_BYTES + 1),
            Value::Null,
        ))
        .await,
        None,
        "8 KiB + 1 of progress details",
    );
    expect_too_large(
        b.progress(progress_request(
            &l,
            "a",
            1,
            Value::Null,
            json_of_len(CHECKPOINT_BYTES + 1),
        ))
        .await,
        None,
        "a 32 KiB + 1 resume cursor",
    );
    assert_unchanged(&b, "inst-1", &before, "too large progress").await;
    ok(
        b.progress(progress_request(
            &l,
            "a",
            1,
            json_of_len(DETAILS_BYTES),
            json_of_len(CHECKPOINT_BYTES),
        ))
        .await,
        "progress exactly at both limits",
    );
}

/// A message origin is at most 1 KiB.
pub async fn origin_size(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    let origin = |note_len: usize| {
        let mut o = MessageOrigin::new("app");
        o.fields
            .insert("note".into(), Value::String("n".repeat(note_len)));
        o
    };
    let big = origin(1_100);
    assert!(json_len(&serde_json::to_value(&big).expect("origin serializes")) > ORIGIN_BYTES);
    let before = snapshot(&b, "inst-1").await;
    let mut req = message_request("inst-1", "m1", json!(null));
    req.origin = Some(big);
    expect_too_large(b.send_message(req).await, None, "an origin over 1 KiB");
    assert_unchanged(&b, "inst-1", &before, "a too large origin").await;
    let mut req = message_request("inst-1", "m1", json!(null));
    req.origin = Some(origin(900));
    let t = ok(b.send_message(req).await, "an origin under 1 KiB");
    assert_eq!(
        t.origin.map(|o| o.fields["note"].clone()),
        Some(json!("n".repeat(900)))
    );
}
