//! The `invoice` workflow: the two ways a turn can stop short of a result without being
//! retried as an ordinary error.
//!
//! - [`WorkflowError`]: an invoice that names no order, or bills nothing, can never succeed.
//!   The turn fails for good on its first attempt and blocks the inbox until an operator
//!   retries or skips it.
//! - [`WorkflowWait`]: an invoice that is not due yet waits until its due date. The attempt
//!   ends, the turn runs again at that time, and the wait counts no attempt.
//!
//! The workflow reads the time from the engine's clock, given to it when it is built, so a test
//! with a virtual clock skips to the due date instantly.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::clock::Clock;
use turnwise::prelude::*;
use turnwise::protocol::Millis;

/// A message: an invoice to send.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Invoice {
    /// The order billed; must not be empty.
    pub order: String,
    /// The amount, in cents; must not be zero.
    pub amount_cents: u64,
    /// When the invoice may be sent, in Unix ms.
    pub due_at_ms: Millis,
}

/// The reply: the invoice as sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Sent {
    /// The invoice number.
    pub number: String,
    /// The amount, in cents.
    pub amount_cents: u64,
}

/// The saved state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Ledger {
    /// Invoice numbers sent, in order.
    pub sent: Vec<String>,
    /// Their total, in cents.
    pub total_cents: u64,
}

/// The step that sends the invoice and returns its number.
#[step]
async fn send(order: String) -> Result<String, TurnError> {
    Ok(format!("INV-{order}"))
}

/// The `invoice` workflow, over the clock it reads due dates against (the engine's clock,
/// `engine.clock().clone()`): `invoicing(clock)`.
#[workflow(name = "invoice", version = "v1")]
pub async fn invoicing(
    ctx: &mut Turn,
    state: Ledger,
    invoice: Invoice,
    clock: &Arc<dyn Clock>,
) -> Result<Done<Ledger, Sent>, TurnError> {
    if invoice.order.trim().is_empty() {
        return Err(WorkflowError::new("an invoice names its order").into());
    }
    if invoice.amount_cents == 0 {
        return Err(WorkflowError::new(format!(
            "the invoice for order {} bills nothing",
            invoice.order
        ))
        .into());
    }
    // This clock read is deliberately not a step: a saved step would replay the first
    // answer forever. It comes before any step, so it never disturbs a replay.
    if clock.now_ms() < invoice.due_at_ms {
        let why = format!("the invoice for order {} is not due yet", invoice.order);
        return Err(WorkflowWait::until(invoice.due_at_ms).because(why).into());
    }
    let number = send(ctx, invoice.order.clone()).await?;
    let mut next = state;
    next.sent.push(number.clone());
    next.total_cents += invoice.amount_cents;
    Ok(Done::new(next).reply(Sent {
        number,
        amount_cents: invoice.amount_cents,
    }))
}
