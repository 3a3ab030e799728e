// A `#[step]` function is called with the turn context first.
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

async fn not_a_turn() {
    let _ = double(4).await;
}

fn main() {}
