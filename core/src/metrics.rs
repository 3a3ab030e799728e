//! What the engine and the worker record, through the [`metrics`](https://docs.rs/metrics)
//! facade.
//!
//! Nothing is exported by this crate: an application installs the recorder of its choice
//! (`metrics-exporter-prometheus`, say) and these series appear in it; without a recorder a
//! call costs one atomic load, and those labelled by `workflow_type` also a copy of the type's
//! name for the label. The `turnwise` server installs the Prometheus recorder and
//! serves it at `GET /metrics` (`docs/operations.md`, "Monitoring").
//!
//! | name | kind | labels | what |
//! |------|------|--------|------|
//! | `turnwise_claims_total` | counter | `result` (`granted`, `empty`) | claims answered by the engine, with a task or with none |
//! | `turnwise_attempts_total` | counter | `workflow_type`, `attempt` (`first`, `retry`) | attempts started (each granted claim starts one) |
//! | `turnwise_turns_total` | counter | `workflow_type`, `outcome` (`completed`, `continued`, `failed`, `cancelled`) | turns moved to history; `continued` is a completion that continued into a new turn |
//! | `turnwise_turns_suspended_total` | counter | `workflow_type` | turns suspended by a replay mismatch (the worker's code no longer made the durable calls the turn saved); each counts again if it is restarted and suspended again |
//! | `turnwise_lease_losses_total` | counter | | worker calls refused because their lease no longer holds the turn |
//! | `turnwise_store_commit_seconds` | histogram | `durability` (`durable`, `relaxed`) | one commit to the store, answered |
//! | `turnwise_store_sqlite_sync_seconds` | histogram | | one `fdatasync` of the SQLite write-ahead log, covering the durable commits waiting on it |
//! | `turnwise_worker_turn_seconds` | histogram | `workflow_type`, `outcome` (`completed`, `failed`, `interrupted`, `released`, `suspended`) | a worker's attempt at a turn, claim to answer |
//! | `turnwise_worker_step_seconds` | histogram | `workflow_type`, `outcome` (`ok`, `error`) | a step's body, as the worker ran it (replayed steps are not counted) |
//!
//! The counters are recorded after the commit that made them true, so a commit refused for a
//! conflict and decided again counts once.

use std::time::Duration;

use metrics::{counter, describe_counter, describe_histogram, histogram};

use crate::protocol::TurnStatus;
use crate::store::{Durability, TurnRecord};

/// Claims answered, by result (`granted`, `empty`).
pub const CLAIMS: &str = "turnwise_claims_total";
/// Attempts started.
pub const ATTEMPTS: &str = "turnwise_attempts_total";
/// Turns moved to history, by outcome.
pub const TURNS: &str = "turnwise_turns_total";
/// Turns suspended by a replay mismatch.
pub const TURNS_SUSPENDED: &str = "turnwise_turns_suspended_total";
/// Worker calls refused for a lost lease.
pub const LEASE_LOSSES: &str = "turnwise_lease_losses_total";
/// Store commit latency.
pub const STORE_COMMIT: &str = "turnwise_store_commit_seconds";
/// A sync of the SQLite write-ahead log.
pub const SQLITE_SYNC: &str = "turnwise_store_sqlite_sync_seconds";
/// A worker's attempt at a turn.
pub const WORKER_TURN: &str = "turnwise_worker_turn_seconds";
/// A step's body.
pub const WORKER_STEP: &str = "turnwise_worker_step_seconds";

/// Describe this module's series to the installed recorder (the `# HELP` lines of a Prometheus
/// exporter). Call it once after installing one; recording works without it.
pub fn describe() {
    describe_counter!(
        CLAIMS,
        "Claims answered by the engine, with a task (granted) or none (empty)."
    );
    describe_counter!(
        ATTEMPTS,
        "Attempts started, the first of a turn or a retry."
    );
    describe_counter!(TURNS, "Turns moved to history, by outcome.");
    describe_counter!(
        TURNS_SUSPENDED,
        "Turns suspended by a replay mismatch, until an operator restarts, forks or cancels them."
    );
    describe_counter!(
        LEASE_LOSSES,
        "Worker calls refused because their lease no longer holds the turn."
    );
    describe_histogram!(
        STORE_COMMIT,
        "Seconds from a commit to the store to its answer."
    );
    describe_histogram!(
        WORKER_TURN,
        "Seconds of a worker's attempt at a turn, claim to answer."
    );
    describe_histogram!(
        WORKER_STEP,
        "Seconds of a step's body as the worker ran it."
    );
}

/// A claim answered with a task of `workflow_type`, starting attempt number `attempt`.
#[doc(hidden)]
pub fn claim_granted(workflow_type: &str, attempt: u32) {
    counter!(CLAIMS, "result" => "granted").increment(1);
    let attempt = if attempt <= 1 { "first" } else { "retry" };
    counter!(ATTEMPTS, "workflow_type" => workflow_type.to_owned(), "attempt" => attempt)
        .increment(1);
}

/// A claim answered with no task.
#[doc(hidden)]
pub fn claim_empty() {
    counter!(CLAIMS, "result" => "empty").increment(1);
}

/// A worker call refused because its lease no longer holds the turn.
#[doc(hidden)]
pub fn lease_lost() {
    counter!(LEASE_LOSSES).increment(1);
}

/// A commit answered after `took`.
#[doc(hidden)]
pub fn store_commit(durability: Durability, took: Duration) {
    // Literal labels: the macro keeps them static, so no recorder means no allocation.
    let h = match durability {
        Durability::Durable => histogram!(STORE_COMMIT, "durability" => "durable"),
        _ => histogram!(STORE_COMMIT, "durability" => "relaxed"),
    };
    h.record(took.as_secs_f64());
}

/// One sync of the SQLite write-ahead log took `took` (the syncer thread's own time).
#[doc(hidden)]
pub fn sqlite_sync(took: Duration) {
    histogram!(SQLITE_SYNC).record(took.as_secs_f64());
}

/// The outcomes of the turns of a commit that move to history in it (most commits: none, and
/// no allocation). Every finish stamps the turn's `finished_at_ms` and `updated_at_ms` with
/// the same time, and a turn in history is never written again.
#[doc(hidden)]
pub fn finishing(turns: &[TurnRecord]) -> Vec<&'static str> {
    let mut outcomes = Vec::new();
    for t in turns {
        if t.finished_at_ms != Some(t.updated_at_ms) {
            continue;
        }
        outcomes.push(match t.status {
            TurnStatus::Completed if t.continued_to.is_some() => "continued",
            TurnStatus::Completed => "completed",
            TurnStatus::Failed => "failed",
            TurnStatus::Cancelled => "cancelled",
            _ => continue,
        });
    }
    outcomes
}

/// Turns of `workflow_type` moved to history with these outcomes (from [`finishing`]), once
/// their commit is answered.
#[doc(hidden)]
pub fn turns_finished(workflow_type: &str, outcomes: &[&'static str]) {
    for outcome in outcomes {
        counter!(TURNS, "workflow_type" => workflow_type.to_owned(), "outcome" => *outcome)
            .increment(1);
    }
}

/// A turn of `workflow_type` was suspended by a replay mismatch, once its commit is answered.
#[doc(hidden)]
pub fn turn_suspended(workflow_type: &str) {
    counter!(TURNS_SUSPENDED, "workflow_type" => workflow_type.to_owned()).increment(1);
}

/// A worker's attempt at a turn of `workflow_type` ended with `outcome` after `took`.
#[doc(hidden)]
pub fn worker_turn(workflow_type: &str, outcome: &'static str, took: Duration) {
    histogram!(WORKER_TURN, "workflow_type" => workflow_type.to_owned(), "outcome" => outcome)
        .record(took.as_secs_f64());
}

/// A step's body ran for `took`, to a value (`ok`) or an error.
#[doc(hidden)]
pub fn worker_step(workflow_type: &str, ok: bool, took: Duration) {
    let outcome = if ok { "ok" } else { "error" };
    histogram!(WORKER_STEP, "workflow_type" => workflow_type.to_owned(), "outcome" => outcome)
        .record(took.as_secs_f64());
}
