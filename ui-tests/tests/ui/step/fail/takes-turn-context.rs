// A step takes the step context, not the turn context.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[step]
async fn double(ctx: &mut Turn<Count>, n: u64) -> Result<u64, TurnError> {
    let _ = ctx;
    Ok(n * 2)
}

fn main() {}
