// A `#[step]` function returns `Result<Output, TurnError>`.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[step]
async fn double(n: u64) -> u64 {
    n * 2
}

#[step]
async fn nothing(n: u64) {
    let _ = n;
}

fn main() {}
