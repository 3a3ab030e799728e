// A transactional step's key is a step key: used twice in one body, both places are shown.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Balance {
    cents: i64,
}

#[workflow]
async fn account(ctx: &mut Turn, state: Balance, cents: i64) -> Result<Done<Balance, i64>, TurnError> {
    let checked = ctx.step("debit", move |_| async move { Ok(cents) }).await?;
    let debited = ctx
        .transact("debit", move |tx| async move {
            tx.execute("UPDATE accounts SET cents = cents - $1", &[&checked]).await?;
            Ok(checked)
        })
        .await?;
    Ok(Done::new(state).reply(debited))
}

fn main() {}
