// A `#[step]` function called twice needs a distinct key per call.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[step]
async fn double(n: u64) -> Result<u64, TurnError> {
    Ok(n * 2)
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let a = double(ctx, add).await?;
    let b = double(ctx, a).await?;
    Ok(Done::new(state).reply(b))
}

fn main() {}
