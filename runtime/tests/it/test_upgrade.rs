//! Moving instances of `order` from v1 to v2 at the boundary a user sees: the live check's
//! verdict on an idle instance, turns in flight (asleep mid-turn, waiting for a signal,
//! backing off after a failed step) and pinned ones (a state v2 cannot read, a saved step v2
//! does not make); the upgrade moves the provable ones, which finish on v2 without running a
//! step twice; each move is checked again in the instance's own commit, recorded as an event
//! with who asked, and a repeat answers the same and records nothing; a suspended turn that v2
//! accepts is resumed.
//!
//! One worker runs `order` v0, v1 and v2 (v0 only to have an instance whose state v2 cannot
//! read). Steps count their runs per instance (the message's `tag`) in a process-wide map, so
//! tests running at once do not share counts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::clock::{Clock, ManualClock};
use turnwise::manifest::grammar::Saved;
use turnwise::manifest::CallKind;
use turnwise::prelude::*;
use turnwise::protocol::*;
use turnwise::store::{
    CommitError, InstanceFilter, InstanceRecord, MemoryStore, RunCount, RunFilter, Store,
    StoreError, TurnRange, TurnRecord, WriteSet,
};
use turnwise::testing::TestEnv;
use turnwise::{Backend, Engine, EngineConfig, Error, Worker};

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);

/// The saved state of v1 and v2.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Order {
    /// What was charged so far.
    pub charged: u64,
}

/// The saved state of v0: the amount as text, which v2's `Order` cannot read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LegacyOrder {
    /// What was charged so far, as text.
    pub charged: String,
}

/// A message of every version.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Place {
    /// Names the instance in the step counts.
    pub tag: String,
    /// The amount.
    pub amount: u64,
    /// Wait for an approval after reserving.
    #[serde(default)]
    pub approval: bool,
    /// Gift-wrap (v1 only): a step v2 no longer makes.
    #[serde(default)]
    pub gift: bool,
    /// The first charge fails (its provider times out).
    #[serde(default)]
    pub flaky: bool,
}

/// An approval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema, Signal)]
#[signal(name = "approval")]
pub struct Approval {
    /// Whether it was approved.
    pub ok: bool,
}

/// Runs of each step, by instance tag and step key.
fn runs() -> &'static Mutex<HashMap<(String, &'static str), usize>> {
    static RUNS: OnceLock<Mutex<HashMap<(String, &'static str), usize>>> = OnceLock::new();
    RUNS.get_or_init(Mutex::default)
}

/// Count a run of step `key` for `tag`; answers how many runs it has had, this one included.
fn ran(tag: &str, key: &'static str) -> usize {
    let mut runs = runs().lock().unwrap();
    let n = runs.entry((tag.to_owned(), key)).or_default();
    *n += 1;
    *n
}

fn count(tag: &str, key: &'static str) -> usize {
    let runs = runs().lock().unwrap();
    runs.get(&(tag.to_owned(), key)).copied().unwrap_or(0)
}

/// v0: charges at once, keeping the amount as text.
#[workflow(name = "order", version = "v0")]
pub async fn order_v0(
    ctx: &mut Turn,
    state: LegacyOrder,
    msg: Place,
) -> Result<Done<LegacyOrder, u64>, TurnError> {
    let tag = msg.tag.clone();
    let charged = ctx
        .step("charge", move |_| async move {
            ran(&tag, "charge");
            Ok(msg.amount)
        })
        .await?;
    let _ = state;
    Ok(Done::new(LegacyOrder {
        charged: charged.to_string(),
    })
    .reply(charged))
}

/// v1: reserve, gift-wrap if asked, wait for an approval if asked, sleep an hour, charge.
#[workflow(name = "order", version = "v1", signals(Approval))]
pub async fn order_v1(
    ctx: &mut Turn,
    state: Order,
    msg: Place,
) -> Result<Done<Order, u64>, TurnError> {
    let tag = msg.tag.as_str();
    let amount = msg.amount;
    let reserved = ctx
        .step("reserve", move |_| async move {
            ran(tag, "reserve");
            Ok(amount)
        })
        .await?;
    if msg.gift {
        ctx.step("wrap", move |_| async move {
            ran(tag, "wrap");
            Ok(true)
        })
        .await?;
    }
    if msg.approval {
        ctx.wait_for_signal::<Approval>("approval", DAY).await?;
    }
    ctx.sleep("settle", HOUR).await?;
    let flaky = msg.flaky;
    let charged = ctx
        .step("charge", move |_| async move {
            if ran(tag, "charge") == 1 && flaky {
                return Err(TurnError::retry("the payment provider timed out"));
            }
            Ok(reserved)
        })
        .await?;
    Ok(Done::new(Order {
        charged: state.charged + charged,
    })
    .reply(charged))
}

/// v2: as v1 without gift-wrapping, and the charge adds a tax of a tenth.
#[workflow(name = "order", version = "v2", signals(Approval))]
pub async fn order_v2(
    ctx: &mut Turn,
    state: Order,
    msg: Place,
) -> Result<Done<Order, u64>, TurnError> {
    let tag = msg.tag.as_str();
    let amount = msg.amount;
    let reserved = ctx
        .step("reserve", move |_| async move {
            ran(tag, "reserve");
            Ok(amount)
        })
        .await?;
    if msg.approval {
        ctx.wait_for_signal::<Approval>("approval", DAY).await?;
    }
    ctx.sleep("settle", HOUR).await?;
    let charged = ctx
        .step("charge_with_tax", move |_| async move {
            ran(tag, "charge_with_tax");
            Ok(reserved + reserved / 10)
        })
        .await?;
    Ok(Done::new(Order {
        charged: state.charged + charged,
    })
    .reply(charged))
}

fn env() -> TestEnv {
    TestEnv::new()
        .register(order_v0)
        .register(order_v1)
        .register(order_v2)
}

fn place(tag: &str) -> Place {
    Place {
        tag: tag.into(),
        amount: 100,
        ..Place::default()
    }
}

fn to_v2() -> LiveCompatQuery {
    LiveCompatQuery {
        workflow_type: "order".into(),
        to_version: "v2".into(),
    }
}

fn verdicts(check: &LiveCompat) -> HashMap<&str, &InstanceCompat> {
    check
        .instances
        .iter()
        .map(|i| (i.workflow_id.as_str(), i))
        .collect()
}

/// Instances of v1 (and one of v0) in each state the check tells apart, with a `prefix` to
/// their ids.
async fn populate(env: &TestEnv, prefix: &str) {
    let id = |name: &str| format!("{prefix}{name}");
    // Backing off: reserve, the hour's sleep, then the first charge fails.
    let flaky = env.start(&order_v1, &id("flaky")).await.unwrap();
    let msg = Place {
        flaky: true,
        ..place(&id("flaky"))
    };
    flaky.send(msg, "m-1").await.unwrap();
    env.run_until_idle().await.unwrap();
    env.advance(HOUR).await.unwrap();
    assert_eq!(count(&id("flaky"), "charge"), 1);
    let t = flaky.turn(1).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Queued, 1), "{t:?}");
    // Idle.
    env.start(&order_v1, &id("idle")).await.unwrap();
    // Asleep mid-turn, waiting for a signal, and past a step v2 does not make.
    let sends = [
        ("asleep", place(&id("asleep"))),
        (
            "signal",
            Place {
                approval: true,
                ..place(&id("signal"))
            },
        ),
        (
            "gift",
            Place {
                gift: true,
                ..place(&id("gift"))
            },
        ),
    ];
    for (name, msg) in sends {
        let h = env.start(&order_v1, &id(name)).await.unwrap();
        h.send(msg, "m-1").await.unwrap();
    }
    // v0's state: v2 cannot read it.
    env.start(&order_v0, &id("legacy")).await.unwrap();
    env.run_until_idle().await.unwrap();
}

#[tokio::test]
async fn the_check_tells_each_instance_and_the_upgrade_moves_the_provable_ones() {
    let env = env();
    populate(&env, "a-").await;
    let check = env.engine().compat_live(to_v2()).await.unwrap();
    assert_eq!((check.checked, check.on_target), (6, 0));
    let expected = VerdictCounts {
        upgradable: 1,
        upgradable_after_turn: 3,
        resumable: 0,
        pinned: 2,
    };
    assert_eq!(check.counts, expected);
    let by_id = verdicts(&check);
    let verdict = |id: &str| by_id[id].verdict;
    assert_eq!(verdict("a-idle"), Verdict::Upgradable);
    for id in ["a-asleep", "a-signal", "a-flaky"] {
        assert_eq!(verdict(id), Verdict::UpgradableAfterTurn, "{id}");
        assert_eq!(by_id[id].turn, Some(1));
    }
    assert_eq!(by_id["a-asleep"].saved_steps, Some(2));
    assert_eq!(by_id["a-signal"].status, InstanceStatus::Waiting);

    // Pinned: the saved prefix v2 rejects, named with what v2 would call and where.
    let gift = by_id["a-gift"].reason.as_ref().unwrap();
    assert_eq!(gift.code, ReasonCode::PrefixRejected);
    assert_eq!(
        gift.saved,
        [
            Saved::new(CallKind::Step, "reserve"),
            Saved::new(CallKind::Step, "wrap"),
            Saved::new(CallKind::Sleep, "settle"),
        ]
    );
    assert_eq!(gift.position, Some(1));
    assert_eq!(gift.expected.len(), 2, "{gift:?}");
    assert!(
        gift.expected[0]
            .starts_with("signal `approval` (approval) at runtime/tests/it/test_upgrade.rs:"),
        "{gift:?}"
    );
    assert!(gift.expected[1].starts_with("sleep `settle` at runtime/tests/it/test_upgrade.rs:"));
    assert!(gift
        .message
        .starts_with("turn 1 saved [step `reserve`, step `wrap`, sleep `settle`]"));
    // Pinned: a state v2 cannot read, named with the part and the JSON pointer.
    let legacy = by_id["a-legacy"].reason.as_ref().unwrap();
    assert_eq!(legacy.code, ReasonCode::SchemaBreak);
    assert_eq!(
        (legacy.part.as_deref(), legacy.at.as_deref()),
        (Some("state"), Some("/charged"))
    );
    assert!(legacy
        .message
        .contains("`order` `v2` cannot read every state `v0` wrote"));

    // The upgrade moves the four that can move, and refuses the two pinned with their reasons.
    let req = UpgradeRequest::all_upgradable("order", "v2").by("ops@example.com");
    let answer = env.engine().upgrade_instances(req).await.unwrap();
    let moved: Vec<&str> = answer
        .upgraded
        .iter()
        .map(|u| u.workflow_id.as_str())
        .collect();
    assert_eq!(moved, ["a-asleep", "a-flaky", "a-idle", "a-signal"]);
    let refused: Vec<(&str, ReasonCode, bool)> = answer
        .refused
        .iter()
        .map(|r| (r.workflow_id.as_str(), r.reason.code, r.retryable))
        .collect();
    assert_eq!(
        refused,
        [
            ("a-gift", ReasonCode::PrefixRejected, false),
            ("a-legacy", ReasonCode::SchemaBreak, false),
        ]
    );
    for u in &answer.upgraded {
        assert_eq!(
            (u.from_version.as_str(), u.action.as_str()),
            ("v1", "upgrade")
        );
        assert_eq!(u.by.as_deref(), Some("ops@example.com"));
    }

    // Each moved instance records one event, with who asked; the pinned ones stay on v1.
    let engine = env.engine().clone();
    let instance = |id: &'static str| {
        let engine = engine.clone();
        async move { engine.get_instance(id).await }
    };
    let idle = instance("a-idle").await.unwrap();
    assert_eq!(idle.version, "v2");
    assert_eq!(idle.events.len(), 1);
    let event = &idle.events[0];
    assert_eq!(event.action, "upgrade");
    assert_eq!(event.by.as_deref(), Some("ops@example.com"));
    assert_eq!(
        (event.from_version.as_deref(), event.to_version.as_deref()),
        (Some("v1"), Some("v2"))
    );
    assert_eq!(instance("a-gift").await.unwrap().version, "v1");
    assert!(instance("a-gift").await.unwrap().events.is_empty());
    assert_eq!(instance("a-legacy").await.unwrap().version, "v0");
    let asleep = instance("a-asleep").await.unwrap();
    assert_eq!(asleep.events[0].turn, Some(1));
    assert_eq!(asleep.current_turn.unwrap().version, "v2");

    // They finish on v2: the signal reaches the waiting turn through a v2 handle, the hour
    // passes, the backoff runs out; each charges with tax, and no step ran twice.
    let signal = order_v1
        .handle(env.engine(), "a-signal")
        .upgrade(&order_v2)
        .await
        .unwrap();
    signal
        .signal_waiting(Approval { ok: true }, "approved-1")
        .await
        .unwrap();
    env.run_until_idle().await.unwrap();
    env.advance(HOUR).await.unwrap();
    for id in ["a-asleep", "a-signal", "a-flaky"] {
        let h = order_v2.handle(env.engine(), id);
        assert_eq!(h.reply(1).await.unwrap(), Some(110), "{id}");
        assert_eq!(h.turn(1).await.unwrap().version, "v2");
        assert_eq!(count(id, "reserve"), 1, "{id}: reserve ran once");
        assert_eq!(
            count(id, "charge_with_tax"),
            1,
            "{id}: the v2 charge ran once"
        );
    }
    assert_eq!(
        count("a-flaky", "charge"),
        1,
        "the failed v1 charge is not run again"
    );
    assert_eq!(count("a-asleep", "charge"), 0);
    // The gift turn goes on on v1.
    let gift = order_v1.handle(env.engine(), "a-gift");
    assert_eq!(gift.reply(1).await.unwrap(), Some(100));
    // A new message to the idle one runs v2's code.
    let idle = order_v2.handle(env.engine(), "a-idle");
    idle.send(place("a-idle"), "m-1").await.unwrap();
    env.run_until_idle().await.unwrap();
    env.advance(HOUR).await.unwrap();
    assert_eq!(idle.reply(1).await.unwrap(), Some(110));

    // Afterwards the check lists only the pinned v0 instance and the finished gift one.
    let after = env.engine().compat_live(to_v2()).await.unwrap();
    assert_eq!((after.checked, after.on_target), (2, 4));
    assert_eq!(verdicts(&after)["a-gift"].verdict, Verdict::Upgradable);
}

#[tokio::test]
async fn a_repeat_answers_the_same_and_records_nothing() {
    let env = env();
    let h = env.start(&order_v1, "b-1").await.unwrap();
    h.send(place("b-1"), "m-1").await.unwrap();
    env.run_until_idle().await.unwrap();
    let req = UpgradeRequest::instance("b-1", "v2").by("alice");
    let first = env.engine().upgrade_instances(req.clone()).await.unwrap();
    assert_eq!(first.upgraded.len(), 1, "{first:?}");
    assert_eq!(first.upgraded[0].verdict, Verdict::UpgradableAfterTurn);
    env.clock().advance(Duration::from_secs(5));
    let again = env.engine().upgrade_instances(req).await.unwrap();
    assert_eq!(again, first, "a repeat answers the recorded move");
    let other = UpgradeRequest::instance("b-1", "v2").by("bob");
    let by_bob = env.engine().upgrade_instances(other).await.unwrap();
    assert_eq!(by_bob.upgraded[0].by.as_deref(), Some("alice"));
    let inst = env.engine().get_instance("b-1").await.unwrap();
    assert_eq!(inst.events.len(), 1, "{:?}", inst.events);
    // The typed handle of the same version is answered as a repeat too.
    let typed = h
        .clone()
        .acting_as("carol")
        .upgrade(&order_v2)
        .await
        .unwrap();
    assert_eq!(typed.instance().await.unwrap().events.len(), 1);
    // A bulk upgrade skips instances already on the target.
    let bulk = UpgradeRequest::all_upgradable("order", "v2");
    let answer = env.engine().upgrade_instances(bulk).await.unwrap();
    assert!(
        answer.upgraded.is_empty() && answer.refused.is_empty(),
        "{answer:?}"
    );
    // An instance created on v2 is unchanged.
    env.start(&order_v2, "b-2").await.unwrap();
    let fresh = UpgradeRequest::instance("b-2", "v2");
    let answer = env.engine().upgrade_instances(fresh).await.unwrap();
    assert_eq!(answer.unchanged, ["b-2"]);
}

/// Another workflow, which an `order` cannot be upgraded to.
#[workflow(name = "invoice", version = "v1")]
pub async fn invoice(
    _ctx: &mut Turn,
    state: Order,
    _msg: u64,
) -> Result<Done<Order, u64>, TurnError> {
    Ok(Done::new(state).reply(0))
}

#[tokio::test]
async fn a_typed_upgrade_refuses_another_workflow_and_a_pinned_instance() {
    let env = env().register(invoice);
    let h = env.start(&order_v1, "c-1").await.unwrap();
    let err = h.upgrade(&invoice).await.unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err:?}");
    assert!(err.to_string().contains("another workflow"), "{err}");

    let legacy = env.start(&order_v0, "c-2").await.unwrap();
    let err = legacy.upgrade(&order_v2).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("instance `c-2` stays on `order` `v0` (schema_break)"),
        "{err}"
    );
    assert_eq!(legacy.instance().await.unwrap().version, "v0");
}

#[tokio::test]
async fn a_suspended_turn_that_v2_accepts_is_resumed() {
    let env = env();
    let h = env.start(&order_v1, "d-1").await.unwrap();
    h.send(place("d-1"), "m-1").await.unwrap();
    env.run_until_idle().await.unwrap();
    suspend(env.engine(), "d-1", 1).await;
    let check = env.engine().compat_live(to_v2()).await.unwrap();
    let entry = &verdicts(&check)["d-1"];
    assert_eq!(entry.verdict, Verdict::Resumable);
    assert_eq!(entry.status, InstanceStatus::Suspended);

    let req = UpgradeRequest::instance("d-1", "v2").by("ops");
    let answer = env.engine().upgrade_instances(req).await.unwrap();
    assert_eq!(answer.upgraded[0].action, "resume");
    let inst = env.engine().get_instance("d-1").await.unwrap();
    assert_eq!(inst.events[0].action, "resume");
    let turn = inst.current_turn.unwrap();
    assert_eq!(turn.status, TurnStatus::Queued);
    assert!(turn.mismatch.is_none(), "the report is cleared");
    env.run_until_idle().await.unwrap();
    env.advance(HOUR).await.unwrap();
    let h2 = order_v2.handle(env.engine(), "d-1");
    assert_eq!(h2.reply(1).await.unwrap(), Some(110));
    assert_eq!(count("d-1", "reserve"), 1);
}

#[tokio::test]
async fn an_upgrade_to_its_own_version_resumes_a_suspended_turn_it_accepts() {
    // A fix deployed under the same version: the version's manifest, as registered now,
    // accepts the saved steps, so an upgrade to the instance's own version resumes the turn.
    let env = env();
    let h = env.start(&order_v1, "h-1").await.unwrap();
    h.send(place("h-1"), "m-1").await.unwrap();
    env.run_until_idle().await.unwrap();
    suspend(env.engine(), "h-1", 1).await;
    let req = UpgradeRequest::instance("h-1", "v1").by("ops");
    let answer = env.engine().upgrade_instances(req.clone()).await.unwrap();
    let resumed = &answer.upgraded[0];
    assert_eq!(
        (resumed.action.as_str(), resumed.from_version.as_str()),
        ("resume", "v1")
    );
    assert_eq!(resumed.verdict, Verdict::Resumable);
    let again = env.engine().upgrade_instances(req).await.unwrap();
    assert_eq!(again, answer, "a repeat answers the recorded resume");
    env.run_until_idle().await.unwrap();
    env.advance(HOUR).await.unwrap();
    assert_eq!(h.reply(1).await.unwrap(), Some(100));
    assert_eq!(h.instance().await.unwrap().events.len(), 1);
}

#[tokio::test]
async fn an_instance_keeps_its_newest_events() {
    let env = env();
    let h = env.start(&order_v1, "i-1").await.unwrap();
    let limit = turnwise_rules::limits::INSTANCE_EVENTS;
    for n in 0..limit + 3 {
        let to = if n % 2 == 0 { "v2" } else { "v1" };
        let req = UpgradeRequest::instance("i-1", to).by(format!("step-{n}"));
        let answer = env.engine().upgrade_instances(req).await.unwrap();
        assert_eq!(answer.upgraded.len(), 1, "{n}: {answer:?}");
    }
    let events = h.instance().await.unwrap().events;
    assert_eq!(events.len(), limit);
    assert_eq!(
        events[0].by.as_deref(),
        Some("step-3"),
        "the oldest are dropped"
    );
    let newest = format!("step-{}", limit + 2);
    assert_eq!(events[limit - 1].by.as_deref(), Some(newest.as_str()));
}

/// Suspend turn `number` of `id` by a replay mismatch, as a worker's report would (written to
/// the store directly: the engine's side of suspending is not this test's subject).
async fn suspend(engine: &Engine, id: &str, number: u64) {
    let store = engine.store();
    let mut inst = store.load_instance("default", id).await.unwrap().unwrap();
    let mut turn = store
        .load_turn("default", id, number)
        .await
        .unwrap()
        .unwrap();
    let saved: Vec<Saved> = turn
        .steps
        .iter()
        .map(|s| Saved::new(CallKind::Step, s.key.clone()))
        .collect();
    turn.status = TurnStatus::Suspended;
    turn.mismatch = Some(MismatchReport {
        version: inst.version.clone(),
        position: 1,
        saved,
        found: Some(Saved::new(CallKind::Step, "audit")),
        at: None,
        message: "the code called step `audit` where the turn saved sleep `settle`".into(),
    });
    let expected = inst.revision;
    inst.revision += 1;
    inst.due_at_ms = None;
    store
        .commit(WriteSet {
            ns: "default".into(),
            id: id.into(),
            expected_revision: Some(expected),
            instance: Some(inst),
            turns: vec![turn],
            retention: None,
            runs: Vec::new(),
            prune_runs_before: None,
            durability: turnwise::store::Durability::Durable,
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn an_instance_that_changed_since_the_check_is_refused_not_moved() {
    let env = env();
    env.start(&order_v1, "e-1").await.unwrap();
    let check = env.engine().compat_live(to_v2()).await.unwrap();
    assert_eq!(verdicts(&check)["e-1"].verdict, Verdict::Upgradable);
    // Before the upgrade, a gift order reaches the step v2 no longer makes.
    let h = order_v1.handle(env.engine(), "e-1");
    let msg = Place {
        gift: true,
        ..place("e-1")
    };
    h.send(msg, "m-1").await.unwrap();
    env.run_until_idle().await.unwrap();
    let answer = env
        .engine()
        .upgrade_instances(UpgradeRequest::instance("e-1", "v2"))
        .await
        .unwrap();
    assert!(answer.upgraded.is_empty(), "{answer:?}");
    assert_eq!(answer.refused[0].reason.code, ReasonCode::PrefixRejected);
    assert_eq!(
        env.engine().get_instance("e-1").await.unwrap().version,
        "v1"
    );
}

/// A [`MemoryStore`] that, once armed, lets another write land on an instance just before the
/// engine commits an upgrade of it: the race an upgrade's conditional commit guards against.
struct Racing {
    inner: Arc<MemoryStore>,
    /// The instance whose upgrade meets a racing write, once.
    armed: Mutex<Option<String>>,
}

impl Racing {
    /// The racing write: the head turn of `id` now saved a gift-wrap, which v2 does not make.
    async fn race(&self, id: &str) {
        let mut inst = self
            .inner
            .load_instance("default", id)
            .await
            .unwrap()
            .unwrap();
        let mut head = self
            .inner
            .load_turn("default", id, inst.pending[0])
            .await
            .unwrap()
            .unwrap();
        let mut wrap = head.steps[0].clone();
        wrap.key = "wrap".into();
        head.steps.insert(1, wrap);
        let expected = inst.revision;
        inst.revision += 1;
        let write = WriteSet {
            ns: "default".into(),
            id: id.into(),
            expected_revision: Some(expected),
            instance: Some(inst),
            turns: vec![head],
            retention: None,
            runs: Vec::new(),
            prune_runs_before: None,
            durability: turnwise::store::Durability::Durable,
        };
        self.inner.commit(write).await.unwrap();
    }
}

#[async_trait]
impl Store for Racing {
    async fn load_instance(
        &self,
        ns: &str,
        id: &str,
    ) -> Result<Option<InstanceRecord>, StoreError> {
        self.inner.load_instance(ns, id).await
    }
    async fn load_turn(
        &self,
        ns: &str,
        id: &str,
        n: u64,
    ) -> Result<Option<TurnRecord>, StoreError> {
        self.inner.load_turn(ns, id, n).await
    }
    async fn find_message(
        &self,
        ns: &str,
        id: &str,
        message_id: &str,
    ) -> Result<Option<TurnRecord>, StoreError> {
        self.inner.find_message(ns, id, message_id).await
    }
    async fn list_turns(
        &self,
        ns: &str,
        id: &str,
        r: TurnRange,
    ) -> Result<Vec<TurnRecord>, StoreError> {
        self.inner.list_turns(ns, id, r).await
    }
    async fn list_instances(
        &self,
        ns: &str,
        filter: InstanceFilter,
    ) -> Result<Vec<InstanceRecord>, StoreError> {
        self.inner.list_instances(ns, filter).await
    }
    async fn count_instances(
        &self,
        ns: &str,
        workflow_type: &str,
        version: Option<&str>,
    ) -> Result<(u64, u64), StoreError> {
        self.inner.count_instances(ns, workflow_type, version).await
    }
    async fn due(
        &self,
        ns: &str,
        workflows: &[WorkflowRef],
        now: Millis,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.inner.due(ns, workflows, now, limit).await
    }
    async fn next_due(
        &self,
        ns: &str,
        workflows: &[WorkflowRef],
    ) -> Result<Option<Millis>, StoreError> {
        self.inner.next_due(ns, workflows).await
    }
    async fn list_runs(&self, ns: &str, filter: RunFilter) -> Result<Vec<WorkflowRun>, StoreError> {
        self.inner.list_runs(ns, filter).await
    }
    async fn load_run(&self, ns: &str, run_id: &str) -> Result<Option<WorkflowRun>, StoreError> {
        self.inner.load_run(ns, run_id).await
    }
    async fn count_runs(&self, ns: &str, since_ms: Millis) -> Result<Vec<RunCount>, StoreError> {
        self.inner.count_runs(ns, since_ms).await
    }
    async fn save_schema(
        &self,
        ns: &str,
        workflow_type: &str,
        version: &str,
        document: &str,
    ) -> Result<(), StoreError> {
        self.inner
            .save_schema(ns, workflow_type, version, document)
            .await
    }
    async fn load_schemas(&self, ns: &str) -> Result<Vec<String>, StoreError> {
        self.inner.load_schemas(ns).await
    }
    async fn commit(&self, write: WriteSet) -> Result<(), CommitError> {
        let upgrading = write.instance.as_ref().is_some_and(|i| {
            i.version == "v2" && self.armed.lock().unwrap().as_deref() == Some(&i.id)
        });
        if upgrading {
            self.armed.lock().unwrap().take();
            self.race(&write.id).await;
        }
        self.inner.commit(write).await
    }
}

#[tokio::test]
async fn the_upgrade_checks_again_in_the_instance_commit() {
    let clock = ManualClock::default();
    let store = Arc::new(Racing {
        inner: Arc::new(MemoryStore::new()),
        armed: Mutex::new(None),
    });
    let engine = Engine::from_parts(
        store.clone(),
        Arc::new(clock.clone()),
        EngineConfig::default(),
    );
    let worker = Worker::new(engine.clone())
        .clock(Arc::new(clock.clone()) as Arc<dyn Clock>)
        .register(order_v1)
        .register(order_v2);
    worker.register_schemas().await.unwrap();
    let h = order_v1.start(&engine, "f-1").await.unwrap();
    h.send(place("f-1"), "m-1").await.unwrap();
    worker.run_until_idle().await.unwrap();
    let check = engine.compat_live(to_v2()).await.unwrap();
    assert_eq!(
        verdicts(&check)["f-1"].verdict,
        Verdict::UpgradableAfterTurn
    );

    // The upgrade decides on the turn asleep after `reserve`; before its commit lands, the
    // turn's saved steps change so that v2 no longer accepts them. The commit, conditional on
    // the record it decided on, is refused; read again, the instance is pinned.
    *store.armed.lock().unwrap() = Some("f-1".into());
    let answer = engine
        .upgrade_instances(UpgradeRequest::instance("f-1", "v2").by("ops"))
        .await
        .unwrap();
    assert!(
        store.armed.lock().unwrap().is_none(),
        "the racing write ran"
    );
    assert!(answer.upgraded.is_empty(), "{answer:?}");
    let refused = &answer.refused[0];
    assert_eq!(refused.reason.code, ReasonCode::PrefixRejected);
    assert_eq!(refused.reason.position, Some(1));
    let inst = engine.get_instance("f-1").await.unwrap();
    assert_eq!((inst.version.as_str(), inst.events.len()), ("v1", 0));
    assert_eq!(
        inst.current_turn.unwrap().steps.len(),
        3,
        "the racing write stands"
    );
}

#[tokio::test]
async fn a_turn_held_by_a_worker_is_refused_as_retryable() {
    let env = env();
    let h = env.start(&order_v1, "g-1").await.unwrap();
    h.send(place("g-1"), "m-1").await.unwrap();
    // A worker of its own claims the turn and holds it.
    let task = env
        .engine()
        .claim(ClaimRequest {
            worker: "w-held".into(),
            workflows: vec![WorkflowRef::new("order", "v1")],
            wait_ms: 0,
            include_execution_credential: None,
        })
        .await
        .unwrap()
        .task
        .unwrap();
    let check = env.engine().compat_live(to_v2()).await.unwrap();
    let entry = &verdicts(&check)["g-1"];
    assert_eq!(entry.verdict, Verdict::UpgradableAfterTurn);
    assert!(entry
        .note
        .as_deref()
        .unwrap()
        .contains("held by worker `w-held`"));
    let answer = env
        .engine()
        .upgrade_instances(UpgradeRequest::instance("g-1", "v2"))
        .await
        .unwrap();
    let refused = &answer.refused[0];
    assert_eq!(
        (refused.reason.code, refused.retryable),
        (ReasonCode::Held, true)
    );
    // Once the attempt ends (the lease runs out), the same request moves it.
    env.clock()
        .advance(Duration::from_millis(task.lease_ms + 1));
    let answer = env
        .engine()
        .upgrade_instances(UpgradeRequest::instance("g-1", "v2"))
        .await
        .unwrap();
    assert_eq!(answer.upgraded.len(), 1, "{answer:?}");
}

#[tokio::test]
async fn requests_name_one_instance_or_a_type_with_all_upgradable() {
    let engine = Engine::in_memory();
    let cases = [
        (UpgradeRequest::default(), "to_version"),
        (
            UpgradeRequest {
                to_version: "v2".into(),
                ..UpgradeRequest::default()
            },
            "workflow_id",
        ),
        (
            UpgradeRequest {
                all_upgradable: false,
                ..UpgradeRequest::all_upgradable("order", "v2")
            },
            "all_upgradable",
        ),
        (
            UpgradeRequest {
                all_upgradable: true,
                ..UpgradeRequest::instance("o", "v2")
            },
            "all_upgradable",
        ),
        (UpgradeRequest::instance("o", "v2").by(" "), "by"),
    ];
    for (req, param) in cases {
        let err = engine.upgrade_instances(req.clone()).await.unwrap_err();
        assert_eq!(err.param(), Some(param), "{req:?}: {err}");
    }
    let err = engine
        .upgrade_instances(UpgradeRequest::instance("missing", "v2"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
    let empty = engine.compat_live(to_v2()).await.unwrap();
    assert_eq!((empty.checked, empty.counts.total()), (0, 0));
}
