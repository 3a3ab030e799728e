// Durable calls in loops take a key per iteration.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

use std::time::Duration;

#[step]
async fn double(n: u64) -> Result<u64, TurnError> {
    Ok(n * 2)
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let mut total = 0;
    for i in 0..add {
        total += ctx.step(format!("add-{i}"), move |_| async move { Ok(i) }).await?;
        total += double(ctx, i).key(format!("double-{i}")).await?;
    }
    let mut round = 0;
    while total < 100 {
        ctx.sleep(format!("nap-{round}"), Duration::from_millis(100)).await?;
        total += 10;
        round += 1;
    }
    Ok(Done::new(state).reply(total))
}

fn main() {}
