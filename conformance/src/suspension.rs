//! Turns suspended by a replay mismatch (a turnwise extension): a worker's `fail` with a
//! mismatch report suspends the turn (no attempt counted, nothing due, the inbox kept in
//! order, an instance event), and an operator restarts the turn (from its last accepted step or
//! from scratch), forks the instance or cancels the turn. Each way out is refused with `409
//! turn_not_suspended` when nothing is suspended, answers an exact repeat as the first one
//! without recording anything new, and records who asked.

use serde_json::json;
use turnwise::manifest::grammar::Saved;
use turnwise::manifest::CallKind;
use turnwise::protocol::*;
use turnwise::{Backend, Error};

use crate::support::*;
use crate::{advance_ms, Fixture};

const ID: &str = "inst-1";
const DAY_MS: u64 = 24 * 3600 * 1000;

/// The report of a worker whose code calls step `fraud` where turn 1 saved sleep `nap`.
fn report() -> MismatchReport {
    MismatchReport {
        version: VERSION.into(),
        position: 1,
        saved: vec![
            Saved::new(CallKind::Step, "charge"),
            Saved::new(CallKind::Sleep, "nap"),
        ],
        found: Some(Saved::new(CallKind::Step, "fraud")),
        at: Some("src/order.rs:42".into()),
        message: "position 1: the saved turn has sleep `nap` but the code now calls step `fraud`"
            .into(),
    }
}

/// The worker's fail that suspends the leased turn with `report`.
fn suspend_request(lease: &Lease, report: MismatchReport) -> FailRequest {
    let mut req = fail_request(lease, "ReplayMismatch: the code changed");
    req.mismatch = Some(report);
    req
}

fn restart(turn: u64, from: RestartFrom, by: &str) -> RestartTurnRequest {
    RestartTurnRequest {
        workflow_id: ID.into(),
        turn,
        from,
        by: Some(by.into()),
    }
}

fn fork(new_id: &str, by: &str) -> ForkInstanceRequest {
    ForkInstanceRequest {
        workflow_id: ID.into(),
        new_id: new_id.into(),
        by: Some(by.into()),
    }
}

/// `inst-1` with state `{"count": 5}` (turn 1 completed it) and messages `m1` (turn 2) and
/// `m2` (turn 3); turn 2 saved step `charge` and sleep `nap`, woke, and its next attempt
/// suspended it with [`report`]. Answers the suspended turn.
async fn suspended<B: Backend + ?Sized>(f: &impl Fixture, b: &B) -> WorkflowTurn {
    create(b, ID).await;
    send(b, ID, "m0", json!({"n": 0})).await;
    let t0 = claim(b, "m0 is ready").await;
    complete(b, &lease(&t0), json!({"count": 5}), json!(null)).await;
    send(b, ID, "m1", json!({"card": "4111-SECRET"})).await;
    send(b, ID, "m2", json!({"n": 2})).await;
    let task = claim(b, "m1 is ready").await;
    let l = lease(&task);
    step(b, &l, 0, "charge", json!({"charged": "4111-SECRET"})).await;
    sleep(b, &l, 1, "nap", 1000).await;
    advance_ms(f, 1000);
    let task = claim(b, "the nap is over").await;
    assert_eq!(task.turn.attempt, 1, "a sleep resumes the same attempt");
    let l = lease(&task);
    let t = ok(
        b.fail(suspend_request(&l, report())).await,
        "fail with a mismatch report",
    );
    assert_eq!(
        t.status,
        TurnStatus::Suspended,
        "a mismatch suspends the turn"
    );
    assert_eq!(t.mismatch, Some(report()), "the turn carries the report");
    t
}

/// A mismatch suspends the turn in that attempt: no attempt counted, no retry however much time
/// passes, the inbox kept in order behind it, the lease ended, the instance `suspended` with a
/// `suspend` event; a waiting read answers at once.
pub async fn mismatch_suspends_the_turn(f: impl Fixture) {
    let b = f.backend();
    let t = suspended(&f, &b).await;
    assert_eq!(t.attempt, 1, "no attempt is counted");
    assert!(
        t.error
            .as_deref()
            .is_some_and(|e| e.contains("ReplayMismatch")),
        "{t:?}"
    );
    advance_ms(&f, DAY_MS);
    assert_no_claim(&b, "a suspended head is not retried").await;
    let t = turn(&b, ID, 2).await;
    assert_eq!((t.status, t.attempt), (TurnStatus::Suspended, 1));
    assert_eq!(t.deadline_ms, None, "the lease ended");
    let inst = instance(&b, ID).await;
    assert_eq!(inst.status, InstanceStatus::Suspended);
    assert_eq!(inst.pending_messages, 2);
    let event = inst.events.last().expect("the suspension is recorded");
    assert_eq!(
        (event.action.as_str(), event.turn),
        (InstanceEvent::SUSPEND, Some(2))
    );
    let entries = inbox(&b, ID).await;
    assert_eq!(inbox_numbers(&entries), [2, 3], "the inbox keeps its order");
    assert_eq!(entries[1].status, TurnStatus::Queued);
    let waited = b
        .await_turn(
            TurnQuery {
                id: ID.into(),
                turn: 2,
            },
            std::time::Duration::from_secs(5),
        )
        .await;
    assert_eq!(
        ok(waited, "await the suspended turn").status,
        TurnStatus::Suspended
    );
    let text = serde_json::to_string(&turn(&b, ID, 2).await.mismatch).unwrap_or_default();
    assert!(
        !text.contains("SECRET"),
        "the report holds no value: {text}"
    );
}

/// A report that does not fit the turn is refused, and nothing is written.
pub async fn bad_reports_are_refused(f: impl Fixture) {
    let b = f.backend();
    create(&b, ID).await;
    send(&b, ID, "m1", json!(null)).await;
    let task = claim(&b, "m1 is ready").await;
    let l = lease(&task);
    let before = snapshot(&b, ID).await;
    let mut other = report();
    other.version = "v9".into();
    expect_invalid(
        b.fail(suspend_request(&l, other)).await,
        "mismatch.version",
        "a report of another version",
    );
    let mut past = report();
    past.position = 3;
    expect_invalid(
        b.fail(suspend_request(&l, past)).await,
        "mismatch.position",
        "a position past the saved entries",
    );
    let mut bad = report();
    bad.saved[0].key = "bad key".into();
    expect_invalid_about(
        b.fail(suspend_request(&l, bad)).await,
        "mismatch.saved",
        "a saved key that is no key",
    );
    expect_invalid(
        b.fail(suspend_request(&l, report())).await,
        "mismatch.saved",
        "saved entries the turn does not hold",
    );
    assert_unchanged(&b, ID, &before, "a refused report").await;
}

/// Restart from the last accepted step keeps the saved steps before the report's position; the
/// turn is queued with no attempt counted, and runs again. A turn not suspended is refused; an
/// exact repeat answers the same and records nothing.
pub async fn restart_from_last_accepted(f: impl Fixture) {
    let b = f.backend();
    suspended(&f, &b).await;
    let before = snapshot(&b, ID).await;
    let e = expect_err(
        b.restart_turn(restart(3, RestartFrom::LastAccepted, "ops"))
            .await,
        409,
        "turn_not_suspended",
        "restart of a queued turn",
    );
    match e {
        Error::NotSuspended { turn, status, .. } => {
            assert_eq!(
                (turn, status.as_str()),
                (Some(3), "queued"),
                "names the state"
            )
        }
        other => panic!("expected NotSuspended, got {other:?}"),
    }
    assert_unchanged(&b, ID, &before, "a refused restart").await;

    let done = ok(
        b.restart_turn(restart(2, RestartFrom::LastAccepted, "ops"))
            .await,
        "restart from the last accepted step",
    );
    assert_eq!((done.turn, done.from), (2, RestartFrom::LastAccepted));
    assert_eq!(done.event.action, InstanceEvent::RESTART_TURN);
    assert_eq!(done.event.by.as_deref(), Some("ops"));
    let t = turn(&b, ID, 2).await;
    assert_eq!((t.status, t.attempt), (TurnStatus::Queued, 0));
    assert_eq!(t.mismatch, None);
    let keys: Vec<&str> = t.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys, ["charge"], "the steps before the divergence are kept");
    let events = instance(&b, ID).await.events.len();

    let again = ok(
        b.restart_turn(restart(2, RestartFrom::LastAccepted, "ops"))
            .await,
        "an exact repeat",
    );
    assert_eq!(again, done, "a repeat answers the same");
    assert_eq!(
        instance(&b, ID).await.events.len(),
        events,
        "and records nothing"
    );
    expect_err(
        b.restart_turn(restart(2, RestartFrom::Scratch, "ops"))
            .await,
        409,
        "turn_not_suspended",
        "another restart of a turn no longer suspended",
    );

    let task = claim(&b, "the restarted turn runs again").await;
    assert_eq!((task.turn.number, task.turn.attempt), (2, 1));
    assert_eq!(task.turn.steps.len(), 1);
    let l = lease(&task);
    step(&b, &l, 1, "fraud", json!(true)).await;
    complete(&b, &l, json!({"count": 6}), json!(null)).await;
    assert_eq!(claim(&b, "m2 goes next").await.turn.number, 3);
}

/// Restart from scratch drops every saved step, and the turn runs from the top.
pub async fn restart_from_scratch(f: impl Fixture) {
    let b = f.backend();
    suspended(&f, &b).await;
    let done = ok(
        b.restart_turn(restart(2, RestartFrom::Scratch, "ops"))
            .await,
        "restart from scratch",
    );
    assert_eq!(done.from, RestartFrom::Scratch);
    let t = turn(&b, ID, 2).await;
    assert_eq!((t.status, t.steps.len()), (TurnStatus::Queued, 0));
    let task = claim(&b, "the restarted turn runs from the top").await;
    assert_eq!(task.turn.number, 2);
    assert!(task.turn.steps.is_empty());
    // Suspended again, it can be restarted again.
    let l = lease(&task);
    step(&b, &l, 0, "charge", json!(1)).await;
    let mut again = report();
    again.position = 0;
    again.saved.truncate(1);
    ok(b.fail(suspend_request(&l, again)).await, "suspend again");
    ok(
        b.restart_turn(restart(2, RestartFrom::Scratch, "ops"))
            .await,
        "a second suspension, a second restart",
    );
    let kinds: Vec<String> = instance(&b, ID)
        .await
        .events
        .iter()
        .map(|e| e.action.clone())
        .collect();
    assert_eq!(
        kinds,
        ["suspend", "restart_turn", "suspend", "restart_turn"],
        "every suspension and restart is recorded"
    );
}

/// `cancel_turn` ends a suspension: the turn is cancelled, the next message runs, and the
/// cancellation is recorded with who asked; an exact repeat answers the instance and records
/// nothing.
pub async fn cancel_suspended_turn(f: impl Fixture) {
    let b = f.backend();
    suspended(&f, &b).await;
    let mut req = control_turn(ID, ControlAction::CancelTurn, 2);
    req.by = Some("ops".into());
    let inst = control(&b, req.clone()).await;
    let event = inst.events.last().expect("the cancellation is recorded");
    assert_eq!(
        (event.action.as_str(), event.turn, event.by.as_deref()),
        (InstanceEvent::CANCEL_TURN, Some(2), Some("ops"))
    );
    assert_eq!(turn(&b, ID, 2).await.status, TurnStatus::Cancelled);
    let again = control(&b, req).await;
    assert_eq!(again.events, inst.events, "a repeat records nothing");
    expect_err(
        b.restart_turn(restart(2, RestartFrom::Scratch, "ops"))
            .await,
        409,
        "turn_not_suspended",
        "restart of a cancelled turn",
    );
    assert_eq!(claim(&b, "m2 goes next").await.turn.number, 3);
}

/// A fork is a new instance of the same type and version with the original's state and its
/// unfinished messages, in order, under ids made from theirs; the suspended turn starts from
/// scratch there, and the original stays suspended. Both record it; an exact repeat answers
/// the same; another instance under the new id, or an instance with nothing suspended, is
/// refused.
pub async fn fork_instance(f: impl Fixture) {
    let b = f.backend();
    suspended(&f, &b).await;
    let done = ok(b.fork_instance(fork("inst-2", "ops")).await, "fork");
    assert_eq!(
        (
            done.workflow_id.as_str(),
            done.forked_from.as_str(),
            done.turn
        ),
        ("inst-2", ID, 2)
    );
    let forked = instance(&b, "inst-2").await;
    assert_eq!(
        (forked.workflow_type.as_str(), forked.version.as_str()),
        (TYPE, VERSION)
    );
    assert_eq!(forked.state, json!({"count": 5}), "the original's state");
    assert_eq!(
        forked.events.len(),
        1,
        "the fork records where it came from"
    );
    let entries = inbox(&b, "inst-2").await;
    let ids: Vec<&str> = entries.iter().map(|m| m.message_id.as_str()).collect();
    assert_eq!(
        ids,
        ["fork.m1", "fork.m2"],
        "the unfinished messages, in order"
    );
    assert_eq!(entries[0].message, Some(json!({"card": "4111-SECRET"})));
    let original = instance(&b, ID).await;
    assert_eq!(
        original.status,
        InstanceStatus::Suspended,
        "the original stays"
    );
    assert_eq!(original.events.last(), Some(&done.event));

    let again = ok(
        b.fork_instance(fork("inst-2", "ops")).await,
        "an exact repeat",
    );
    assert_eq!(again, done);
    assert_eq!(
        instance(&b, ID).await.events,
        original.events,
        "records nothing"
    );
    assert_eq!(instance(&b, "inst-2").await.events, forked.events);
    assert_eq!(inbox(&b, "inst-2").await.len(), 2, "admits nothing twice");

    create(&b, "inst-3").await;
    expect_conflict(
        b.fork_instance(fork("inst-3", "ops")).await,
        "a fork onto another instance",
    );
    let e = expect_err(
        b.fork_instance(ForkInstanceRequest {
            workflow_id: "inst-3".into(),
            new_id: "inst-4".into(),
            by: None,
        })
        .await,
        409,
        "turn_not_suspended",
        "a fork of an instance with nothing suspended",
    );
    assert!(matches!(e, Error::NotSuspended { turn: None, .. }), "{e:?}");
    expect_not_found(
        b.get_instance("inst-4").await,
        "a refused fork creates nothing",
    );

    let task = claim(&b, "the fork runs its first message").await;
    assert_eq!(
        (
            task.turn.workflow_id.as_str(),
            task.turn.number,
            task.turn.attempt
        ),
        ("inst-2", 1, 1)
    );
    assert!(task.turn.steps.is_empty(), "from scratch");
}
