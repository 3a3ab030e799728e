// A syntax error in the body: rustc's own error, and nothing else.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let x = ;
    Ok(Done::new(state).reply(add))
}

fn main() {
    // Code that names the workflow compiles on: only the typo is reported.
    let _ = counter;
}
