// A fourth parameter `deps: &Deps`: the workflow value holds them (`name(deps)`).
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

use std::sync::Arc;

#[derive(Clone)]
struct Rates {
    factor: Arc<u64>,
}

#[step]
async fn multiply(n: u64, factor: u64) -> Result<u64, TurnError> {
    Ok(n * factor)
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64, rates: &Rates) -> Result<Done<Count, u64>, TurnError> {
    let a = multiply(ctx, add, *rates.factor).await?;
    Ok(Done::new(Count { n: state.n + a }).reply(a))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let engine = Engine::in_memory();
    let workflow = counter(Rates { factor: Arc::new(3) });
    let handle = workflow.start(&engine, "c-1").await.unwrap();
    handle.send(2, "m-1").await.unwrap();
    let worker = Worker::new(engine.clone()).register(workflow.clone());
    worker.run_until_idle().await.unwrap();
    assert_eq!(handle.reply(1).await.unwrap(), Some(6));
    assert_eq!(format!("{workflow:?}"), "counter(..)");
}
