// `allow_nondeterminism` turns the replay checks off for one workflow.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[workflow(allow_nondeterminism)]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let _ = std::time::SystemTime::now();
    let _ = std::env::var("HOME");
    tokio::time::sleep(std::time::Duration::ZERO).await;
    let _ = ctx;
    Ok(Done::new(state).reply(add))
}

fn main() {}
