// A handle sending a signal the workflow does not accept, named with a turbofish or inferred
// from the value (the signal is named, not a type mismatch against the one accepted signal).
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
    let _ = ctx;
    Ok(Done::new(state).reply(add))
}

async fn cancel(handle: Handle<review>) -> Result<(), turnwise::Error> {
    handle.signal::<Cancel>(1, Cancel, "cancel-1").await?;
    handle.signal(1, Cancel, "cancel-2").await?;
    Ok(())
}

fn main() {}
