// A frozen version whose body only gained comments, blank lines and another layout: its shape
// is the committed one (tests/frozen/checkout.rs), so it builds.
#![allow(dead_code)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
pub struct Cart {
    pub total: u64,
}

/// Checkout, second version.
#[workflow(name = "checkout", version = "v2", frozen)]
pub async fn checkout(
    ctx: &mut Turn,
    cart: Cart,
    add: u64,
) -> Result<Done<Cart, u64>, TurnError> {
    // Price the cart.
    let total = ctx
        .step("price", move |_| async move { Ok(add) })
        .await?;

    // Give the payment time to settle.
    ctx.sleep("settle", std::time::Duration::from_secs(60))
        .await?;

    if total > 100 {
        // Large carts are looked at by a person.
        ctx.step("review", |_| async { Ok(true) }).await?;
    }
    Ok(Done::new(Cart {
        total: cart.total + total,
    })
    .reply(total))
}

fn main() {}
