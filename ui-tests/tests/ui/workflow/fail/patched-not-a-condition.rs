// `patched` asked outside the condition of an `if`: the manifest could not see both branches.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let new = ctx.patched("tax").await?;
    if new {
        ctx.step("tax", |_| async { Ok(1u64) }).await?;
    }
    Ok(Done::new(state).reply(add))
}

fn main() {}
