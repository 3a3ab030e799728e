//! Awaiting a turn's outcome ([`Backend::await_turn`], a turnwise extension): an await answers
//! once the turn is `completed`, `failed` or `cancelled`, is woken by the commit that settles
//! the turn (and by nothing else), and when its wait runs out answers the turn as it is then.
//!
//! The wait is real time, whatever clock the backend's engine runs on: a case that lets a wait
//! run out does not move the fixture's clock, and a case that expects a wake-up bounds it with
//! [`WOKEN_WITHIN`], well under the [`LONG_WAIT`] it asks for, so an await that merely ran out
//! its wait fails the case.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::task::JoinHandle;
use turnwise::protocol::*;
use turnwise::{Backend, EngineConfig, Result};

use crate::support::*;
use crate::{advance_ms, Fixture};

/// The wait an await asks for when the case expects it to be woken before it runs out.
pub const LONG_WAIT: Duration = Duration::from_secs(5);

/// How long (real time) a case lets an await that must be woken take to answer: under
/// [`LONG_WAIT`], so only a wake-up meets it.
pub const WOKEN_WITHIN: Duration = Duration::from_secs(4);

/// The wait an await asks for when the case expects it to run out.
pub const SHORT_WAIT: Duration = Duration::from_millis(200);

/// The cap on waits that [`wait_is_capped`] runs under.
pub const CAPPED_WAIT: Duration = Duration::from_millis(300);

/// The default engine configuration with every wait (claims and awaits) capped at
/// [`CAPPED_WAIT`].
pub fn capped_config() -> EngineConfig {
    let mut config = EngineConfig::default();
    config.max_claim_wait = CAPPED_WAIT;
    config
}

fn query(id: &str, turn: u64) -> TurnQuery {
    TurnQuery {
        id: id.into(),
        turn,
    }
}

/// Start an await of turn `turn` of `id` that waits up to `wait`, in the background.
pub fn spawn_await<B>(
    b: &B,
    id: &str,
    turn: u64,
    wait: Duration,
) -> JoinHandle<Result<WorkflowTurn>>
where
    B: Backend + Clone + 'static,
{
    let b = b.clone();
    let q = query(id, turn);
    tokio::spawn(async move { b.await_turn(q, wait).await })
}

/// Give a spawned await time to reach the backend, and check it is still waiting.
pub async fn let_await_park(handle: &JoinHandle<Result<WorkflowTurn>>, why: &str) {
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !handle.is_finished(),
        "an await with a {LONG_WAIT:?} wait answered at once, but the turn has no outcome \
         ({why})"
    );
}

/// Wait (at most [`WOKEN_WITHIN`] of real time) for a spawned await's answer.
pub async fn finish_await(
    handle: JoinHandle<Result<WorkflowTurn>>,
    what: &str,
) -> Result<WorkflowTurn> {
    match tokio::time::timeout(WOKEN_WITHIN, handle).await {
        Err(_) => panic!(
            "{what}: the await was not answered within {WOKEN_WITHIN:?} (an await must be \
             woken by the commit that settles its turn, not by its own wait of {LONG_WAIT:?})"
        ),
        Ok(Err(join)) => panic!("{what}: the await task panicked: {join}"),
        Ok(Ok(res)) => res,
    }
}

/// Await turn `turn` of `id` with [`LONG_WAIT`] and expect an answer within [`WOKEN_WITHIN`]:
/// for turns that already have an outcome, or that do not exist.
pub async fn await_now<B>(b: &B, id: &str, turn: u64, what: &str) -> Result<WorkflowTurn>
where
    B: Backend + Clone + 'static,
{
    finish_await(spawn_await(b, id, turn, LONG_WAIT), what).await
}

/// Await turn `turn` of `id` with a wait that must run out: the answer (the turn as it is),
/// checked to come no sooner than the wait.
pub async fn await_ran_out<B>(
    b: &B,
    id: &str,
    turn: u64,
    wait: Duration,
    what: &str,
) -> WorkflowTurn
where
    B: Backend + ?Sized,
{
    let asked = Instant::now();
    let answer = tokio::time::timeout(wait + WOKEN_WITHIN, b.await_turn(query(id, turn), wait))
        .await
        .unwrap_or_else(|_| {
            panic!("{what}: an await with a {wait:?} wait was still waiting long after it")
        });
    let took = asked.elapsed();
    let t = ok(answer, what);
    assert!(
        took >= wait,
        "{what}: the turn has no outcome ({}), so the await must hold its whole wait of \
         {wait:?}, but it answered after {took:?}",
        t.status
    );
    t
}

/// An await of a turn that already has an outcome answers at once with it: a completed turn
/// with its result and state, a failed one with its error, a cancelled one.
pub async fn settled_turn_answers_at_once(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!({"q": 1})).await;
    let task = claim(&b, "m1 is ready").await;
    let l = lease(&task);
    step(&b, &l, 0, "a", json!("out")).await;
    complete(&b, &l, json!({"count": 1}), json!({"answer": 42})).await;

    let t = ok(
        await_now(&b, "inst-1", 1, "an await of a completed turn").await,
        "await turn 1",
    );
    assert_eq!(t.status, TurnStatus::Completed);
    assert_eq!(t.number, 1);
    assert_eq!(
        t.result,
        json!({"answer": 42}),
        "the await answers the result"
    );
    assert_eq!(t.state_after, json!({"count": 1}));
    assert_eq!(t.steps.len(), 1, "the turn as a read shows it");
    assert_eq!(
        t,
        turn(&b, "inst-1", 1).await,
        "the same turn a read answers"
    );

    send(&b, "inst-1", "m2", json!(null)).await;
    send(&b, "inst-1", "m3", json!(null)).await;
    let task = claim(&b, "m2 is ready").await;
    fail_for_good(&b, &lease(&task), "WorkflowError: no stock").await;
    control(&b, control_turn("inst-1", ControlAction::CancelTurn, 3)).await;

    let t = ok(
        await_now(&b, "inst-1", 2, "an await of a failed turn").await,
        "await turn 2",
    );
    assert_eq!(t.status, TurnStatus::Failed);
    assert_eq!(t.error.as_deref(), Some("WorkflowError: no stock"));
    let t = ok(
        await_now(&b, "inst-1", 3, "an await of a cancelled turn").await,
        "await turn 3",
    );
    assert_eq!(t.status, TurnStatus::Cancelled);
}

/// An await started while the turn is queued is woken by its completion and answers the
/// completed turn; the claim, the operation and the step before it do not end the wait.
pub async fn woken_by_complete(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!({"q": 1})).await;
    let waiting = spawn_await(&b, "inst-1", 1, LONG_WAIT);
    let_await_park(&waiting, "turn 1 is queued").await;

    let task = claim(&b, "m1 is ready").await;
    let l = lease(&task);
    step(&b, &l, 0, "a", json!("out")).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !waiting.is_finished(),
        "a claim, an operation and a step are not outcomes, yet the await answered"
    );
    complete(&b, &l, json!({"count": 1}), json!("done")).await;

    let t = ok(
        finish_await(waiting, "an await while the turn completes").await,
        "await turn 1",
    );
    assert_eq!(t.status, TurnStatus::Completed, "woken by the completion");
    assert_eq!(t.result, json!("done"));
    assert_eq!(t.state_after, json!({"count": 1}));
    assert_eq!(t.steps.len(), 1);
}

/// An await is woken by a non-retryable fail and answers `failed` with the error; a retryable
/// fail before it, which queues the turn again, does not end the wait.
pub async fn woken_by_failure(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await; // three attempts
    send(&b, "inst-1", "m1", json!(null)).await;
    let waiting = spawn_await(&b, "inst-1", 1, LONG_WAIT);
    let_await_park(&waiting, "turn 1 is queued").await;

    let first = claim(&b, "m1 is ready").await;
    fail(&b, &lease(&first), "RuntimeError: flaky").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiting.is_finished(),
        "a retryable fail queues the turn again, which is no outcome, yet the await answered"
    );
    advance_ms(&f, 1_000);
    let second = claim(&b, "the 1 s backoff passed").await;
    fail_for_good(&b, &lease(&second), "WorkflowError: out of stock").await;

    let t = ok(
        finish_await(waiting, "an await while the turn fails for good").await,
        "await turn 1",
    );
    assert_eq!(t.status, TurnStatus::Failed, "woken by the failure");
    assert_eq!(
        t.error.as_deref(),
        Some("WorkflowError: out of stock"),
        "the failed turn keeps the error text"
    );
    assert_eq!(t.attempt, 2);
}

/// An await is woken when an operator cancels the turn (here while it waits for a signal), and
/// answers `cancelled`.
pub async fn woken_by_cancel(f: impl Fixture) {
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

    let waiting = spawn_await(&b, "inst-1", 1, LONG_WAIT);
    let_await_park(&waiting, "turn 1 waits for a signal").await;
    control(&b, control_turn("inst-1", ControlAction::CancelTurn, 1)).await;

    let t = ok(
        finish_await(waiting, "an await while the turn is cancelled").await,
        "await turn 1",
    );
    assert_eq!(t.status, TurnStatus::Cancelled, "woken by the cancel");
    assert_eq!(
        instance(&b, "inst-1").await.state,
        json!({"count": 0}),
        "cancel leaves the state"
    );
}

/// A wait that runs out answers the turn as it is then (`queued`, `running`, `waiting`), no
/// sooner than the wait, in real time: the fixture's clock is not moved. A zero wait reads at
/// once.
pub async fn wait_runs_out(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!({"q": 1})).await;

    let t = await_ran_out(&b, "inst-1", 1, SHORT_WAIT, "an await of a queued turn").await;
    assert_eq!(t.status, TurnStatus::Queued, "the turn as it is: queued");
    assert_eq!(t.message, json!({"q": 1}));
    let t = ok(
        b.await_turn(query("inst-1", 1), Duration::ZERO).await,
        "an await with a zero wait",
    );
    assert_eq!(t.status, TurnStatus::Queued);

    let task = claim(&b, "m1 is ready").await;
    let t = await_ran_out(&b, "inst-1", 1, SHORT_WAIT, "an await of a running turn").await;
    assert_eq!(t.status, TurnStatus::Running, "the turn as it is: running");
    assert_eq!(t.attempt, 1);

    sleep(&b, &lease(&task), 0, "nap", 60_000).await;
    let t = await_ran_out(&b, "inst-1", 1, SHORT_WAIT, "an await of a sleeping turn").await;
    assert_eq!(t.status, TurnStatus::Waiting, "the turn as it is: waiting");
    assert_eq!(
        t,
        turn(&b, "inst-1", 1).await,
        "the same turn a read answers"
    );
}

/// A commit that settles a turn of another instance (or of the same id in another namespace)
/// does not end an await early: it still holds its whole wait and answers no outcome.
pub async fn other_instances_do_not_wake(f: impl Fixture) {
    let b = f.backend();
    let elsewhere = f.backend_in("ns-other");
    for id in ["inst-a", "inst-b"] {
        create(&b, id).await;
    }
    create(&elsewhere, "inst-a").await;
    send(&b, "inst-b", "m1", json!(null)).await;
    send(&elsewhere, "inst-a", "m1", json!(null)).await;
    let on_b = claim(&b, "inst-b's m1 is the only ready turn").await;
    assert_eq!(on_b.turn.workflow_id, "inst-b");
    let on_other = claim(&elsewhere, "inst-a's m1 in ns-other is ready").await;
    send(&b, "inst-a", "m1", json!(null)).await;

    let wait = Duration::from_millis(300);
    let watcher = b.clone();
    let waiting = tokio::spawn(async move {
        await_ran_out(
            &watcher,
            "inst-a",
            1,
            wait,
            "an await while other instances settle turns",
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    complete(&b, &lease(&on_b), json!({"count": 1}), json!("b")).await;
    complete(
        &elsewhere,
        &lease(&on_other),
        json!({"count": 1}),
        json!("x"),
    )
    .await;

    let t = match tokio::time::timeout(wait + WOKEN_WITHIN, waiting).await {
        Err(_) => panic!("the await of inst-a was still waiting long after its wait"),
        Ok(joined) => joined.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic())),
    };
    assert_eq!(
        t.status,
        TurnStatus::Queued,
        "inst-a's turn has no outcome: the await answers it as it is"
    );
    assert_eq!(turn(&b, "inst-b", 1).await.status, TurnStatus::Completed);
}

/// Deleting the instance wakes an await, which answers `404 not_found`.
pub async fn delete_wakes_with_not_found(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let waiting = spawn_await(&b, "inst-1", 1, LONG_WAIT);
    let_await_park(&waiting, "turn 1 is queued").await;

    let deleted = ok(
        b.delete_instance(DeleteRequest {
            workflow_id: "inst-1".into(),
        })
        .await,
        "delete inst-1",
    );
    assert!(deleted.deleted);
    expect_not_found(
        finish_await(waiting, "an await while its instance is deleted").await,
        "an await whose instance was deleted",
    );
}

/// An await of an unknown instance or turn answers `404 not_found` at once, and an await with
/// a bad instance id is `400` naming `id`.
pub async fn unknown_turn_not_found(f: impl Fixture) {
    let b = f.backend();
    expect_not_found(
        await_now(&b, "nobody", 1, "an await of an unknown instance").await,
        "an await of an unknown instance",
    );
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    for missing in [0, 2, 99] {
        expect_not_found(
            await_now(&b, "inst-1", missing, "an await of an unknown turn").await,
            &format!("an await of turn {missing}, which does not exist"),
        );
    }
    expect_invalid(
        await_now(&b, "not a valid id!", 1, "an await with a bad id").await,
        "id",
        "an await with an invalid instance id",
    );
}

/// An await asking for longer than the backend's cap on waits (here [`CAPPED_WAIT`], run with
/// [`capped_config`]) answers the turn as it is once the cap has passed.
pub async fn wait_is_capped(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let asked = Instant::now();
    let answer = tokio::time::timeout(
        WOKEN_WITHIN,
        b.await_turn(query("inst-1", 1), Duration::from_secs(60)),
    )
    .await
    .unwrap_or_else(|_| {
        panic!(
            "an await asking for 60 s under a cap of {CAPPED_WAIT:?} was still waiting after \
             {WOKEN_WITHIN:?}"
        )
    });
    let t = ok(answer, "an await past the cap");
    assert_eq!(t.status, TurnStatus::Queued, "the turn as it is");
    assert!(
        asked.elapsed() >= CAPPED_WAIT,
        "the await still holds the capped wait of {CAPPED_WAIT:?}, it answered after {:?}",
        asked.elapsed()
    );
}

/// A turn whose last attempt's lease expires fails for good; the claim that settles it (and
/// commits the failure) wakes an await, which answers `failed`.
pub async fn woken_by_settled_lease_expiry(f: impl Fixture) {
    let b = f.backend();
    let mut req = create_request("inst-1");
    req.lease_ms = Some(1_000);
    req.max_attempts = Some(1);
    create_with(&b, req).await;
    send(&b, "inst-1", "m1", json!(null)).await;
    claim(&b, "m1 is ready").await;
    let waiting = spawn_await(&b, "inst-1", 1, LONG_WAIT);
    let_await_park(&waiting, "turn 1 runs under a live lease").await;

    advance_ms(&f, 1_000);
    assert_no_claim(&b, "turn 1 ran out of attempts when its lease expired").await;
    let t = ok(
        finish_await(waiting, "an await while the last lease expires").await,
        "await turn 1",
    );
    assert_eq!(t.status, TurnStatus::Failed, "out of attempts: failed");
    assert_eq!(t.attempt, 1);
}
