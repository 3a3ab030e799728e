// A transactional step beside ordinary steps: its key is checked with theirs, and its output
// type is the closure's.
#![allow(dead_code)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Balance {
    cents: i64,
}

#[workflow]
async fn account(ctx: &mut Turn, _state: Balance, cents: i64) -> Result<Done<Balance, i64>, TurnError> {
    let checked = ctx.step("check", move |_| async move { Ok(cents) }).await?;
    let left: i64 = ctx
        .transact("debit", move |tx| async move {
            let row = tx
                .query_one(
                    "UPDATE accounts SET cents = cents - $1 RETURNING cents",
                    &[&checked],
                )
                .await?;
            Ok(row.get::<_, i64>(0))
        })
        .await?;
    Ok(Done::new(Balance { cents: left }).reply(left))
}

fn main() {}
