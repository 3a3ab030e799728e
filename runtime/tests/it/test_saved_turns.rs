//! Saved turns replayed in a test: a turn exported with its payloads replays against the code
//! that saved it (accepted), against changed code (the divergence, with the report a live
//! mismatch gives), never running a step past the saved ones.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use turnwise::manifest::grammar::Saved;
use turnwise::manifest::CallKind;
use turnwise::prelude::*;
use turnwise::replay::{export_turn, Replayed, SavedTurn};
use turnwise::testing::TestEnv;

const HOUR: Duration = Duration::from_secs(3600);

/// Real executions of the steps, by any version.
static RAN: AtomicUsize = AtomicUsize::new(0);

async fn counted(m: u64) -> Result<u64, TurnError> {
    RAN.fetch_add(1, SeqCst);
    Ok(m)
}

/// As deployed: `a`, a nap, `b`.
#[workflow(name = "pay")]
pub async fn deployed(ctx: &mut Turn, n: u64, m: u64) -> Result<Done<u64, u64>, TurnError> {
    let a = ctx.step("a", move |_| counted(m)).await?;
    ctx.sleep("nap", HOUR).await?;
    let b = ctx.step("b", move |_| counted(m)).await?;
    Ok(Done::new(n + a + b).reply(a))
}

/// Changed: a check inserted before the nap.
#[workflow(name = "pay")]
pub async fn changed(ctx: &mut Turn, n: u64, m: u64) -> Result<Done<u64, u64>, TurnError> {
    let a = ctx.step("a", move |_| counted(m)).await?;
    ctx.step("check", move |_| counted(m)).await?;
    ctx.sleep("nap", HOUR).await?;
    let b = ctx.step("b", move |_| counted(m)).await?;
    Ok(Done::new(n + a + b).reply(a))
}

#[workflow(name = "other")]
pub async fn other(_ctx: &mut Turn, n: u64, _m: u64) -> Result<Done<u64, u64>, TurnError> {
    Ok(Done::new(n).reply(0))
}

#[tokio::test]
async fn a_saved_turn_replays_against_the_code_that_saved_it_or_names_the_divergence() {
    let env = TestEnv::new().register(deployed);
    let h = env.start(&deployed, "pay-1").await.unwrap();
    let t1 = h.send(5, "m-1").await.unwrap().number;
    env.run_until_idle().await.unwrap();

    // The turn asleep at `nap`, exported as a file would hold it.
    let saved = export_turn(env.engine(), "pay-1", t1).await.unwrap();
    assert_eq!(saved.turn.steps.len(), 2);
    let text = serde_json::to_string_pretty(&saved).unwrap();
    let saved: SavedTurn = serde_json::from_str(&text).unwrap();
    let before = RAN.load(SeqCst);

    let same = env.replay(deployed, &saved).await.unwrap();
    assert_eq!(
        same,
        Replayed::Accepted {
            replayed: 2,
            finished: false
        }
    );
    let diverged = env.replay(changed, &saved).await.unwrap();
    let Replayed::Diverged(report) = diverged else {
        panic!("{diverged:?}")
    };
    assert_eq!(report.position, 1);
    assert_eq!(report.found, Some(Saved::new(CallKind::Step, "check")));
    assert_eq!(
        report.saved,
        [
            Saved::new(CallKind::Step, "a"),
            Saved::new(CallKind::Sleep, "nap")
        ]
    );
    let at = report.at.unwrap();
    assert!(
        at.starts_with("runtime/tests/it/test_saved_turns.rs:"),
        "{at}"
    );
    assert_eq!(RAN.load(SeqCst), before, "no step ran in a replay");
    // The replays touched nothing: the turn still sleeps.
    assert_eq!(h.turn(t1).await.unwrap().steps.len(), 2);

    // A finished turn (its state before is the previous turn's) replays to the end.
    env.advance(HOUR).await.unwrap();
    let t2 = h.send(1, "m-2").await.unwrap().number;
    env.run_until_idle().await.unwrap();
    env.advance(HOUR).await.unwrap();
    let done = export_turn(env.engine(), "pay-1", t2).await.unwrap();
    assert_eq!(done.state, serde_json::json!(10));
    assert_eq!(
        env.replay(deployed, &done).await.unwrap(),
        Replayed::Accepted {
            replayed: 3,
            finished: true
        }
    );
    assert_eq!(
        RAN.load(SeqCst),
        before + 3,
        "only the real turns ran steps"
    );
}

#[tokio::test]
async fn what_cannot_be_replayed_is_refused_by_name() {
    let env = TestEnv::new().register(deployed);
    let h = env.start(&deployed, "pay-2").await.unwrap();
    let t1 = h.send(5, "m-1").await.unwrap().number;
    env.run_until_idle().await.unwrap();
    env.advance(HOUR).await.unwrap();
    // The state before a finished first turn is no longer kept.
    let e = export_turn(env.engine(), "pay-2", t1).await.unwrap_err();
    assert_eq!(e.param(), Some("turn"), "{e}");
    let h3 = env.start(&deployed, "pay-3").await.unwrap();
    let t = h3.send(1, "m-1").await.unwrap().number;
    env.run_until_idle().await.unwrap();
    let mut saved = export_turn(env.engine(), "pay-3", t).await.unwrap();
    let e = env.replay(other, &saved).await.unwrap_err();
    assert!(e.to_string().contains("`pay`"), "{e}");
    saved.format = 9;
    let e = env.replay(deployed, &saved).await.unwrap_err();
    assert!(e.to_string().contains("format 9"), "{e}");
}
