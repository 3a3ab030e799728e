// A step's output is serializable, deserializable and `JsonSchema`; the error is at the type.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

struct Pages(Vec<String>);

#[step]
async fn crawl(site: String) -> Result<Pages, TurnError> {
    Ok(Pages(vec![site]))
}

fn main() {}
