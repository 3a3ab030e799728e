// The same literal key twice in one body: both places are shown.
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
    let a = ctx.step("add", move |_| async move { Ok(add) }).await?;
    ctx.sleep("add", std::time::Duration::from_secs(1)).await?;
    Ok(Done::new(state).reply(a))
}

fn main() {}
