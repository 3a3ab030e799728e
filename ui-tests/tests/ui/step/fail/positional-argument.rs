// A bare value as an argument names the argument it is for; a misspelled argument names the
// nearest supported one.
#![allow(dead_code, unused_imports)]
use turnwise::prelude::*;

#[step("tool", "30s", timout = "5m")]
async fn double(n: u64) -> Result<u64, TurnError> {
    Ok(n * 2)
}

fn main() {}
