// A helper that takes the context, called with the bare context: `#[workflow]` takes
// `name(ctx, ..)` for a `#[step]` function's call, and says to pass `&mut *ctx`.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

async fn twice(ctx: &mut Turn<counter>, n: u64) -> Result<u64, TurnError> {
    let a = ctx.step("first", |_| async move { Ok(n) }).await?;
    let b = ctx.step("second", |_| async move { Ok(n) }).await?;
    Ok(a + b)
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let n = twice(ctx, add).await?;
    Ok(Done::new(state).reply(n))
}

fn main() {}
