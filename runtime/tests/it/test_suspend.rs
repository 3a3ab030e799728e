//! A replay mismatch suspends the turn, at the boundary a user sees: a workflow's code is
//! changed under the same name and version while a turn of it sleeps (a second `Worker` over
//! the same engine, as a deploy would), and the turn meets the change when it wakes. The turn is
//! suspended in that attempt with a report naming the version, the saved prefix, the call the
//! code made instead and its line in this file (no payload value); nothing after the
//! divergence runs, no retry spins, and the inbox waits behind it in order. Then the ways out:
//! restart from the last accepted step or from scratch, cancel, fork; each refused when nothing
//! is suspended, idempotent, and recorded. `on_mismatch = "fail"` keeps the permanent failure.
//! The same on SQLite across a restart, and on PostgreSQL across two engines.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::clock::{Clock, ManualClock};
use turnwise::manifest::grammar::Saved;
use turnwise::manifest::CallKind;
use turnwise::prelude::*;
use turnwise::protocol::{InstanceEvent, InstanceStatus, RestartFrom, TurnStatus, WorkflowTurn};
use turnwise::testing::TestEnv;
use turnwise::{EngineConfig, Error, Worker};

const HOUR: Duration = Duration::from_secs(3600);
/// A card number no report, error or event may show.
const CARD: &str = "4111-SECRET-CARD";
/// An amount no report, error or event may show.
const AMOUNT: u64 = 987_654_321;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Orders {
    pub shipped: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Order {
    pub card: String,
    pub amount: u64,
}

fn order() -> Order {
    Order {
        card: CARD.into(),
        amount: AMOUNT,
    }
}

/// What the steps did, counted: a step that runs adds one.
#[derive(Clone, Debug, Default)]
pub struct Probe {
    pub charged: Arc<AtomicUsize>,
    pub fraud_checked: Arc<AtomicUsize>,
    pub shipped: Arc<AtomicUsize>,
}

impl Probe {
    fn counts(&self) -> (usize, usize, usize) {
        (
            self.charged.load(SeqCst),
            self.fraud_checked.load(SeqCst),
            self.shipped.load(SeqCst),
        )
    }
}

fn counted(n: &Arc<AtomicUsize>) -> Arc<AtomicUsize> {
    n.clone()
}

/// `order` as first deployed: charge, cool off for an hour, ship.
#[workflow(name = "order")]
pub async fn order_before(
    ctx: &mut Turn,
    state: Orders,
    order: Order,
    probe: &Probe,
) -> Result<Done<Orders, u64>, TurnError> {
    let (charged, shipped) = (counted(&probe.charged), counted(&probe.shipped));
    let card = order.card.clone();
    ctx.step("charge", move |_| async move {
        charged.fetch_add(1, SeqCst);
        Ok(format!("charged {card}"))
    })
    .await?;
    ctx.sleep("cool-off", HOUR).await?;
    ctx.step("ship", move |_| async move {
        shipped.fetch_add(1, SeqCst);
        Ok(1u64)
    })
    .await?;
    Ok(Done::new(Orders {
        shipped: state.shipped + 1,
    })
    .reply(order.amount))
}

/// The same name and version, changed: a fraud check inserted before the cool-off.
#[workflow(name = "order")]
pub async fn order_changed(
    ctx: &mut Turn,
    state: Orders,
    order: Order,
    probe: &Probe,
) -> Result<Done<Orders, u64>, TurnError> {
    let (charged, checked, shipped) = (
        counted(&probe.charged),
        counted(&probe.fraud_checked),
        counted(&probe.shipped),
    );
    let card = order.card.clone();
    ctx.step("charge", move |_| async move {
        charged.fetch_add(1, SeqCst);
        Ok(format!("charged {card}"))
    })
    .await?;
    ctx.step("fraud-check", move |_| async move {
        checked.fetch_add(1, SeqCst);
        Ok(true)
    })
    .await?;
    ctx.sleep("cool-off", HOUR).await?;
    ctx.step("ship", move |_| async move {
        shipped.fetch_add(1, SeqCst);
        Ok(1u64)
    })
    .await?;
    Ok(Done::new(Orders {
        shipped: state.shipped + 1,
    })
    .reply(order.amount))
}

/// The same change, in a workflow that asks for the permanent failure instead.
#[workflow(name = "order", on_mismatch = "fail")]
pub async fn order_changed_strict(
    ctx: &mut Turn,
    state: Orders,
    order: Order,
    probe: &Probe,
) -> Result<Done<Orders, u64>, TurnError> {
    let checked = counted(&probe.fraud_checked);
    ctx.step("charge", |_| async { Ok(String::new()) }).await?;
    ctx.step("fraud-check", move |_| async move {
        checked.fetch_add(1, SeqCst);
        Ok(true)
    })
    .await?;
    ctx.sleep("cool-off", HOUR).await?;
    Ok(Done::new(state).reply(order.amount))
}

/// An instance of `order_before` with three orders: the first asleep in its cool-off, the
/// other two queued behind it; and a worker running `order_changed` over the same engine and
/// clock, as after a deploy.
struct Deployed {
    env: TestEnv,
    h: Handle<order_before>,
    /// The probe of the code deployed after the change.
    after: Probe,
    changed: Worker,
}

async fn deployed(id: &str) -> Deployed {
    let before = order_before(Probe::default());
    let env = TestEnv::new().register(before.clone());
    let h = env.start(&before, id).await.unwrap();
    for m in ["m1", "m2", "m3"] {
        h.send(order(), m).await.unwrap();
    }
    env.run_until_idle().await.unwrap();
    let t = h.turn(1).await.unwrap();
    assert_eq!(
        t.status,
        TurnStatus::Waiting,
        "turn 1 sleeps in its cool-off: {t:?}"
    );
    let after = Probe::default();
    let changed = Worker::new(env.engine().clone())
        .clock(Arc::new(env.clock().clone()) as Arc<dyn Clock>)
        .register(order_changed(after.clone()));
    Deployed {
        env,
        h,
        after,
        changed,
    }
}

/// [`deployed`], then the cool-off ends and the changed code runs turn 1: suspended.
async fn suspended(id: &str) -> Deployed {
    let d = deployed(id).await;
    d.env.clock().advance(HOUR);
    assert_eq!(
        d.changed.run_until_idle().await.unwrap(),
        1,
        "one attempt ran"
    );
    assert_eq!(d.h.turn(1).await.unwrap().status, TurnStatus::Suspended);
    d
}

/// The line of this file a report's `at` names.
fn line_of(at: &str) -> &'static str {
    let (file, line) = at.rsplit_once(':').expect("`at` is file:line");
    assert_eq!(file, "runtime/tests/it/test_suspend.rs", "{at}");
    let n: usize = line.parse().expect("a line number");
    include_str!("test_suspend.rs")
        .lines()
        .nth(n - 1)
        .expect("the line exists")
}

fn assert_no_payload(what: &str, text: &str) {
    assert!(
        !text.contains("SECRET") && !text.contains(&AMOUNT.to_string()),
        "{what} shows a payload value: {text}"
    );
}

#[tokio::test]
async fn a_changed_workflow_suspends_the_turn_in_that_attempt() {
    let d = suspended("order-1").await;
    let t = d.h.turn(1).await.unwrap();
    assert_eq!(
        t.attempt, 1,
        "the sleep resumed the attempt; the mismatch counted none"
    );
    assert_eq!(
        d.after.counts(),
        (0, 0, 0),
        "no step ran after the divergence"
    );
    let r = t.mismatch.clone().expect("the turn carries its report");
    assert_eq!(r.version, "v1");
    assert_eq!(r.position, 1);
    assert_eq!(
        r.saved,
        [
            Saved::new(CallKind::Step, "charge"),
            Saved::new(CallKind::Sleep, "cool-off")
        ]
    );
    assert_eq!(r.found, Some(Saved::new(CallKind::Step, "fraud-check")));
    let at = r.at.clone().expect("the manifest names the call's line");
    assert!(
        line_of(&at).contains("\"fraud-check\""),
        "{at}: {}",
        line_of(&at)
    );
    assert!(r.message.contains("sleep `cool-off`"), "{}", r.message);
    assert_no_payload("the report", &serde_json::to_string(&r).unwrap());
    assert_no_payload("the error", t.error.as_deref().unwrap_or(""));

    // No retry spins, however long it waits; the inbox waits behind it in order.
    d.env.clock().advance(30 * 24 * HOUR);
    assert_eq!(d.changed.run_until_idle().await.unwrap(), 0);
    assert_eq!(d.h.turn(1).await.unwrap().attempt, 1);
    let inst = d.h.instance().await.unwrap();
    assert_eq!(inst.status, InstanceStatus::Suspended);
    let inbox = d.h.inbox().await.unwrap();
    let waiting: Vec<(u64, &str, TurnStatus)> = inbox
        .messages
        .iter()
        .map(|m| (m.turn, m.message_id.as_str(), m.status))
        .collect();
    assert_eq!(
        waiting,
        [
            (1, "m1", TurnStatus::Suspended),
            (2, "m2", TurnStatus::Queued),
            (3, "m3", TurnStatus::Queued)
        ]
    );
    let events: Vec<(&str, Option<u64>)> = inst
        .events
        .iter()
        .map(|e| (e.action.as_str(), e.turn))
        .collect();
    assert_eq!(events, [(InstanceEvent::SUSPEND, Some(1))]);
    assert_no_payload("the event", &serde_json::to_string(&inst.events).unwrap());

    // A caller waiting for the turn is told, not left waiting.
    let answer = tokio::time::timeout(Duration::from_secs(5), d.h.result(1))
        .await
        .expect("a suspended turn answers its caller");
    match answer {
        Err(CallError::Suspended { turn, error, .. }) => {
            assert_eq!(turn, 1);
            assert!(error.contains("fraud-check"), "{error}");
        }
        other => panic!("expected CallError::Suspended, got {other:?}"),
    }
}

#[tokio::test]
async fn a_mismatch_swallowed_by_the_handler_still_suspends() {
    /// A handler that ignores every error and tries to go on.
    #[workflow(name = "order")]
    pub async fn swallowing(
        ctx: &mut Turn,
        state: Orders,
        _order: Order,
        probe: &Probe,
    ) -> Result<Done<Orders, u64>, TurnError> {
        let checked = counted(&probe.fraud_checked);
        let shipped = counted(&probe.shipped);
        let _ = ctx.step("charge", |_| async { Ok(String::new()) }).await;
        let _ = ctx
            .step("fraud-check", move |_| async move {
                checked.fetch_add(1, SeqCst);
                Ok(true)
            })
            .await;
        let _ = ctx
            .step("ship-anyway", move |_| async move {
                shipped.fetch_add(1, SeqCst);
                Ok(1u64)
            })
            .await;
        Ok(Done::new(state).reply(0))
    }
    let d = deployed("order-1").await;
    let probe = Probe::default();
    let worker = Worker::new(d.env.engine().clone())
        .clock(Arc::new(d.env.clock().clone()) as Arc<dyn Clock>)
        .register(swallowing(probe.clone()));
    d.env.clock().advance(HOUR);
    worker.run_until_idle().await.unwrap();
    let t = d.h.turn(1).await.unwrap();
    assert_eq!(t.status, TurnStatus::Suspended, "{t:?}");
    assert_eq!(
        probe.counts(),
        (0, 0, 0),
        "every call after the divergence was refused"
    );
    assert_eq!(t.mismatch.unwrap().position, 1);
    assert_eq!(t.steps.len(), 2, "nothing was saved after the divergence");
}

#[tokio::test]
async fn on_mismatch_fail_fails_the_turn_for_good_as_before() {
    let d = deployed("order-1").await;
    let probe = Probe::default();
    let strict = Worker::new(d.env.engine().clone())
        .clock(Arc::new(d.env.clock().clone()) as Arc<dyn Clock>)
        .register(order_changed_strict(probe.clone()));
    d.env.clock().advance(HOUR);
    assert_eq!(strict.run_until_idle().await.unwrap(), 1);
    let t = d.h.turn(1).await.unwrap();
    assert_eq!(t.status, TurnStatus::Failed, "{t:?}");
    assert_eq!(t.mismatch, None);
    let error = t.error.unwrap();
    assert!(
        error.starts_with("WorkflowError: ") && error.contains("step order changed"),
        "{error}"
    );
    assert_eq!(probe.fraud_checked.load(SeqCst), 0);
    let inst = d.h.instance().await.unwrap();
    assert_eq!(inst.status, InstanceStatus::Failed);
    assert!(inst.events.is_empty(), "a failure is no suspension");
}

#[tokio::test]
async fn restart_from_the_last_accepted_step_runs_on_from_the_divergence() {
    let d = suspended("order-1").await;
    let ops = d.h.clone().acting_as("alice");
    let e = ops
        .restart_turn(2, RestartFrom::LastAccepted)
        .await
        .expect_err("turn 2 is queued");
    assert!(
        matches!(&e, Error::NotSuspended { turn: Some(2), status, .. } if status == "queued"),
        "{e:?}"
    );

    let done = ops
        .restart_turn(1, RestartFrom::LastAccepted)
        .await
        .unwrap();
    assert_eq!(done.event.by.as_deref(), Some("alice"));
    assert_eq!(
        done.event.detail.as_deref(),
        Some("from last_accepted, keeping 1 saved step(s)")
    );
    let t = d.h.turn(1).await.unwrap();
    assert_eq!(
        (t.status, t.attempt, t.steps.len()),
        (TurnStatus::Queued, 0, 1)
    );
    let events = d.h.instance().await.unwrap().events;
    assert_eq!(
        ops.restart_turn(1, RestartFrom::LastAccepted)
            .await
            .unwrap(),
        done
    );
    assert_eq!(
        d.h.instance().await.unwrap().events,
        events,
        "a repeat records nothing"
    );
    let other = d.h.clone().acting_as("bob");
    assert!(matches!(
        other.restart_turn(1, RestartFrom::LastAccepted).await,
        Err(Error::NotSuspended { .. })
    ));

    // The changed code runs on from the divergence: the charge replays, the rest runs.
    d.changed.run_until_idle().await.unwrap();
    d.env.clock().advance(HOUR);
    d.changed.run_until_idle().await.unwrap();
    assert_eq!(d.h.turn(1).await.unwrap().status, TurnStatus::Completed);
    assert_eq!(d.h.reply(1).await.unwrap(), Some(AMOUNT));
    let (charged, checked, shipped) = d.after.counts();
    assert_eq!(
        (charged, checked),
        (1, 2),
        "turn 1 was not charged again; turn 2 was"
    );
    assert!(shipped >= 1);
}

#[tokio::test]
async fn restart_from_scratch_drops_the_saved_steps() {
    let d = suspended("order-1").await;
    let ops = d.h.clone().acting_as("alice");
    let done = ops.restart_turn(1, RestartFrom::Scratch).await.unwrap();
    assert_eq!(
        done.event.detail.as_deref(),
        Some("from scratch, keeping 0 saved step(s)")
    );
    assert!(d.h.turn(1).await.unwrap().steps.is_empty());
    assert_eq!(
        ops.restart_turn(1, RestartFrom::Scratch).await.unwrap(),
        done
    );
    d.changed.run_until_idle().await.unwrap();
    d.env.clock().advance(HOUR);
    d.changed.run_until_idle().await.unwrap();
    assert_eq!(d.h.turn(1).await.unwrap().status, TurnStatus::Completed);
    assert!(
        d.after.charged.load(SeqCst) >= 1,
        "the charge ran again from scratch"
    );
}

#[tokio::test]
async fn cancel_ends_a_suspension_and_the_inbox_goes_on() {
    let d = suspended("order-1").await;
    let ops = d.h.clone().acting_as("carol");
    let inst = ops.cancel_turn(1).await.unwrap();
    let last = inst.events.last().unwrap();
    assert_eq!(
        (last.action.as_str(), last.turn, last.by.as_deref()),
        (InstanceEvent::CANCEL_TURN, Some(1), Some("carol"))
    );
    assert_eq!(
        ops.cancel_turn(1).await.unwrap().events,
        inst.events,
        "an exact repeat"
    );
    assert!(matches!(
        ops.restart_turn(1, RestartFrom::Scratch).await,
        Err(Error::NotSuspended { .. })
    ));
    assert!(matches!(
        d.h.result(1).await,
        Err(CallError::Cancelled { turn: 1, .. })
    ));
    d.changed.run_until_idle().await.unwrap();
    let t2: WorkflowTurn = d.h.turn(2).await.unwrap();
    assert_eq!(
        t2.status,
        TurnStatus::Waiting,
        "turn 2 runs on the changed code: {t2:?}"
    );
}

#[tokio::test]
async fn fork_continues_in_a_new_instance_and_the_original_stays() {
    let d = suspended("order-1").await;
    let ops = d.h.clone().acting_as("dave");
    let fork = ops.fork("order-1b").await.unwrap();
    assert_eq!(fork.id(), "order-1b");
    let original = d.h.instance().await.unwrap();
    assert_eq!(
        original.status,
        InstanceStatus::Suspended,
        "the original stays suspended"
    );
    assert_eq!(original.events.last().unwrap().action, InstanceEvent::FORK);
    let copy = fork.instance().await.unwrap();
    assert_eq!(
        (copy.workflow_type.as_str(), copy.version.as_str()),
        ("order", "v1")
    );
    assert_eq!(copy.state, original.state);
    let ids: Vec<String> = fork
        .inbox()
        .await
        .unwrap()
        .messages
        .into_iter()
        .map(|m| m.message_id)
        .collect();
    assert_eq!(ids, ["fork.m1", "fork.m2", "fork.m3"]);
    // An exact repeat answers the same fork; another instance under the id is refused.
    assert_eq!(ops.fork("order-1b").await.unwrap().id(), "order-1b");
    assert_eq!(d.h.instance().await.unwrap().events, original.events);
    assert!(matches!(
        d.h.clone().acting_as("eve").fork("order-1b").await,
        Err(Error::Conflict { .. })
    ));
    assert!(matches!(
        fork.fork("order-1c").await,
        Err(Error::NotSuspended { .. })
    ));

    // The fork's first turn runs the changed code from scratch.
    d.changed.run_until_idle().await.unwrap();
    let t = fork.turn(1).await.unwrap();
    let keys: Vec<&str> = t.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys, ["charge", "fraud-check", "cool-off"], "{t:?}");
}

/// On SQLite, a suspended turn, its report and the instance's events survive a restart of
/// the store, and the ways out work on the reopened store.
#[tokio::test]
async fn a_suspension_survives_a_restart_on_sqlite() {
    use turnwise::store::SqliteStore;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("turnwise.db");
    let clock = ManualClock::default();
    let open = |clock: &ManualClock| {
        let clock = clock.clone();
        let path = path.clone();
        async move {
            let store = SqliteStore::open(&path).await.unwrap();
            Engine::new(store, clock, EngineConfig::default())
        }
    };
    let report = {
        let engine = open(&clock).await;
        let h = order_before(Probe::default())
            .start(&engine, "order-1")
            .await
            .unwrap();
        h.send(order(), "m1").await.unwrap();
        h.send(order(), "m2").await.unwrap();
        Worker::new(engine.clone())
            .clock(Arc::new(clock.clone()) as Arc<dyn Clock>)
            .register(order_before(Probe::default()))
            .run_until_idle()
            .await
            .unwrap();
        clock.advance(HOUR);
        Worker::new(engine.clone())
            .clock(Arc::new(clock.clone()) as Arc<dyn Clock>)
            .register(order_changed(Probe::default()))
            .run_until_idle()
            .await
            .unwrap();
        let t = h.turn(1).await.unwrap();
        assert_eq!(t.status, TurnStatus::Suspended);
        t.mismatch.unwrap()
    };
    let engine = open(&clock).await;
    let h = order_before(Probe::default()).handle(&engine, "order-1");
    let t = h.turn(1).await.unwrap();
    assert_eq!(
        (t.status, t.mismatch.as_ref()),
        (TurnStatus::Suspended, Some(&report))
    );
    let inst = h.instance().await.unwrap();
    assert_eq!(inst.status, InstanceStatus::Suspended);
    assert_eq!(inst.events.len(), 1);
    h.clone()
        .acting_as("ops")
        .restart_turn(1, RestartFrom::Scratch)
        .await
        .unwrap();
    let after = Probe::default();
    let fixed = Worker::new(engine.clone())
        .clock(Arc::new(clock.clone()) as Arc<dyn Clock>)
        .register(order_changed(after.clone()));
    fixed.run_until_idle().await.unwrap();
    clock.advance(HOUR);
    fixed.run_until_idle().await.unwrap();
    assert_eq!(h.turn(1).await.unwrap().status, TurnStatus::Completed);
}

/// On PostgreSQL, two engines over one database (two nodes): a turn suspended through one is
/// read, restarted and forked through the other, and finishes on the first. Nothing in memory
/// decides.
#[cfg(feature = "postgres")]
#[tokio::test]
async fn a_suspension_is_shared_by_two_postgres_nodes() {
    let Some(db) = turnwise::testing::TestPostgres::start("test_suspend_nodes").await else {
        return;
    };
    let clock = ManualClock::default();
    let a = Engine::new(db.store().await, clock.clone(), EngineConfig::default());
    let b = Engine::new(db.store().await, clock.clone(), EngineConfig::default());
    let worker = |engine: &Engine| {
        Worker::new(engine.clone()).clock(Arc::new(clock.clone()) as Arc<dyn Clock>)
    };
    let h = order_before(Probe::default())
        .start(&a, "order-1")
        .await
        .unwrap();
    h.send(order(), "m1").await.unwrap();
    worker(&a)
        .register(order_before(Probe::default()))
        .run_until_idle()
        .await
        .unwrap();
    clock.advance(HOUR);
    let changed = worker(&a).register(order_changed(Probe::default()));
    changed.run_until_idle().await.unwrap();

    let on_b = order_before(Probe::default())
        .handle(&b, "order-1")
        .acting_as("ops");
    let t = on_b.turn(1).await.unwrap();
    assert_eq!(
        t.status,
        TurnStatus::Suspended,
        "node B reads the suspension"
    );
    assert!(t.mismatch.is_some());
    let fork = on_b.fork("order-2").await.unwrap();
    assert_eq!(fork.inbox().await.unwrap().messages.len(), 1);
    on_b.restart_turn(1, RestartFrom::LastAccepted)
        .await
        .unwrap();
    assert!(
        matches!(
            h.clone()
                .acting_as("ops")
                .restart_turn(1, RestartFrom::Scratch)
                .await,
            Err(Error::NotSuspended { .. })
        ),
        "node A sees the restart node B made"
    );
    changed.run_until_idle().await.unwrap();
    clock.advance(HOUR);
    changed.run_until_idle().await.unwrap();
    assert_eq!(h.turn(1).await.unwrap().status, TurnStatus::Completed);
}
