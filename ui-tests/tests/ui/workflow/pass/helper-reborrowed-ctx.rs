// A helper that takes the context, called as the docs say, `helper(&mut *ctx, ..)`; and a
// `#[step]` function with several arguments beside it, whose output the schema lists.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[step]
async fn add(a: u64, b: u64, label: String) -> Result<u64, TurnError> {
    let _ = label;
    Ok(a + b)
}

async fn twice(ctx: &mut Turn<counter>, n: u64) -> Result<u64, TurnError> {
    let a = ctx.step("first", |_| async move { Ok(n) }).await?;
    let b = ctx.step("second", |_| async move { Ok(n) }).await?;
    Ok(a + b)
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, n: u64) -> Result<Done<Count, u64>, TurnError> {
    let n = twice(&mut *ctx, n).await?;
    let sum = add(ctx, n, 1, "one".to_owned()).await?;
    Ok(Done::new(state).reply(sum))
}

fn main() {
    let schema = counter.schema();
    assert_eq!(schema.steps["add"]["type"], "integer");
}
