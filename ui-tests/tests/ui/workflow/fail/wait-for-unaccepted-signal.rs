// Waiting for a signal the workflow does not accept; the accepted ones are named.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[derive(Serialize, Deserialize, JsonSchema, Signal)]
#[signal(name = "approval")]
struct Approval {
    approved: bool,
}

#[derive(Serialize, Deserialize, JsonSchema, Signal)]
#[signal(name = "cancel")]
struct Cancel;

#[workflow(signals(Approval))]
async fn review(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let _ = ctx.wait_for_signal::<Cancel>("cancel", std::time::Duration::from_secs(60)).await?;
    Ok(Done::new(state).reply(add))
}

fn main() {}
