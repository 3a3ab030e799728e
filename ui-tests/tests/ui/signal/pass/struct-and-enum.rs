// `#[derive(Signal)]` on structs and enums.
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
#[signal(name = "cancel.v2")]
enum Cancel {
    Now,
    Later(u64),
}

fn main() {
    assert_eq!(<Approval as Signal>::NAME, "approval");
    assert_eq!(<Cancel as Signal>::NAME, "cancel.v2");
    let _ = (Approval { approved: true }, Cancel::Now, Cancel::Later(1));
}
