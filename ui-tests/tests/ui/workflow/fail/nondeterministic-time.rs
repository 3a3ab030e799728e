// Reading the clock in the body: `ctx.now` is suggested.
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
    let started = std::time::Instant::now();
    let wall = std::time::SystemTime::now();
    let _ = (started, wall, ctx);
    Ok(Done::new(state).reply(add))
}

fn main() {}
