// A `#[workflow]` function returns `Result<Done<State, Reply>, TurnError>`.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<u64, TurnError> {
    let _ = (ctx, state);
    Ok(add)
}

fn main() {}
