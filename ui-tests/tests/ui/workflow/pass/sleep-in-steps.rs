// What the sleep check must let through: the durable `ctx.sleep`, and `tokio::time::sleep` or
// `std::thread::sleep` inside a step (an inline step, a `#[step]` function, a parallel group's
// member, a fan-out's item), which runs once and is saved.
#![allow(dead_code, unused_imports)]
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[step]
async fn backoff(ms: u64) -> Result<u64, TurnError> {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    Ok(ms)
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    ctx.sleep("cool-down", Duration::from_secs(60)).await?;
    let a = ctx
        .step("poll", move |_| async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            Ok(add)
        })
        .await?;
    let b = backoff(ctx, 10).await?;
    let (c, d) = ctx
        .parallel()
        .step("left", |_| async move {
            std::thread::sleep(Duration::from_millis(1));
            Ok(1_u64)
        })
        .step("right", |_| async move {
            use tokio::time::sleep;
            sleep(Duration::from_millis(1)).await;
            Ok(2_u64)
        })
        .await?;
    let e: Vec<u64> = ctx
        .fan_out("each", vec![1_u64, 2], |_, n| async move {
            tokio::time::sleep(Duration::from_millis(n)).await;
            Ok(n)
        })
        .await?;
    Ok(Done::new(state).reply(a + b + c + d + e.iter().sum::<u64>()))
}

fn main() {}
