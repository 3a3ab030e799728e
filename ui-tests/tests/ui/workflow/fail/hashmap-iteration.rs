// Iterating over a `HashMap` or `HashSet` in the body: a `BTreeMap` is suggested.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

use std::collections::{HashMap, HashSet};

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let mut seen = HashMap::new();
    seen.insert("a", add);
    let tags: HashSet<u64> = [1, 2].into_iter().collect();
    let mut total = 0;
    for (_, n) in &seen {
        total += n;
    }
    total += tags.iter().sum::<u64>();
    let _ = ctx;
    Ok(Done::new(state).reply(total))
}

fn main() {}
