//! Run with: cargo run -p example-review-draft [-- <database path>]
//!
//! A draft waits for a person's approval. The turn drafts a text in a step and waits for the
//! `approval` signal; while it waits, the worker is free and the turn is parked in the
//! database. The app then approves through the handle, the turn runs again from the top
//! (replaying its saved draft), takes the signal, sleeps one second durably, and publishes.
//! By default the database is a fresh file in a temporary directory.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use example_review_draft::{review_draft, Approval, Outcome, Review, Task};
use turnwise::prelude::*;
use turnwise::protocol::{CheckpointKind, TurnStatus, WorkflowTurn};

fn database_path() -> std::io::Result<PathBuf> {
    if let Some(path) = std::env::args().nth(1) {
        return Ok(PathBuf::from(path));
    }
    let dir = std::env::temp_dir().join(format!("turnwise-review-draft-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir.join("review-draft.db"))
}

fn describe(turn: &WorkflowTurn) -> String {
    let steps: Vec<String> = turn
        .steps
        .iter()
        .map(|s| match s.kind {
            CheckpointKind::Signal if s.output.is_null() => {
                format!("{} (waiting for `approval`)", s.key)
            }
            CheckpointKind::Signal => format!("{} (signal received: {})", s.key, s.output["value"]),
            CheckpointKind::Sleep => {
                format!("{} (sleep of {} ms)", s.key, s.delay_ms.unwrap_or_default())
            }
            // `step`, and any kind a later version adds.
            kind => format!("{} ({kind})", s.key),
        })
        .collect();
    format!(
        "turn {} is {}, saved steps: {}",
        turn.number,
        turn.status,
        steps.join(", ")
    )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = database_path()?;
    let engine = Engine::open(&path).await?;
    println!("The engine keeps its data in {}.", path.display());

    let workflow = review_draft(Review {
        review_timeout: Duration::from_secs(60),
        cool_down: Duration::from_secs(1),
    });
    let review = workflow.start(&engine, "review-1").await?;
    let turn = review
        .send(
            Task {
                task: "a customer response".into(),
            },
            "request-1",
        )
        .await?
        .number;
    println!("Sent a task to `{}`; it is turn {turn}.", review.id());

    let worker = Worker::new(engine.clone()).register(workflow.clone());
    worker.run_until_idle().await?;
    let t = review.turn(turn).await?;
    println!("The worker drafted and is free again: {}.", describe(&t));
    println!(
        "The draft reads {}; the turn waits up to 60 s for an approval.",
        t.steps[0].output
    );

    review
        .signal::<Approval>(turn, Approval { approved: true }, "review-event-1")
        .await?;
    println!(
        "The reviewer approved through the handle (signal `approval`, event id review-event-1)."
    );

    worker.run_until_idle().await?;
    let t = review.turn(turn).await?;
    println!(
        "The turn ran again, replayed its draft and took the approval: {}.",
        describe(&t)
    );
    println!("It now sleeps 1 s before publishing; the worker is free meanwhile.");

    let started = Instant::now();
    while review.reply(turn).await?.is_none() {
        if started.elapsed() > Duration::from_secs(10) {
            return Err("the turn did not finish within 10 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        worker.run_until_idle().await?;
    }
    let t = review.turn(turn).await?;
    assert_eq!(t.status, TurnStatus::Completed);
    println!(
        "After {:.1} s the sleep was due and the turn finished: {}.",
        started.elapsed().as_secs_f64(),
        describe(&t)
    );
    match review.reply(turn).await? {
        Some(Outcome::Published(text)) => println!("Reply: published \"{text}\"."),
        other => println!("Reply: {other:?}."),
    }
    println!("Drafts published so far: {}.", review.state().await?.sent);
    Ok(())
}
