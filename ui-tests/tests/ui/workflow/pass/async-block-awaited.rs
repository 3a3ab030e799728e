// An `async` block holding durable calls is fine when awaited where it is made, and an
// `async` block without durable calls may be stored.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let a = async {
        let n = ctx.step("a", move |_| async move { Ok(add) }).await?;
        Ok::<u64, TurnError>(n + 1)
    }
    .await?;
    let pure = async move { add * 2 };
    let b = ctx.step("b", move |_| async move { Ok(add) }).await?;
    Ok(Done::new(state).reply(a + b + pure.await))
}

fn main() {}
