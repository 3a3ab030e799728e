// A key used twice inside one parallel group: both places are shown.
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
    let (a, b, c) = ctx
        .parallel()
        .step("quote", move |_| async move { Ok(add) })
        .step("stock", |_| async move { Ok(2_u64) })
        .step("quote", |_| async move { Ok(3_u64) })
        .await?;
    Ok(Done::new(state).reply(a + b + c))
}

fn main() {}
