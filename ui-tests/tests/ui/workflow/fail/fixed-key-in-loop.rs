// A fixed key inside a loop would repeat on every iteration; an indexed key is suggested.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[step]
async fn double(n: u64) -> Result<u64, TurnError> {
    Ok(n * 2)
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let mut total = 0;
    for (i, n) in [1, 2, 3].into_iter().enumerate() {
        let _ = i;
        total += ctx.step("add", move |_| async move { Ok(n) }).await?;
    }
    while total < 10 {
        total += double(ctx, total).await?;
    }
    loop {
        ctx.sleep("nap", std::time::Duration::from_secs(1)).await?;
        break;
    }
    Ok(Done::new(state).reply(total + add))
}

fn main() {}
