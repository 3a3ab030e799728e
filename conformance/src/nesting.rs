//! The nesting limit: every user value may nest [`MAX_DEPTH`] arrays and objects deep, one
//! level more is refused with `400 invalid_request` naming the field, before anything is
//! written — on every route that carries a user value.

use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::validate::MAX_DEPTH;
use turnwise::Backend;

use crate::support::*;
use crate::Fixture;

/// A value nesting `levels` arrays and objects deep (alternately), around the number 1.
///
/// Built without recursion, so any depth can be made; a value much deeper than the limit is
/// also expensive to drop (serde_json drops recursively), so tests keep them moderate.
pub fn deep(levels: usize) -> Value {
    let mut v = json!(1);
    for i in 0..levels {
        v = if i % 2 == 0 {
            Value::Array(vec![v])
        } else {
            Value::Object([("k".to_owned(), v)].into_iter().collect())
        };
    }
    v
}

/// A value at the limit is accepted and read back whole on every value-carrying route; a value
/// one level deeper is refused there with `400 invalid_request` naming the field, and nothing
/// is written.
pub async fn nesting_limit_on_every_route(f: impl Fixture) {
    let b = f.backend();
    let at = deep(MAX_DEPTH);
    let over = deep(MAX_DEPTH + 1);

    // create: state
    let mut req = create_request("deep-state");
    req.state = over.clone();
    expect_invalid(
        b.create_instance(req).await,
        "state",
        "a create with a too-deep state",
    );
    expect_not_found(b.get_instance("deep-state").await, "the refused create");
    let mut req = create_request("deep");
    req.state = at.clone();
    create_with(&b, req).await;
    assert_eq!(
        instance(&b, "deep").await.state,
        at,
        "a state at the limit, read back"
    );

    // send: message and origin
    let before = snapshot(&b, "deep").await;
    expect_invalid(
        b.send_message(message_request("deep", "m-over", over.clone()))
            .await,
        "message",
        "a message past the limit",
    );
    let mut origin = MessageOrigin::new("app");
    origin.fields.insert("note".into(), deep(MAX_DEPTH));
    let mut req = message_request("deep", "m-origin", json!(1));
    req.origin = Some(origin);
    expect_invalid(
        b.send_message(req).await,
        "origin",
        "an origin past the limit",
    );
    assert_unchanged(&b, "deep", &before, "refused deep messages").await;
    send(&b, "deep", "m1", at.clone()).await;
    assert_eq!(
        turn(&b, "deep", 1).await.message,
        at,
        "a message at the limit"
    );

    // signal: value (buffered on the queued turn)
    let before = snapshot(&b, "deep").await;
    expect_invalid(
        b.signal(signal_request(
            "deep",
            1,
            "sig-over",
            "approval",
            over.clone(),
        ))
        .await,
        "value",
        "a signal value past the limit",
    );
    assert_unchanged(&b, "deep", &before, "a refused deep signal").await;
    signal(&b, "deep", 1, "sig-1", "approval", at.clone()).await;

    // worker routes: progress details and cursor, step output, completion
    let l = lease(&claim(&b, "the deep message is ready").await);
    ok(
        b.operation(operation_request(&l, 0, "s")).await,
        "operation",
    );
    let before = snapshot(&b, "deep").await;
    expect_invalid(
        b.progress(progress_request(&l, "s", 1, over.clone(), json!(null)))
            .await,
        "details",
        "progress details past the limit",
    );
    expect_invalid(
        b.progress(progress_request(&l, "s", 1, json!({}), over.clone()))
            .await,
        "checkpoint",
        "a resume cursor past the limit",
    );
    expect_invalid(
        b.checkpoint(step_request(&l, 0, "s", over.clone())).await,
        "output",
        "a step output past the limit",
    );
    assert_unchanged(&b, "deep", &before, "refused deep worker writes").await;
    ok(
        b.progress(progress_request(&l, "s", 1, at.clone(), at.clone()))
            .await,
        "progress at the limit",
    );
    let op = turn(&b, "deep", 1).await.operation.expect("the operation");
    assert_eq!((op.details, op.checkpoint), (at.clone(), at.clone()));
    checkpoint_step(&b, &l, 0, "s", at.clone()).await;
    let waited = ok(
        b.wait_signal(wait_request(&l, 1, "w", "approval", 60_000))
            .await,
        "a wait that consumes the buffered deep signal",
    );
    assert_eq!(
        waited.steps[1].output,
        json!({"received": true, "value": at}),
        "the deep signal value, consumed (one level deeper inside the step)"
    );

    let before = snapshot(&b, "deep").await;
    for (field, req) in [
        ("state", complete_request(&l, over.clone(), json!(null))),
        ("result", complete_request(&l, json!(null), over.clone())),
        (
            "continuation.message",
            CompleteRequest {
                continuation: Some(Continuation {
                    message: over.clone(),
                }),
                ..complete_request(&l, json!(null), json!(null))
            },
        ),
    ] {
        expect_invalid(
            b.complete(req).await,
            field,
            &format!("a completion with `{field}` past the limit"),
        );
    }
    assert_unchanged(&b, "deep", &before, "refused deep completions").await;
    ok(
        b.complete(CompleteRequest {
            continuation: Some(Continuation {
                message: at.clone(),
            }),
            ..complete_request(&l, at.clone(), at.clone())
        })
        .await,
        "a completion at the limit",
    );
    let done = turn(&b, "deep", 1).await;
    assert_eq!((done.result, done.state_after), (at.clone(), at.clone()));
    assert_eq!(turn(&b, "deep", 2).await.message, at, "the continuation");
    assert_eq!(instance(&b, "deep").await.state, at);
}
