// A syntax error in a step's body: rustc's own error, and nothing else.
#![allow(dead_code, unused_imports)]
use turnwise::prelude::*;

#[step]
async fn fetch(url: String) -> Result<String, std::io::Error> {
    let x = ;
    Ok(url)
}

fn main() {}
