//! Typed handles through the public API: idempotent start, message admission by id, the reads
//! (state, reply, turn, inbox, history), continuations, and the operator actions (pause,
//! resume, retry, skip, cancel_turn, wake, delete).

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;
use turnwise::clock::{Clock, ManualClock};
use turnwise::prelude::*;
use turnwise::protocol::{InstanceStatus, TurnStatus};
use turnwise::testing::TestEnv;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
enum Op {
    /// Log a word; reply with the log length.
    Add(String),
    /// Fail for good while the failure budget lasts, then log "fixed".
    Flaky,
    /// Sleep an hour, then log "slept".
    Nap,
    /// Wait (WorkflowWait) an hour the first time, then log "waited".
    Later,
    /// Wait (WorkflowWait) until the largest time there is the first time, then log "waited".
    Forever,
    /// Log `c<n>` and continue with `n - 1` while `n > 0`.
    Count(u32),
}

#[derive(Default)]
struct Probe {
    /// Permanent failures `Flaky` still has to give.
    failures: AtomicUsize,
    /// Runs of `Later`.
    later: AtomicUsize,
}

#[derive(Clone)]
struct Ledger {
    probe: Arc<Probe>,
    clock: ManualClock,
}

impl Workflow for Ledger {
    type State = Vec<String>;
    type Message = Op;
    type Reply = usize;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "ledger";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, mut log: Vec<String>, op: Op) -> TurnResult<Self> {
        match op {
            Op::Add(word) => log.push(ctx.step("add", |_s| async move { Ok(word) }).await?),
            Op::Flaky => {
                let left = self.probe.failures.load(SeqCst);
                if left > 0 {
                    self.probe.failures.store(left - 1, SeqCst);
                    Err(WorkflowError::new("not yet"))?;
                }
                log.push("fixed".into());
            }
            Op::Nap => {
                ctx.sleep("nap", Duration::from_secs(3600)).await?;
                log.push("slept".into());
            }
            Op::Later => {
                if self.probe.later.fetch_add(1, SeqCst) == 0 {
                    Err(WorkflowWait::until(self.clock.now_ms() + 3_600_000))?;
                }
                log.push("waited".into());
            }
            Op::Forever => {
                if self.probe.later.fetch_add(1, SeqCst) == 0 {
                    Err(WorkflowWait::until(i64::MAX))?;
                }
                log.push("waited".into());
            }
            Op::Count(n) => {
                log.push(format!("c{n}"));
                if n > 0 {
                    // Both ways of continuing: the context helper and the `Done` builder.
                    return Ok(if n % 2 == 1 {
                        ctx.continue_(log, Op::Count(n - 1))
                    } else {
                        Done::new(log).continue_with(Op::Count(n - 1))
                    });
                }
            }
        }
        let n = log.len();
        Ok(Done::new(log).reply(n))
    }
}

/// Another workflow type, for conflicts on an existing id.
#[derive(Clone, Default)]
struct Other;

impl Workflow for Other {
    type State = Vec<String>;
    type Message = Op;
    type Reply = usize;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "other";
    const VERSION: &'static str = "v1";

    async fn run(&self, _ctx: &mut Turn<Self>, log: Vec<String>, _op: Op) -> TurnResult<Self> {
        Ok(Done::new(log))
    }
}

/// The ledger under a second version, for conflicts on an existing id.
#[derive(Clone, Default)]
struct LedgerV2;

impl Workflow for LedgerV2 {
    type State = Vec<String>;
    type Message = Op;
    type Reply = usize;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "ledger";
    const VERSION: &'static str = "v2";

    async fn run(&self, _ctx: &mut Turn<Self>, log: Vec<String>, _op: Op) -> TurnResult<Self> {
        Ok(Done::new(log))
    }
}

async fn setup() -> (TestEnv, Ledger, Handle<Ledger>) {
    let env = TestEnv::new();
    let wf = Ledger {
        probe: Arc::default(),
        clock: env.clock().clone(),
    };
    let env = env.register(wf.clone());
    let h = env.start(&wf, "ledger-1").await.unwrap();
    (env, wf, h)
}

fn add(word: &str) -> Op {
    Op::Add(word.into())
}

#[tokio::test]
async fn start_is_idempotent_and_conflicts_with_another_definition() {
    let (env, wf, h) = setup().await;
    assert_eq!(h.id(), "ledger-1");
    let inst = h.instance().await.unwrap();
    assert_eq!(
        (inst.workflow_type.as_str(), inst.version.as_str()),
        ("ledger", "v1")
    );
    assert_eq!(inst.status, InstanceStatus::Idle);
    assert_eq!(
        (inst.max_attempts, inst.lease_ms),
        (Some(3), Some(60_000)),
        "the workflow's default options"
    );

    h.send(add("a"), "m1").await.unwrap();
    env.run_until_idle().await.unwrap();
    let again = env.start(&wf, "ledger-1").await.unwrap();
    assert_eq!(
        again.state().await.unwrap(),
        vec!["a".to_owned()],
        "the existing instance, unchanged"
    );
    assert_eq!(again.instance().await.unwrap().completed_turns, 1);

    for err in [
        Other.start(env.engine(), "ledger-1").await.unwrap_err(),
        LedgerV2.start(env.engine(), "ledger-1").await.unwrap_err(),
    ] {
        assert_eq!(err.status(), 409, "{err}");
    }
    // A handle on an id checks nothing until used.
    let missing = wf.handle(env.engine(), "nobody");
    assert_eq!(missing.instance().await.unwrap_err().status(), 404);
}

#[tokio::test]
async fn a_message_id_is_admitted_once() {
    let (env, _wf, h) = setup().await;
    let first = h.send(add("a"), "m1").await.unwrap();
    let repeat = h.send(add("a"), "m1").await.unwrap();
    assert_eq!((first.number, repeat.number), (1, 1));
    assert_eq!(h.instance().await.unwrap().pending_messages, 1);
    let err = h.send(add("b"), "m1").await.unwrap_err();
    assert_eq!(err.status(), 409, "the same id with another payload: {err}");

    env.run_until_idle().await.unwrap();
    let after = h.send(add("a"), "m1").await.unwrap();
    assert_eq!(
        (after.number, after.status),
        (1, TurnStatus::Completed),
        "also after it ran"
    );
    env.run_until_idle().await.unwrap();
    assert_eq!(h.state().await.unwrap(), vec!["a".to_owned()]);
}

#[tokio::test]
async fn reads_show_state_replies_turns_inbox_and_history() {
    let (env, _wf, h) = setup().await;
    h.send(add("a"), "m1").await.unwrap();
    h.send(add("b"), "m2").await.unwrap();
    assert_eq!(
        h.reply(1).await.unwrap(),
        None,
        "no reply before the turn completes"
    );
    assert_eq!(h.state().await.unwrap(), Vec::<String>::new());

    let inbox = h.inbox().await.unwrap();
    assert_eq!(inbox.pending_messages, 2);
    let entries: Vec<_> = inbox
        .messages
        .iter()
        .map(|m| (m.turn, m.message_id.as_str(), m.message.clone(), m.status))
        .collect();
    assert_eq!(
        entries,
        vec![
            (1, "m1", Some(json!({"Add": "a"})), TurnStatus::Queued),
            (2, "m2", Some(json!({"Add": "b"})), TurnStatus::Queued)
        ]
    );
    assert_eq!(inbox.messages[0].origin.as_ref().unwrap().kind, "app");

    env.run_until_idle().await.unwrap();
    assert_eq!(
        h.state().await.unwrap(),
        vec!["a".to_owned(), "b".to_owned()]
    );
    assert_eq!(
        (h.reply(1).await.unwrap(), h.reply(2).await.unwrap()),
        (Some(1), Some(2))
    );
    let t = h.turn(2).await.unwrap();
    assert_eq!(t.state_after, json!(["a", "b"]));
    assert_eq!(t.result, json!(2));
    assert!(h.inbox().await.unwrap().messages.is_empty());

    let history = h.history(None).await.unwrap();
    let done: Vec<_> = history.turns.iter().map(|t| (t.number, t.status)).collect();
    assert_eq!(
        done,
        vec![(1, TurnStatus::Completed), (2, TurnStatus::Completed)]
    );
    assert_eq!(h.history(Some(1)).await.unwrap().turns.len(), 1);
    assert_eq!(h.turn(3).await.unwrap_err().status(), 404);
}

#[tokio::test]
async fn a_continuation_runs_next_behind_already_queued_messages() {
    let (env, _wf, h) = setup().await;
    h.send(Op::Count(2), "m1").await.unwrap();
    h.send(add("x"), "m2").await.unwrap();
    env.run_until_idle().await.unwrap();

    // Turn 1 continues into turn 3, behind m2 (turn 2); turn 3 continues into turn 4.
    assert_eq!(
        h.state().await.unwrap(),
        ["c2", "x", "c1", "c0"].map(String::from).to_vec()
    );
    let t1 = h.turn(1).await.unwrap();
    assert_eq!(t1.continued_to, Some(3));
    assert_eq!(
        h.reply(1).await.unwrap(),
        None,
        "a continuing turn records no reply"
    );
    let t3 = h.turn(3).await.unwrap();
    assert_eq!(t3.message_id, "continue-1");
    assert_eq!(t3.message, json!({"Count": 1}));
    let origin = t3.origin.unwrap();
    assert_eq!(origin.kind, "continuation");
    assert_eq!(
        (
            origin.fields["turn"].clone(),
            origin.fields["message_id"].clone()
        ),
        (json!(1), json!("m1"))
    );
    assert_eq!(t3.continued_to, Some(4));
    assert_eq!(h.turn(4).await.unwrap().message_id, "continue-3");
    assert_eq!(h.reply(4).await.unwrap(), Some(4));
}

#[tokio::test]
async fn pause_holds_claims_and_resume_releases_them() {
    let (env, _wf, h) = setup().await;
    assert_eq!(h.pause().await.unwrap().status, InstanceStatus::Paused);
    h.send(add("a"), "m1").await.unwrap();
    assert_eq!(
        env.run_until_idle().await.unwrap(),
        0,
        "a paused instance hands out no claims"
    );
    assert_eq!(h.turn(1).await.unwrap().status, TurnStatus::Queued);

    h.resume().await.unwrap();
    assert_eq!(env.run_until_idle().await.unwrap(), 1);
    assert_eq!(h.state().await.unwrap(), vec!["a".to_owned()]);
}

#[tokio::test]
async fn retry_runs_a_failed_turn_again() {
    let (env, wf, h) = setup().await;
    wf.probe.failures.store(1, SeqCst);
    h.send(Op::Flaky, "m1").await.unwrap();
    env.run_until_idle().await.unwrap();
    assert_eq!(h.turn(1).await.unwrap().status, TurnStatus::Failed);
    assert_eq!(h.skip(2).await.unwrap_err().status(), 404);

    h.retry(1).await.unwrap();
    let t = h.turn(1).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Queued, 0), "{t:?}");
    env.run_until_idle().await.unwrap();
    let t = h.turn(1).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Completed, 1));
    assert_eq!(h.state().await.unwrap(), vec!["fixed".to_owned()]);
    assert_eq!(
        h.retry(1).await.unwrap_err().status(),
        409,
        "only a failed turn is retried"
    );
}

#[tokio::test]
async fn skip_moves_a_failed_turn_to_history_and_goes_on() {
    let (env, wf, h) = setup().await;
    wf.probe.failures.store(1, SeqCst);
    h.send(Op::Flaky, "m1").await.unwrap();
    h.send(add("next"), "m2").await.unwrap();
    env.run_until_idle().await.unwrap();
    assert_eq!(
        h.turn(2).await.unwrap().status,
        TurnStatus::Queued,
        "blocked behind the failure"
    );

    h.skip(1).await.unwrap();
    env.run_until_idle().await.unwrap();
    assert_eq!(h.turn(1).await.unwrap().status, TurnStatus::Failed);
    assert_eq!(h.turn(2).await.unwrap().status, TurnStatus::Completed);
    assert_eq!(h.state().await.unwrap(), vec!["next".to_owned()]);
    let history: Vec<_> = h
        .history(None)
        .await
        .unwrap()
        .turns
        .iter()
        .map(|t| (t.number, t.status))
        .collect();
    assert_eq!(
        history,
        vec![(1, TurnStatus::Failed), (2, TurnStatus::Completed)]
    );
}

#[tokio::test]
async fn cancel_turn_ends_a_sleeping_turn_and_leaves_the_state() {
    let (env, _wf, h) = setup().await;
    h.send(add("a"), "m1").await.unwrap();
    h.send(Op::Nap, "m2").await.unwrap();
    h.send(add("b"), "m3").await.unwrap();
    env.run_until_idle().await.unwrap();
    assert_eq!(h.turn(2).await.unwrap().status, TurnStatus::Waiting);

    h.cancel_turn(2).await.unwrap();
    env.run_until_idle().await.unwrap();
    assert_eq!(h.turn(2).await.unwrap().status, TurnStatus::Cancelled);
    assert_eq!(
        h.state().await.unwrap(),
        vec!["a".to_owned(), "b".to_owned()],
        "the nap never logged"
    );
    env.advance(Duration::from_secs(3600)).await.unwrap();
    assert_eq!(h.state().await.unwrap().len(), 2);
    assert_eq!(
        h.cancel_turn(2).await.unwrap_err().status(),
        409,
        "a finished turn"
    );
}

#[tokio::test]
async fn wake_makes_a_retry_wait_ready_now_but_not_a_sleep() {
    let (env, wf, h) = setup().await;
    h.send(Op::Later, "m1").await.unwrap();
    env.run_until_idle().await.unwrap();
    assert_eq!(h.turn(1).await.unwrap().status, TurnStatus::Waiting);

    h.wake().await.unwrap();
    assert_eq!(
        env.run_until_idle().await.unwrap(),
        1,
        "ready without the hour passing"
    );
    let t = h.turn(1).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Completed, 1));
    assert_eq!(wf.probe.later.load(SeqCst), 2);

    h.send(Op::Nap, "m2").await.unwrap();
    env.run_until_idle().await.unwrap();
    h.wake().await.unwrap();
    assert_eq!(
        env.run_until_idle().await.unwrap(),
        0,
        "a sleep is not woken"
    );
    assert_eq!(h.turn(2).await.unwrap().status, TurnStatus::Waiting);
}

/// A wait until a time past the last one a request may name (9999-12-31) is the longest wait,
/// 366 days, as a wait until any far time is: the worker does not send a time the engine
/// refuses.
#[tokio::test]
async fn a_wait_past_the_last_time_is_the_longest_wait() {
    let (env, wf, h) = setup().await;
    h.send(Op::Forever, "m1").await.unwrap();
    env.run_until_idle().await.unwrap();
    let t = h.turn(1).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Waiting, 1), "{t:?}");
    let wait = t.wait.expect("a retry wait");
    let longest = turnwise_rules::durations::RETRY_AT_AHEAD.max;
    assert_eq!((wait.until_ms - wait.since_ms) as u64, longest, "{wait:?}");
    h.wake().await.unwrap();
    env.run_until_idle().await.unwrap();
    assert_eq!(wf.probe.later.load(SeqCst), 2);
    assert_eq!(h.turn(1).await.unwrap().status, TurnStatus::Completed);
}

#[tokio::test]
async fn delete_removes_the_instance() {
    let (env, wf, h) = setup().await;
    h.send(add("a"), "m1").await.unwrap();
    env.run_until_idle().await.unwrap();

    assert!(h.delete().await.unwrap());
    assert_eq!(h.instance().await.unwrap_err().status(), 404);
    assert_eq!(h.state().await.unwrap_err().status(), 404);
    assert!(!h.delete().await.unwrap(), "already gone");

    // The id can be started again, from the initial state.
    let again = env.start(&wf, "ledger-1").await.unwrap();
    assert_eq!(again.state().await.unwrap(), Vec::<String>::new());
    again.send(add("z"), "m1").await.unwrap();
    env.run_until_idle().await.unwrap();
    assert_eq!(
        again.state().await.unwrap(),
        vec!["z".to_owned()],
        "m1 is a new message again"
    );
    assert_eq!(
        again.instance().await.unwrap().completed_turns,
        1,
        "no history of the deleted one"
    );
}
