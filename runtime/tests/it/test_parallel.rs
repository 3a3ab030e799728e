//! Parallel steps on the `TestEnv`: a fixed group (`ctx.parallel()`) and a fan-out
//! (`ctx.fan_out(..)`) run their members concurrently, save them in declaration order, replay
//! them without running them again, respect the concurrency bound, give each member its own
//! effect id, save the members before a failed one and cancel those after it, and refuse a
//! fan-out larger than the turn has room for.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::sync::Notify;
use turnwise::prelude::*;
use turnwise::protocol::{CheckpointKind, TurnStatus};
use turnwise::testing::TestEnv;

use crate::common::GUARD;

// ---------------------------------------------------------------------------------------------
// A fixed group: concurrent, saved in declaration order, replayed without running again.

#[derive(Default)]
struct GroupProbe {
    runs: AtomicUsize,
    /// Real executions of each member's body, by key.
    executed: Mutex<Vec<String>>,
    /// What the group returned on each run.
    seen: Mutex<Vec<(u64, String, bool)>>,
    /// Rung by the last member; the first one waits for it, so the group only finishes if its
    /// members really run at the same time.
    last_ran: Notify,
}

#[derive(Clone, Default)]
struct Group(Arc<GroupProbe>);

impl Workflow for Group {
    type State = u64;
    type Message = u64;
    type Reply = String;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "group";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, state: u64, n: u64) -> TurnResult<Self> {
        let run = self.0.runs.fetch_add(1, SeqCst) + 1;
        let (p1, p2, p3) = (self.0.clone(), self.0.clone(), self.0.clone());
        let (a, b, c) = ctx
            .parallel()
            .step("a", move |_| async move {
                p1.last_ran.notified().await;
                p1.executed.lock().unwrap().push("a".into());
                Ok(n)
            })
            .step("b", move |_| async move {
                p2.executed.lock().unwrap().push("b".into());
                Ok(format!("b{n}"))
            })
            .step("c", move |_| async move {
                p3.executed.lock().unwrap().push("c".into());
                p3.last_ran.notify_one();
                Ok(n.is_multiple_of(2))
            })
            .await?;
        self.0.seen.lock().unwrap().push((a, b.clone(), c));
        if run == 1 {
            Err(std::io::Error::other("after the group"))?;
        }
        Ok(Done::new(state + a).reply(b))
    }
}

#[tokio::test]
async fn a_group_runs_concurrently_saves_in_declaration_order_and_replays() {
    let wf = Group::default();
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "group-1").await.unwrap();
    let turn = h.send(4, "m1").await.unwrap().number;

    // Member `a` only finishes after `c` ran: a sequential run would never get there.
    tokio::time::timeout(GUARD, env.run_until_idle())
        .await
        .expect("the members ran concurrently")
        .unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!(
        t.status,
        TurnStatus::Queued,
        "retried after the group: {t:?}"
    );
    let saved: Vec<(&str, CheckpointKind, serde_json::Value)> = t
        .steps
        .iter()
        .map(|s| (s.key.as_str(), s.kind, s.output.clone()))
        .collect();
    assert_eq!(
        saved,
        [
            ("a", CheckpointKind::Step, json!(4)),
            ("b", CheckpointKind::Step, json!("b4")),
            ("c", CheckpointKind::Step, json!(true)),
        ],
        "saved in declaration order, whatever order they finished in"
    );
    let executed = wf.0.executed.lock().unwrap().clone();
    assert_eq!(
        executed.last().map(String::as_str),
        Some("a"),
        "{executed:?}"
    );

    env.advance(Duration::from_secs(1)).await.unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Completed, "{t:?}");
    assert_eq!(t.steps.len(), 3);
    assert_eq!(wf.0.runs.load(SeqCst), 2);
    assert_eq!(
        wf.0.executed.lock().unwrap().len(),
        3,
        "the replay ran no member again"
    );
    let seen = wf.0.seen.lock().unwrap().clone();
    assert_eq!(seen, [(4, "b4".into(), true), (4, "b4".into(), true)]);
    assert_eq!(h.reply(turn).await.unwrap().as_deref(), Some("b4"));
}

// ---------------------------------------------------------------------------------------------
// A fan-out: the bound, the order of outputs, effect ids per member.

#[derive(Default)]
struct FanProbe {
    running: AtomicUsize,
    most: AtomicUsize,
    executions: AtomicUsize,
    /// The effect id each member saw, by item.
    effect_ids: Mutex<Vec<(u64, String)>>,
    /// The effect ids the handler expects, from `ctx.effect_id`.
    expected: Mutex<Vec<String>>,
    outputs: Mutex<Vec<Vec<u64>>>,
    runs: AtomicUsize,
}

#[derive(Clone, Default)]
struct Fan(Arc<FanProbe>);

impl Workflow for Fan {
    type State = u64;
    type Message = u64;
    type Reply = u64;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "fan";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, state: u64, items: u64) -> TurnResult<Self> {
        let run = self.0.runs.fetch_add(1, SeqCst) + 1;
        let probe = self.0.clone();
        *self.0.expected.lock().unwrap() = (0..items)
            .map(|i| ctx.effect_id(&format!("fetch.{i}")))
            .collect();
        let outputs = ctx
            .fan_out("fetch", 0..items, |s, i| {
                let probe = probe.clone();
                async move {
                    let now = probe.running.fetch_add(1, SeqCst) + 1;
                    probe.most.fetch_max(now, SeqCst);
                    probe.executions.fetch_add(1, SeqCst);
                    probe
                        .effect_ids
                        .lock()
                        .unwrap()
                        .push((i, s.effect_id().to_owned()));
                    // Later items finish first.
                    tokio::time::sleep(Duration::from_millis(2 * (items - i))).await;
                    probe.running.fetch_sub(1, SeqCst);
                    Ok(i * 10)
                }
            })
            .limit(3)
            .await?;
        self.0.outputs.lock().unwrap().push(outputs.clone());
        if run == 1 {
            Err(std::io::Error::other("after the fan-out"))?;
        }
        Ok(Done::new(state + 1).reply(outputs.iter().sum()))
    }
}

#[tokio::test]
async fn a_fan_out_respects_its_bound_keeps_order_and_gives_each_member_its_effect_id() {
    let wf = Fan::default();
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "fan-1").await.unwrap();
    let turn = h.send(8, "m1").await.unwrap().number;
    env.run_until_idle().await.unwrap();

    assert_eq!(
        wf.0.most.load(SeqCst),
        3,
        "at most 3 at a time, and 3 reached"
    );
    assert_eq!(wf.0.executions.load(SeqCst), 8);
    let t = h.turn(turn).await.unwrap();
    let keys: Vec<&str> = t.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(
        keys,
        ["fetch.0", "fetch.1", "fetch.2", "fetch.3", "fetch.4", "fetch.5", "fetch.6", "fetch.7"]
    );
    let saved: Vec<serde_json::Value> = t.steps.iter().map(|s| s.output.clone()).collect();
    assert_eq!(saved, (0..8).map(|i| json!(i * 10)).collect::<Vec<_>>());

    let mut ids = wf.0.effect_ids.lock().unwrap().clone();
    ids.sort();
    let expected = wf.0.expected.lock().unwrap().clone();
    let got: Vec<String> = ids.iter().map(|(_, id)| id.clone()).collect();
    assert_eq!(
        got, expected,
        "each member's effect id is ctx.effect_id of its key"
    );
    assert!(got[0].ends_with("/fetch.0") && got[0] != got[1], "{got:?}");

    env.advance(Duration::from_secs(1)).await.unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Completed, "{t:?}");
    assert_eq!(wf.0.executions.load(SeqCst), 8, "the replay ran none again");
    let outputs = wf.0.outputs.lock().unwrap().clone();
    let want: Vec<u64> = (0..8).map(|i| i * 10).collect();
    assert_eq!(
        outputs,
        [want.clone(), want],
        "in the items' order, on both runs"
    );
    assert_eq!(h.reply(turn).await.unwrap(), Some(280));
}

// ---------------------------------------------------------------------------------------------
// A member fails: the members before it are saved, the ones after it cancelled; the next
// attempt replays the saved ones and runs the rest, with the same effect ids.

#[derive(Default)]
struct FailProbe {
    runs: AtomicUsize,
    /// Executions by key, with the effect id seen.
    executed: Mutex<Vec<(String, String)>>,
    /// Members dropped before they finished.
    cancelled: Mutex<Vec<String>>,
    b_failed: Notify,
}

#[derive(Clone, Default)]
struct Failing(Arc<FailProbe>);

/// Records a member dropped before it finished.
struct OnDrop(Arc<FailProbe>, &'static str, bool);

impl Drop for OnDrop {
    fn drop(&mut self) {
        if !self.2 {
            self.0.cancelled.lock().unwrap().push(self.1.into());
        }
    }
}

impl Workflow for Failing {
    type State = u64;
    type Message = u64;
    type Reply = u64;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "failing";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, state: u64, _m: u64) -> TurnResult<Self> {
        let first = self.0.runs.fetch_add(1, SeqCst) == 0;
        let (pa, pb, pc) = (self.0.clone(), self.0.clone(), self.0.clone());
        let (a, b, c) = ctx
            .parallel()
            .step("a", move |s| async move {
                // `a` is still running when `b` fails; it is saved all the same.
                if first {
                    pa.b_failed.notified().await;
                }
                pa.executed
                    .lock()
                    .unwrap()
                    .push(("a".into(), s.effect_id().into()));
                Ok(1_u64)
            })
            .step("b", move |s| async move {
                pb.executed
                    .lock()
                    .unwrap()
                    .push(("b".into(), s.effect_id().into()));
                if first {
                    pb.b_failed.notify_one();
                    return Err(TurnError::retry("b is down"));
                }
                Ok(2_u64)
            })
            .step("c", move |s| async move {
                let mut guard = OnDrop(pc.clone(), "c", false);
                if first {
                    std::future::pending::<()>().await;
                }
                pc.executed
                    .lock()
                    .unwrap()
                    .push(("c".into(), s.effect_id().into()));
                guard.2 = true;
                Ok(3_u64)
            })
            .await?;
        Ok(Done::new(state + a + b + c).reply(a + b + c))
    }
}

#[tokio::test]
async fn a_failed_member_keeps_the_ones_before_it_and_cancels_the_ones_after_it() {
    let wf = Failing::default();
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "failing-1").await.unwrap();
    let turn = h.send(0, "m1").await.unwrap().number;
    tokio::time::timeout(GUARD, env.run_until_idle())
        .await
        .expect("the group ended")
        .unwrap();

    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Queued, "{t:?}");
    assert_eq!(t.error.as_deref(), Some("Error: b is down"));
    let keys: Vec<&str> = t.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys, ["a"], "the member before the failed one is saved");
    assert_eq!(*wf.0.cancelled.lock().unwrap(), ["c"]);

    env.advance(Duration::from_secs(1)).await.unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Completed, "{t:?}");
    let keys: Vec<&str> = t.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys, ["a", "b", "c"]);
    let executed = wf.0.executed.lock().unwrap().clone();
    let runs_of = |k: &str| executed.iter().filter(|(key, _)| key == k).count();
    assert_eq!(
        (runs_of("a"), runs_of("b"), runs_of("c")),
        (1, 2, 1),
        "a replayed, b ran again, c ran once: {executed:?}"
    );
    let b_ids: Vec<&str> = executed
        .iter()
        .filter(|(k, _)| k == "b")
        .map(|(_, id)| id.as_str())
        .collect();
    assert_eq!(b_ids[0], b_ids[1], "the rerun has the same effect id");
    assert_eq!(h.reply(turn).await.unwrap(), Some(6));
}

// ---------------------------------------------------------------------------------------------
// The budget at run time, and members' progress and heartbeats.

#[derive(Clone, Default)]
struct Wide;

impl Workflow for Wide {
    type State = u64;
    type Message = (u64, u64);
    type Reply = u64;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "wide";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, state: u64, m: (u64, u64)) -> TurnResult<Self> {
        let (before, items) = m;
        for i in 0..before {
            ctx.step(format!("before-{i}"), |_| async move { Ok(i) })
                .await?;
        }
        let out = ctx
            .fan_out("item", 0..items, |s, i| async move {
                s.progress("working", i, Some(items), "items");
                s.heartbeat(i).await?;
                Ok(i)
            })
            .heartbeat_timeout(Duration::from_secs(5))
            .await?;
        Ok(Done::new(state + 1).reply(out.len() as u64))
    }
}

#[tokio::test]
async fn a_fan_out_over_the_budget_fails_naming_the_key_and_the_count() {
    let env = TestEnv::new().register(Wide);
    let h = env.start(&Wide, "wide-1").await.unwrap();
    let over = h.send((60, 5), "over").await.unwrap().number;
    env.run_until_idle().await.unwrap();
    let t = h.turn(over).await.unwrap();
    assert_eq!(t.status, TurnStatus::Failed, "{t:?}");
    let error = t.error.unwrap_or_default();
    assert!(
        error.contains("fan-out `item` has 5 steps, and the turn has room for 4 more"),
        "{error}"
    );
    assert_eq!(t.steps.len(), 60, "nothing of the fan-out ran");

    let env = TestEnv::new().register(Wide);
    let h = env.start(&Wide, "wide-2").await.unwrap();
    let fits = h.send((60, 4), "fits").await.unwrap().number;
    env.run_until_idle().await.unwrap();
    let t = h.turn(fits).await.unwrap();
    assert_eq!(
        t.status,
        TurnStatus::Completed,
        "members' progress and heartbeats do not disturb the turn: {t:?}"
    );
    assert_eq!(t.steps.len(), 64);
    assert_eq!(h.reply(fits).await.unwrap(), Some(4));
}
