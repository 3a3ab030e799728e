// A step called with `?` and no `.await`: one error, saying to await it.
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
    let a = ctx.step("a", move |_| async move { Ok(add) })?;
    Ok(Done::new(state).reply(a))
}

fn main() {}
