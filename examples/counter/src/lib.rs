//! The `counter` workflow: each message adds an amount to a count, in a step. Every third
//! request from the app also earns a bonus, which the turn does not add itself: it ends with a
//! *continuation*, a follow-up message committed atomically with the new state and appended at
//! the tail of the inbox, so it runs as a turn of its own after what is already queued.

use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

/// The bonus a follow-up turn adds.
pub const BONUS: u64 = 100;

/// The saved state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Count {
    /// The running total.
    pub count: u64,
    /// How many requests from the app were counted (follow-ups are not requests).
    pub requests: u64,
}

/// A message of the inbox.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Add {
    /// What to add.
    pub amount: u64,
    /// Whether this is the follow-up a third request continued with.
    #[serde(default)]
    pub follow_up: bool,
}

impl Add {
    /// A request from the app.
    pub fn request(amount: u64) -> Self {
        Self {
            amount,
            follow_up: false,
        }
    }

    /// The follow-up that pays the bonus.
    pub fn bonus() -> Self {
        Self {
            amount: BONUS,
            follow_up: true,
        }
    }
}

/// The workflow definition.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counter;

impl Workflow for Counter {
    type State = Count;
    type Message = Add;
    /// The count after the turn.
    type Reply = u64;
    const NAME: &'static str = "counter";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, state: Count, message: Add) -> TurnResult<Self> {
        let amount = message.amount;
        // The step's output is saved before the turn goes on; a retry replays it.
        let added = ctx.step("add", move |_s| async move { Ok(amount) }).await?;
        let requests = state.requests + u64::from(!message.follow_up);
        let next = Count {
            count: state.count + added,
            requests,
        };
        let total = next.count;
        if !message.follow_up && requests.is_multiple_of(3) {
            // State, reply and the follow-up message are committed in one write.
            return Ok(ctx.continue_(next, Add::bonus()).reply(total));
        }
        Ok(Done::new(next).reply(total))
    }
}
