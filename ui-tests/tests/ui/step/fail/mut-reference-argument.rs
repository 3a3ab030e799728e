// A step argument taken by reference: the message names the owned type to take instead.
#![allow(dead_code, unused_imports)]
use turnwise::prelude::*;

#[step]
async fn append(items: &mut Vec<u64>, n: u64) -> Result<u64, TurnError> {
    items.push(n);
    Ok(n)
}

#[step]
async fn total(items: &[u64]) -> Result<u64, TurnError> {
    Ok(items.iter().sum())
}

#[step]
async fn open(path: &std::path::Path) -> Result<u64, TurnError> {
    Ok(path.as_os_str().len() as u64)
}

fn main() {}
