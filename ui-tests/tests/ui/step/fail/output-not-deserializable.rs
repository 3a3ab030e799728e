// A step's output that is serializable but not deserializable: one error, naming the derive.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, JsonSchema)]
struct Pages(Vec<String>);

#[step]
async fn crawl(site: String) -> Result<Pages, TurnError> {
    Ok(Pages(vec![site]))
}

fn main() {}
