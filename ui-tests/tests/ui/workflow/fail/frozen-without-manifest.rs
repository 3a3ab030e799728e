// A frozen version with no committed manifest: the build says which file it expected.
#![allow(dead_code)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
pub struct Cart {
    pub total: u64,
}

#[workflow(name = "checkout", version = "v9", frozen)]
pub async fn checkout(ctx: &mut Turn, cart: Cart, add: u64) -> Result<Done<Cart, u64>, TurnError> {
    let total = ctx.step("price", move |_| async move { Ok(add) }).await?;
    Ok(Done::new(Cart { total: cart.total + total }).reply(total))
}

fn main() {}
