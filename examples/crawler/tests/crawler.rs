//! The crawler workflow in the test environment: a failed attempt, a backoff, and a retry
//! that resumes from the saved cursor.

use std::time::Duration;

use example_crawler::{crawler, Crawl, CrawlReport, Crawled, Site};
use turnwise::protocol::{CheckpointKind, TurnStatus};
use turnwise::testing::TestEnv;
use turnwise::Worker;

type Result = std::result::Result<(), Box<dyn std::error::Error>>;

/// The environment's worker with a non-zero progress interval.
///
/// Workaround: `TestEnv` sets the worker's progress interval to zero, and a step with a
/// `heartbeat_timeout` then panics (`Duration::clamp` with min 50 ms > max 0). So these tests
/// run turns with their own worker; time still moves with the environment's virtual clock.
fn worker(env: &TestEnv) -> Worker {
    env.worker()
        .clone()
        .progress_every(Duration::from_millis(50))
}

#[tokio::test]
async fn the_retry_resumes_from_the_cursor_of_the_failed_attempt() -> Result {
    let site = Site::new().fail_once_at(2);
    let workflow = crawler(site.clone());
    let env = TestEnv::new().register(workflow.clone());
    let handle = env.start(&workflow, "crawler-1").await?;
    let turn = handle.send(Crawl { pages: 5 }, "crawl-1").await?.number;

    let worker = worker(&env);
    worker.run_until_idle().await?;
    assert!(site.fault_fired());
    assert_eq!(site.pages_read(), [0, 1]);
    let failed = handle.turn(turn).await?;
    assert_eq!(
        failed.status,
        TurnStatus::Queued,
        "the turn backs off before its next attempt"
    );
    assert_eq!(failed.attempt, 1);
    assert!(
        failed.steps.is_empty(),
        "the long step has saved no output yet"
    );
    assert!(
        failed
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("page 2"),
        "{:?}",
        failed.error
    );
    let progress = failed
        .progress
        .expect("the failed attempt's progress is kept");
    assert_eq!(progress.phase, "reading pages");
    assert_eq!(progress.total, Some(5));

    env.clock().advance(Duration::from_secs(1));
    worker.run_until_idle().await?;
    assert_eq!(site.pages_read(), [0, 1, 2, 3, 4], "no page is read twice");
    assert_eq!(
        handle.reply(turn).await?,
        Some(CrawlReport {
            pages: 5,
            resumed_from: 2
        })
    );
    assert_eq!(
        handle.state().await?,
        Crawled {
            crawls: 1,
            pages: 5
        }
    );
    let done = handle.turn(turn).await?;
    assert_eq!(done.status, TurnStatus::Completed);
    assert_eq!(done.attempt, 2);
    assert_eq!(done.steps.len(), 1);
    assert_eq!(
        (done.steps[0].key.as_str(), done.steps[0].kind),
        ("crawl", CheckpointKind::Step)
    );
    assert_eq!(
        done.steps[0].output,
        serde_json::json!({"pages": 5, "resumed_from": 2})
    );
    Ok(())
}

#[tokio::test]
async fn without_a_fault_the_crawl_starts_at_page_zero() -> Result {
    let site = Site::new();
    let workflow = crawler(site.clone());
    let env = TestEnv::new().register(workflow.clone());
    let handle = env.start(&workflow, "crawler-1").await?;
    handle.send(Crawl { pages: 3 }, "crawl-1").await?;
    assert_eq!(worker(&env).run_until_idle().await?, 1);
    assert_eq!(site.pages_read(), [0, 1, 2]);
    assert_eq!(
        handle.reply(1).await?,
        Some(CrawlReport {
            pages: 3,
            resumed_from: 0
        })
    );
    assert_eq!(handle.turn(1).await?.attempt, 1);
    Ok(())
}

/// The workflow's JSON Schemas, compared with the committed `schema.json`.
/// `TURNWISE_BLESS=1 cargo test -p example-crawler schema::` rewrites it after a reviewed change.
mod schema {
    use example_crawler::crawler;

    #[test]
    fn the_schema_matches_its_snapshot() {
        let workflow = crawler(example_crawler::Site::new());
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema.json");
        turnwise::testing::assert_snapshot(&workflow.schema().to_json(), path);
    }
}
