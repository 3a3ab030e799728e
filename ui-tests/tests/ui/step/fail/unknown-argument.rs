// Unknown `#[step]` arguments are named, with the supported ones.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[step(kind = "tool", retries = 3)]
async fn double(n: u64) -> Result<u64, TurnError> {
    Ok(n * 2)
}

fn main() {}
