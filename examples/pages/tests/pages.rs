//! The pages workflow in the test environment: a large message split over turns, each within
//! the step budget.

use example_pages::{count_words, pages, Batch, PageDone, Paging, Totals};
use turnwise::context::MAX_STEPS;
use turnwise::protocol::TurnStatus;
use turnwise::testing::TestEnv;

type Result = std::result::Result<(), Box<dyn std::error::Error>>;

fn documents(n: usize) -> Vec<String> {
    (1..=n)
        .map(|i| format!("document {i} {}", "word ".repeat(i % 4)))
        .collect()
}

#[tokio::test]
async fn a_large_message_is_processed_a_page_per_turn() -> Result {
    let workflow = pages(Paging::default());
    let env = TestEnv::new().register(workflow.clone());
    let handle = env.start(&workflow, "pages-1").await?;
    let items = documents(50);
    let words: u64 = items.iter().map(|d| count_words(d)).sum();
    handle
        .send(
            Batch {
                items: items.clone(),
            },
            "batch-1",
        )
        .await?;
    assert_eq!(env.run_until_idle().await?, 3);

    assert_eq!(
        handle.state().await?,
        Totals {
            items: 50,
            words,
            pages: 3
        }
    );
    assert_eq!(
        handle.reply(1).await?,
        Some(PageDone {
            processed: 20,
            remaining: 30
        })
    );
    assert_eq!(
        handle.reply(2).await?,
        Some(PageDone {
            processed: 20,
            remaining: 10
        })
    );
    assert_eq!(
        handle.reply(3).await?,
        Some(PageDone {
            processed: 10,
            remaining: 0
        })
    );

    let history = handle.history(None).await?.turns;
    let sizes: Vec<usize> = history.iter().map(|t| t.steps.len()).collect();
    assert_eq!(sizes, [20, 20, 10]);
    let links: Vec<Option<u64>> = history.iter().map(|t| t.continued_to).collect();
    assert_eq!(links, [Some(2), Some(3), None]);
    for turn in &history {
        assert_eq!(turn.status, TurnStatus::Completed);
        assert_eq!(turn.steps[0].key, "item-0");
    }
    // Turn 2 counted documents 21..=40, and saved each count as its step output.
    let second = &history[1];
    assert_eq!(
        second.steps[0].output,
        serde_json::json!(count_words(&items[20]))
    );
    let message: Batch = serde_json::from_value(second.message.clone())?;
    assert_eq!(message.items, items[20..]);
    Ok(())
}

#[tokio::test]
async fn a_page_larger_than_the_step_budget_fails_the_turn_for_good() -> Result {
    let workflow = pages(Paging {
        page_size: MAX_STEPS + 1,
    });
    let env = TestEnv::new().register(workflow.clone());
    let handle = env.start(&workflow, "pages-1").await?;
    handle
        .send(
            Batch {
                items: documents(MAX_STEPS + 1),
            },
            "batch-1",
        )
        .await?;
    env.run_until_idle().await?;
    let turn = handle.turn(1).await?;
    assert_eq!(turn.status, TurnStatus::Failed);
    assert_eq!(
        turn.attempt, 1,
        "a step-budget breach is permanent: no retry"
    );
    assert!(
        turn.error
            .as_deref()
            .unwrap_or_default()
            .contains("at most 64 steps"),
        "{:?}",
        turn.error
    );
    Ok(())
}

/// The workflow's JSON Schemas, compared with the committed `schema.json`.
/// `TURNWISE_BLESS=1 cargo test -p example-pages schema::` rewrites it after a reviewed change.
mod schema {
    use example_pages::pages;

    #[test]
    fn the_schema_matches_its_snapshot() {
        let workflow = pages(example_pages::Paging::default());
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema.json");
        turnwise::testing::assert_snapshot(&workflow.schema().to_json(), path);
    }
}
