//! The `review-draft` workflow: a turn drafts a text in a step, then waits for a person's
//! `approval` signal, for at most a review timeout. While it waits, no worker is held: the
//! turn is released and runs again from the top (replaying the draft) when the signal arrives
//! or the deadline passes. An approved draft is published after a short durable cool-down.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

/// The saved state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    /// How many drafts were published.
    pub sent: u64,
}

/// A message: what to write a draft for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// The task.
    pub task: String,
}

/// What became of a draft: the reply of its turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// Whether the draft may be published.
    pub approved: bool,
}

impl Signal for Approval {
    const NAME: &'static str = "approval";
}

/// The workflow definition, with its two durations.
#[derive(Clone, Copy, Debug)]
pub struct ReviewDraft {
    /// How long to wait for the approval.
    pub review_timeout: Duration,
    /// The pause between the approval and the publication.
    pub cool_down: Duration,
}

impl Default for ReviewDraft {
    fn default() -> Self {
        Self {
            review_timeout: Duration::from_secs(24 * 3600),
            cool_down: Duration::from_secs(1),
        }
    }
}

impl Accepts<Approval> for ReviewDraft {}

/// The text a task's draft has.
pub fn draft_for(task: &str) -> String {
    format!("Draft for {task}")
}

impl Workflow for ReviewDraft {
    type State = Published;
    type Message = Task;
    type Reply = Outcome;
    const NAME: &'static str = "review-draft";
    const VERSION: &'static str = "v1";
    const SIGNALS: &'static [&'static str] = &[Approval::NAME];

    async fn run(&self, ctx: &mut Turn<Self>, state: Published, message: Task) -> TurnResult<Self> {
        let task = message.task;
        let draft = ctx
            .step("draft", move |_s| async move { Ok(draft_for(&task)) })
            .await?;
        let review = ctx
            .wait_for_signal::<Approval>("review", self.review_timeout)
            .await?;
        match review {
            None => Ok(Done::new(state).reply(Outcome::TimedOut)),
            Some(Approval { approved: false }) => Ok(Done::new(state).reply(Outcome::Rejected)),
            Some(Approval { approved: true }) => {
                ctx.sleep("cool-down", self.cool_down).await?;
                Ok(Done::new(Published {
                    sent: state.sent + 1,
                })
                .reply(Outcome::Published(draft)))
            }
        }
    }
}
