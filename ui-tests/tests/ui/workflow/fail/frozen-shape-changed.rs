// A frozen version whose body gained a durable call before a saved sleep: its shape is no
// longer the committed one (tests/frozen/checkout.rs), so the build fails at the new call.
#![allow(dead_code)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
pub struct Cart {
    pub total: u64,
}

#[workflow(name = "checkout", version = "v2", frozen)]
pub async fn checkout(ctx: &mut Turn, cart: Cart, add: u64) -> Result<Done<Cart, u64>, TurnError> {
    let total = ctx.step("price", move |_| async move { Ok(add) }).await?;
    ctx.step("fraud-check", |_| async { Ok(true) }).await?;
    ctx.sleep("settle", std::time::Duration::from_secs(60)).await?;
    if total > 100 {
        ctx.step("review", |_| async { Ok(true) }).await?;
    }
    Ok(Done::new(Cart { total: cart.total + total }).reply(total))
}

fn main() {}
