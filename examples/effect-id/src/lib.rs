//! The `effect-id` example: a `checkout` workflow charges a card through an external payment
//! service, passing the step's effect id as the idempotency key.
//!
//! An effect can succeed before its step is saved: the worker may crash between the payment
//! call and the checkpoint. The next attempt then runs the step again and calls the service
//! again. The effect id is the same on every attempt of the step, so the service recognizes
//! the repeat and answers with the first charge instead of charging twice.
//!
//! [`Payments`] stands in for the payment API: an in-memory map of charges keyed by
//! idempotency key, with a log of every call it received.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

/// A charge, as the payment service reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Receipt {
    /// The service's id of the charge.
    pub charge_id: String,
    /// The amount charged, in cents.
    pub amount_cents: u64,
    /// The idempotency key the charge was made under.
    pub idempotency_key: String,
}

/// One call the payment service received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// The idempotency key sent.
    pub idempotency_key: String,
    /// Whether the service answered with an earlier charge instead of charging.
    pub deduplicated: bool,
}

#[derive(Debug, Default)]
struct Service {
    charges: HashMap<String, Receipt>,
    calls: Vec<Call>,
}

/// A fake payment API with idempotency keys. Clones share the service.
#[derive(Clone, Debug, Default)]
pub struct Payments {
    inner: Arc<Mutex<Service>>,
}

impl Payments {
    /// A service with no charges.
    pub fn new() -> Self {
        Self::default()
    }

    /// Charge `amount_cents` under `idempotency_key`: the first call with a key charges, a
    /// repeat answers with the first charge.
    pub async fn charge(&self, idempotency_key: &str, amount_cents: u64) -> Receipt {
        let mut service = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let next_id = format!("ch_{}", service.charges.len() + 1);
        let deduplicated = service.charges.contains_key(idempotency_key);
        let receipt = service
            .charges
            .entry(idempotency_key.to_owned())
            .or_insert_with(|| Receipt {
                charge_id: next_id,
                amount_cents,
                idempotency_key: idempotency_key.to_owned(),
            })
            .clone();
        service.calls.push(Call {
            idempotency_key: idempotency_key.to_owned(),
            deduplicated,
        });
        receipt
    }

    /// Every call received, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .calls
            .clone()
    }

    /// Every charge actually made.
    pub fn charges(&self) -> Vec<Receipt> {
        let service = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut charges: Vec<Receipt> = service.charges.values().cloned().collect();
        charges.sort_by(|a, b| a.charge_id.cmp(&b.charge_id));
        charges
    }
}

/// A message: an order to charge for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Order {
    /// The order id.
    pub order: String,
    /// The amount, in cents.
    pub amount_cents: u64,
}

/// The saved state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Paid {
    /// Charge ids, in order.
    pub charges: Vec<String>,
    /// The total charged, in cents.
    pub total_cents: u64,
}

/// The workflow's dependencies: its payment service, and a switch to simulate a crash.
#[derive(Clone, Debug, Default)]
pub struct Services {
    /// The payment service.
    pub payments: Payments,
    crash_once: Arc<AtomicBool>,
}

impl Services {
    /// The services over `payments`.
    pub fn new(payments: Payments) -> Self {
        Self {
            payments,
            crash_once: Arc::default(),
        }
    }

    /// Simulate a crash once: the next charge step fails right after the payment call, before
    /// its output is saved.
    pub fn crash_once_after_charging(self) -> Self {
        self.crash_once.store(true, Ordering::SeqCst);
        self
    }
}

/// The step that charges the card, passing the step's effect id as the idempotency key: the
/// same on every attempt of the step.
#[step]
async fn charge(
    s: StepCtx,
    payments: Payments,
    crash: Arc<AtomicBool>,
    amount_cents: u64,
) -> Result<Receipt, TurnError> {
    let receipt = payments.charge(s.effect_id(), amount_cents).await;
    if crash.swap(false, Ordering::SeqCst) {
        // The charge went through, but the step's output is never saved.
        return Err(TurnError::retry("the worker crashed after charging"));
    }
    Ok(receipt)
}

/// The `checkout` workflow, over its services: charge each order once.
#[workflow(name = "checkout", version = "v1")]
pub async fn checkout(
    ctx: &mut Turn,
    state: Paid,
    order: Order,
    services: &Services,
) -> Result<Done<Paid, Receipt>, TurnError> {
    let payments = services.payments.clone();
    let crash = services.crash_once.clone();
    let receipt = charge(ctx, payments, crash, order.amount_cents).await?;
    let mut next = state;
    next.charges.push(receipt.charge_id.clone());
    next.total_cents += receipt.amount_cents;
    Ok(Done::new(next).reply(receipt))
}
