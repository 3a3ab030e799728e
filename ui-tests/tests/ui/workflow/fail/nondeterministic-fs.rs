// File-system access in the body: a step is suggested.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

use std::fs;

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let text = fs::read_to_string("config.toml").unwrap_or_default();
    let _ = (text, ctx);
    Ok(Done::new(state).reply(add))
}

fn main() {}
