// Child calls: a typed reply, a timeout, a key override, a typed failure matched by the
// parent, children started together and awaited one by one, and keys checked together with
// the turn's steps.
#![allow(dead_code)]
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
struct Quote {
    cents: u64,
}

#[workflow(name = "pricer", version = "v1")]
async fn pricer(_ctx: &mut Turn, state: u64, item: String) -> Result<Done<u64, Quote>, TurnError> {
    Ok(Done::new(state + 1).reply(Quote { cents: item.len() as u64 }))
}

#[workflow(name = "basket", version = "v1")]
async fn basket(ctx: &mut Turn, state: u64, items: Vec<String>) -> Result<Done<u64, u64>, TurnError> {
    let first = items.first().cloned().unwrap_or_default();
    let quote: Quote = ctx.call_child("first", &pricer, "pricer-1", first).await?;
    let second = ctx
        .call_child("unused", &pricer, "pricer-2", "fig".to_owned())
        .timeout(Duration::from_secs(3600))
        .key("second")
        .await;
    let extra = match second {
        Ok(q) => q.cents,
        Err(ChildError::Failed { .. } | ChildError::TimedOut { .. }) => 0,
        Err(e) => return Err(e.into()),
    };
    let a = ctx.start_child("start-a", &pricer, "pricer-a", "kiwi".to_owned()).await?;
    let b = ctx.start_child("start-b", &pricer, "pricer-b", "lime".to_owned()).await?;
    let qa = ctx.await_child("await-a", &a).await?;
    let qb = ctx
        .await_child("await-b", &b)
        .timeout(Duration::from_secs(60))
        .await?;
    let total = ctx
        .step("total", move |_| async move { Ok(quote.cents + extra + qa.cents + qb.cents) })
        .await?;
    Ok(Done::new(state + total).reply(total))
}

fn main() {}
