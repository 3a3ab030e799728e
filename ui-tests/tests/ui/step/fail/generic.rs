// A `#[step]` function cannot be generic.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[step]
async fn double<T: Into<u64>>(n: T) -> Result<u64, TurnError> {
    Ok(n.into() * 2)
}

fn main() {}
