//! Errors through the public API: ordinary errors retry with backoff up to `max_attempts`,
//! `WorkflowError` fails for good at once, `WorkflowWait` waits without counting an attempt, the
//! wire texts of each, and values that do not survive their codec (a step output, the state, a
//! reply, a continuation, a message) fail the turn for good naming the value and the JSON path.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::json;
use turnwise::clock::{Clock, ManualClock};
use turnwise::prelude::*;
use turnwise::protocol::{InstanceStatus, MessageRequest, TurnStatus, WorkflowTurn};
use turnwise::testing::TestEnv;

/// A price whose `Deserialize` caps it at 100: prices over 100 do not survive the codec.
#[derive(Serialize, Clone, Debug, PartialEq, Default)]
struct Price(u64);

impl<'de> Deserialize<'de> for Price {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Price(u64::deserialize(d)?.min(100)))
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
struct Line {
    price: Price,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
struct Cart {
    items: Vec<Line>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
struct Measure {
    value: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
struct Books {
    total: f64,
    runs: u32,
}

/// What the handler does with its message.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
enum Act {
    /// Return an ordinary error with `?`, every time.
    Ordinary(String),
    /// Return an ordinary error on the first run only.
    OrdinaryOnce,
    /// Return a `WorkflowError` with `?`.
    Permanent(String),
    /// A step fails with a permanent error.
    PermanentInStep,
    /// Wait `ms` from now, once, then complete.
    Wait { ms: i64, reason: Option<String> },
    /// A step returns a cart whose item 2 does not round-trip.
    LossyStep,
    /// A step returns a value with a NaN at `$.value`.
    NanStep,
    /// The new state holds a NaN.
    NanState,
    /// The reply does not round-trip.
    LossyReply,
    /// The continuation message holds an infinity.
    InfiniteContinuation,
    /// Complete.
    Fine,
    /// Complete (a message holding a float).
    Scale(f64),
}

#[derive(Default)]
struct Probe {
    runs: AtomicUsize,
    steps: AtomicUsize,
}

#[derive(Clone)]
struct Faulty {
    probe: Arc<Probe>,
    clock: ManualClock,
    options: WorkflowOptions,
}

impl Faulty {
    fn new(env: &TestEnv, options: WorkflowOptions) -> Self {
        Self {
            probe: Arc::default(),
            clock: env.clock().clone(),
            options,
        }
    }
}

impl Workflow for Faulty {
    type State = Books;
    type Message = Act;
    type Reply = Cart;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "faulty";
    const VERSION: &'static str = "v1";

    fn options(&self) -> WorkflowOptions {
        self.options.clone()
    }

    async fn run(&self, ctx: &mut Turn<Self>, mut state: Books, act: Act) -> TurnResult<Self> {
        let run = self.probe.runs.fetch_add(1, SeqCst) + 1;
        state.runs += 1;
        let probe = self.probe.clone();
        let counted = move || {
            probe.steps.fetch_add(1, SeqCst);
        };
        match act {
            Act::Ordinary(msg) => Err(std::io::Error::other(msg))?,
            Act::OrdinaryOnce if run == 1 => Err(std::io::Error::other("first run"))?,
            Act::Permanent(msg) => Err(WorkflowError::new(msg))?,
            Act::PermanentInStep => {
                ctx.step("check", |_s| async move {
                    counted();
                    Err::<(), _>(TurnError::permanent("the card was declined"))
                })
                .await?;
            }
            Act::Wait { ms, reason } if run == 1 => {
                let mut wait = WorkflowWait::until(self.clock.now_ms() + ms);
                if let Some(r) = reason {
                    wait = wait.because(r);
                }
                Err(wait)?
            }
            Act::LossyStep => {
                ctx.step("cart", |_s| async move {
                    counted();
                    Ok(Cart {
                        items: [5, 50, 500].map(|p| Line { price: Price(p) }).to_vec(),
                    })
                })
                .await?;
            }
            Act::NanStep => {
                ctx.step("measure", |_s| async move {
                    counted();
                    Ok(Measure { value: f64::NAN })
                })
                .await?;
            }
            Act::NanState => state.total = f64::NAN,
            Act::LossyReply => {
                let cart = Cart {
                    items: vec![Line { price: Price(101) }],
                };
                return Ok(Done::new(state).reply(cart));
            }
            Act::InfiniteContinuation => return Ok(ctx.continue_(state, Act::Scale(f64::INFINITY))),
            _ => {}
        }
        state.total += 1.0;
        Ok(Done::new(state))
    }
}

fn env_with(options: WorkflowOptions) -> (TestEnv, Faulty) {
    let env = TestEnv::new();
    let wf = Faulty::new(&env, options);
    (env.clone().register(wf.clone()), wf)
}

/// The turn after `act` ran once.
async fn run_one(act: Act) -> (WorkflowTurn, Faulty, Handle<Faulty>, TestEnv) {
    let (env, wf) = env_with(WorkflowOptions::default());
    let h = env.start(&wf, "faulty-1").await.unwrap();
    let turn = h.send(act, "m1").await.unwrap().number;
    env.run_until_idle().await.unwrap();
    (h.turn(turn).await.unwrap(), wf, h, env)
}

/// A turn failed for good on its first attempt, with a `WorkflowError:` text.
fn failed_for_good(t: &WorkflowTurn) -> String {
    assert_eq!(t.status, TurnStatus::Failed, "{t:?}");
    assert_eq!(t.attempt, 1, "no retry: {t:?}");
    let err = t.error.clone().unwrap();
    assert!(err.starts_with("WorkflowError: "), "{err}");
    err
}

#[tokio::test]
async fn an_ordinary_error_retries_with_backoff_then_fails_for_good() {
    let (env, wf) = env_with(WorkflowOptions::default().max_attempts(3));
    let h = env.start(&wf, "faulty-1").await.unwrap();
    let turn = h
        .send(Act::Ordinary("boom".into()), "m1")
        .await
        .unwrap()
        .number;
    let later = h.send(Act::Fine, "m2").await.unwrap().number;
    let t0 = env.clock().now_ms();

    env.run_until_idle().await.unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!(
        (t.status, t.attempt, t.error.as_deref()),
        (TurnStatus::Queued, 1, Some("Error: boom"))
    );
    assert_eq!(t.ready_at_ms, t0 + 1000, "first backoff 1 s");
    assert_eq!(h.instance().await.unwrap().status, InstanceStatus::Waiting);

    // 1 s later the second attempt fails; the backoff doubles.
    assert_eq!(env.advance(Duration::from_millis(999)).await.unwrap(), 0);
    assert_eq!(env.advance(Duration::from_millis(1)).await.unwrap(), 1);
    let t = h.turn(turn).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Queued, 2));
    assert_eq!(t.ready_at_ms, t0 + 1000 + 2000, "second backoff 2 s");

    assert_eq!(env.advance(Duration::from_millis(1999)).await.unwrap(), 0);
    assert_eq!(env.advance(Duration::from_millis(1)).await.unwrap(), 1);
    let t = h.turn(turn).await.unwrap();
    assert_eq!(
        (t.status, t.attempt, t.error.as_deref()),
        (TurnStatus::Failed, 3, Some("Error: boom"))
    );
    assert_eq!(wf.probe.runs.load(SeqCst), 3);

    // Failed for good blocks the inbox (on_exhausted = block).
    env.advance(Duration::from_secs(3600)).await.unwrap();
    assert_eq!(wf.probe.runs.load(SeqCst), 3);
    assert_eq!(h.turn(later).await.unwrap().status, TurnStatus::Queued);
    assert_eq!(h.instance().await.unwrap().status, InstanceStatus::Failed);
}

#[tokio::test]
async fn an_exhausted_turn_with_on_exhausted_skip_moves_to_history() {
    let options = WorkflowOptions::default()
        .max_attempts(1)
        .on_exhausted(OnExhausted::Skip);
    let (env, wf) = env_with(options);
    let h = env.start(&wf, "faulty-1").await.unwrap();
    let turn = h
        .send(Act::Ordinary("boom".into()), "m1")
        .await
        .unwrap()
        .number;
    let later = h.send(Act::Fine, "m2").await.unwrap().number;
    env.run_until_idle().await.unwrap();

    let t = h.turn(turn).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Failed, 1));
    assert!(t.finished_at_ms.is_some(), "moved to history: {t:?}");
    assert_eq!(h.turn(later).await.unwrap().status, TurnStatus::Completed);
    assert_eq!(
        h.state().await.unwrap().total,
        1.0,
        "only the second message changed the state"
    );
}

#[tokio::test]
async fn a_retried_turn_that_succeeds_completes_with_its_attempt_count() {
    let (env, wf) = env_with(WorkflowOptions::default());
    let h = env.start(&wf, "faulty-1").await.unwrap();
    let turn = h.send(Act::OrdinaryOnce, "m1").await.unwrap().number;
    env.run_until_idle().await.unwrap();
    env.advance(Duration::from_secs(1)).await.unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Completed, 2), "{t:?}");
    assert_eq!(
        h.state().await.unwrap(),
        Books {
            total: 1.0,
            runs: 1
        },
        "the failed attempt left no state"
    );
}

#[tokio::test]
async fn a_workflow_error_fails_the_turn_for_good_at_once() {
    let (t, wf, h, env) = run_one(Act::Permanent("the order does not exist".into())).await;
    assert_eq!(
        failed_for_good(&t),
        "WorkflowError: the order does not exist"
    );
    env.advance(Duration::from_secs(3600)).await.unwrap();
    assert_eq!(wf.probe.runs.load(SeqCst), 1, "never retried");
    assert_eq!(h.state().await.unwrap(), Books::default());
}

#[tokio::test]
async fn a_permanent_error_inside_a_step_fails_the_turn_for_good() {
    let (t, wf, _, _) = run_one(Act::PermanentInStep).await;
    assert_eq!(failed_for_good(&t), "WorkflowError: the card was declined");
    assert!(t.steps.is_empty(), "a failed step is not saved");
    assert_eq!(wf.probe.steps.load(SeqCst), 1);
}

#[tokio::test]
async fn a_workflow_wait_waits_without_counting_an_attempt() {
    // One attempt only: if the wait counted one, the turn could never run again.
    let (env, wf) = env_with(WorkflowOptions::default().max_attempts(1));
    let h = env.start(&wf, "faulty-1").await.unwrap();
    let t0 = env.clock().now_ms();
    let act = Act::Wait {
        ms: 5000,
        reason: Some("the rate limit resets".into()),
    };
    let turn = h.send(act, "m1").await.unwrap().number;

    env.run_until_idle().await.unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Waiting, "{t:?}");
    assert_eq!(t.attempt, 1);
    assert_eq!(
        t.error.as_deref(),
        Some("WorkflowWait: the rate limit resets")
    );
    let wait = t.wait.expect("a retry wait");
    assert_eq!((wait.since_ms, wait.until_ms), (t0, t0 + 5000));

    assert_eq!(env.advance(Duration::from_millis(4999)).await.unwrap(), 0);
    assert_eq!(env.advance(Duration::from_millis(1)).await.unwrap(), 1);
    let t = h.turn(turn).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Completed, 1), "{t:?}");
    assert_eq!(wf.probe.runs.load(SeqCst), 2);
}

#[tokio::test]
async fn a_workflow_wait_less_than_a_second_ahead_waits_one_second() {
    let (env, wf) = env_with(WorkflowOptions::default());
    let h = env.start(&wf, "faulty-1").await.unwrap();
    let t0 = env.clock().now_ms();
    let turn = h
        .send(
            Act::Wait {
                ms: -5000,
                reason: None,
            },
            "m1",
        )
        .await
        .unwrap()
        .number;
    env.run_until_idle().await.unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!(
        t.error.as_deref(),
        Some("WorkflowWait: the turn waits"),
        "the default reason"
    );
    assert_eq!(t.wait.unwrap().until_ms, t0 + 1000);
    assert_eq!(wf.probe.runs.load(SeqCst), 1);
}

#[test]
fn wire_error_texts() {
    assert_eq!(TurnError::retry("boom").wire_message(), "Error: boom");
    assert_eq!(
        TurnError::permanent("bad").wire_message(),
        "WorkflowError: bad"
    );
    assert_eq!(
        TurnError::from(WorkflowError::new("bad")).to_string(),
        "WorkflowError: bad"
    );
    let wait = TurnError::from(WorkflowWait::until(5));
    assert_eq!(wait.wire_message(), "WorkflowWait: the turn waits");
    assert!(matches!(
        wait,
        TurnError::Wait(WorkflowWait { retry_at_ms: 5, .. })
    ));
    let io = TurnError::from(std::io::Error::other("disk full"));
    assert!(
        matches!(io, TurnError::Retry(_)),
        "an ordinary error retries"
    );
    assert_eq!(io.wire_message(), "Error: disk full");
}

// ---------------------------------------------------------------------------------------------
// Values that do not survive their codec.

#[tokio::test]
async fn a_step_output_that_does_not_round_trip_fails_for_good_naming_key_and_path() {
    let (t, wf, _, _) = run_one(Act::LossyStep).await;
    let err = failed_for_good(&t);
    assert!(err.contains("step `cart`"), "{err}");
    assert!(err.contains("at $.items[2].price"), "{err}");
    assert!(
        err.contains("500") && err.contains("100"),
        "shows both sides: {err}"
    );
    assert!(t.steps.is_empty(), "nothing was saved");
    assert_eq!(wf.probe.steps.load(SeqCst), 1);
}

#[tokio::test]
async fn a_nan_step_output_fails_for_good_naming_key_and_path() {
    let (t, _, _, _) = run_one(Act::NanStep).await;
    let err = failed_for_good(&t);
    assert!(
        err.contains("step `measure`") && err.contains("$.value"),
        "{err}"
    );
    assert!(t.steps.is_empty());
}

#[tokio::test]
async fn a_nan_state_fails_for_good_and_leaves_the_state_unchanged() {
    let (t, _, h, _) = run_one(Act::NanState).await;
    let err = failed_for_good(&t);
    assert!(err.contains("state") && err.contains("$.total"), "{err}");
    assert_eq!(h.state().await.unwrap(), Books::default());
}

#[tokio::test]
async fn a_reply_that_does_not_round_trip_fails_for_good() {
    let (t, _, h, _) = run_one(Act::LossyReply).await;
    let err = failed_for_good(&t);
    assert!(
        err.contains("reply") && err.contains("$.items[0].price"),
        "{err}"
    );
    assert_eq!(h.state().await.unwrap(), Books::default());
}

#[tokio::test]
async fn a_continuation_that_does_not_encode_fails_for_good() {
    let (t, _, h, _) = run_one(Act::InfiniteContinuation).await;
    let err = failed_for_good(&t);
    assert!(err.contains("continuation message"), "{err}");
    assert_eq!(
        h.inbox().await.unwrap().pending_messages,
        1,
        "no continuation was appended"
    );
}

/// A queued message the code cannot decode is data written before a change (or around the
/// typed handle): the turn is suspended like at a replay mismatch, not failed, with a report
/// that names the message and the kind of failure and no value; the handler never runs.
#[tokio::test]
async fn a_message_the_handler_cannot_decode_suspends_the_turn() {
    let (env, wf) = env_with(WorkflowOptions::default());
    let h = env.start(&wf, "faulty-1").await.unwrap();
    // Written around the typed handle, as another client could.
    let req = MessageRequest {
        workflow_id: "faulty-1".into(),
        id: "raw".into(),
        message: json!({"NoSuchAct": 424_242}),
        origin: None,
    };
    let turn = env.engine().send_message(req).await.unwrap().number;
    env.run_until_idle().await.unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Suspended, "{t:?}");
    let r = t.mismatch.clone().expect("a report");
    assert!(
        r.message
            .contains("the message cannot be read by this code (an unknown variant)"),
        "{}",
        r.message
    );
    let shown = format!("{r:?} {:?}", t.error);
    assert!(
        !shown.contains("424242") && !shown.contains("NoSuchAct"),
        "{shown}"
    );
    assert_eq!(wf.probe.runs.load(SeqCst), 0, "the handler never ran");
}

#[tokio::test]
async fn a_message_that_does_not_encode_is_refused_before_it_is_admitted() {
    let (env, wf) = env_with(WorkflowOptions::default());
    let h = env.start(&wf, "faulty-1").await.unwrap();
    let err = h.send(Act::Scale(f64::INFINITY), "bad").await.unwrap_err();
    assert_eq!(err.status(), 400, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("message") && text.contains("non-finite number at $.Scale"),
        "{text}"
    );
    assert_eq!(
        h.inbox().await.unwrap().pending_messages,
        0,
        "nothing was admitted"
    );
    assert_eq!(h.send(Act::Scale(2.5), "good").await.unwrap().number, 1);
}
