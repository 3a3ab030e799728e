// A handle sending a signal, inferred from the value, to a workflow that accepts no signal at
// all: the error names the signal's type (not `_`).
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[derive(Serialize, Deserialize, JsonSchema, Signal)]
#[signal(name = "cancel")]
struct Cancel {
    reason: String,
}

#[workflow]
async fn tally(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let _ = ctx;
    Ok(Done::new(state).reply(add))
}

async fn cancel(handle: Handle<tally>) -> Result<(), turnwise::Error> {
    let reason = String::from("late");
    handle.signal(1, Cancel { reason: reason.clone() }, "cancel-1").await?;
    handle.signal_waiting(Cancel { reason }, "cancel-2").await?;
    Ok(())
}

fn main() {}
