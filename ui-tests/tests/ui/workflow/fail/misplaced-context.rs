// The turn context is the first parameter, not a later one.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[workflow]
async fn counter(state: Count, ctx: &mut Turn, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let _ = ctx;
    Ok(Done::new(state).reply(add))
}

fn main() {}
