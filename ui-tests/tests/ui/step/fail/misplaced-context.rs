// The step context is the first parameter.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[step]
async fn double(n: u64, s: StepCtx) -> Result<u64, TurnError> {
    let _ = s;
    Ok(n * 2)
}

fn main() {}
