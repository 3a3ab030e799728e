// Two durable calls run concurrently with `join!`.
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
    let (a, b) = tokio::join!(
        ctx.step("a", move |_| async move { Ok(add) }),
        ctx.step("b", move |_| async move { Ok(add) }),
    );
    Ok(Done::new(state).reply(a? + b?))
}

fn main() {}
