// Each member of a parallel group is a step of the turn budget: 60 steps and a group of
// five are 65.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let mut total = add;
    total += ctx.step("s0", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s1", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s2", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s3", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s4", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s5", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s6", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s7", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s8", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s9", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s10", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s11", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s12", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s13", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s14", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s15", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s16", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s17", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s18", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s19", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s20", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s21", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s22", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s23", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s24", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s25", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s26", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s27", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s28", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s29", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s30", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s31", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s32", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s33", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s34", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s35", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s36", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s37", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s38", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s39", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s40", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s41", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s42", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s43", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s44", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s45", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s46", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s47", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s48", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s49", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s50", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s51", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s52", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s53", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s54", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s55", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s56", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s57", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s58", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s59", |_| async move { Ok(1u64) }).await?;
    let (a, b, c, d, e) = ctx
        .parallel()
        .step("p0", |_| async move { Ok(1u64) })
        .step("p1", |_| async move { Ok(1u64) })
        .step("p2", |_| async move { Ok(1u64) })
        .step("p3", |_| async move { Ok(1u64) })
        .step("p4", |_| async move { Ok(1u64) })
        .await?;
    total += a + b + c + d + e;
    Ok(Done::new(state).reply(total))
}

fn main() {}
