// A `#[workflow]` function takes at most a fourth parameter, its dependencies.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64, deps: &String, extra: u8) -> Result<Done<Count, u64>, TurnError> {
    let _ = (ctx, deps, extra);
    Ok(Done::new(state).reply(add))
}

fn main() {}
