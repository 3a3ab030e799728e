// A workflow's error type converts into `TurnError`.
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

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, MyError> {
    let _ = ctx;
    Ok(Done::new(state).reply(add))
}

fn main() {}
