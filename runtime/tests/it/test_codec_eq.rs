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

/// A codec that stores every value inside an envelope `{"v": ...}`.
#[derive(Default)]
struct Enveloped;

impl turnwise::codec::Codec for Enveloped {
    fn encode<T: Serialize + ?Sized>(&self, value: &T) -> Result<serde_json::Value, String> {
        let v = serde_json::to_value(value).map_err(|e| e.to_string())?;
        Ok(serde_json::json!({ "v": v }))
    }
    fn decode<T: serde::de::DeserializeOwned>(
        &self,
        value: &serde_json::Value,
    ) -> Result<T, String> {
        let inner = value.get("v").ok_or("not an envelope")?;
        T::deserialize(inner).map_err(|e| e.to_string())
    }
}

#[workflow(name = "enveloped", version = "v1", codec = Enveloped)]
async fn enveloped(
    ctx: &mut Turn,
    state: Ledger,
    add: u64,
) -> Result<Done<Ledger, u64>, TurnError> {
    let add = ctx.step("add", move |_| async move { Ok(add) }).await?;
    let total = state.total + add;
    Ok(Done::new(Ledger { total, scratch: 0 }).reply(total))
}

#[tokio::test]
async fn a_workflows_codec_carries_its_state_steps_and_replies() {
    let env = TestEnv::new().register(enveloped);
    let handle = env.start(&enveloped, "enveloped-1").await.unwrap();
    let turn = handle.send(5, "m1").await.unwrap();
    assert_eq!(
        turn.message,
        serde_json::json!({"v": 5}),
        "the message crossed the codec"
    );
    env.run_until_idle().await.unwrap();

    let stored = handle.instance().await.unwrap().state;
    assert_eq!(
        stored,
        serde_json::json!({"v": {"total": 5}}),
        "the stored state"
    );
    assert_eq!(
        handle.state().await.unwrap().total,
        5,
        "and it decodes back"
    );
    let t = handle.turn(turn.number).await.unwrap();
    assert_eq!(t.status, TurnStatus::Completed, "{t:?}");
    assert_eq!(
        t.steps[0].output,
        serde_json::json!({"v": 5}),
        "the step output"
    );
    assert_eq!(t.result, serde_json::json!({"v": 5}), "the reply");
    assert_eq!(handle.reply(turn.number).await.unwrap(), Some(5));
}
