//! The turn budget: a turn holds at most [`TURN_BUDGET`] durable calls.

use super::{Flow, Settings};
use crate::ctxt::Ctxt;

/// The most durable calls a turn holds by default: the protocol's step limit, which the
/// engine's `Limits::default` and the runtime's `turnwise::context::MAX_STEPS` also read.
pub(crate) const TURN_BUDGET: usize = turnwise_rules::limits::STEPS_PER_TURN;

/// The turn budget: the longest run of durable calls must fit in [`TURN_BUDGET`].
///
/// The calls inside a loop are not counted (the loop may run any number of times, none
/// included), so in a body with loops the run is a lower bound: it is rejected when the calls
/// outside the loops alone exceed the budget.
pub(super) fn check_budget(cx: &Ctxt, settings: &Settings, flow: &Flow, has_loop: bool) {
    let Some(over) = flow.path.get(TURN_BUDGET) else {
        return;
    };
    let counted = if has_loop {
        " (not counting the calls inside loops)"
    } else {
        ""
    };
    cx.error_spanned_by(
        over,
        format!(
            "this is durable call {} of this turn{counted}, over the turn budget of {TURN_BUDGET} steps, sleeps and signal waits; end the turn with `{}.continue_(state, message)` and do the rest in the next turn",
            TURN_BUDGET + 1,
            settings.ctx
        ),
    );
}
