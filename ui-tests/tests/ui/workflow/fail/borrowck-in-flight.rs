// Two steps in flight through an alias of the context: the borrow checker's report.
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
    let turn = &mut *ctx;
    let first = turn.step("a", move |_| async move { Ok(add) });
    ctx.sleep("nap", std::time::Duration::from_secs(1)).await?;
    let a = first.await?;
    Ok(Done::new(state).reply(a))
}

fn main() {}
