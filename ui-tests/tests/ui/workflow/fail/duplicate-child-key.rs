// A child call and a step under one key: both places are shown.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[workflow]
async fn pricer(_ctx: &mut Turn, state: u64, item: String) -> Result<Done<u64, u64>, TurnError> {
    Ok(Done::new(state).reply(item.len() as u64))
}

#[workflow]
async fn basket(ctx: &mut Turn, state: u64, item: String) -> Result<Done<u64, u64>, TurnError> {
    let price = ctx.call_child("price", &pricer, "pricer-1", item).await?;
    let taxed = ctx.step("price", move |_| async move { Ok(price + 1) }).await?;
    Ok(Done::new(state + taxed).reply(taxed))
}

fn main() {}
