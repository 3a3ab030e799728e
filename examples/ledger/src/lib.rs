//! The `account` workflow: each message debits (or credits) an account. The balance lives in
//! the application's own table, `accounts`, and changes in a **transactional step**: the
//! `UPDATE` and the step's saved output commit in one PostgreSQL transaction, so a debit lands
//! exactly once however often a worker crashes or a turn is retried. The workflow's state
//! counts the debits it applied.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

/// The application's table, created by `example-ledger setup`.
pub const CREATE_ACCOUNTS: &str = "CREATE TABLE IF NOT EXISTS accounts (
    id text PRIMARY KEY,
    cents bigint NOT NULL,
    debits bigint NOT NULL DEFAULT 0
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

/// The `account` workflow: the instance id is the account's id in `accounts`. Replies with the
/// balance after the debit.
#[workflow(name = "account", version = "v1")]
pub async fn account(
    ctx: &mut Turn,
    state: Applied,
    debit: Debit,
) -> Result<Done<Applied, i64>, TurnError> {
    let id = ctx.workflow_id().to_owned();
    let balance: i64 = ctx
        .transact("debit", move |tx| async move {
            let row = tx
                .query_one(
                    "UPDATE accounts SET cents = cents - $2, debits = debits + 1 \
                     WHERE id = $1 RETURNING cents",
                    &[&id, &debit.cents],
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
