// A `#[step]` function cannot take `self`.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

struct Doubler;

impl Doubler {
    #[step]
    async fn double(&self, n: u64) -> Result<u64, TurnError> {
        Ok(n * 2)
    }
}

fn main() {}
