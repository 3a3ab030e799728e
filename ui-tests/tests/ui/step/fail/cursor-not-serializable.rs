// A typed resume cursor is serializable; the error is at the type.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

struct Cursor(u32);

#[step]
async fn crawl(s: Resumable<Cursor>, pages: u32) -> Result<u32, TurnError> {
    let _ = s;
    Ok(pages)
}

fn main() {}
