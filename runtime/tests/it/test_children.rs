//! Child workflows through the public API (`Turn::call_child`), on the test environment's
//! manual clock: the parent gets the child's typed reply; a child that fails for good or is
//! cancelled reaches the parent as a typed `ChildError` (and with `?` fails the parent's turn
//! for good); a call past its timeout answers `TimedOut` and the late outcome is dropped; the
//! parent's worker slot is free while it waits (a worker with one slot runs the child);
//! replays return the saved outcome and never send the message again; two children in one
//! turn each get their own reply.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;
use turnwise::protocol::{CheckpointKind, TurnStatus};
use turnwise::testing::TestEnv;

use crate::common::{eventually, GUARD};

const HOUR: Duration = Duration::from_secs(3600);

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
struct Quote {
    item: String,
    cents: u64,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
enum Job {
    /// Price the item.
    Price(String),
    /// Fail for good with this message.
    Refuse(String),
    /// Sleep for this many hours, then price "late".
    Slow(u64),
    /// Wait (a year) for an approval that never comes.
    Stall,
}

#[derive(Serialize, Deserialize, JsonSchema, Signal, Clone, Debug)]
#[signal(name = "approval")]
struct Approval;

/// Child handler runs, across all tests of this file that use `pricer` (each test counts its
/// own child's turns from the store instead where it must be exact).
static PRICER_RUNS: AtomicUsize = AtomicUsize::new(0);

#[workflow(name = "pricer", version = "v1", signals(Approval))]
async fn pricer(ctx: &mut Turn, priced: u64, job: Job) -> Result<Done<u64, Quote>, TurnError> {
    PRICER_RUNS.fetch_add(1, SeqCst);
    match job {
        Job::Price(item) => {
            let cents = ctx
                .step(
                    "price",
                    move |_s| async move { Ok(item.len() as u64 * 100) },
                )
                .await?;
            let quote = Quote {
                item: "priced".into(),
                cents,
            };
            Ok(Done::new(priced + 1).reply(quote))
        }
        Job::Refuse(why) => Err(WorkflowError::new(why).into()),
        Job::Slow(hours) => {
            ctx.sleep("slow", HOUR * hours as u32).await?;
            Ok(Done::new(priced + 1).reply(Quote {
                item: "late".into(),
                cents: 1,
            }))
        }
        Job::Stall => {
            ctx.wait_for_signal::<Approval>("stall", HOUR * 24 * 365)
                .await?;
            Ok(Done::new(priced))
        }
    }
}

/// What the parent asks for, and how it reports what its child call answered.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
struct Ask {
    child: String,
    job: Job,
    /// Wait at most this many hours for the child.
    hours: u64,
    /// Use `?` on the child's answer instead of reporting its error.
    strict: bool,
}

static BUYER_RUNS: AtomicUsize = AtomicUsize::new(0);

/// Calls the child, then sleeps an hour (so a later run replays the call), then replies.
#[workflow(name = "buyer", version = "v1")]
async fn buyer(ctx: &mut Turn, spent: u64, ask: Ask) -> Result<Done<u64, String>, TurnError> {
    BUYER_RUNS.fetch_add(1, SeqCst);
    let timeout = HOUR * ask.hours as u32;
    let answer = if ask.strict {
        let quote = ctx
            .call_child("buy", &pricer, ask.child.clone(), ask.job)
            .timeout(timeout)
            .await?;
        Ok(quote)
    } else {
        ctx.call_child("buy", &pricer, ask.child.clone(), ask.job)
            .timeout(timeout)
            .await
    };
    ctx.sleep("settle", HOUR).await?;
    match answer {
        Ok(q) => Ok(Done::new(spent + q.cents).reply(format!("{} {}", q.item, q.cents))),
        Err(ChildError::Failed { error, turn, .. }) => {
            Ok(Done::new(spent).reply(format!("failed {turn}: {error}")))
        }
        Err(ChildError::Cancelled { turn, .. }) => {
            Ok(Done::new(spent).reply(format!("cancelled {turn}")))
        }
        Err(ChildError::TimedOut { workflow_id, .. }) => {
            Ok(Done::new(spent).reply(format!("timed out {workflow_id}")))
        }
        Err(e) => Err(e.into()),
    }
}

/// Calls two children one after the other in one turn.
#[workflow(name = "pair-buyer", version = "v1")]
async fn pair_buyer(
    ctx: &mut Turn,
    spent: u64,
    items: (String, String),
) -> Result<Done<u64, Vec<u64>>, TurnError> {
    let a = ctx
        .call_child("first", &pricer, "pair-a", Job::Price(items.0))
        .await?;
    let b = ctx
        .call_child("second", &pricer, "pair-b", Job::Price(items.1))
        .await?;
    Ok(Done::new(spent + a.cents + b.cents).reply(vec![a.cents, b.cents]))
}

/// Starts two children, then awaits them: both run before either is awaited.
#[workflow(name = "fan-buyer", version = "v1")]
async fn fan_buyer(
    ctx: &mut Turn,
    spent: u64,
    items: (String, String),
) -> Result<Done<u64, Vec<u64>>, TurnError> {
    let a = ctx
        .start_child("start-a", &pricer, "fan-a", Job::Price(items.0))
        .await?;
    let b = ctx
        .start_child("start-b", &pricer, "fan-b", Job::Price(items.1))
        .await?;
    let qa = ctx.await_child("await-a", &a).await?;
    let qb = ctx.await_child("await-b", &b).timeout(HOUR).await?;
    Ok(Done::new(spent + qa.cents + qb.cents).reply(vec![qa.cents, qb.cents]))
}

fn ask(child: &str, job: Job) -> Ask {
    Ask {
        child: child.into(),
        job,
        hours: 24,
        strict: false,
    }
}

fn env() -> TestEnv {
    TestEnv::new()
        .register(buyer)
        .register(pricer)
        .register(pair_buyer)
        .register(fan_buyer)
}

#[tokio::test]
async fn the_parent_gets_the_childs_typed_reply() {
    let env = env();
    let parent = env.start(&buyer, "buyer-1").await.unwrap();
    parent
        .send(ask("pricer-1", Job::Price("pear".into())), "m1")
        .await
        .unwrap();
    env.run_until_idle().await.unwrap();
    // The child has run and its reply was delivered; the parent sleeps its hour.
    let child = pricer.handle(env.engine(), "pricer-1");
    assert_eq!(child.reply(1).await.unwrap().unwrap().cents, 400);
    let waiting = parent.turn(1).await.unwrap();
    assert_eq!(waiting.status, TurnStatus::Waiting, "{waiting:?}");
    assert_eq!(waiting.steps[0].kind, CheckpointKind::Signal);
    assert_eq!(waiting.steps[0].signal_name.as_deref(), Some("child.buy"));

    env.advance(HOUR).await.unwrap();
    assert_eq!(
        parent.reply(1).await.unwrap().as_deref(),
        Some("priced 400")
    );
    assert_eq!(parent.state().await.unwrap(), 400);

    // The child's message says which turn sent it.
    let t = child.turn(1).await.unwrap();
    let origin = t.origin.expect("the child's message has an origin");
    assert_eq!(origin.kind, "workflow");
    assert_eq!(origin.fields["parent_id"], "buyer-1");
    assert_eq!(origin.fields["parent_turn"], 1);
    assert_eq!(origin.fields["reply_signal"], "child.buy");
    assert!(t.message_id.starts_with("buy-"), "{}", t.message_id);
}

#[tokio::test]
async fn a_child_that_fails_for_good_reaches_the_parent_as_a_typed_error() {
    let env = env();
    let parent = env.start(&buyer, "buyer-2").await.unwrap();
    parent
        .send(
            ask("pricer-2", Job::Refuse("no price for that".into())),
            "m1",
        )
        .await
        .unwrap();
    env.run_until_idle().await.unwrap();
    env.advance(HOUR).await.unwrap();
    let reply = parent.reply(1).await.unwrap().unwrap();
    assert_eq!(reply, "failed 1: WorkflowError: no price for that");
    let child = pricer.handle(env.engine(), "pricer-2");
    assert_eq!(child.turn(1).await.unwrap().status, TurnStatus::Failed);
}

#[tokio::test]
async fn a_child_failure_through_question_mark_fails_the_parents_turn_for_good() {
    let env = env();
    let parent = env.start(&buyer, "buyer-3").await.unwrap();
    let mut a = ask("pricer-3", Job::Refuse("out of stock".into()));
    a.strict = true;
    parent.send(a, "m1").await.unwrap();
    env.run_until_idle().await.unwrap();
    let t = parent.turn(1).await.unwrap();
    // At once, with no retry: the outcome is saved, so another attempt would meet it again.
    assert_eq!((t.status, t.attempt), (TurnStatus::Failed, 1), "{t:?}");
    let error = t.error.unwrap_or_default();
    assert!(
        error.starts_with("WorkflowError: child turn 1 of `pricer-3` failed")
            && error.contains("out of stock"),
        "{error}"
    );
}

#[tokio::test]
async fn a_cancelled_child_turn_reaches_the_parent_as_cancelled() {
    let env = env();
    let parent = env.start(&buyer, "buyer-4").await.unwrap();
    parent
        .send(ask("pricer-4", Job::Stall), "m1")
        .await
        .unwrap();
    env.run_until_idle().await.unwrap();
    let child = pricer.handle(env.engine(), "pricer-4");
    assert_eq!(child.turn(1).await.unwrap().status, TurnStatus::Waiting);
    assert_eq!(parent.turn(1).await.unwrap().status, TurnStatus::Waiting);

    child.cancel_turn(1).await.unwrap();
    env.run_until_idle().await.unwrap();
    env.advance(HOUR).await.unwrap();
    assert_eq!(
        parent.reply(1).await.unwrap().as_deref(),
        Some("cancelled 1")
    );
}

#[tokio::test]
async fn a_call_past_its_timeout_times_out_and_the_late_outcome_is_dropped() {
    let env = env();
    let parent = env.start(&buyer, "buyer-5").await.unwrap();
    let mut a = ask("pricer-5", Job::Slow(3));
    a.hours = 1;
    parent.send(a, "m1").await.unwrap();
    env.run_until_idle().await.unwrap();
    env.advance(HOUR).await.unwrap(); // the call times out; the parent sleeps an hour
    env.advance(HOUR).await.unwrap(); // the parent replies
    assert_eq!(
        parent.reply(1).await.unwrap().as_deref(),
        Some("timed out pricer-5")
    );
    env.advance(HOUR).await.unwrap(); // the child finishes late
    let child = pricer.handle(env.engine(), "pricer-5");
    assert_eq!(child.reply(1).await.unwrap().unwrap().item, "late");
    // The parent's turn is over: the late outcome changed nothing there, and nothing waits.
    let t = parent.turn(1).await.unwrap();
    assert_eq!(t.status, TurnStatus::Completed);
    assert!(t.signals.unwrap_or_default().is_empty());
    assert_eq!(parent.state().await.unwrap(), 0);
    let inst = child.instance().await.unwrap();
    assert_eq!(inst.pending_messages, 0, "{inst:?}");
}

#[tokio::test]
async fn the_parents_worker_slot_is_free_while_it_waits() {
    let env = env();
    // One slot: if the parent's turn held it while waiting, the child could never run.
    let worker = Worker::new(env.engine().clone())
        .register(buyer)
        .register(pricer)
        .concurrency(1)
        .run_async();
    let parent = env.start(&buyer, "buyer-6").await.unwrap();
    let mut a = ask("pricer-6", Job::Price("fig".into()));
    a.strict = true;
    let turn = parent.send(a, "m1").await.unwrap();
    let child = pricer.handle(env.engine(), "pricer-6");
    // The parent's turn creates the child; wait for that, then for the child's reply.
    eventually("the child instance", || async {
        child.instance().await.ok()
    })
    .await;
    let reply = tokio::time::timeout(GUARD, child.result(1)).await;
    assert_eq!(reply.expect("the child ran").unwrap().cents, 300);
    // The parent is released again, sleeping its hour; move the clock and it replies.
    env.clock().advance(HOUR);
    let reply = tokio::time::timeout(GUARD, parent.result(turn.number)).await;
    assert_eq!(reply.expect("the parent replied").unwrap(), "priced 300");
    worker.stop().await.unwrap();
}

#[tokio::test]
async fn a_replay_returns_the_saved_outcome_and_sends_nothing_again() {
    let env = env();
    let parent = env.start(&buyer, "buyer-7").await.unwrap();
    parent
        .send(ask("pricer-7", Job::Price("plum".into())), "m1")
        .await
        .unwrap();
    let before = BUYER_RUNS.load(SeqCst);
    env.run_until_idle().await.unwrap();
    env.advance(HOUR).await.unwrap();
    assert_eq!(
        parent.reply(1).await.unwrap().as_deref(),
        Some("priced 400")
    );
    // Three runs of the parent: the first sent and waited, the second replayed the call and
    // slept, the third replayed both. (Other tests run in parallel, so at least three.)
    assert!(BUYER_RUNS.load(SeqCst) - before >= 3);
    let child = pricer.handle(env.engine(), "pricer-7");
    let inst = child.instance().await.unwrap();
    assert_eq!(
        (inst.completed_turns, inst.pending_messages),
        (1, 0),
        "the child got exactly one message: {inst:?}"
    );
    let history = child.history(None).await.unwrap();
    assert_eq!(history.turns.len(), 1);
    // The parent's turn holds exactly one delivery of the outcome.
    let t = parent.turn(1).await.unwrap();
    let signals = t.signals.unwrap_or_default();
    assert_eq!(signals.len(), 1, "{signals:?}");
    assert_eq!(signals[0].name, "child.buy");
}

#[tokio::test]
async fn two_children_in_one_turn_each_get_their_own_reply() {
    let env = env();
    let parent = env.start(&pair_buyer, "pair-1").await.unwrap();
    parent
        .send(("ab".into(), "abcde".into()), "m1")
        .await
        .unwrap();
    env.run_until_idle().await.unwrap();
    assert_eq!(parent.reply(1).await.unwrap(), Some(vec![200, 500]));
    assert_eq!(parent.state().await.unwrap(), 700);
}

#[tokio::test]
async fn children_started_together_are_awaited_one_by_one() {
    let env = env();
    let parent = env.start(&fan_buyer, "fan-1").await.unwrap();
    parent.send(("abc".into(), "a".into()), "m1").await.unwrap();
    env.run_until_idle().await.unwrap();
    let t = parent.turn(1).await.unwrap();
    assert_eq!(t.status, TurnStatus::Completed, "{t:#?}");
    assert_eq!(parent.reply(1).await.unwrap(), Some(vec![300, 100]));
    let t = parent.turn(1).await.unwrap();
    let kinds: Vec<_> = t.steps.iter().map(|s| (s.key.as_str(), s.kind)).collect();
    assert_eq!(
        kinds,
        [
            ("start-a", CheckpointKind::Step),
            ("start-b", CheckpointKind::Step),
            ("await-a", CheckpointKind::Signal),
            ("await-b", CheckpointKind::Signal),
        ]
    );
    // Both outcomes arrived on the parent's turn once each, and each child got one message.
    assert_eq!(t.signals.unwrap_or_default().len(), 2);
    for id in ["fan-a", "fan-b"] {
        let inst = pricer.handle(env.engine(), id).instance().await.unwrap();
        assert_eq!(
            (inst.completed_turns, inst.pending_messages),
            (1, 0),
            "{inst:?}"
        );
    }
}

/// On PostgreSQL another node delivers: node A holds its deliveries (as if it died right after
/// the child's commit); node B, which runs only the child's workflow, finds the outcome in the
/// child's outbox through its claim scan and delivers it.
#[cfg(all(feature = "postgres", feature = "test-util"))]
#[tokio::test]
async fn on_postgres_another_node_delivers_an_outcome_left_behind() {
    use turnwise::clock::SystemClock;
    use turnwise::testing::TestPostgres;
    use turnwise::{Engine, EngineConfig};

    let Some(db) = TestPostgres::start("children_other_node").await else {
        return;
    };
    let a = Engine::new(db.store().await, SystemClock, EngineConfig::default());
    let b = Engine::new(db.store().await, SystemClock, EngineConfig::default());
    a.hold_child_deliveries(true);
    let parent = buyer.start(&a, "buyer-pg").await.unwrap();
    let mut asked = ask("pricer-pg", Job::Price("kiwi".into()));
    asked.hours = 1;
    parent.send(asked, "m1").await.unwrap();
    let node_a = Worker::new(a.clone()).register(buyer).register(pricer);
    node_a.run_until_idle().await.unwrap();
    let child = pricer.handle(&a, "pricer-pg");
    assert_eq!(child.reply(1).await.unwrap().unwrap().cents, 400);
    assert_eq!(parent.turn(1).await.unwrap().status, TurnStatus::Waiting);

    let node_b = Worker::new(b.clone()).register(pricer);
    node_b.run_until_idle().await.unwrap();
    let t = parent.turn(1).await.unwrap();
    assert_eq!(t.status, TurnStatus::Queued, "node B delivered: {t:?}");
    assert_eq!(t.signals.unwrap_or_default().len(), 1);
    let record = b
        .store()
        .load_instance(b.ns(), "pricer-pg")
        .await
        .unwrap()
        .expect("the child's record");
    assert!(record.outbox.is_empty(), "{:?}", record.outbox);
}
