//! Phase 1: the raw SQLite ceiling on the benchmark's disk.
//!
//! One thread, one connection, WAL mode with `synchronous=FULL` (the level the engine's durable
//! commits use), one small row inserted per `BEGIN IMMEDIATE … COMMIT` transaction. Every commit
//! waits for its own fsync, so this is the most durable transactions per second one writer
//! gets from the disk without batching, and its latency is the price of one durable commit.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{params, Connection};

use crate::stats::{rate, Summary};

/// What the raw phase measured.
#[derive(Clone, Copy, Debug)]
pub struct RawResult {
    /// Transactions committed.
    pub transactions: u64,
    /// Wall time of the whole loop.
    pub elapsed: Duration,
    /// Per-transaction latency (begin to commit returned).
    pub latency: Summary,
}

impl RawResult {
    /// Committed transactions per second.
    pub fn commits_per_sec(&self) -> f64 {
        rate(self.transactions, self.elapsed)
    }
}

/// Commit `transactions` single-row transactions to a fresh database at `path`.
pub fn run(path: &Path, transactions: u64) -> rusqlite::Result<RawResult> {
    let conn = Connection::open(path)?;
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    assert_eq!(
        mode.to_ascii_lowercase(),
        "wal",
        "the raw baseline needs WAL mode"
    );
    conn.execute_batch(
        "PRAGMA synchronous=FULL;
         CREATE TABLE IF NOT EXISTS commits(
             id INTEGER PRIMARY KEY,
             at_ns INTEGER NOT NULL,
             body BLOB NOT NULL
         );",
    )?;
    // About the size of a small turn record.
    let body = vec![b'x'; 256];
    let mut insert = conn.prepare("INSERT INTO commits(at_ns, body) VALUES (?1, ?2)")?;
    let mut samples = Vec::with_capacity(transactions as usize);
    let started = Instant::now();
    for i in 0..transactions {
        let t0 = Instant::now();
        conn.execute_batch("BEGIN IMMEDIATE")?;
        insert.execute(params![i as i64, body])?;
        conn.execute_batch("COMMIT")?;
        samples.push(t0.elapsed());
    }
    let elapsed = started.elapsed();
    Ok(RawResult {
        transactions,
        elapsed,
        latency: Summary::of(&mut samples),
    })
}
