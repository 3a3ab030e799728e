// A signal cannot be generic.
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
struct Approval<T> {
    by: T,
}

fn main() {}
