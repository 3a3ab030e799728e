// A `#[step]` function takes at most 12 arguments beside its step context.
use turnwise::prelude::*;

#[step]
async fn sum(
    s: StepCtx,
    a: u64,
    b: u64,
    c: u64,
    d: u64,
    e: u64,
    f: u64,
    g: u64,
    h: u64,
    i: u64,
    j: u64,
    k: u64,
    l: u64,
    m: u64,
) -> Result<u64, TurnError> {
    let _ = s;
    Ok(a + b + c + d + e + f + g + h + i + j + k + l + m)
}

fn main() {}
