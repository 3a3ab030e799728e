// Step arguments are moved into the step: no references.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[step]
async fn shout(text: &str) -> Result<String, TurnError> {
    Ok(text.to_uppercase())
}

fn main() {}
