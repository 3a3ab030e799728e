// Drawing random values in the body: `ctx.random` is suggested.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

mod rand {
    pub fn random() -> u64 {
        4
    }
    pub fn thread_rng() -> u64 {
        4
    }
}
use rand::thread_rng;

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let a = rand::random() + thread_rng();
    let _ = ctx;
    Ok(Done::new(state).reply(add + a))
}

fn main() {}
