//! Child workflows (a turnwise extension): a message whose origin is of kind `workflow` and
//! names a parent turn and a reply signal has its turn's outcome delivered to that parent turn
//! as a signal, once, when the turn ends: completed (with the reply), failed for good (with the
//! error) or cancelled. The outcome is delivered before the call that ended the child's turn
//! is answered, so every backend shows it at once.

use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::Backend;

use crate::support::*;
use crate::Fixture;

const PARENT: &str = "parent-1";
const CHILD: &str = "child-1";
const SIGNAL: &str = "child.price";

/// A message for [`CHILD`] sent by turn 1 of [`PARENT`], which waits on [`SIGNAL`].
fn child_message(id: &str, message: Value) -> MessageRequest {
    let mut origin = MessageOrigin::new("workflow");
    origin.fields.insert("parent_id".into(), json!(PARENT));
    origin.fields.insert("parent_turn".into(), json!(1));
    origin.fields.insert("reply_signal".into(), json!(SIGNAL));
    MessageRequest {
        workflow_id: CHILD.into(),
        id: id.into(),
        message,
        origin: Some(origin),
    }
}

/// The parent's turn 1 claimed and waiting on [`SIGNAL`]; the child created with one message
/// from it, queued.
async fn parent_waits<B: Backend + ?Sized>(b: &B) {
    create(b, PARENT).await;
    create(b, CHILD).await;
    send(b, PARENT, "m1", json!("buy")).await;
    let task = claim(b, "the parent's turn is ready").await;
    assert_eq!(task.turn.workflow_id, PARENT);
    let waited = ok(
        b.wait_signal(wait_request(&lease(&task), 0, "price", SIGNAL, 60_000))
            .await,
        "the parent waits for its child",
    );
    assert_eq!(waited.status, TurnStatus::Waiting, "the parent is released");
    let sent = ok(
        b.send_message(child_message("price-1", json!("pear")))
            .await,
        "a message with a `workflow` origin is admitted",
    );
    let origin = sent.origin.expect("the child's turn keeps its origin");
    assert_eq!(origin.kind, "workflow");
    assert_eq!(origin.fields["parent_id"], json!(PARENT));
}

/// The child's turn, claimed.
async fn claim_child<B: Backend + ?Sized>(b: &B) -> Lease {
    let task = claim(b, "the child's turn is ready").await;
    assert_eq!(
        task.turn.workflow_id, CHILD,
        "the parent waits; the child runs"
    );
    lease(&task)
}

/// The parent's turn 1 after delivery: ready again, its wait resolved with `outcome`, which
/// arrived once as signal [`SIGNAL`].
async fn assert_delivered<B: Backend + ?Sized>(b: &B, outcome: Value) {
    let t = turn(b, PARENT, 1).await;
    assert_eq!(
        t.status,
        TurnStatus::Queued,
        "the parent's turn is ready again once the child's outcome arrived"
    );
    assert_eq!(
        t.steps[0].output,
        json!({"received": true, "value": outcome}),
        "the parent's wait holds the child's outcome"
    );
    let signals = t.signals.unwrap_or_default();
    assert_eq!(signals.len(), 1, "delivered once: {signals:?}");
    assert_eq!(
        (signals[0].id.as_str(), signals[0].name.as_str()),
        (SIGNAL, SIGNAL)
    );
    let task = claim(b, "the parent's turn is ready").await;
    assert_eq!(
        (task.turn.workflow_id.as_str(), task.turn.number),
        (PARENT, 1)
    );
}

/// A completed child turn's reply reaches the waiting parent turn.
pub async fn reply_reaches_parent(f: impl Fixture) {
    let b = f.backend();
    parent_waits(&b).await;
    let l = claim_child(&b).await;
    complete(&b, &l, json!({"priced": 1}), json!({"cents": 400})).await;
    let outcome =
        json!({"status": "completed", "workflow_id": CHILD, "turn": 1, "reply": {"cents": 400}});
    assert_delivered(&b, outcome).await;
}

/// A child's outcome is delivered under the parent's reply signal even when the parent's
/// workflow has a registered schema that declares no such signal: only a client's signals are
/// held to the declared names.
pub async fn reply_reaches_parent_whose_schema_declares_no_signal(f: impl Fixture) {
    let b = f.backend();
    let document = SchemaDocument {
        workflow_type: TYPE.into(),
        version: VERSION.into(),
        message: Value::Null,
        signals: Default::default(),
        state: Value::Null,
        reply: Value::Null,
        manifest: None,
    };
    ok(
        b.register_schema(&document).await,
        "register a schema declaring no signal",
    );
    parent_waits(&b).await;
    let l = claim_child(&b).await;
    complete(&b, &l, json!({"priced": 1}), json!({"cents": 400})).await;
    let outcome =
        json!({"status": "completed", "workflow_id": CHILD, "turn": 1, "reply": {"cents": 400}});
    assert_delivered(&b, outcome).await;
}

/// A child turn that fails for good reaches the parent with its error.
pub async fn failure_reaches_parent(f: impl Fixture) {
    let b = f.backend();
    parent_waits(&b).await;
    let l = claim_child(&b).await;
    fail_for_good(&b, &l, "no price").await;
    let outcome = json!({"status": "failed", "workflow_id": CHILD, "turn": 1, "error": "no price"});
    assert_delivered(&b, outcome).await;
}

/// A retryable failure is not an outcome: nothing is delivered until the turn ends.
pub async fn retryable_failure_delivers_nothing(f: impl Fixture) {
    let b = f.backend();
    parent_waits(&b).await;
    let l = claim_child(&b).await;
    fail(&b, &l, "flaky").await;
    let t = turn(&b, PARENT, 1).await;
    assert_eq!(t.status, TurnStatus::Waiting, "the parent still waits");
    assert!(
        t.signals.unwrap_or_default().is_empty(),
        "nothing delivered"
    );
}

/// An operator's cancel of the child's turn reaches the parent as `cancelled`.
pub async fn cancel_reaches_parent(f: impl Fixture) {
    let b = f.backend();
    parent_waits(&b).await;
    control(&b, control_turn(CHILD, ControlAction::CancelTurn, 1)).await;
    let outcome = json!({"status": "cancelled", "workflow_id": CHILD, "turn": 1});
    assert_delivered(&b, outcome).await;
}

/// An outcome that arrives before the parent waits is buffered on the parent's turn, and the
/// wait takes it at once.
pub async fn outcome_before_wait_is_buffered(f: impl Fixture) {
    let b = f.backend();
    create(&b, PARENT).await;
    create(&b, CHILD).await;
    send(&b, PARENT, "m1", json!("buy")).await;
    let parent = claim(&b, "the parent's turn is ready").await;
    ok(
        b.send_message(child_message("price-1", json!("pear")))
            .await,
        "send to the child",
    );
    let l = claim_child(&b).await;
    complete(&b, &l, json!(null), json!(7)).await;
    let buffered = turn(&b, PARENT, 1).await;
    assert_eq!(
        buffered.status,
        TurnStatus::Running,
        "the parent still runs"
    );
    assert_eq!(
        buffered.signals.unwrap_or_default().len(),
        1,
        "the outcome is buffered"
    );
    let waited = ok(
        b.wait_signal(wait_request(&lease(&parent), 0, "price", SIGNAL, 60_000))
            .await,
        "the parent waits",
    );
    assert_eq!(
        waited.status,
        TurnStatus::Running,
        "the wait takes it at once"
    );
    assert_eq!(
        waited.steps[0].output["value"],
        json!({"status": "completed", "workflow_id": CHILD, "turn": 1, "reply": 7})
    );
}

/// An outcome for a parent turn that has ended (or a parent that is gone) is dropped: the
/// child's turn ends as usual and the parent's finished turn is not touched.
pub async fn outcome_for_finished_parent_is_dropped(f: impl Fixture) {
    let b = f.backend();
    create(&b, PARENT).await;
    create(&b, CHILD).await;
    send(&b, PARENT, "m1", json!("buy")).await;
    run_next(&b, json!({"count": 1})).await;
    ok(
        b.send_message(child_message("price-1", json!("pear")))
            .await,
        "send to the child",
    );
    let l = claim_child(&b).await;
    let done = complete(&b, &l, json!(null), json!(7)).await;
    assert_eq!(done.status, TurnStatus::Completed);
    let t = turn(&b, PARENT, 1).await;
    assert_eq!(t.status, TurnStatus::Completed);
    assert!(
        t.signals.unwrap_or_default().is_empty(),
        "a finished turn takes no signal"
    );
    assert_no_claim(&b, "both turns are over").await;
    // And a parent that does not exist at all.
    let mut gone = child_message("price-2", json!("fig"));
    if let Some(o) = gone.origin.as_mut() {
        o.fields.insert("parent_id".into(), json!("no-such-parent"));
    }
    ok(b.send_message(gone).await, "send to the child");
    let l = claim_child(&b).await;
    complete(&b, &l, json!(null), json!(8)).await;
    assert_eq!(instance(&b, CHILD).await.pending_messages, 0);
    assert_no_claim(&b, "both turns are over").await;
}
