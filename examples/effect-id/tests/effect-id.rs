//! The effect-id example in the test environment: the effect id is stable across a crash
//! between an external call and its checkpoint, so the external effect happens once.

use std::time::Duration;

use example_effect_id::{checkout, Order, Paid, Payments, Receipt, Services};
use turnwise::protocol::TurnStatus;
use turnwise::testing::TestEnv;

type Result = std::result::Result<(), Box<dyn std::error::Error>>;

fn order(id: &str) -> Order {
    Order {
        order: id.into(),
        amount_cents: 4_999,
    }
}

#[tokio::test]
async fn the_retry_sends_the_same_effect_id_and_the_service_charges_once() -> Result {
    let payments = Payments::new();
    let workflow = checkout(Services::new(payments.clone()).crash_once_after_charging());
    let env = TestEnv::new().register(workflow.clone());
    let handle = env.start(&workflow, "checkout-1").await?;
    let turn = handle.send(order("A-17"), "order-A-17").await?.number;

    // Attempt 1: the service charges, then the step fails before its output is saved.
    env.run_until_idle().await?;
    let calls = payments.calls();
    assert_eq!(calls.len(), 1);
    assert!(!calls[0].deduplicated);
    assert!(
        calls[0].idempotency_key.ends_with("/charge"),
        "{}",
        calls[0].idempotency_key
    );
    assert_eq!(payments.charges().len(), 1);
    let failed = handle.turn(turn).await?;
    assert_eq!((failed.status, failed.attempt), (TurnStatus::Queued, 1));
    assert!(
        failed.steps.is_empty(),
        "the crash came before the checkpoint"
    );
    assert_eq!(
        failed.error.as_deref(),
        Some("Error: the worker crashed after charging")
    );

    // Attempt 2, after the backoff: the same effect id; the service answers with the charge.
    env.advance(Duration::from_secs(1)).await?;
    let calls = payments.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[1].idempotency_key, calls[0].idempotency_key,
        "the effect id is stable"
    );
    assert!(calls[1].deduplicated);
    let charges = payments.charges();
    assert_eq!(charges.len(), 1, "one external effect");
    let want = Receipt {
        charge_id: "ch_1".into(),
        amount_cents: 4_999,
        idempotency_key: calls[0].idempotency_key.clone(),
    };
    assert_eq!(charges[0], want);

    let done = handle.turn(turn).await?;
    assert_eq!((done.status, done.attempt), (TurnStatus::Completed, 2));
    assert_eq!(done.steps.len(), 1);
    assert_eq!(done.steps[0].key, "charge");
    assert_eq!(
        serde_json::from_value::<Receipt>(done.steps[0].output.clone())?,
        want
    );
    assert_eq!(handle.reply(turn).await?, Some(want));
    assert_eq!(
        handle.state().await?,
        Paid {
            charges: vec!["ch_1".into()],
            total_cents: 4_999
        }
    );
    Ok(())
}

#[tokio::test]
async fn every_message_has_effect_ids_of_its_own() -> Result {
    let payments = Payments::new();
    let workflow = checkout(Services::new(payments.clone()));
    let env = TestEnv::new().register(workflow.clone());
    let handle = env.start(&workflow, "checkout-1").await?;
    handle.send(order("A-17"), "order-A-17").await?;
    handle.send(order("A-18"), "order-A-18").await?;
    // Sending the first order again under its message id admits nothing new.
    handle.send(order("A-17"), "order-A-17").await?;
    assert_eq!(env.run_until_idle().await?, 2);

    let calls = payments.calls();
    assert_eq!(calls.len(), 2);
    assert_ne!(calls[0].idempotency_key, calls[1].idempotency_key);
    assert!(calls.iter().all(|c| !c.deduplicated));
    assert_eq!(payments.charges().len(), 2);
    assert_eq!(handle.state().await?.total_cents, 2 * 4_999);
    Ok(())
}

/// The workflow's JSON Schemas, compared with the committed `schema.json`.
/// `TURNWISE_BLESS=1 cargo test -p example-effect-id schema::` rewrites it after a reviewed change.
mod schema {
    use example_effect_id::checkout;

    #[test]
    fn the_schema_matches_its_snapshot() {
        let workflow = checkout(example_effect_id::Services::default());
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema.json");
        turnwise::testing::assert_snapshot(&workflow.schema().to_json(), path);
    }
}
