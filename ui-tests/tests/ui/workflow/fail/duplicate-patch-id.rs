// The same patch id twice in one workflow: both places are shown.
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
    if ctx.patched("tax").await? {
        ctx.step("tax", |_| async { Ok(1u64) }).await?;
    }
    if ctx.patched("tax").await? {
        ctx.step("fee", |_| async { Ok(2u64) }).await?;
    }
    Ok(Done::new(state).reply(add))
}

fn main() {}
