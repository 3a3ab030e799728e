// The nondeterminism checks follow the body's `use` items and cover each family wholesale:
// file access by `File`, task sets, and the UUID versions that read the clock or randomness.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

/// A stand-in for the `uuid` crate's type.
struct Uuid;

impl Uuid {
    fn now_v7() -> Self {
        Uuid
    }
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    use std::fs::File;
    use std::time::Instant as Clock;
    use tokio::task::JoinSet;

    let config = File::open("config.toml");
    let started = Clock::now();
    let mut set = JoinSet::new();
    set.spawn(async move { add * 2 });
    let id = Uuid::now_v7();
    let _ = (ctx, config, started, id);
    Ok(Done::new(state).reply(add))
}

fn main() {}
