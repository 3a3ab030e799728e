// A step future bound with `let` and not awaited where it is made.
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
    let first = ctx.step("a", move |_| async move { Ok(add) });
    let a = first.await?;
    Ok(Done::new(state).reply(a))
}

fn main() {}
