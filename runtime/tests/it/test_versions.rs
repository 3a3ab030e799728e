//! Several versions of one workflow side by side: one worker runs `order` v1 and v2, each
//! instance keeps the version it was created with, and turns in flight on both versions (asleep
//! mid-turn) resume on their own code and replay their own saved steps.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;
use turnwise::protocol::TurnStatus;
use turnwise::testing::TestEnv;

const HOUR: Duration = Duration::from_secs(3600);

/// The saved state of both versions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Order {
    /// What was charged so far.
    pub charged: u64,
}

#[step]
async fn reserve(amount: u64) -> Result<u64, TurnError> {
    Ok(amount)
}

#[step]
async fn charge(amount: u64) -> Result<u64, TurnError> {
    Ok(amount)
}

#[step]
async fn charge_with_tax(amount: u64) -> Result<u64, TurnError> {
    Ok(amount + amount / 10)
}

/// v1: reserve, sleep an hour, charge.
#[workflow(name = "order", version = "v1")]
pub async fn order_v1(
    ctx: &mut Turn,
    state: Order,
    amount: u64,
) -> Result<Done<Order, u64>, TurnError> {
    let reserved = reserve(ctx, amount).await?;
    ctx.sleep("settle", HOUR).await?;
    let charged = charge(ctx, reserved).await?;
    Ok(Done::new(Order {
        charged: state.charged + charged,
    })
    .reply(charged))
}

/// v2: reserve, sleep an hour, charge with a tax of a tenth.
#[workflow(name = "order", version = "v2")]
pub async fn order_v2(
    ctx: &mut Turn,
    state: Order,
    amount: u64,
) -> Result<Done<Order, u64>, TurnError> {
    let reserved = reserve(ctx, amount).await?;
    ctx.sleep("settle", HOUR).await?;
    let charged = charge_with_tax(ctx, reserved).await?;
    Ok(Done::new(Order {
        charged: state.charged + charged,
    })
    .reply(charged))
}

fn keys(turn: &turnwise::protocol::WorkflowTurn) -> Vec<&str> {
    turn.steps.iter().map(|s| s.key.as_str()).collect()
}

#[tokio::test]
async fn one_worker_runs_both_versions_with_turns_in_flight_on_each() {
    let env = TestEnv::new().register(order_v1).register(order_v2);
    let old = env.start(&order_v1, "order-1").await.unwrap();
    let new = env.start(&order_v2, "order-2").await.unwrap();
    let old_turn = old.send(100, "m-1").await.unwrap().number;
    let new_turn = new.send(100, "m-1").await.unwrap().number;

    // Both turns run up to their sleep and wait there, in flight.
    env.run_until_idle().await.unwrap();
    let waiting = [
        ("v1", old.turn(old_turn).await.unwrap()),
        ("v2", new.turn(new_turn).await.unwrap()),
    ];
    for (version, t) in &waiting {
        assert_eq!(t.status, TurnStatus::Waiting, "{version}: {t:?}");
        assert_eq!(keys(t), ["reserve", "settle"], "{version}");
    }
    assert_eq!(old.instance().await.unwrap().version, "v1");
    assert_eq!(new.instance().await.unwrap().version, "v2");

    // The hour passes: each turn replays its saved prefix and finishes on its own version.
    env.advance(HOUR).await.unwrap();
    let t1 = old.turn(old_turn).await.unwrap();
    let t2 = new.turn(new_turn).await.unwrap();
    assert_eq!(
        (t1.status, t2.status),
        (TurnStatus::Completed, TurnStatus::Completed)
    );
    assert_eq!(keys(&t1), ["reserve", "settle", "charge"]);
    assert_eq!(keys(&t2), ["reserve", "settle", "charge_with_tax"]);
    assert_eq!(old.reply(old_turn).await.unwrap(), Some(100));
    assert_eq!(new.reply(new_turn).await.unwrap(), Some(110));

    // A later message to the v1 instance still runs v1's code: an instance keeps its version.
    let again = old.send(10, "m-2").await.unwrap().number;
    env.run_until_idle().await.unwrap();
    env.advance(HOUR).await.unwrap();
    assert_eq!(old.reply(again).await.unwrap(), Some(10));
    assert_eq!(old.state().await.unwrap(), Order { charged: 110 });
    assert_eq!(new.state().await.unwrap(), Order { charged: 110 });
}
