//! Moving instances to another version (a turnwise extension): the live compatibility check's
//! verdicts and the upgrade, driven over the raw protocol with hand-written replay manifests
//! for `order` v0, v1 and v2.
//!
//! v1 saves `reserve`, then optionally `wrap`, optionally waits for the signal `approval`,
//! sleeps `settle` and saves `charge`; v2 has no `wrap` and saves `charge_with_tax`; v0's
//! state keeps `charged` as a string, which v2's integer cannot read.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};
use turnwise::manifest::{Alt, Call, CallKind, Manifest, Node};
use turnwise::protocol::*;
use turnwise::Backend;

use crate::support::*;
use crate::{advance_ms, Fixture};

/// The workflow type of these cases.
pub const ORDER: &str = "order";
const HOUR_MS: u64 = 3_600_000;

fn call(kind: CallKind, key: &str, line: u32) -> Node {
    let call = Call::new(kind, key, format!("src/order.rs:{line}"));
    let call = if kind == CallKind::Signal {
        call.signal("approval")
    } else {
        call
    };
    Node::Call(call)
}

/// The manifest of `version`: with a `wrap` branch (v1), and ending in `last`.
fn manifest(version: &str, wrap: bool, last: &str, state: Value) -> Manifest {
    let optional = |node: Node| {
        Node::Alt(Alt {
            cond: String::new(),
            arms: vec![node, Node::Seq(Vec::new())],
        })
    };
    let mut parts = vec![call(CallKind::Step, "reserve", 10)];
    if wrap {
        parts.push(optional(call(CallKind::Step, "wrap", 12)));
    }
    parts.push(optional(call(CallKind::Signal, "approval", 14)));
    parts.push(call(CallKind::Sleep, "settle", 16));
    parts.push(call(CallKind::Step, last, 17));
    let mut m = Manifest::new(ORDER, version, Node::Seq(parts));
    m.schemas.state = state;
    m.schemas.message = json!({"type": "object"});
    m.schemas.signals = BTreeMap::from([("approval".to_owned(), json!({"type": "object"}))]);
    m
}

fn charged(of: &str) -> Value {
    json!({"type": "object", "properties": {"charged": {"type": of}}})
}

/// Register `order` v0, v1 and v2 with their manifests.
pub async fn register<B: Backend + ?Sized>(b: &B) {
    let versions = [
        manifest("v0", false, "charge", charged("string")),
        manifest("v1", true, "charge", charged("integer")),
        manifest("v2", false, "charge_with_tax", charged("integer")),
    ];
    for m in versions {
        let doc = SchemaDocument {
            workflow_type: ORDER.into(),
            version: m.version.clone(),
            message: m.schemas.message.clone(),
            signals: m.schemas.signals.clone(),
            state: m.schemas.state.clone(),
            reply: Value::Null,
            manifest: Some(m),
        };
        ok(b.register_schema(&doc).await, "register an order version");
    }
}

/// Create `id` on `version` of `order`.
async fn create_order<B: Backend + ?Sized>(b: &B, id: &str, version: &str) {
    let state = if version == "v0" {
        json!({"charged": "0"})
    } else {
        json!({"charged": 0})
    };
    create_with(
        b,
        CreateInstanceRequest {
            id: id.into(),
            workflow_type: ORDER.into(),
            version: version.into(),
            state,
            lease_ms: None,
            max_attempts: None,
            on_exhausted: None,
        },
    )
    .await;
}

fn on(version: &str) -> Vec<WorkflowRef> {
    vec![WorkflowRef::new(ORDER, version)]
}

/// Create `id` on v1, admit a message, claim it, save `reserve` and answer the lease.
async fn reserved<B: Backend + ?Sized>(b: &B, id: &str) -> Lease {
    create_order(b, id, "v1").await;
    send(b, id, "m-1", json!({"amount": 100})).await;
    let task = try_claim_as(b, WORKER, on("v1")).await;
    let task = task.unwrap_or_else(|| panic!("`{id}`'s first turn is ready"));
    assert_eq!(task.turn.workflow_id, id, "the only ready turn is `{id}`'s");
    let lease = lease(&task);
    step(b, &lease, 0, "reserve", json!(100)).await;
    lease
}

/// Instances in every state the check tells apart, their ids prefixed with `p`.
async fn populate<B: Backend + ?Sized>(b: &B, p: &str) {
    register(b).await;
    create_order(b, &format!("{p}idle"), "v1").await;
    let l = reserved(b, &format!("{p}asleep")).await;
    sleep(b, &l, 1, "settle", HOUR_MS).await;
    let l = reserved(b, &format!("{p}signal")).await;
    let waiting = b.wait_signal(wait_request(&l, 1, "approval", "approval", 24 * HOUR_MS));
    ok(waiting.await, "wait for the approval");
    let l = reserved(b, &format!("{p}backoff")).await;
    fail(b, &l, "the payment provider timed out").await;
    let l = reserved(b, &format!("{p}gift")).await;
    step(b, &l, 1, "wrap", json!(true)).await;
    sleep(b, &l, 2, "settle", HOUR_MS).await;
    create_order(b, &format!("{p}legacy"), "v0").await;
    // Held by a worker under a lease: last, so that it stays held.
    reserved(b, &format!("{p}held")).await;
}

async fn check<B: Backend + ?Sized>(b: &B) -> LiveCompat {
    let query = LiveCompatQuery {
        workflow_type: ORDER.into(),
        to_version: "v2".into(),
    };
    ok(b.compat_live(query).await, "the live check of order → v2")
}

fn by_id(check: &LiveCompat) -> HashMap<&str, &InstanceCompat> {
    check
        .instances
        .iter()
        .map(|i| (i.workflow_id.as_str(), i))
        .collect()
}

async fn upgrade<B: Backend + ?Sized>(b: &B, req: UpgradeRequest) -> UpgradeResponse {
    let what = format!("upgrade {req:?}");
    ok(b.upgrade_instances(req).await, &what)
}

/// Every instance not on the target gets its verdict: idle → upgradable; asleep, waiting for a
/// signal, backing off and held → upgradable-after-turn (the held one with a note); a saved
/// step the target does not make, and a state it cannot read → pinned, each saying why.
pub async fn live_check_verdicts(f: impl Fixture) {
    let b = f.backend();
    populate(&b, "").await;
    create_order(&b, "on-v2", "v2").await;
    let check = check(&b).await;
    assert_eq!((check.checked, check.on_target), (7, 1), "{check:#?}");
    let want = VerdictCounts {
        upgradable: 1,
        upgradable_after_turn: 4,
        resumable: 0,
        pinned: 2,
    };
    assert_eq!(check.counts, want, "{check:#?}");
    let ids: Vec<&str> = check
        .instances
        .iter()
        .map(|i| i.workflow_id.as_str())
        .collect();
    assert_eq!(
        ids,
        ["asleep", "backoff", "gift", "held", "idle", "legacy", "signal"],
        "every instance not on the target, by id"
    );
    let by = by_id(&check);
    assert_eq!(by["idle"].verdict, Verdict::Upgradable);
    for id in ["asleep", "signal", "backoff", "held"] {
        assert_eq!(by[id].verdict, Verdict::UpgradableAfterTurn, "{id}");
        assert_eq!(by[id].turn, Some(1), "{id}");
    }
    assert_eq!(by["signal"].saved_steps, Some(2));
    assert_eq!(by["held"].status, InstanceStatus::Running);
    let note = by["held"].note.as_deref().unwrap_or_default();
    assert!(note.contains(&format!("worker `{WORKER}`")), "{note}");
    let gift = by["gift"].reason.as_ref().expect("gift is pinned");
    assert_eq!(gift.code, ReasonCode::PrefixRejected);
    assert_eq!(gift.position, Some(1));
    assert_eq!(
        gift.expected,
        [
            "signal `approval` (approval) at src/order.rs:14",
            "sleep `settle` at src/order.rs:16"
        ]
    );
    let legacy = by["legacy"].reason.as_ref().expect("legacy is pinned");
    assert_eq!(legacy.code, ReasonCode::SchemaBreak);
    assert_eq!(legacy.part.as_deref(), Some("state"));
    assert_eq!(legacy.at.as_deref(), Some("/charged"));
}

/// The upgrade moves the instances that can move, each with an event naming who asked, and
/// refuses the others with their reasons (the held one as retryable); a repeat answers the
/// same and records nothing; the moved turns are claimed by v2's workers only, and go on from
/// their saved steps.
pub async fn upgrade_moves_the_movable(f: impl Fixture) {
    let b = f.backend();
    populate(&b, "").await;
    let answer = upgrade(
        &b,
        UpgradeRequest::all_upgradable(ORDER, "v2").by("conformance"),
    )
    .await;
    let moved: Vec<(&str, &str)> = answer
        .upgraded
        .iter()
        .map(|u| (u.workflow_id.as_str(), u.from_version.as_str()))
        .collect();
    let want = [
        ("asleep", "v1"),
        ("backoff", "v1"),
        ("idle", "v1"),
        ("signal", "v1"),
    ];
    assert_eq!(moved, want, "{answer:#?}");
    let refused: Vec<(&str, ReasonCode, bool)> = answer
        .refused
        .iter()
        .map(|r| (r.workflow_id.as_str(), r.reason.code, r.retryable))
        .collect();
    let want = [
        ("gift", ReasonCode::PrefixRejected, false),
        ("held", ReasonCode::Held, true),
        ("legacy", ReasonCode::SchemaBreak, false),
    ];
    assert_eq!(refused, want, "{answer:#?}");
    for id in ["asleep", "idle"] {
        let inst = instance(&b, id).await;
        assert_eq!(inst.version, "v2", "{id}");
        assert_eq!(inst.events.len(), 1, "{id}: {:?}", inst.events);
        let e = &inst.events[0];
        assert_eq!(e.action, "upgrade");
        assert_eq!(e.by.as_deref(), Some("conformance"));
        assert_eq!(e.from_version.as_deref(), Some("v1"));
        assert_eq!(e.to_version.as_deref(), Some("v2"));
    }
    for id in ["gift", "held", "legacy"] {
        let inst = instance(&b, id).await;
        assert!(
            inst.version != "v2" && inst.events.is_empty(),
            "{id}: {inst:?}"
        );
    }

    // A repeat answers the recorded move and records nothing.
    let once = UpgradeRequest::instance("asleep", "v2").by("someone else");
    let again = upgrade(&b, once).await;
    assert_eq!(again.upgraded, [answer.upgraded[0].clone()]);
    assert_eq!(instance(&b, "asleep").await.events.len(), 1);

    // The sleep ends: v1's workers get nothing of the moved ones; v2's worker replays the
    // saved steps and saves its own next step.
    advance_ms(&f, HOUR_MS);
    loop {
        let Some(task) = try_claim_as(&b, WORKER, on("v1")).await else {
            break;
        };
        let id = task.turn.workflow_id.as_str();
        assert!(["gift", "held"].contains(&id), "v1 claimed `{id}`");
        complete(&b, &lease(&task), json!({"charged": 100}), json!(100)).await;
    }
    let mut went_on = Vec::new();
    while let Some(task) = try_claim_as(&b, WORKER, on("v2")).await {
        let id = task.turn.workflow_id.clone();
        assert_eq!(task.turn.version, "v2", "{id}");
        let keys: Vec<&str> = task.turn.steps.iter().map(|s| s.key.as_str()).collect();
        let saved: &[&str] = if id == "asleep" {
            &["reserve", "settle"]
        } else {
            &["reserve"]
        };
        assert_eq!(keys, saved, "{id}: the saved steps moved with the turn");
        let l = lease(&task);
        let position = saved.len() as u32;
        if id == "asleep" {
            step(&b, &l, position, "charge_with_tax", json!(110)).await;
        }
        complete(&b, &l, json!({"charged": 110}), json!(110)).await;
        went_on.push(id);
    }
    went_on.sort();
    assert_eq!(
        went_on,
        ["asleep", "backoff"],
        "the moved turns that were due"
    );
    assert_eq!(turn(&b, "asleep", 1).await.status, TurnStatus::Completed);
}

/// The upgrade checks each instance again when it moves it: an instance that was upgradable
/// when checked, and whose turn has since saved a step the target does not make, is refused
/// and stays where it is.
pub async fn upgrade_checks_the_instance_again(f: impl Fixture) {
    let b = f.backend();
    register(&b).await;
    create_order(&b, "late", "v1").await;
    let checked = check(&b).await;
    assert_eq!(by_id(&checked)["late"].verdict, Verdict::Upgradable);
    send(&b, "late", "m-1", json!({"amount": 1})).await;
    let task = try_claim_as(&b, WORKER, on("v1"))
        .await
        .expect("a ready turn");
    let l = lease(&task);
    step(&b, &l, 0, "reserve", json!(1)).await;
    step(&b, &l, 1, "wrap", json!(true)).await;
    sleep(&b, &l, 2, "settle", HOUR_MS).await;
    let before = snapshot(&b, "late").await;
    let answer = upgrade(&b, UpgradeRequest::instance("late", "v2")).await;
    assert!(answer.upgraded.is_empty(), "{answer:#?}");
    assert_eq!(answer.refused[0].reason.code, ReasonCode::PrefixRejected);
    assert_unchanged(&b, "late", &before, "a refused upgrade writes nothing").await;
}

/// An upgrade request names one instance, or a type with `all_upgradable`; anything else is
/// refused naming the field, and a missing instance is not found.
pub async fn upgrade_request_rules(f: impl Fixture) {
    let b = f.backend();
    let both = UpgradeRequest {
        all_upgradable: true,
        ..UpgradeRequest::instance("x", "v2")
    };
    expect_invalid(
        b.upgrade_instances(both).await,
        "all_upgradable",
        "id and all",
    );
    let neither = UpgradeRequest {
        to_version: "v2".into(),
        ..UpgradeRequest::default()
    };
    expect_invalid(
        b.upgrade_instances(neither).await,
        "workflow_id",
        "nothing named",
    );
    let bad = UpgradeRequest::instance("x", "not a version");
    expect_invalid(
        b.upgrade_instances(bad).await,
        "to_version",
        "a bad version",
    );
    let missing = UpgradeRequest::instance("missing", "v2");
    expect_not_found(b.upgrade_instances(missing).await, "a missing instance");
    let query = LiveCompatQuery {
        workflow_type: "nothing-here".into(),
        to_version: "v2".into(),
    };
    let empty = ok(
        b.compat_live(query).await,
        "the check of a type with no instance",
    );
    assert_eq!((empty.checked, empty.on_target), (0, 0));
}
