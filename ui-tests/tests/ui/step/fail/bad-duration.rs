// Durations are a number and a unit: timeouts 100ms to 24h, heartbeats at most the timeout.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[step(timeout = "5 minutes")]
async fn a(n: u64) -> Result<u64, TurnError> {
    Ok(n)
}

#[step(timeout = "10ms")]
async fn b(n: u64) -> Result<u64, TurnError> {
    Ok(n)
}

#[step(timeout = "25h")]
async fn c(n: u64) -> Result<u64, TurnError> {
    Ok(n)
}

#[step(timeout = "10s", heartbeat_timeout = "30s")]
async fn d(n: u64) -> Result<u64, TurnError> {
    Ok(n)
}

#[step(heartbeat_timeout = "10m")]
async fn e(n: u64) -> Result<u64, TurnError> {
    Ok(n)
}

#[step(timeout = 5)]
async fn f(n: u64) -> Result<u64, TurnError> {
    Ok(n)
}

fn main() {}
