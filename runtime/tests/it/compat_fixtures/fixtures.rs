//! The fixtures' workflows: `base` and the other starting points, and one module per change.
//! Each is a workflow `f` named `order` (v1 unless the change is a new version).

#![allow(clippy::unused_async)]

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

pub const HOUR: Duration = Duration::from_secs(3600);

/// The state of most fixtures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct S {
    pub n: u64,
}

/// Every successful step run, as (instance id, effect id): a step that ran twice shows its
/// effect id twice.
static RAN: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
/// Instances whose first run of step `a`, `item-0` or `right` fails (once, retryably).
static FAIL_ONCE: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Make the first run of instance `id`'s step `a` (or the loop's `item-0`, or the group's
/// last member `right`) fail, with a retryable error. In a group it is the last member: a
/// member that finishes after an earlier member failed is not saved, so it runs again on the
/// retry (seen here with `left` failing: `right` ran twice).
pub fn fail_once(id: &str) {
    FAIL_ONCE.lock().unwrap().insert(id.to_owned());
}

/// Instances whose next `base` turn fails once after saving `b`, before it completes: a turn
/// in flight that saved every step.
static FAIL_AFTER_B: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Make instance `id`'s next `base` turn fail once (retryably) after it saved `b`.
pub fn fail_after_b(id: &str) {
    FAIL_AFTER_B.lock().unwrap().insert(id.to_owned());
}

/// Whether this turn of `id` fails after `b` ([`fail_after_b`]).
fn take_fail_after_b(id: &str) -> bool {
    FAIL_AFTER_B.lock().unwrap().remove(id)
}

/// The effect ids of the steps instance `id` ran, in order.
pub fn runs(id: &str) -> Vec<String> {
    RAN.lock()
        .unwrap()
        .iter()
        .filter(|(w, _)| w == id)
        .map(|(_, e)| e.clone())
        .collect()
}

/// Every fixture step: records its run by effect id, and answers `v` (or fails once, see
/// [`fail_once`]).
pub async fn ran<T>(c: StepCtx, v: T) -> Result<T, TurnError> {
    let id = c.fence().workflow_id.clone();
    if matches!(c.key(), "a" | "item-0" | "right") && FAIL_ONCE.lock().unwrap().remove(&id) {
        return Err(TurnError::retry("the step fails its first attempt"));
    }
    RAN.lock().unwrap().push((id, c.effect_id().to_owned()));
    Ok(v)
}

async fn one(c: StepCtx) -> Result<u64, TurnError> {
    ran(c, 1).await
}

pub mod base {
    use super::*;
    /// `a` → `nap` → `b`.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        if take_fail_after_b(ctx.workflow_id()) {
            return Err(TurnError::retry("the turn fails once after saving `b`"));
        }
        Ok(Done::new(S { n: s.n + a + b }).reply(a))
    }
}

pub mod layout {
    use super::*;
    /// `base` with comments and another layout.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        // First the amount.
        let a = ctx.step("a", move |c| ran(c, m)).await?;

        // Then wait an hour.
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        Ok(Done::new(S { n: s.n + a + b }).reply(a))
    }
}

pub mod rename {
    use super::*;
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("amount", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        Ok(Done::new(S { n: s.n + a + b }).reply(a))
    }
}

pub mod insert_before {
    use super::*;
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        ctx.step("x", one).await?;
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        Ok(Done::new(S { n: s.n + a + b }).reply(a))
    }
}

pub mod insert_between {
    use super::*;
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.step("x", one).await?;
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        Ok(Done::new(S { n: s.n + a + b }).reply(a))
    }
}

pub mod insert_after {
    use super::*;
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        let c = ctx.step("c", one).await?;
        Ok(Done::new(S { n: s.n + a + b + c }).reply(a))
    }
}

pub mod reorder {
    use super::*;
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        ctx.sleep("nap", HOUR).await?;
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        let b = ctx.step("b", one).await?;
        Ok(Done::new(S { n: s.n + a + b }).reply(a))
    }
}

pub mod remove_last {
    use super::*;
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        Ok(Done::new(S { n: s.n + a }).reply(a))
    }
}

pub mod kind_change {
    use super::*;
    /// `b` was a step and is now a sleep.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        ctx.sleep("b", HOUR).await?;
        Ok(Done::new(S { n: s.n + a }).reply(a))
    }
}

pub mod new_branch {
    use super::*;
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        if a > 100 {
            ctx.step("review", one).await?;
        }
        let b = ctx.step("b", one).await?;
        Ok(Done::new(S { n: s.n + a + b }).reply(a))
    }
}

pub mod branchy {
    use super::*;
    /// `a` → `nap` → `big` when the amount is over 100.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        if a > 100 {
            ctx.step("big", one).await?;
        }
        Ok(Done::new(S { n: s.n + a }).reply(a))
    }
}

pub mod else_added {
    use super::*;
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        if a > 100 {
            ctx.step("big", one).await?;
        } else {
            ctx.step("small", one).await?;
        }
        Ok(Done::new(S { n: s.n + a }).reply(a))
    }
}

pub mod condition_changed {
    use super::*;
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        if a > 50 {
            ctx.step("big", one).await?;
        }
        Ok(Done::new(S { n: s.n + a }).reply(a))
    }
}

pub mod input_changed {
    use super::*;
    /// The sleep is as long, but computed from another value.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", Duration::from_secs(60 * 60)).await?;
        let b = ctx.step("b", one).await?;
        Ok(Done::new(S { n: s.n + a + b }).reply(a))
    }
}

pub mod looped {
    use super::*;
    /// One step per unit of the amount (at most 3), then a sleep.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        for i in 0..m.min(3) {
            ctx.step(format!("item-{i}"), one).await?;
        }
        ctx.sleep("nap", HOUR).await?;
        Ok(Done::new(S { n: s.n + m }).reply(m))
    }
}

pub mod loop_key_changed {
    use super::*;
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        for i in 0..m.min(3) {
            ctx.step(format!("row-{i}"), one).await?;
        }
        ctx.sleep("nap", HOUR).await?;
        Ok(Done::new(S { n: s.n + m }).reply(m))
    }
}

pub mod grouped {
    use super::*;
    /// Two steps in parallel, then a sleep.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let (l, r) = ctx.parallel().step("left", one).step("right", one).await?;
        ctx.sleep("nap", HOUR).await?;
        Ok(Done::new(S { n: s.n + l + r }).reply(m))
    }
}

pub mod member_added {
    use super::*;
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let (l, c, r) = ctx
            .parallel()
            .step("left", one)
            .step("centre", one)
            .step("right", one)
            .await?;
        ctx.sleep("nap", HOUR).await?;
        Ok(Done::new(S { n: s.n + l + c + r }).reply(m))
    }
}

pub mod optional_field {
    use super::*;
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    pub struct S2 {
        pub n: u64,
        #[serde(default)]
        pub note: Option<String>,
    }
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S2, m: u64) -> Result<Done<S2, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        Ok(Done::new(S2 {
            n: s.n + a + b,
            ..s
        })
        .reply(a))
    }
}

pub mod required_field {
    use super::*;
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    pub struct S2 {
        pub n: u64,
        pub owner: String,
    }
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S2, m: u64) -> Result<Done<S2, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        Ok(Done::new(S2 {
            n: s.n + a + b,
            ..s
        })
        .reply(a))
    }
}

/// The messages of the message fixtures.
pub mod enum_message {
    use super::*;
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    pub enum Msg {
        Pay(u64),
        Refund(u64),
    }
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: Msg) -> Result<Done<S, u64>, TurnError> {
        let amount = match m {
            Msg::Pay(n) | Msg::Refund(n) => n,
        };
        let a = ctx.step("a", move |c| ran(c, amount)).await?;
        ctx.sleep("nap", HOUR).await?;
        Ok(Done::new(S { n: s.n + a }).reply(a))
    }
}

pub mod variant_removed {
    use super::*;
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    pub enum Msg {
        Pay(u64),
    }
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: Msg) -> Result<Done<S, u64>, TurnError> {
        let Msg::Pay(amount) = m;
        let a = ctx.step("a", move |c| ran(c, amount)).await?;
        ctx.sleep("nap", HOUR).await?;
        Ok(Done::new(S { n: s.n + a }).reply(a))
    }
}

pub mod variant_added {
    use super::*;
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    pub enum Msg {
        Pay(u64),
        Refund(u64),
        Void,
    }
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: Msg) -> Result<Done<S, u64>, TurnError> {
        let amount = match m {
            Msg::Pay(n) | Msg::Refund(n) => n,
            Msg::Void => 0,
        };
        let a = ctx.step("a", move |c| ran(c, amount)).await?;
        ctx.sleep("nap", HOUR).await?;
        Ok(Done::new(S { n: s.n + a }).reply(a))
    }
}

/// The signal of the signal fixtures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema, Signal)]
#[signal(name = "approval")]
pub struct Approval {
    pub ok: bool,
}

pub mod waiting {
    use super::*;
    /// `a`, then a wait for an approval.
    #[workflow(name = "order", signals(Approval))]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        let ok = ctx.wait_for_signal::<Approval>("approve", HOUR).await?;
        let n = if ok.is_some_and(|o| o.ok) { a } else { 0 };
        Ok(Done::new(S { n: s.n + n }).reply(a))
    }
}

pub mod signal_changed {
    use super::*;
    /// The approval now names who approved, and must.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema, Signal)]
    #[signal(name = "approval")]
    pub struct Approval {
        pub ok: bool,
        pub by: String,
    }
    #[workflow(name = "order", signals(Approval))]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        let ok = ctx.wait_for_signal::<Approval>("approve", HOUR).await?;
        let n = if ok.is_some_and(|o| o.ok) { a } else { 0 };
        Ok(Done::new(S { n: s.n + n }).reply(a))
    }
}

pub mod signal_added {
    use super::*;
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema, Signal)]
    #[signal(name = "cancel")]
    pub struct Cancel;
    #[workflow(name = "order", signals(Approval, Cancel))]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        let ok = ctx.wait_for_signal::<Approval>("approve", HOUR).await?;
        let n = if ok.is_some_and(|o| o.ok) { a } else { 0 };
        Ok(Done::new(S { n: s.n + n }).reply(a))
    }
}

pub mod typed {
    use super::*;
    /// `base` with `a`'s output type written out, so that its schema is in the manifest.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step::<u64, _, _>("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        Ok(Done::new(S { n: s.n + a + b }).reply(a))
    }
}

pub mod output_changed {
    use super::*;
    /// `a` now saves the amount as text.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx
            .step::<String, _, _>("a", move |c| ran(c, m.to_string()))
            .await?;
        let a: u64 = a.parse().unwrap_or(0);
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        Ok(Done::new(S { n: s.n + a + b }).reply(a))
    }
}

pub mod patch_added {
    use super::*;
    /// `base` with a check inserted before the sleep, behind a patch.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        if ctx.patched("check").await? {
            ctx.step("x", one).await?;
        }
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        Ok(Done::new(S { n: s.n + a + b }).reply(a))
    }
}

pub mod patch_removed {
    use super::*;
    /// The patch taken out, keeping the new branch: turns saved before it, or with its
    /// marker, no longer replay.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.step("x", one).await?;
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        Ok(Done::new(S { n: s.n + a + b }).reply(a))
    }
}

pub mod next_version {
    use super::*;
    /// v2: `base` with a final step; instances of v1 upgrade to it.
    #[workflow(name = "order", version = "v2")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        let c = ctx.step("receipt", one).await?;
        Ok(Done::new(S { n: s.n + a + b + c }).reply(a))
    }
}

// The fixes the findings suggest, one per change that needs a patch or breaks: each is
// classed `safe` against the old code and finishes the turns the change suspends.

pub mod rename_fixed {
    use super::*;
    /// The rename, keeping the saved key `a`.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let amount = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        Ok(Done::new(S {
            n: s.n + amount + b,
        })
        .reply(amount))
    }
}

pub mod insert_before_fixed {
    use super::*;
    /// The inserted step behind `ctx.patched("x")`.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        if ctx.patched("x").await? {
            ctx.step("x", one).await?;
        }
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        Ok(Done::new(S { n: s.n + a + b }).reply(a))
    }
}

pub mod insert_between_fixed {
    use super::*;
    /// The inserted step behind `ctx.patched("x")`.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        if ctx.patched("x").await? {
            ctx.step("x", one).await?;
        }
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        Ok(Done::new(S { n: s.n + a + b }).reply(a))
    }
}

pub mod reorder_fixed {
    use super::*;
    /// The new order behind a patch; turns saved before it keep the old one.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = if ctx.patched("nap-first").await? {
            ctx.sleep("nap", HOUR).await?;
            ctx.step("a", move |c| ran(c, m)).await?
        } else {
            let a = ctx.step("a", move |c| ran(c, m)).await?;
            ctx.sleep("nap", HOUR).await?;
            a
        };
        let b = ctx.step("b", one).await?;
        Ok(Done::new(S { n: s.n + a + b }).reply(a))
    }
}

pub mod remove_last_fixed {
    use super::*;
    /// `b` dropped behind a patch: turns saved before it still run it.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        let b = if ctx.patched("no-b").await? {
            0
        } else {
            ctx.step("b", one).await?
        };
        Ok(Done::new(S { n: s.n + a + b }).reply(a))
    }
}

pub mod kind_change_fixed {
    use super::*;
    /// The new sleep under a key of its own, after `b`.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        ctx.sleep("b-wait", HOUR).await?;
        Ok(Done::new(S { n: s.n + a + b }).reply(a))
    }
}

pub mod loop_key_fixed {
    use super::*;
    /// The loop keeps its saved keys (`item-*`), whatever its variables are now called.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        for row in 0..m.min(3) {
            ctx.step(format!("item-{row}"), one).await?;
        }
        ctx.sleep("nap", HOUR).await?;
        Ok(Done::new(S { n: s.n + m }).reply(m))
    }
}

pub mod member_added_fixed {
    use super::*;
    /// The bigger group behind a patch.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let n = if ctx.patched("centre").await? {
            let (l, c, r) = ctx
                .parallel()
                .step("left", one)
                .step("centre", one)
                .step("right", one)
                .await?;
            l + c + r
        } else {
            let (l, r) = ctx.parallel().step("left", one).step("right", one).await?;
            l + r
        };
        ctx.sleep("nap", HOUR).await?;
        Ok(Done::new(S { n: s.n + n }).reply(m))
    }
}

pub mod required_field_fixed {
    use super::*;
    /// The new field, readable from old states.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    pub struct S2 {
        pub n: u64,
        #[serde(default)]
        pub owner: String,
    }
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S2, m: u64) -> Result<Done<S2, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        Ok(Done::new(S2 {
            n: s.n + a + b,
            ..s
        })
        .reply(a))
    }
}

pub mod variant_kept {
    use super::*;
    /// `Refund` kept readable, no longer sent.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    pub enum Msg {
        Pay(u64),
        /// Still read from queued messages.
        Refund(u64),
    }
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: Msg) -> Result<Done<S, u64>, TurnError> {
        let amount = match m {
            Msg::Pay(n) | Msg::Refund(n) => n,
        };
        let a = ctx.step("a", move |c| ran(c, amount)).await?;
        ctx.sleep("nap", HOUR).await?;
        Ok(Done::new(S { n: s.n + a }).reply(a))
    }
}

pub mod signal_changed_fixed {
    use super::*;
    /// The approval names who approved, when it does.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema, Signal)]
    #[signal(name = "approval")]
    pub struct Approval {
        pub ok: bool,
        #[serde(default)]
        pub by: Option<String>,
    }
    #[workflow(name = "order", signals(Approval))]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step("a", move |c| ran(c, m)).await?;
        let ok = ctx.wait_for_signal::<Approval>("approve", HOUR).await?;
        let n = if ok.is_some_and(|o| o.ok) { a } else { 0 };
        Ok(Done::new(S { n: s.n + n }).reply(a))
    }
}

pub mod output_kept {
    use super::*;
    /// `a` keeps its saved type; the text is made from it.
    #[workflow(name = "order")]
    pub async fn f(ctx: &mut Turn, s: S, m: u64) -> Result<Done<S, u64>, TurnError> {
        let a = ctx.step::<u64, _, _>("a", move |c| ran(c, m)).await?;
        let text = a.to_string();
        ctx.sleep("nap", HOUR).await?;
        let b = ctx.step("b", one).await?;
        let a: u64 = text.parse().unwrap_or(0);
        Ok(Done::new(S { n: s.n + a + b }).reply(a))
    }
}
