//! Codec verification uses the type's `PartialEq` when `#[workflow]` can see one: a state that
//! re-encodes to the same bytes but decodes to a different value (a `#[serde(skip)]` field) fails
//! the turn for good where it is produced, while a state without `PartialEq` is checked by bytes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;
use turnwise::protocol::TurnStatus;
use turnwise::testing::TestEnv;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Ledger {
    total: u64,
    /// Never saved: a decoded ledger always has 0 here.
    #[serde(skip)]
    scratch: u64,
}

#[workflow(name = "ledger", version = "v1")]
async fn ledger(_ctx: &mut Turn, state: Ledger, add: u64) -> Result<Done<Ledger, u64>, TurnError> {
    let next = Ledger {
        total: state.total + add,
        scratch: add,
    };
    Ok(Done::new(next).reply(state.total + add))
}

/// The same shape without `PartialEq`: only the bytes can be compared.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
struct Tally {
    total: u64,
    /// Never saved, and never compared.
    #[serde(skip)]
    #[allow(dead_code)]
    scratch: u64,
}

#[workflow(name = "tally", version = "v1")]
async fn tally(_ctx: &mut Turn, state: Tally, add: u64) -> Result<Done<Tally, u64>, TurnError> {
    let next = Tally {
        total: state.total + add,
        scratch: add,
    };
    Ok(Done::new(next).reply(state.total + add))
}

#[tokio::test]
async fn a_partial_eq_state_that_loses_a_field_fails_for_good() {
    let env = TestEnv::new().register(ledger);
    let handle = env.start(&ledger, "ledger-1").await.unwrap();
    let turn = handle.send(5, "m1").await.unwrap().number;
    env.run_until_idle().await.unwrap();

    let t = handle.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Failed, "{t:?}");
    let error = t.error.unwrap_or_default();
    assert!(error.starts_with("WorkflowError: state:"), "{error}");
    assert!(error.contains("not equal to the original"), "{error}");
    assert_eq!(
        handle.state().await.unwrap().total,
        0,
        "nothing was committed"
    );
}

#[tokio::test]
async fn a_state_without_partial_eq_is_checked_by_bytes() {
    let env = TestEnv::new().register(tally);
    let handle = env.start(&tally, "tally-1").await.unwrap();
    handle.send(5, "m1").await.unwrap();
    env.run_until_idle().await.unwrap();
    assert_eq!(handle.state().await.unwrap().total, 5);
}

#[test]
fn the_hooks_follow_partial_eq() {
    assert!(<ledger as Workflow>::state_eq().is_some());
    assert!(<tally as Workflow>::state_eq().is_none());
    assert!(
        <ledger as Workflow>::message_eq().is_some(),
        "u64 is PartialEq"
    );
}
