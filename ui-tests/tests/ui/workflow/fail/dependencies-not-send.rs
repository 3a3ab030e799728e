// A workflow's dependencies are `Clone + Send + Sync + 'static`.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

use std::rc::Rc;

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64, base: &Rc<u64>) -> Result<Done<Count, u64>, TurnError> {
    let _ = ctx;
    Ok(Done::new(state).reply(add + **base))
}

fn main() {}
