//! A worker that only talks HTTP, for the clean-build measurement of docs/testing.md
//! ("Build times"): it registers a counter workflow with a worker over `Http`, and stops.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;
use turnwise::Http;

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct Count {
    pub count: u64,
}

#[step]
async fn add(amount: u64) -> Result<u64, TurnError> {
    Ok(amount)
}

#[workflow(name = "counter", version = "v1")]
pub async fn counter(
    ctx: &mut Turn,
    state: Count,
    amount: u64,
) -> Result<Done<Count, u64>, TurnError> {
    let added = add(ctx, amount).await?;
    Ok(Done::new(Count {
        count: state.count + added,
    })
    .reply(state.count + added))
}

#[tokio::main]
async fn main() -> Result<(), turnwise::Error> {
    let backend = Http::connect("http://127.0.0.1:7400", None)?;
    let worker = Worker::new(backend).register(counter);
    let _ = worker;
    Ok(())
}
