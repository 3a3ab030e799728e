//! Sleeps and signals through the public API, on the test environment's manual clock: sleeps
//! skip instantly with `advance`, a signal resumes a waiting turn with `Some(value)`, a timeout
//! gives `None`, signals sent before the wait are buffered and consumed oldest first, and a
//! signal at or after the deadline stays buffered.
//!
//! Sending a signal a workflow does not accept does not compile: with `Comment` below (not
//! accepted by `Review`), `handle.signal::<Comment>(turn, Comment(..), "id")` and
//! `ctx.wait_for_signal::<Comment>(..)` fail with "workflow `Review` does not accept signal
//! `Comment`". That is a compile-fail case for the trybuild suite, so it is not built here.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;
use turnwise::clock::Clock;
use turnwise::prelude::*;
use turnwise::protocol::{CheckpointKind, InstanceStatus, TurnStatus};
use turnwise::testing::TestEnv;

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct Approval {
    approved: bool,
    by: u32,
}

impl Signal for Approval {
    const NAME: &'static str = "approval";
}

/// A signal `Review` does not accept (see the module docs).
#[derive(Serialize, Deserialize)]
#[allow(dead_code)]
struct Comment(String);

impl Signal for Comment {
    const NAME: &'static str = "comment";
}

#[derive(Serialize, Deserialize, Clone, Debug)]
enum Ask {
    /// Sleep an hour, then two hours more, then complete.
    Naps,
    /// Wait a day for one approval.
    Once,
    /// Wait an hour for one approval, then a day for another.
    Twice,
    /// Wait a day for one approval, then fail (ordinary error) on the first run past it.
    OnceThenFail,
}

#[derive(Default)]
struct Probe {
    runs: AtomicUsize,
    naps: AtomicUsize,
    /// Runs that got past the signal wait of `OnceThenFail`.
    past: AtomicUsize,
}

#[derive(Clone, Default)]
struct Review(Arc<Probe>);

impl Accepts<Approval> for Review {}

impl Workflow for Review {
    type State = Vec<String>;
    type Message = Ask;
    type Reply = Vec<Option<u32>>;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "review";
    const VERSION: &'static str = "v1";
    const SIGNALS: &'static [&'static str] = &["approval"];

    async fn run(
        &self,
        ctx: &mut Turn<Self>,
        mut state: Vec<String>,
        ask: Ask,
    ) -> TurnResult<Self> {
        self.0.runs.fetch_add(1, SeqCst);
        let mut got = Vec::new();
        match ask {
            Ask::Naps => {
                ctx.sleep("nap-1", HOUR).await?;
                self.0.naps.fetch_add(1, SeqCst);
                ctx.sleep("nap-2", 2 * HOUR).await?;
                self.0.naps.fetch_add(1, SeqCst);
            }
            Ask::Once => got.push(
                ctx.wait_for_signal::<Approval>("review", DAY)
                    .await?
                    .map(|a| a.by),
            ),
            Ask::OnceThenFail => {
                got.push(
                    ctx.wait_for_signal::<Approval>("review", DAY)
                        .await?
                        .map(|a| a.by),
                );
                if self.0.past.fetch_add(1, SeqCst) == 0 {
                    return Err(TurnError::retry("the mail server is down"));
                }
            }
            Ask::Twice => {
                got.push(
                    ctx.wait_for_signal::<Approval>("first", HOUR)
                        .await?
                        .map(|a| a.by),
                );
                got.push(
                    ctx.wait_for_signal::<Approval>("second", DAY)
                        .await?
                        .map(|a| a.by),
                );
            }
        }
        state.push(format!("{got:?}"));
        Ok(Done::new(state).reply(got))
    }
}

fn approval(by: u32) -> Approval {
    Approval { approved: true, by }
}

async fn setup() -> (TestEnv, Review, Handle<Review>) {
    let wf = Review::default();
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "review-1").await.unwrap();
    (env, wf, h)
}

#[tokio::test]
async fn sleeps_skip_instantly_with_the_manual_clock() {
    let (env, wf, h) = setup().await;
    let started = Instant::now();
    let t0 = env.clock().now_ms();
    let turn = h.send(Ask::Naps, "m1").await.unwrap().number;

    env.run_until_idle().await.unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Waiting);
    assert_eq!(t.ready_at_ms, t0 + 3_600_000);
    assert_eq!(t.steps[0].wake_at_ms, Some(t0 + 3_600_000));
    assert_eq!(h.instance().await.unwrap().status, InstanceStatus::Waiting);

    assert_eq!(
        env.advance(HOUR - Duration::from_millis(1)).await.unwrap(),
        0,
        "not due yet"
    );
    assert_eq!(env.advance(Duration::from_millis(1)).await.unwrap(), 1);
    assert_eq!(
        wf.0.naps.load(SeqCst),
        1,
        "the second sleep suspended the re-run"
    );
    assert_eq!(h.turn(turn).await.unwrap().status, TurnStatus::Waiting);

    assert_eq!(env.advance(2 * HOUR).await.unwrap(), 1);
    let t = h.turn(turn).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Completed, 1), "{t:?}");
    assert_eq!(wf.0.runs.load(SeqCst), 3);
    assert_eq!(
        wf.0.naps.load(SeqCst),
        3,
        "1 after the first re-run, 2 after the last"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "three hours passed in no real time"
    );
}

#[tokio::test]
async fn a_signal_resumes_a_waiting_turn_with_its_value() {
    let (env, wf, h) = setup().await;
    let t0 = env.clock().now_ms();
    let turn = h.send(Ask::Once, "m1").await.unwrap().number;
    env.run_until_idle().await.unwrap();

    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Waiting);
    let w = &t.steps[0];
    assert_eq!((w.key.as_str(), w.kind), ("review", CheckpointKind::Signal));
    assert_eq!(
        (w.signal_name.as_deref(), w.delay_ms),
        (Some("approval"), Some(86_400_000))
    );
    assert_eq!(w.wake_at_ms, Some(t0 + 86_400_000));

    env.clock().advance(HOUR);
    h.signal(turn, approval(7), "ev-1").await.unwrap();
    // The same event id again is delivered once.
    h.signal(turn, approval(7), "ev-1").await.unwrap();
    assert_eq!(
        env.run_until_idle().await.unwrap(),
        1,
        "the signal made the turn ready"
    );

    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Completed, "{t:?}");
    assert_eq!(
        t.steps[0].output,
        json!({"received": true, "value": {"approved": true, "by": 7}})
    );
    let signals = t.signals.unwrap();
    assert_eq!(signals.len(), 1);
    assert_eq!(signals[0].consumed_by.as_deref(), Some("review"));
    assert_eq!(h.reply(turn).await.unwrap(), Some(vec![Some(7)]));
    assert_eq!(wf.0.runs.load(SeqCst), 2);
}

#[tokio::test]
async fn signal_waiting_finds_the_turn_that_waits_and_refuses_when_none_does() {
    let (env, _wf, h) = setup().await;
    // Nothing queued: no turn waits.
    let e = h.signal_waiting(approval(1), "ev-0").await.unwrap_err();
    assert!(matches!(e, turnwise::Error::NotFound { .. }), "{e:?}");
    assert!(
        e.to_string().contains("waiting for signal `approval`"),
        "{e}"
    );

    // Queued but not yet run: it does not wait yet, and nothing is delivered.
    let first = h.send(Ask::Once, "m1").await.unwrap().number;
    let e = h.signal_waiting(approval(1), "ev-1").await.unwrap_err();
    assert!(matches!(e, turnwise::Error::NotFound { .. }), "{e:?}");
    assert_eq!(h.turn(first).await.unwrap().signals, None);

    // Waiting: found without its number; a second message queued behind it is not the target.
    env.run_until_idle().await.unwrap();
    let second = h.send(Ask::Naps, "m2").await.unwrap().number;
    let t = h.signal_waiting(approval(2), "ev-2").await.unwrap();
    assert_eq!(t.number, first);
    // A repeat with the same event id answers the same delivery, once.
    let again = h.signal_waiting(approval(2), "ev-2").await.unwrap();
    assert_eq!(again.number, first);
    assert_eq!(h.turn(first).await.unwrap().signals.unwrap().len(), 1);
    env.run_until_idle().await.unwrap();
    assert_eq!(h.reply(first).await.unwrap(), Some(vec![Some(2)]));

    // The next head sleeps rather than waiting for the signal: refused.
    let t = h.turn(second).await.unwrap();
    assert_eq!(t.status, TurnStatus::Waiting, "{t:?}");
    let e = h.signal_waiting(approval(3), "ev-3").await.unwrap_err();
    assert!(matches!(e, turnwise::Error::NotFound { .. }), "{e:?}");
    assert_eq!(h.turn(second).await.unwrap().signals, None);
}

#[tokio::test]
async fn a_signal_wait_that_times_out_gives_none() {
    let (env, _wf, h) = setup().await;
    let turn = h.send(Ask::Once, "m1").await.unwrap().number;
    env.run_until_idle().await.unwrap();

    assert_eq!(
        env.advance(DAY - Duration::from_millis(1)).await.unwrap(),
        0
    );
    assert_eq!(env.advance(Duration::from_millis(1)).await.unwrap(), 1);
    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Completed);
    assert_eq!(t.steps[0].output, json!({"received": false, "value": null}));
    assert_eq!(h.reply(turn).await.unwrap(), Some(vec![None]));
    // A completed turn takes no more signals.
    let err = h.signal(turn, approval(1), "late").await.unwrap_err();
    assert_eq!(err.status(), 409, "{err}");
}

#[tokio::test]
async fn a_signal_sent_before_the_wait_is_consumed_without_suspending() {
    let (env, wf, h) = setup().await;
    let turn = h.send(Ask::Once, "m1").await.unwrap().number;
    h.signal(turn, approval(3), "early").await.unwrap();

    assert_eq!(env.run_until_idle().await.unwrap(), 1);
    assert_eq!(
        wf.0.runs.load(SeqCst),
        1,
        "the wait took the buffered signal at once"
    );
    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Completed);
    assert_eq!(t.steps[0].wake_at_ms, None, "never suspended");
    assert_eq!(h.reply(turn).await.unwrap(), Some(vec![Some(3)]));
}

#[tokio::test]
async fn buffered_signals_are_consumed_oldest_first() {
    let (env, _wf, h) = setup().await;
    let turn = h.send(Ask::Twice, "m1").await.unwrap().number;
    h.signal(turn, approval(1), "a").await.unwrap();
    h.signal(turn, approval(2), "b").await.unwrap();
    env.run_until_idle().await.unwrap();
    assert_eq!(h.reply(turn).await.unwrap(), Some(vec![Some(1), Some(2)]));
    let signals = h.turn(turn).await.unwrap().signals.unwrap();
    let consumed: Vec<_> = signals
        .iter()
        .map(|s| (s.id.as_str(), s.consumed_by.as_deref()))
        .collect();
    assert_eq!(consumed, vec![("a", Some("first")), ("b", Some("second"))]);
}

#[tokio::test]
async fn a_signal_at_the_deadline_stays_buffered_for_a_later_wait() {
    let (env, _wf, h) = setup().await;
    let turn = h.send(Ask::Twice, "m1").await.unwrap().number;
    env.run_until_idle().await.unwrap();

    // The first wait's deadline is reached before the signal arrives.
    env.clock().advance(HOUR);
    h.signal(turn, approval(9), "late").await.unwrap();
    env.run_until_idle().await.unwrap();

    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Completed, "{t:?}");
    assert_eq!(
        h.reply(turn).await.unwrap(),
        Some(vec![None, Some(9)]),
        "the second wait took it"
    );
    assert_eq!(t.signals.unwrap()[0].consumed_by.as_deref(), Some("second"));
}

#[tokio::test]
async fn a_signal_for_an_unknown_turn_is_not_found_and_a_bad_value_is_refused() {
    let (_env, _wf, h) = setup().await;
    let err = h.signal(7, approval(1), "ev").await.unwrap_err();
    assert_eq!(err.status(), 404, "{err}");

    #[derive(Serialize, Deserialize)]
    struct Score(f64);
    impl Signal for Score {
        const NAME: &'static str = "score";
    }
    impl Accepts<Score> for Review {}
    let turn = h.send(Ask::Once, "m1").await.unwrap().number;
    let err = h.signal(turn, Score(f64::NAN), "nan").await.unwrap_err();
    assert_eq!(err.status(), 400, "{err}");
    assert!(
        err.to_string().contains("signal") && err.to_string().contains("non-finite"),
        "{err}"
    );
    assert!(
        h.turn(turn).await.unwrap().signals.is_none(),
        "nothing was delivered"
    );
}

#[tokio::test]
async fn a_received_signal_is_replayed_from_the_store_on_a_retry() {
    let (env, wf, h) = setup().await;
    let turn = h.send(Ask::OnceThenFail, "m1").await.unwrap().number;
    env.run_until_idle().await.unwrap();
    h.signal(turn, approval(4), "ev").await.unwrap();
    env.run_until_idle().await.unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Queued, 1), "{t:?}");

    env.advance(Duration::from_secs(1)).await.unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Completed, 2), "{t:?}");
    assert_eq!(
        h.reply(turn).await.unwrap(),
        Some(vec![Some(4)]),
        "the retry saw the same signal"
    );
    assert_eq!(wf.0.past.load(SeqCst), 2);
    assert_eq!(
        wf.0.runs.load(SeqCst),
        3,
        "suspended, resumed and failed, retried"
    );
}

/// Through a handle on the embedded engine: each attempt is one run, however often a sleep or
/// a signal wait suspended it, and runs are kept 30 days on the manual clock.
#[tokio::test]
async fn a_handle_reads_one_run_per_attempt_kept_thirty_days() {
    use turnwise::protocol::RunEnd;
    let (env, _wf, h) = setup().await;
    let turn = h.send(Ask::OnceThenFail, "m1").await.unwrap().number;
    env.run_until_idle().await.unwrap();
    let runs = h.runs(None).await.unwrap().runs;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].outcome, RunEnd::WaitingSignal, "{runs:?}");

    h.signal(turn, approval(3), "ev-1").await.unwrap();
    env.run_until_idle().await.unwrap();
    // The first run past the wait failed; the retry (after its backoff) completed.
    env.advance(Duration::from_secs(2)).await.unwrap();
    assert_eq!(h.turn(turn).await.unwrap().status, TurnStatus::Completed);
    let runs = h.all_runs().await.unwrap();
    let seen: Vec<(u32, RunEnd)> = runs.iter().map(|r| (r.attempt, r.outcome)).collect();
    assert_eq!(
        seen,
        [(2, RunEnd::Completed), (1, RunEnd::Failed)],
        "one run per attempt, newest first; the signal wait did not start another"
    );
    assert!(
        runs[1]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("the mail server is down")),
        "{:?}",
        runs[1].error
    );
    assert_eq!(
        runs[1].steps.len(),
        1,
        "the first run saved the signal wait"
    );

    env.advance(31 * DAY).await.unwrap();
    let next = h.send(Ask::Naps, "m2").await.unwrap().number;
    env.run_until_idle().await.unwrap();
    env.advance(HOUR).await.unwrap();
    env.advance(2 * HOUR).await.unwrap();
    assert_eq!(h.turn(next).await.unwrap().status, TurnStatus::Completed);
    let runs = h.all_runs().await.unwrap();
    assert_eq!(
        runs.iter().map(|r| (r.turn, r.outcome)).collect::<Vec<_>>(),
        [(next, RunEnd::Completed)],
        "the runs that ended 31 days ago are gone; two sleeps made one run"
    );
}
