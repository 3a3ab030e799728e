// `on_mismatch` is "suspend" or "fail".
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[workflow(on_mismatch = "retry")]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let _ = ctx;
    Ok(Done::new(state).reply(add))
}

fn main() {}
