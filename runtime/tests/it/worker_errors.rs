//! What the worker does with the engine's refusals, over the embedded engine: it decides by
//! the error's meaning, never by its HTTP status. A limit or a size refusal fails the turn for
//! good at once, with the engine's message on the turn; only a lost lease ends the attempt
//! without a word. (The same cases over HTTP are in `conformance/tests/it/http_worker_errors.rs`.)
//! Every due time is on the manual clock, which these tests never move: what they assert
//! happens at once, not at a lease expiry.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use tokio::sync::Notify;
use turnwise::prelude::*;
use turnwise::protocol::TurnStatus;
use turnwise::testing::TestEnv;
use turnwise::EngineConfig;

use crate::common;
use common::GUARD;

/// Three steps, each adding one.
#[workflow(name = "three-steps", version = "v1")]
async fn three_steps(ctx: &mut Turn, state: u64, add: u64) -> Result<Done<u64, u64>, TurnError> {
    let a = ctx.step("one", move |_s| async move { Ok(add) }).await?;
    let b = ctx.step("two", move |_s| async move { Ok(a + 1) }).await?;
    let c = ctx
        .step("three", move |_s| async move { Ok(b + 1) })
        .await?;
    Ok(Done::new(state + c).reply(c))
}

/// One step whose output is `len` bytes of JSON (a string of `len - 2` characters).
#[workflow(name = "big-output", version = "v1")]
async fn big_output(ctx: &mut Turn, state: u64, len: u64) -> Result<Done<u64, u64>, TurnError> {
    let s = ctx
        .step(
            "big",
            move |_s| async move { Ok("x".repeat(len as usize - 2)) },
        )
        .await?;
    Ok(Done::new(state + s.len() as u64))
}

fn config(change: impl FnOnce(&mut EngineConfig)) -> EngineConfig {
    let mut c = EngineConfig::default();
    change(&mut c);
    c
}

#[tokio::test]
async fn a_step_past_the_engines_step_limit_fails_the_turn_for_good_at_once() {
    let env = TestEnv::with_config(config(|c| c.limits.steps_per_turn = 2)).register(three_steps);
    let h = env.start(&three_steps, "steps-1").await.unwrap();
    h.send(1, "m1").await.unwrap();
    assert_eq!(env.run_until_idle().await.unwrap(), 1);

    // At once: no lease had to expire (the clock never moved), no attempt was retried.
    let t = h.turn(1).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Failed, 1), "{t:?}");
    let error = t.error.unwrap_or_default();
    assert!(
        error.starts_with("WorkflowError: "),
        "a permanent failure: {error}"
    );
    assert!(
        error.contains("at most 2 steps") && error.contains("step_limit"),
        "the error names the limit: {error}"
    );
    assert!(error.contains("`three`"), "and the step past it: {error}");
    assert_eq!(t.steps.len(), 2, "the two steps within the limit are saved");
    assert_eq!(h.state().await.unwrap(), 0);
}

#[tokio::test]
async fn the_default_step_limit_is_the_one_constant() {
    assert_eq!(
        turnwise::Limits::default().steps_per_turn,
        turnwise::context::MAX_STEPS
    );
    // And a claim carries the engine's limit, whatever it is set to.
    let env = TestEnv::with_config(config(|c| c.limits.steps_per_turn = 7));
    let h = env.start(&three_steps, "steps-1").await.unwrap();
    h.send(1, "m1").await.unwrap();
    let task = env
        .engine()
        .claim(turnwise::protocol::ClaimRequest {
            worker: "w".into(),
            workflows: vec![turnwise::protocol::WorkflowRef::new("three-steps", "v1")],
            wait_ms: 0,
            include_execution_credential: None,
        })
        .await
        .unwrap()
        .task
        .expect("the message is ready");
    assert_eq!(task.steps_max, Some(7));
}

#[tokio::test]
async fn a_step_output_over_its_limit_fails_the_turn_for_good_with_the_engines_message() {
    let env = TestEnv::with_config(config(|c| c.limits.output_bytes = 100)).register(big_output);
    let h = env.start(&big_output, "big-1").await.unwrap();
    h.send(101, "m1").await.unwrap();
    assert_eq!(env.run_until_idle().await.unwrap(), 1);

    let t = h.turn(1).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Failed, 1), "{t:?}");
    let error = t.error.unwrap_or_default();
    assert!(
        error.contains("payload_too_large")
            && error.contains("`output` is 101 bytes, over its limit of 100 bytes"),
        "the engine's refusal is on the turn: {error}"
    );

    // Exactly at the limit it is saved.
    h.send(100, "m2").await.unwrap();
    h.skip(1).await.unwrap();
    assert_eq!(env.run_until_idle().await.unwrap(), 1);
    assert_eq!(h.turn(2).await.unwrap().status, TurnStatus::Completed);
}

/// A step that waits for the test before returning, once.
#[derive(Clone, Default)]
struct Gate {
    entered: Arc<Notify>,
    open: Arc<Notify>,
    after: Arc<AtomicUsize>,
}

impl Workflow for Gate {
    type State = u64;
    type Message = u64;
    type Reply = u64;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "gate";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, state: u64, n: u64) -> TurnResult<Self> {
        let (entered, open) = (self.entered.clone(), self.open.clone());
        let n = ctx
            .step("wait", move |_s| async move {
                entered.notify_one();
                tokio::time::timeout(GUARD, open.notified())
                    .await
                    .map_err(|_| TurnError::permanent("held past the guard"))?;
                Ok(n)
            })
            .await?;
        self.after.fetch_add(1, SeqCst);
        Ok(Done::new(state + n))
    }
}

#[tokio::test]
async fn an_instance_deleted_under_a_held_turn_ends_the_attempt_quietly() {
    let wf = Gate::default();
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "gate-1").await.unwrap();
    h.send(5, "m1").await.unwrap();

    let worker = env.worker().clone();
    let run = tokio::spawn(async move { worker.run_once().await });
    tokio::time::timeout(GUARD, wf.entered.notified())
        .await
        .unwrap();
    assert!(h.delete().await.unwrap());
    wf.open.notify_one();
    // The checkpoint, sent with the completion, is answered turn_lease_lost: the attempt
    // ends, nothing more is sent.
    assert!(tokio::time::timeout(GUARD, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap());
    assert_eq!(
        wf.after.load(SeqCst),
        1,
        "the code after the step ran once, and its completion was refused"
    );
    assert_eq!(h.instance().await.unwrap_err().code(), "not_found");
}
