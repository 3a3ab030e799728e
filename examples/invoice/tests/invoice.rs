//! The invoice workflow on a virtual clock: a permanent failure that an operator skips, and a
//! wait for a due date that counts no attempt.

use std::time::Duration;

use example_invoice::{invoicing, Invoice, Ledger, Sent};
use turnwise::clock::Clock;
use turnwise::protocol::{InstanceStatus, TurnStatus, WaitReason};
use turnwise::testing::TestEnv;

type Result = std::result::Result<(), Box<dyn std::error::Error>>;

#[tokio::test]
async fn an_invalid_invoice_fails_for_good_and_blocks_the_inbox_until_skipped() -> Result {
    let env = TestEnv::new();
    let workflow = invoicing(env.engine().clock().clone());
    let env = env.register(workflow.clone());
    let invoices = env.start(&workflow, "invoices-1").await?;
    let now = env.clock().now_ms();
    let due = now + 3_600_000;
    invoices
        .send(
            Invoice {
                order: "".into(),
                amount_cents: 100,
                due_at_ms: now,
            },
            "invoice-1",
        )
        .await?;
    invoices
        .send(
            Invoice {
                order: "A-17".into(),
                amount_cents: 12_500,
                due_at_ms: due,
            },
            "invoice-2",
        )
        .await?;

    // The invalid invoice fails for good at once, with attempts to spare, and blocks the inbox.
    assert_eq!(env.run_until_idle().await?, 1);
    let failed = invoices.turn(1).await?;
    assert_eq!(failed.status, TurnStatus::Failed);
    assert_eq!(failed.attempt, 1);
    assert_eq!(
        failed.error.as_deref(),
        Some("WorkflowError: an invoice names its order")
    );
    assert!(failed.steps.is_empty());
    let inst = invoices.instance().await?;
    assert_eq!(inst.status, InstanceStatus::Failed);
    assert_eq!(inst.pending_messages, 2);
    env.advance(Duration::from_secs(3600)).await?;
    assert_eq!(
        invoices.turn(2).await?.status,
        TurnStatus::Queued,
        "nothing runs past a failed turn"
    );

    // Skipping moves it to history, and the next invoice (due by now) runs.
    invoices.skip(1).await?;
    assert_eq!(env.run_until_idle().await?, 1);
    let history = invoices.history(None).await?.turns;
    let summary: Vec<_> = history.iter().map(|t| (t.number, t.status)).collect();
    assert_eq!(
        summary,
        [(1, TurnStatus::Failed), (2, TurnStatus::Completed)]
    );
    assert_eq!(invoices.reply(1).await?, None, "a failed turn has no reply");
    assert_eq!(
        invoices.state().await?,
        Ledger {
            sent: vec!["INV-A-17".into()],
            total_cents: 12_500
        }
    );
    assert_eq!(invoices.instance().await?.status, InstanceStatus::Idle);
    Ok(())
}

#[tokio::test]
async fn waiting_for_the_due_date_counts_no_attempt() -> Result {
    let env = TestEnv::new();
    let workflow = invoicing(env.engine().clock().clone());
    let env = env.register(workflow.clone());
    let invoices = env.start(&workflow, "invoices-1").await?;
    let due = env.clock().now_ms() + 3_600_000;
    let turn = invoices
        .send(
            Invoice {
                order: "A-17".into(),
                amount_cents: 12_500,
                due_at_ms: due,
            },
            "invoice-1",
        )
        .await?;

    env.run_until_idle().await?;
    let waiting = invoices.turn(turn.number).await?;
    assert_eq!(waiting.status, TurnStatus::Waiting);
    assert_eq!(waiting.attempt, 1);
    let wait = waiting.wait.expect("a waiting turn says until when");
    assert_eq!(wait.until_ms, due);
    assert!(
        matches!(wait.reason, None | Some(WaitReason::Retry)),
        "absent means retry"
    );
    assert!(
        waiting
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("not due yet"),
        "{:?}",
        waiting.error
    );

    // Woken early, the turn runs, finds the invoice not due, and waits again: five more waits
    // than its three attempts, and still no attempt is counted.
    for _ in 0..5 {
        invoices.wake().await?;
        env.run_until_idle().await?;
    }
    env.advance(Duration::from_secs(3600 - 60)).await?;
    assert_eq!(
        invoices.reply(turn.number).await?,
        None,
        "a minute early it still waits"
    );
    env.advance(Duration::from_secs(60)).await?;
    assert_eq!(
        invoices.reply(turn.number).await?,
        Some(Sent {
            number: "INV-A-17".into(),
            amount_cents: 12_500
        })
    );
    let done = invoices.turn(turn.number).await?;
    assert_eq!(done.status, TurnStatus::Completed);
    assert_eq!(done.attempt, 1, "the waits counted no attempt");
    assert_eq!(done.steps.len(), 1);
    assert_eq!(done.steps[0].key, "send");
    assert_eq!(
        invoices.state().await?,
        Ledger {
            sent: vec!["INV-A-17".into()],
            total_cents: 12_500
        }
    );
    Ok(())
}

/// The workflow's JSON Schemas, compared with the committed `schema.json`.
/// `TURNWISE_BLESS=1 cargo test -p example-invoice schema::` rewrites it after a reviewed change.
mod schema {
    use example_invoice::invoicing;

    #[test]
    fn the_schema_matches_its_snapshot() {
        let workflow = invoicing(std::sync::Arc::new(turnwise::clock::SystemClock));
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema.json");
        turnwise::testing::assert_snapshot(&workflow.schema().to_json(), path);
    }
}
