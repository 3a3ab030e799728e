// An `async` block holding a durable call, stored instead of awaited where it is made.
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
    let later = async {
        let n = ctx.step("a", move |_| async move { Ok(add) }).await?;
        Ok::<u64, TurnError>(n + 1)
    };
    let b = ctx.step("b", move |_| async move { Ok(add) }).await?;
    let a = later.await?;
    Ok(Done::new(state).reply(a + b))
}

fn main() {}
