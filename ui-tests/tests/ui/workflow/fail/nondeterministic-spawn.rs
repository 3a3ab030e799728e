// Spawning tasks in the body: a step is suggested.
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
    let task = tokio::spawn(async move { add * 2 });
    let thread = std::thread::spawn(move || add * 3);
    let _ = (ctx, thread);
    Ok(Done::new(state).reply(task.await.unwrap_or_default()))
}

fn main() {}
