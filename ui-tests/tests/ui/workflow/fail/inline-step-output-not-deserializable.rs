// An inline step's output that is not deserializable: one error, naming the derive.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[derive(Serialize)]
struct Pages(Vec<String>);

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let pages = ctx.step("crawl", move |_| async move { Ok(Pages(vec![add.to_string()])) }).await?;
    Ok(Done::new(state).reply(pages.0.len() as u64))
}

fn main() {}
