// A `#[workflow]` function takes the turn context first.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[workflow]
async fn counter(state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    Ok(Done::new(state).reply(add))
}

fn main() {}
