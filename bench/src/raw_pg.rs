//! The raw PostgreSQL ceiling, for `--store postgres`: clients committing one-row transactions
//! to the benchmark's database, each waiting for its own `COMMIT` (at the server's
//! `synchronous_commit`, as the store's durable commits do). One client gives the price of one
//! durable commit; 16 clients show what the server's group commit makes of concurrency.

use std::time::{Duration, Instant};

use tokio_postgres::NoTls;

use crate::raw::RawResult;
use crate::stats::Summary;

/// Commit `transactions` one-row transactions from `clients` connections at once, into a
/// fresh table of the schema `url` selects.
pub async fn run(url: &str, transactions: u64, clients: usize) -> Result<RawResult, String> {
    let connect = || async {
        let (client, connection) = tokio_postgres::connect(url, NoTls)
            .await
            .map_err(|e| format!("raw postgres: connect: {e}"))?;
        tokio::spawn(connection);
        Ok::<_, String>(client)
    };
    let setup = connect().await?;
    setup
        .batch_execute(
            "DROP TABLE IF EXISTS raw_commits; \
             CREATE TABLE raw_commits (id bigserial PRIMARY KEY, at_ns bigint NOT NULL, body text NOT NULL)",
        )
        .await
        .map_err(|e| format!("raw postgres: create the table: {e}"))?;
    // About the size of a small turn record.
    let body = "x".repeat(256);
    let clients = clients.max(1);
    let mut tasks = Vec::with_capacity(clients);
    let started = Instant::now();
    for i in 0..clients {
        let share =
            transactions / clients as u64 + u64::from((i as u64) < transactions % clients as u64);
        let client = connect().await?;
        let body = body.clone();
        tasks.push(tokio::spawn(async move {
            let insert = client
                .prepare("INSERT INTO raw_commits (at_ns, body) VALUES ($1, $2)")
                .await
                .map_err(|e| format!("raw postgres: prepare: {e}"))?;
            let mut samples: Vec<Duration> = Vec::with_capacity(share as usize);
            for k in 0..share {
                let t0 = Instant::now();
                // One statement outside a transaction block is one transaction, committed
                // (and flushed) before the answer.
                client
                    .execute(&insert, &[&(k as i64), &body])
                    .await
                    .map_err(|e| format!("raw postgres: insert: {e}"))?;
                samples.push(t0.elapsed());
            }
            Ok::<_, String>(samples)
        }));
    }
    let mut samples = Vec::with_capacity(transactions as usize);
    for t in tasks {
        samples.extend(t.await.map_err(|e| format!("raw postgres: {e}"))??);
    }
    let elapsed = started.elapsed();
    Ok(RawResult {
        transactions: samples.len() as u64,
        elapsed,
        latency: Summary::of(&mut samples),
    })
}
