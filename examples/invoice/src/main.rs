//! Run with: cargo run -p example-invoice [-- <database path>]
//!
//! Two invoices go into the inbox. The first names no order: the workflow raises a
//! `WorkflowError`, the turn fails for good on its first attempt and blocks the inbox, and the
//! operator skips it. The second is due 1.5 s from now: the workflow raises a `WorkflowWait`,
//! the turn waits for the due date without counting an attempt, then sends the invoice. By
//! default the database is a fresh file in a temporary directory.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use example_invoice::{invoicing, Invoice};
use turnwise::prelude::*;

fn database_path() -> std::io::Result<PathBuf> {
    if let Some(path) = std::env::args().nth(1) {
        return Ok(PathBuf::from(path));
    }
    let dir = std::env::temp_dir().join(format!("turnwise-invoice-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir.join("invoice.db"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = database_path()?;
    let engine = Engine::open(&path).await?;
    println!("The engine keeps its data in {}.", path.display());

    let workflow = invoicing(engine.clock().clone());
    let invoices = workflow.start(&engine, "invoices-1").await?;
    let now = engine.clock().now_ms();
    let bad = Invoice {
        order: String::new(),
        amount_cents: 4_200,
        due_at_ms: now,
    };
    let good = Invoice {
        order: "A-17".into(),
        amount_cents: 12_500,
        due_at_ms: now + 1_500,
    };
    let first = invoices.send(bad, "invoice-1").await?.number;
    let second = invoices.send(good, "invoice-2").await?.number;
    println!("Sent an invoice with no order (turn {first}) and one for order A-17 due in 1.5 s (turn {second}).");

    let worker = Worker::new(engine.clone()).register(workflow.clone());
    worker.run_until_idle().await?;
    let t = invoices.turn(first).await?;
    println!(
        "Turn {first} is {} after attempt {} of 3: {}.",
        t.status,
        t.attempt,
        t.error.unwrap_or_default()
    );
    let inst = invoices.instance().await?;
    println!(
        "The instance is {} and holds {} pending messages: the failed turn blocks the inbox.",
        inst.status, inst.pending_messages
    );

    invoices.skip(first).await?;
    println!(
        "The operator skipped turn {first}; it moved to the history as {}.",
        invoices.turn(first).await?.status
    );

    worker.run_until_idle().await?;
    let t = invoices.turn(second).await?;
    let until = t
        .wait
        .as_ref()
        .map_or(0, |w| w.until_ms - engine.clock().now_ms());
    println!(
        "Turn {second} is {} for another {until} ms: {} (attempts so far: {}).",
        t.status,
        t.error.unwrap_or_default(),
        t.attempt
    );

    let started = Instant::now();
    let sent = loop {
        if let Some(sent) = invoices.reply(second).await? {
            break sent;
        }
        if started.elapsed() > Duration::from_secs(10) {
            return Err("the invoice was not sent within 10 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        worker.run_until_idle().await?;
    };
    let t = invoices.turn(second).await?;
    println!(
        "At the due date turn {second} ran again and is {} on attempt {}: sent {} for {}.{:02}.",
        t.status,
        t.attempt,
        sent.number,
        sent.amount_cents / 100,
        sent.amount_cents % 100
    );
    let ledger = invoices.state().await?;
    println!(
        "The ledger holds {:?}, {} cents in all.",
        ledger.sent, ledger.total_cents
    );
    Ok(())
}
