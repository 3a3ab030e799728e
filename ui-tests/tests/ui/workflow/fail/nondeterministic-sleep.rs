// Sleeping in the body with tokio's or the standard library's sleep, by full path or through
// the body's `use` items: the durable `ctx.sleep` is suggested.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    use std::thread;
    use std::time::Duration;
    use tokio::time::sleep as pause;

    tokio::time::sleep(Duration::from_secs(60)).await;
    tokio::time::sleep_until(tokio::time::Instant::from_std(deadline())).await;
    std::thread::sleep(Duration::from_millis(10));
    pause(Duration::from_secs(1)).await;
    thread::sleep(Duration::from_millis(10));
    let _ = ctx;
    Ok(Done::new(state).reply(add))
}

/// A deadline computed elsewhere (the body may not read the clock).
fn deadline() -> std::time::Instant {
    std::time::Instant::now()
}

fn main() {}
