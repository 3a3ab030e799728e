// The reply is deserializable; the error is at the type.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[derive(Serialize, JsonSchema)]
struct Total {
    n: u64,
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, Total>, TurnError> {
    let _ = ctx;
    Ok(Done::new(state).reply(Total { n: add }))
}

fn main() {}
