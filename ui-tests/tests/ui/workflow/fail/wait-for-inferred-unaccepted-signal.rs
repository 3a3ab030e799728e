// A wait without a turbofish whose binding names a signal the workflow does not accept: the
// workflow's one accepted signal is not silently inferred in its place.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;
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

#[workflow(signals(Cancel))]
async fn review(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let first: Option<Approval> = ctx.wait_for_signal("first", Duration::from_secs(60)).await?;
    let Some(Approval { approved }) = ctx.wait_for_signal("second", Duration::from_secs(60)).await? else {
        return Ok(Done::new(state).reply(0));
    };
    Ok(Done::new(state).reply(add + u64::from(approved) + u64::from(first.is_some())))
}

fn main() {}
