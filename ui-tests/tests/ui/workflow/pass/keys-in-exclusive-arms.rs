// The same key in mutually exclusive arms of one `if` or `match`, and after an arm that returns.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

use std::time::Duration;

#[step]
async fn double(n: u64) -> Result<u64, TurnError> {
    Ok(n * 2)
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let a = if add > 10 {
        ctx.step("add", move |_| async move { Ok(add) }).await?
    } else {
        ctx.step("add", move |_| async move { Ok(add + 1) }).await?
    };
    match a % 3 {
        0 => ctx.sleep("nap", Duration::from_secs(1)).await?,
        1 => {
            double(ctx, a).await?;
        }
        _ => {
            double(ctx, a).key("nap").await?;
        }
    }
    if a == 7 {
        let b = ctx.step("late", move |_| async move { Ok(a) }).await?;
        return Ok(Done::new(state).reply(b));
    }
    let b = ctx.step("late", move |_| async move { Ok(a + 1) }).await?;
    Ok(Done::new(state).reply(b))
}

fn main() {}
