//! Parallel steps through the SDK's worker on the backend under test: a fan-out's members run
//! concurrently and each is saved as an ordinary step (an operation, then a checkpoint) at its
//! own position, in the items' order, which the backend's step rules accept; a later attempt
//! replays them without running them again.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use turnwise::prelude::*;
use turnwise::protocol::{CheckpointKind, TurnStatus};

use crate::Fixture;

/// A turn fanning out over `items` items (at most 3 at a time, later items finishing first),
/// failing its first attempt after the fan-out so that the second one replays it.
#[derive(Clone, Default)]
struct FanOutWorkflow {
    executions: Arc<AtomicUsize>,
    attempts: Arc<AtomicUsize>,
}

impl Workflow for FanOutWorkflow {
    type State = u64;
    type Message = u64;
    type Reply = Vec<u64>;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "conformance-fan-out";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, state: u64, items: u64) -> TurnResult<Self> {
        let first = self.attempts.fetch_add(1, SeqCst) == 0;
        let executions = self.executions.clone();
        let out = ctx
            .fan_out("fetch", 0..items, |_, i| {
                let executions = executions.clone();
                async move {
                    executions.fetch_add(1, SeqCst);
                    tokio::time::sleep(Duration::from_millis(items - i)).await;
                    Ok(i * i)
                }
            })
            .limit(3)
            .await?;
        if first {
            return Err(TurnError::retry("after the fan-out, once"));
        }
        Ok(Done::new(state + 1).reply(out))
    }
}

/// A fan-out turn commits with its steps in order, each an ordinary saved step, and a retry
/// replays them without running any again.
pub async fn fan_out_commits_in_order(f: impl Fixture) {
    let b = f.backend();
    let wf = FanOutWorkflow::default();
    let worker = Worker::new(b.clone()).id("worker-a").register(wf.clone());
    let h = wf.start(&b, "fan-out-1").await.expect("start the instance");
    let turn = h.send(6, "m-1").await.expect("send the message").number;

    worker.run_until_idle().await.expect("the first attempt");
    let t = h.turn(turn).await.expect("read the turn");
    assert_eq!(
        t.status,
        TurnStatus::Queued,
        "the first attempt failed after the fan-out: {t:?}"
    );
    let saved: Vec<(String, CheckpointKind, serde_json::Value)> = t
        .steps
        .iter()
        .map(|s| (s.key.clone(), s.kind, s.output.clone()))
        .collect();
    let want: Vec<(String, CheckpointKind, serde_json::Value)> = (0..6u64)
        .map(|i| (format!("fetch.{i}"), CheckpointKind::Step, json!(i * i)))
        .collect();
    assert_eq!(saved, want, "the members are saved in the items' order");
    assert_eq!(wf.executions.load(SeqCst), 6);

    f.advance(Duration::from_secs(1));
    worker.run_until_idle().await.expect("the second attempt");
    let t = h.turn(turn).await.expect("read the turn");
    assert_eq!(t.status, TurnStatus::Completed, "{t:?}");
    let keys: Vec<&str> = t.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(
        keys,
        ["fetch.0", "fetch.1", "fetch.2", "fetch.3", "fetch.4", "fetch.5"]
    );
    assert_eq!(
        wf.executions.load(SeqCst),
        6,
        "the replay ran no member again"
    );
    assert_eq!(
        h.reply(turn).await.expect("read the reply"),
        Some(vec![0, 1, 4, 9, 16, 25])
    );
}
