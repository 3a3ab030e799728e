// Reading the environment in the body: a step or the dependencies are suggested.
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
    let home = std::env::var("HOME").unwrap_or_default();
    let _ = (home, ctx);
    Ok(Done::new(state).reply(add))
}

fn main() {}
