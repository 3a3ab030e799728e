// A workflow fails with `TurnError`, not `WorkflowError` (steps fail with `TurnError`).
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, WorkflowError> {
    let _ = ctx;
    Ok(Done::new(state).reply(add))
}

fn main() {}
