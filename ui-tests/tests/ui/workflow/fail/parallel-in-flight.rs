// A parallel group or a fan-out stored instead of awaited where it is made, and a group
// without steps.
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
    let group = ctx.parallel().step("quote", move |_| async move { Ok(add) });
    let (a,) = group.await?;
    let fan = ctx.fan_out("fetch", 0..add, |_, i| async move { Ok(i) });
    let all: Vec<u64> = fan.await?;
    let () = ctx.parallel().await?;
    Ok(Done::new(state).reply(a + all.len() as u64))
}

fn main() {}
