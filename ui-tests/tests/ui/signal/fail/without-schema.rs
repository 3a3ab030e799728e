// A signal is serializable, deserializable and `JsonSchema`; the error is at the type.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[derive(Serialize, Deserialize, Signal)]
#[signal(name = "approval")]
struct Approval {
    approved: bool,
}

fn main() {}
