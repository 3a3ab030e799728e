//! The `counter` workflow: each message adds an amount to a count, in a step. Every third
//! request from the app also earns a bonus, which the turn does not add itself: it ends with a
//! *continuation*, a follow-up message committed atomically with the new state and appended at
//! the tail of the inbox, so it runs as a turn of its own after what is already queued.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

/// The bonus a follow-up turn adds.
pub const BONUS: u64 = 100;

/// The saved state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Count {
    /// The running total.
    pub count: u64,
    /// How many requests from the app were counted (follow-ups are not requests).
    pub requests: u64,
}

/// A message of the inbox.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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

/// The step of a turn: add `amount`. Its output is saved before the turn goes on, and a retry
/// replays it instead of running it again. Its key is its name, `add`.
#[step]
async fn add(amount: u64) -> Result<u64, TurnError> {
    Ok(amount)
}

/// The `counter` workflow: each message adds its amount in a step and replies with the count
/// after the turn; every third request from the app also continues with the bonus.
///
/// `counter` is both the workflow's type and its value: `counter.start(&engine, "counter-1")`,
/// `Worker::new(engine).register(counter)`, `counter.schema()`.
#[workflow(name = "counter", version = "v1")]
pub async fn counter(
    ctx: &mut Turn,
    state: Count,
    message: Add,
) -> Result<Done<Count, u64>, TurnError> {
    let added = add(ctx, message.amount).await?;
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
