// A `#[step]` function with the most arguments it may take (12) beside its step context,
// called from a workflow, whose schema lists the step's output.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[allow(clippy::too_many_arguments)]
#[step]
async fn sum(
    s: StepCtx,
    a: u64,
    b: u64,
    c: u64,
    d: u64,
    e: u64,
    f: u64,
    g: u64,
    h: u64,
    i: u64,
    j: u64,
    k: u64,
    l: String,
) -> Result<u64, TurnError> {
    let _ = (s.key(), l);
    Ok(a + b + c + d + e + f + g + h + i + j + k)
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, n: u64) -> Result<Done<Count, u64>, TurnError> {
    let total = sum(ctx, n, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, "l".to_owned()).await?;
    Ok(Done::new(state).reply(total))
}

fn main() {
    assert_eq!(counter.schema().steps["sum"]["type"], "integer");
}
