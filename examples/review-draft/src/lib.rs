//! The `review-draft` workflow: a turn drafts a text in a step, then waits for a person's
//! `approval` signal, for at most a review timeout. While it waits, no worker is held: the
//! turn is released and runs again from the top (replaying the draft) when the signal arrives
//! or the deadline passes. An approved draft is published after a short durable cool-down.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

/// The saved state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Published {
    /// How many drafts were published.
    pub sent: u64,
}

/// A message: what to write a draft for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Task {
    /// The task.
    pub task: String,
}

/// What became of a draft: the reply of its turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Approved and published; the published text.
    Published(String),
    /// The reviewer rejected it.
    Rejected,
    /// No answer came before the review timeout.
    TimedOut,
}

/// The signal a reviewer sends to the waiting turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Signal)]
#[signal(name = "approval")]
pub struct Approval {
    /// Whether the draft may be published.
    pub approved: bool,
}

/// The workflow's two durations: its dependencies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Review {
    /// How long to wait for the approval.
    pub review_timeout: Duration,
    /// The pause between the approval and the publication.
    pub cool_down: Duration,
}

impl Default for Review {
    fn default() -> Self {
        Self {
            review_timeout: Duration::from_secs(24 * 3600),
            cool_down: Duration::from_secs(1),
        }
    }
}

/// The text a task's draft has.
pub fn draft_for(task: &str) -> String {
    format!("Draft for {task}")
}

/// The step that writes the draft; its key is its name, `draft`.
#[step]
async fn draft(task: String) -> Result<String, TurnError> {
    Ok(draft_for(&task))
}

/// The `review-draft` workflow: draft, wait for the `approval` signal for at most
/// `review.review_timeout`, and publish an approved draft after `review.cool_down`.
///
/// Build it over its durations: `review_draft(Review::default())`.
#[workflow(name = "review-draft", version = "v1", signals(Approval))]
pub async fn review_draft(
    ctx: &mut Turn,
    state: Published,
    message: Task,
    review: &Review,
) -> Result<Done<Published, Outcome>, TurnError> {
    let draft = draft(ctx, message.task).await?;
    let answer = ctx
        .wait_for_signal::<Approval>("review", review.review_timeout)
        .await?;
    match answer {
        None => Ok(Done::new(state).reply(Outcome::TimedOut)),
        Some(Approval { approved: false }) => Ok(Done::new(state).reply(Outcome::Rejected)),
        Some(Approval { approved: true }) => {
            ctx.sleep("cool-down", review.cool_down).await?;
            Ok(Done::new(Published {
                sent: state.sent + 1,
            })
            .reply(Outcome::Published(draft)))
        }
    }
}
