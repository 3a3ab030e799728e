//! The `pages` workflow: a large message processed in chunks. A turn holds at most 64 steps,
//! so a message with hundreds of items cannot take one step per item in a single turn. Each
//! turn handles one page of items (one step each) and, if items remain, ends with a
//! continuation carrying the rest: the new state and the rest commit in one write, and the
//! rest runs as the next turn.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

/// The saved state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Totals {
    /// Items processed so far.
    pub items: u64,
    /// Words counted in them.
    pub words: u64,
    /// Turns (pages) that did the work.
    pub pages: u64,
}

/// A message: the documents still to count.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Batch {
    /// The documents, in order.
    pub items: Vec<String>,
}

/// What a turn replies: its share of the work and what is left.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PageDone {
    /// Items this turn processed.
    pub processed: u64,
    /// Items handed on to the next turn.
    pub remaining: u64,
}

/// The workflow's setting: its dependencies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Paging {
    /// Items (steps) per turn: at most [`turnwise::context::MAX_STEPS`].
    pub page_size: usize,
}

impl Default for Paging {
    fn default() -> Self {
        Self { page_size: 20 }
    }
}

/// The work of one item: count its words.
pub fn count_words(item: &str) -> u64 {
    item.split_whitespace().count() as u64
}

/// The step of one item: count its words. Called once per item, each call with its own key.
#[step]
async fn count(item: String) -> Result<u64, TurnError> {
    Ok(count_words(&item))
}

/// The `pages` workflow: a page of `paging.page_size` items per turn, one step each; the rest
/// goes on in a continuation.
#[workflow(name = "pages", version = "v1")]
pub async fn pages(
    ctx: &mut Turn,
    state: Totals,
    message: Batch,
    paging: &Paging,
) -> Result<Done<Totals, PageDone>, TurnError> {
    let mut items = message.items;
    let rest = items.split_off(paging.page_size.min(items.len()));
    let processed = items.len() as u64;
    let mut words = 0;
    for (i, item) in items.into_iter().enumerate() {
        // A step in a loop needs a key per iteration.
        words += count(ctx, item).key(format!("item-{i}")).await?;
    }
    let next = Totals {
        items: state.items + processed,
        words: state.words + words,
        pages: state.pages + 1,
    };
    let reply = PageDone {
        processed,
        remaining: rest.len() as u64,
    };
    if rest.is_empty() {
        Ok(Done::new(next).reply(reply))
    } else {
        Ok(ctx.continue_(next, Batch { items: rest }).reply(reply))
    }
}
