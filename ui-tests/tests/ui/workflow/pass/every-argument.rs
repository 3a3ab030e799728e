// Every `#[workflow]` argument at once.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

use std::time::Duration;

#[derive(Serialize, Deserialize, JsonSchema, Signal)]
#[signal(name = "approval")]
struct Approval {
    approved: bool,
}

#[derive(Serialize, Deserialize, JsonSchema, Signal)]
#[signal(name = "cancel")]
enum Cancel {
    Now,
    Later { after_ms: u64 },
}

/// A counter with every argument.
#[workflow(
    name = "every-argument",
    version = "v2.1",
    signals(Approval, Cancel),
    max_attempts = 5,
    lease = "1m30s",
    on_exhausted = "skip",
    on_mismatch = "fail",
    allow_nondeterminism,
    crate = ::turnwise,
)]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let _ = std::time::Instant::now();
    if let Some(a) = ctx.wait_for_signal::<Approval>("approval", Duration::from_secs(60)).await? {
        if !a.approved {
            return Ok(Done::new(state).reply(0));
        }
    }
    let _ = ctx.wait_for_signal::<Cancel>("cancel", Duration::from_secs(1)).await?;
    let _ = (ctx.now("t0").await?, ctx.random("r0").await?);
    Ok(Done::new(state).reply(add))
}

fn main() {
    assert_eq!(<counter as Workflow>::NAME, "every-argument");
    assert_eq!(<counter as Workflow>::VERSION, "v2.1");
    assert_eq!(<counter as Workflow>::SIGNALS, ["approval", "cancel"]);
    let options = counter.options();
    assert_eq!(options.max_attempts, 5);
    assert_eq!(options.lease, std::time::Duration::from_secs(90));
    assert_eq!(options.on_exhausted, OnExhausted::Skip);
    assert_eq!(counter.on_mismatch(), OnMismatch::Fail);
    let schema = counter.schema();
    assert_eq!(schema.signals.len(), 2);
    assert!(schema.steps.contains_key("t0") && schema.steps.contains_key("r0"));
    assert_eq!(Workflow::schema(&counter), Some(schema));
}
