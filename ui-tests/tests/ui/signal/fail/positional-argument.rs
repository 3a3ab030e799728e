// A bare value as an argument names the argument it is for; a misspelled argument names the
// nearest supported one.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Signal)]
#[signal("approval")]
struct Approval {
    approved: bool,
}

#[derive(Serialize, Deserialize, JsonSchema, Signal)]
#[signal(nmae = "cancel")]
struct Cancel {
    reason: String,
}

fn main() {}
