//! Run with: cargo run -p example-effect-id [-- <database path>]
//!
//! A checkout charges a card in a step, passing the step's effect id to the payment service
//! as its idempotency key. The first attempt charges and then "crashes" before the step is
//! saved. After a one-second backoff the retry runs the step again and calls the service with
//! the same effect id; the service recognizes it and answers with the first charge, so the
//! customer pays once. By default the database is a fresh file in a temporary directory.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use example_effect_id::{checkout, Order, Payments, Services};
use turnwise::prelude::*;

fn database_path() -> std::io::Result<PathBuf> {
    if let Some(path) = std::env::args().nth(1) {
        return Ok(PathBuf::from(path));
    }
    let dir = std::env::temp_dir().join(format!("turnwise-effect-id-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir.join("effect-id.db"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = database_path()?;
    let engine = Engine::open(&path).await?;
    println!("The engine keeps its data in {}.", path.display());

    let payments = Payments::new();
    let workflow = checkout(Services::new(payments.clone()).crash_once_after_charging());
    let handle = workflow.start(&engine, "checkout-1").await?;
    let turn = handle
        .send(
            Order {
                order: "A-17".into(),
                amount_cents: 4_999,
            },
            "order-A-17",
        )
        .await?
        .number;
    println!("Sent order A-17 for 49.99 (turn {turn}).");

    let worker = Worker::new(engine.clone()).register(workflow.clone());
    worker.run_until_idle().await?;
    let t = handle.turn(turn).await?;
    let first = &payments.calls()[0];
    println!(
        "Attempt 1 called the payment service with idempotency key {}.",
        first.idempotency_key
    );
    let charge = &payments.charges()[0];
    println!(
        "The service made charge {} for {} cents.",
        charge.charge_id, charge.amount_cents
    );
    println!(
        "Then the attempt failed before saving the step ({}); saved steps: {}. The turn backs off for 1 s.",
        t.error.unwrap_or_default(),
        t.steps.len()
    );

    let started = Instant::now();
    let receipt = loop {
        if let Some(receipt) = handle.reply(turn).await? {
            break receipt;
        }
        if started.elapsed() > Duration::from_secs(10) {
            return Err("the checkout did not finish within 10 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        worker.run_until_idle().await?;
    };
    let t = handle.turn(turn).await?;
    let second = &payments.calls()[1];
    println!(
        "Attempt {} ran the step again and called the service with key {} (the same: {}).",
        t.attempt,
        second.idempotency_key,
        second.idempotency_key == first.idempotency_key
    );
    println!(
        "The service recognized the key and answered with charge {} instead of charging again (deduplicated: {}).",
        receipt.charge_id, second.deduplicated
    );
    println!(
        "The turn is {}; {} calls reached the service, {} charge was made, and the state records {:?}.",
        t.status,
        payments.calls().len(),
        payments.charges().len(),
        handle.state().await?.charges
    );
    Ok(())
}
