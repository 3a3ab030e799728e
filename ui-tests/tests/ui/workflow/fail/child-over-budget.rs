// 64 steps and then a child call: the child call is durable call 65, over the turn budget.
#![allow(dead_code, unused_imports)]
use turnwise::prelude::*;

#[workflow]
async fn pricer(_ctx: &mut Turn, state: u64, item: String) -> Result<Done<u64, u64>, TurnError> {
    Ok(Done::new(state).reply(item.len() as u64))
}

#[workflow]
async fn basket(ctx: &mut Turn, state: u64, item: String) -> Result<Done<u64, u64>, TurnError> {
    let mut total = 0;
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
    total += ctx.step("s60", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s61", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s62", |_| async move { Ok(1u64) }).await?;
    total += ctx.step("s63", |_| async move { Ok(1u64) }).await?;
    total += ctx.call_child("price", &pricer, "pricer-1", item).await?;
    Ok(Done::new(state + total).reply(total))
}

fn main() {}
