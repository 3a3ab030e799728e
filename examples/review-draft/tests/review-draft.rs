//! The review-draft workflow on a virtual clock: approval, rejection and timeout.

use std::time::Duration;

use example_review_draft::{draft_for, review_draft, Approval, Outcome, Published, Review, Task};
use turnwise::clock::Clock;
use turnwise::protocol::{CheckpointKind, TurnStatus};
use turnwise::testing::TestEnv;

type Result = std::result::Result<(), Box<dyn std::error::Error>>;

fn task() -> Task {
    Task {
        task: "a customer response".into(),
    }
}

#[tokio::test]
async fn an_approved_draft_is_published_after_the_cool_down() -> Result {
    let times = Review::default();
    let workflow = review_draft(times);
    let env = TestEnv::new().register(workflow.clone());
    let review = env.start(&workflow, "review-1").await?;
    let turn = review.send(task(), "request-1").await?.number;

    env.run_until_idle().await?;
    let waiting = review.turn(turn).await?;
    assert_eq!(waiting.status, TurnStatus::Waiting);
    assert_eq!(
        waiting.steps.len(),
        2,
        "the draft, and the wait with its deadline"
    );
    assert_eq!(waiting.steps[0].key, "draft");
    assert_eq!(
        waiting.steps[0].output,
        serde_json::json!(draft_for("a customer response"))
    );
    let wait = &waiting.steps[1];
    assert_eq!(
        (wait.key.as_str(), wait.kind),
        ("review", CheckpointKind::Signal)
    );
    assert_eq!(wait.signal_name.as_deref(), Some("approval"));
    assert!(wait.output.is_null(), "nothing received yet");
    let now = env.clock().now_ms();
    assert_eq!(
        wait.wake_at_ms,
        Some(now + times.review_timeout.as_millis() as i64)
    );

    review
        .signal::<Approval>(turn, Approval { approved: true }, "review-event-1")
        .await?;
    env.run_until_idle().await?;
    let sleeping = review.turn(turn).await?;
    assert_eq!(
        sleeping.status,
        TurnStatus::Waiting,
        "the cool-down is not due yet"
    );
    let kinds: Vec<_> = sleeping
        .steps
        .iter()
        .map(|s| (s.key.as_str(), s.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("draft", CheckpointKind::Step),
            ("review", CheckpointKind::Signal),
            ("cool-down", CheckpointKind::Sleep)
        ]
    );
    assert_eq!(review.reply(turn).await?, None);

    env.advance(Duration::from_secs(1)).await?;
    assert_eq!(
        review.reply(turn).await?,
        Some(Outcome::Published(draft_for("a customer response")))
    );
    assert_eq!(review.state().await?, Published { sent: 1 });
    let done = review.turn(turn).await?;
    assert_eq!(done.status, TurnStatus::Completed);
    assert_eq!(done.steps.len(), 3);
    assert_eq!(
        done.attempt, 1,
        "waiting for a signal or a sleep counts no attempt"
    );
    Ok(())
}

#[tokio::test]
async fn a_signal_sent_twice_with_one_event_id_is_delivered_once() -> Result {
    let times = Review::default();
    let workflow = review_draft(times);
    let env = TestEnv::new().register(workflow.clone());
    let review = env.start(&workflow, "review-1").await?;
    let turn = review.send(task(), "request-1").await?.number;
    // Sent before the turn even ran: signals to a queued turn are buffered.
    review
        .signal::<Approval>(turn, Approval { approved: false }, "review-event-1")
        .await?;
    review
        .signal::<Approval>(turn, Approval { approved: false }, "review-event-1")
        .await?;
    env.run_until_idle().await?;
    assert_eq!(review.reply(turn).await?, Some(Outcome::Rejected));
    assert_eq!(review.state().await?, Published { sent: 0 });
    let signals = review.turn(turn).await?.signals.unwrap_or_default();
    assert_eq!(signals.len(), 1);
    Ok(())
}

#[tokio::test]
async fn without_an_answer_the_review_times_out() -> Result {
    let times = Review::default();
    let workflow = review_draft(times);
    let env = TestEnv::new().register(workflow.clone());
    let review = env.start(&workflow, "review-1").await?;
    let turn = review.send(task(), "request-1").await?.number;
    env.run_until_idle().await?;
    env.advance(times.review_timeout - Duration::from_secs(1))
        .await?;
    assert_eq!(
        review.reply(turn).await?,
        None,
        "a second before the deadline it still waits"
    );
    env.advance(Duration::from_secs(1)).await?;
    assert_eq!(review.reply(turn).await?, Some(Outcome::TimedOut));
    let done = review.turn(turn).await?;
    assert_eq!(done.steps[1].output["received"], serde_json::json!(false));
    assert_eq!(review.state().await?, Published { sent: 0 });
    Ok(())
}

/// The workflow's JSON Schemas, compared with the committed `schema.json`.
/// `TURNWISE_BLESS=1 cargo test -p example-review-draft schema::` rewrites it after a reviewed change.
mod schema {
    use example_review_draft::review_draft;

    #[test]
    fn the_schema_matches_its_snapshot() {
        let workflow = review_draft(example_review_draft::Review::default());
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema.json");
        turnwise::testing::assert_snapshot(&workflow.schema().to_json(), path);
    }
}
