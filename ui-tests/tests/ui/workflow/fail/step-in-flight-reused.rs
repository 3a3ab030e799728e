// A durable call stored, then the context used again before it is awaited: one error, the
// macro's (the generated code gives the stored call a context of its own, so rustc adds no
// E0499 about the second borrow).
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
    let first = ctx.step("a", move |_| async move { Ok(add) });
    let b = ctx.step("b", move |_| async move { Ok(add) }).await?;
    let a = first.await?;
    Ok(Done::new(state).reply(a + b))
}

fn main() {}
