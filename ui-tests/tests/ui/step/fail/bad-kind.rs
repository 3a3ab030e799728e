// `kind` is "step", "model" or "tool".
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[step(kind = "http")]
async fn double(n: u64) -> Result<u64, TurnError> {
    Ok(n * 2)
}

fn main() {}
