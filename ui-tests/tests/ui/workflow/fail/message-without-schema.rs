// The message implements `JsonSchema`; the error is at the type.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[derive(Serialize, Deserialize)]
struct Add {
    n: u64,
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: Add) -> Result<Done<Count, u64>, TurnError> {
    let _ = ctx;
    Ok(Done::new(state).reply(add.n))
}

fn main() {}
