// A bare value as an argument names the argument it is for; a misspelled argument names the
// nearest supported one.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[workflow("counter", verison = "v2", max_atempts = 3)]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let _ = ctx;
    Ok(Done::new(state).reply(add))
}

fn main() {}
