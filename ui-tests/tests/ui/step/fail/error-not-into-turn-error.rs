// A step's error type converts into `TurnError`.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[derive(Debug)]
struct MyError;

#[step]
async fn double(n: u64) -> Result<u64, MyError> {
    Ok(n * 2)
}

fn main() {}
