// The state is serializable, deserializable and `JsonSchema`; the error is at the type.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[derive(Default)]
struct Plain {
    n: u64,
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Plain, add: u64) -> Result<Done<Plain, u64>, TurnError> {
    let _ = ctx;
    Ok(Done::new(Plain { n: state.n + add }).reply(add))
}

fn main() {}
