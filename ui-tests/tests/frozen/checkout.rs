// `checkout` v2 as its manifest was committed (turnwise/manifests/checkout.v2.json): the
// frozen cases under tests/ui/workflow/ change this code and build against that file.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
pub struct Cart {
    pub total: u64,
}

#[workflow(name = "checkout", version = "v2")]
pub async fn checkout(ctx: &mut Turn, cart: Cart, add: u64) -> Result<Done<Cart, u64>, TurnError> {
    let total = ctx.step("price", move |_| async move { Ok(add) }).await?;
    ctx.sleep("settle", std::time::Duration::from_secs(60)).await?;
    if total > 100 {
        ctx.step("review", |_| async { Ok(true) }).await?;
    }
    Ok(Done::new(Cart { total: cart.total + total }).reply(total))
}
