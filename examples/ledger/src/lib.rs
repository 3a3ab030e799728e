//! The `account` workflow: each message debits (or credits) an account. The balance lives in
//! the application's own table, `accounts`, and changes in a **transactional step**: the
//! `UPDATE` and the step's saved output commit in one PostgreSQL transaction, so a debit lands
//! exactly once however often a worker crashes or a turn is retried. The same transaction
//! writes the debit's row in the journal, `entries`, so which message was applied how often can
//! be read back. The workflow's state counts the debits it applied.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

/// The application's table, created by `example-ledger setup`.
pub const CREATE_ACCOUNTS: &str = "CREATE TABLE IF NOT EXISTS accounts (
    id text PRIMARY KEY,
    cents bigint NOT NULL,
    debits bigint NOT NULL DEFAULT 0
)";

/// The application's journal, created by `example-ledger setup`: one row per debit applied,
/// naming the account and the turn (which names the message: a turn's message id is in the
/// instance's history). No unique key on purpose: that each debit lands once is the
/// transactional step's doing, and `examples/ledger/tests/ledger.rs` checks it from these rows.
pub const CREATE_ENTRIES: &str = "CREATE TABLE IF NOT EXISTS entries (
    account text NOT NULL,
    turn bigint NOT NULL,
    cents bigint NOT NULL
)";

/// The saved state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Applied {
    /// Debits applied to the account.
    pub debits: u64,
}

/// A debit (positive) or credit (negative), in cents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Debit {
    /// Cents to take from the account.
    pub cents: i64,
}

/// The `account` workflow: the instance id is the account's id in `accounts`. Debits the
/// account and journals the debit in `entries`, in one transaction; replies with the balance
/// after the debit.
#[workflow(name = "account", version = "v1")]
pub async fn account(
    ctx: &mut Turn,
    state: Applied,
    debit: Debit,
) -> Result<Done<Applied, i64>, TurnError> {
    let id = ctx.workflow_id().to_owned();
    let turn = i64::try_from(ctx.turn_number()).unwrap_or(i64::MAX);
    let balance: i64 = ctx
        .transact("debit", move |tx| async move {
            let row = tx
                .query_one(
                    "UPDATE accounts SET cents = cents - $2, debits = debits + 1 \
                     WHERE id = $1 RETURNING cents",
                    &[&id, &debit.cents],
                )
                .await?;
            tx.execute(
                "INSERT INTO entries (account, turn, cents) VALUES ($1, $2, $3)",
                &[&id, &turn, &debit.cents],
            )
            .await?;
            Ok(row.get(0))
        })
        .await?;
    let next = Applied {
        debits: state.debits + 1,
    };
    Ok(Done::new(next).reply(balance))
}
