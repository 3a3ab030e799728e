// A `#[step]` function called twice in one body, with a distinct key for each call.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[step]
async fn double(n: u64) -> Result<u64, TurnError> {
    Ok(n * 2)
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let a = double(ctx, add).await?;
    let b = double(ctx, a).key("double-again").await?;
    Ok(Done::new(state).reply(b))
}

fn main() {
    let schema = counter.schema();
    assert!(schema.steps.contains_key("double"));
    assert!(schema.steps.contains_key("double-again"));
}
