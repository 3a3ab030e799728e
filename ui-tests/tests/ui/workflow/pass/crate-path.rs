// `crate = path` names where `turnwise` is, for a renamed or re-exported crate.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

mod support {
    pub use ::turnwise as runtime;
}

#[step(crate = crate::support::runtime)]
async fn double(n: u64) -> Result<u64, TurnError> {
    Ok(n * 2)
}

#[derive(Serialize, Deserialize, JsonSchema, Signal)]
#[signal(name = "approval", crate = crate::support::runtime)]
struct Approval;

#[workflow(crate = crate::support::runtime, signals(Approval))]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let a = double(ctx, add).await?;
    Ok(Done::new(state).reply(a))
}

fn main() {
    assert_eq!(<counter as Workflow>::NAME, "counter");
}
