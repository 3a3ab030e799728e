//! Replay manifests at the boundary a user sees: `#[workflow]` generates each version's
//! grammar of durable calls (sequence, branches, loops, parallel groups, patches, waits) with
//! keys, kinds and source lines, and `ctx.patched` lets one version carry the structure of
//! turns saved before a change and after it.

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::clock::Clock;
use turnwise::manifest::{CallKind, Manifest, Node};
use turnwise::prelude::*;
use turnwise::protocol::TurnStatus;
use turnwise::testing::TestEnv;
use turnwise::Worker;

const HOUR: Duration = Duration::from_secs(3600);

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Trail {
    pub ran: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema, Signal)]
#[signal(name = "approval")]
pub struct Approval {
    pub ok: bool,
}

#[step]
async fn reserve(amount: u64) -> Result<u64, TurnError> {
    Ok(amount)
}

/// Every kind of structure the grammar records.
#[workflow(name = "shapes", signals(Approval))]
pub async fn shapes(
    ctx: &mut Turn,
    state: Trail,
    items: Vec<u64>,
) -> Result<Done<Trail, u64>, TurnError> {
    let total = reserve(ctx, items.len() as u64).await?;
    if total > 3 {
        ctx.sleep("cool-off", HOUR).await?;
    } else {
        ctx.step("small", |_| async { Ok(1u64) }).await?;
    }
    for (i, item) in items.iter().enumerate() {
        let item = *item;
        ctx.step(format!("item-{i}"), move |_| async move { Ok(item) })
            .await?;
    }
    let (a, b) = ctx
        .parallel()
        .step("left", |_| async { Ok(1u64) })
        .step("right", |_| async { Ok(2u64) })
        .await?;
    let approval = ctx.wait_for_signal::<Approval>("approve", HOUR).await?;
    let _ = approval;
    Ok(Done::new(state).reply(total + a + b))
}

fn calls(node: &Node) -> Vec<(CallKind, String)> {
    turnwise::manifest::grammar::calls(node)
        .into_iter()
        .map(|c| (c.kind, c.key.clone()))
        .collect()
}

#[test]
fn a_workflow_describes_its_durable_calls() {
    let m: Manifest = shapes.manifest();
    assert_eq!((m.name.as_str(), m.version.as_str()), ("shapes", "v1"));
    assert_eq!(m.shape_hash.len(), 64);
    let Node::Seq(parts) = &m.grammar else {
        panic!("a body is a sequence: {:?}", m.grammar)
    };
    assert!(matches!(&parts[0], Node::Call(c) if c.key == "reserve" && c.call == "step_fn"));
    let Node::Alt(alt) = &parts[1] else {
        panic!("the `if` is an alternative: {:?}", parts[1])
    };
    assert_eq!(alt.arms.len(), 2);
    assert!(!alt.cond.is_empty());
    let Node::Loop(body) = &parts[2] else {
        panic!("the `for` is a loop: {:?}", parts[2])
    };
    assert!(matches!(&**body, Node::Call(c) if c.key == "item-*"));
    assert!(matches!(&parts[3], Node::Parallel(members) if members.len() == 2));
    let Node::Call(wait) = &parts[4] else {
        panic!("the wait is a call: {:?}", parts[4])
    };
    assert_eq!(wait.kind, CallKind::Signal);
    assert_eq!(wait.signal.as_deref(), Some("approval"));
    assert_eq!(
        calls(&m.grammar),
        [
            (CallKind::Step, "reserve".to_owned()),
            (CallKind::Sleep, "cool-off".to_owned()),
            (CallKind::Step, "small".to_owned()),
            (CallKind::Step, "item-*".to_owned()),
            (CallKind::Step, "left".to_owned()),
            (CallKind::Step, "right".to_owned()),
            (CallKind::Signal, "approve".to_owned()),
        ]
    );
    // Each call names its line in this file.
    for call in turnwise::manifest::grammar::calls(&m.grammar) {
        assert!(
            call.at.starts_with("runtime/tests/it/test_manifest.rs:"),
            "{}",
            call.at
        );
    }
    // The schemas travel with it, and the canonical text is stable.
    assert!(m.schemas.signals.contains_key("approval"));
    assert_eq!(m.schemas.steps["reserve"]["type"], "integer");
    assert_eq!(shapes.manifest().to_canonical_json(), m.to_canonical_json());
    assert_eq!(Manifest::from_json(&m.to_canonical_json()).unwrap(), m);
    // The trait gives the same manifest as the type.
    assert_eq!(Workflow::manifest(&shapes), Some(m));
}

// ---- patches --------------------------------------------------------------------------

fn trail(state: &Trail, step: &str) -> Trail {
    let mut t = state.clone();
    t.ran.push(step.to_owned());
    t
}

/// `pay` as first deployed: hold, sleep, settle.
#[workflow(name = "pay")]
pub async fn pay_before(
    ctx: &mut Turn,
    state: Trail,
    _m: u64,
) -> Result<Done<Trail, u64>, TurnError> {
    ctx.step("hold", |_| async { Ok(1u64) }).await?;
    ctx.sleep("nap", HOUR).await?;
    ctx.step("settle", |_| async { Ok(1u64) }).await?;
    Ok(Done::new(trail(&state, "old")).reply(0))
}

/// The same version with a fraud check inserted before the sleep, behind a patch.
#[workflow(name = "pay")]
pub async fn pay_patched(
    ctx: &mut Turn,
    state: Trail,
    _m: u64,
) -> Result<Done<Trail, u64>, TurnError> {
    ctx.step("hold", |_| async { Ok(1u64) }).await?;
    let checked = if ctx.patched("fraud-check").await? {
        ctx.step("fraud", |_| async { Ok(1u64) }).await?
    } else {
        0
    };
    ctx.sleep("nap", HOUR).await?;
    ctx.step("settle", |_| async { Ok(1u64) }).await?;
    let branch = if checked == 1 { "new" } else { "old" };
    Ok(Done::new(trail(&state, branch)).reply(checked))
}

fn keys(turn: &turnwise::protocol::WorkflowTurn) -> Vec<&str> {
    turn.steps.iter().map(|s| s.key.as_str()).collect()
}

#[tokio::test]
async fn a_patch_keeps_turns_saved_before_it_on_the_old_branch() {
    let env = TestEnv::new().register(pay_before);
    let old = env.start(&pay_before, "pay-1").await.unwrap();
    let t1 = old.send(1, "m-1").await.unwrap().number;
    env.run_until_idle().await.unwrap();
    assert_eq!(keys(&old.turn(t1).await.unwrap()), ["hold", "nap"]);

    // The patched code is deployed under the same version while that turn sleeps.
    let patched = Worker::new(env.engine().clone())
        .clock(Arc::new(env.clock().clone()) as Arc<dyn Clock>)
        .register(pay_patched);
    let new = env.start(&pay_patched, "pay-2").await.unwrap();
    let t2 = new.send(1, "m-1").await.unwrap().number;
    env.clock().advance(HOUR);
    patched.run_until_idle().await.unwrap();
    env.clock().advance(HOUR);
    patched.run_until_idle().await.unwrap();

    // The turn saved before the patch replays the old branch and finishes without the check.
    let done = old.turn(t1).await.unwrap();
    assert_eq!(done.status, TurnStatus::Completed, "{done:?}");
    assert_eq!(keys(&done), ["hold", "nap", "settle"]);
    assert_eq!(old.reply(t1).await.unwrap(), Some(0));
    // A turn that reached the patch on new code saved its marker and took the new branch.
    let done = new.turn(t2).await.unwrap();
    assert_eq!(done.status, TurnStatus::Completed, "{done:?}");
    assert_eq!(
        keys(&done),
        ["hold", "patched.fraud-check", "fraud", "nap", "settle"]
    );
    assert_eq!(new.state().await.unwrap().ran, ["new"]);

    // The manifest carries the patch with both branches.
    let m = pay_patched.manifest();
    assert_eq!(m.patches, ["fraud-check"]);
    let Node::Seq(parts) = &m.grammar else {
        panic!("{:?}", m.grammar)
    };
    assert!(
        matches!(&parts[1], Node::Patch(p) if p.id == "fraud-check"
            && matches!(&*p.new, Node::Call(c) if c.key == "fraud")
            && matches!(&*p.old, Node::Seq(s) if s.is_empty())),
        "{:?}",
        parts[1]
    );
    assert_ne!(m.shape_hash, pay_before.manifest().shape_hash);
}
