//! Schema snapshots: one JSON document per workflow and a manifest for the set, compared with
//! the committed files in `tests/schemas/`. `TURNWISE_BLESS=1` rewrites them after a reviewed
//! change.

use std::path::Path;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;
use turnwise::schema::Manifest;

/// An order.
#[derive(Serialize, Deserialize, JsonSchema)]
struct Order {
    /// The order id.
    id: String,
    /// The amount, in cents.
    cents: u64,
}

/// The ledger.
#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Ledger {
    /// Charged orders.
    orders: Vec<String>,
}

/// A receipt.
#[derive(Serialize, Deserialize, JsonSchema)]
struct Receipt {
    /// The charge id.
    charge: String,
}

/// A reviewer's answer.
#[derive(Serialize, Deserialize, JsonSchema, Signal)]
#[signal(name = "approval")]
struct Approval {
    /// Whether the order may be charged.
    approved: bool,
}

/// Charge an order.
#[step(kind = "tool")]
async fn charge(s: StepCtx, cents: u64) -> Result<Receipt, TurnError> {
    Ok(Receipt {
        charge: format!("{}-{cents}", s.effect_id()),
    })
}

#[workflow(name = "checkout", version = "v2", signals(Approval))]
async fn checkout(
    ctx: &mut Turn,
    state: Ledger,
    order: Order,
) -> Result<Done<Ledger, Option<Receipt>>, TurnError> {
    let at = ctx.now("received-at").await?;
    let answer = ctx
        .wait_for_signal::<Approval>("approval", Duration::from_hours(1))
        .await?;
    if !answer.is_some_and(|a| a.approved) {
        return Ok(Done::new(state).reply(None));
    }
    let receipt = charge(ctx, order.cents).await?;
    let note = ctx
        .step::<String, _, _>("note", move |_| async move { Ok(format!("at {at}")) })
        .await?;
    let mut next = state;
    next.orders.push(order.id + &note);
    Ok(Done::new(next).reply(Some(receipt)))
}

#[workflow(name = "counter", version = "v1")]
async fn counter(ctx: &mut Turn, state: u64, add: u64) -> Result<Done<u64, u64>, TurnError> {
    let jitter = ctx.random("jitter").await?;
    Ok(Done::new(state + add).reply(jitter % 2))
}

fn check(name: &str, json: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/schemas")
        .join(format!("{name}.json"));
    turnwise::testing::assert_snapshot(json, path);
}

#[test]
fn each_workflow_has_one_schema_document() {
    check("checkout", &checkout.schema().to_json());
    check("counter", &counter.schema().to_json());
}

#[test]
fn a_manifest_gathers_a_set_of_workflows() {
    let manifest = Manifest::of([counter.schema(), checkout.schema()]);
    let names: Vec<&str> = manifest.workflows.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["checkout", "counter"]);
    check("manifest", &manifest.schemas_json());
}

#[test]
fn the_schema_names_signals_and_statically_known_steps() {
    let schema = checkout.schema();
    let signals: Vec<&str> = schema.signals.keys().map(String::as_str).collect();
    assert_eq!(signals, ["approval"]);
    let steps: Vec<&str> = schema.steps.keys().map(String::as_str).collect();
    assert_eq!(steps, ["charge", "note", "received-at"]);
    assert_eq!(Workflow::schema(&checkout), Some(schema));
}
