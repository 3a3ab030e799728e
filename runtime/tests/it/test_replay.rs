//! Replay (wire.md §3.4) through the public API: a turn's saved entries are made by one handler,
//! then a different handler registered under the same name and version, in a new worker, runs
//! the turn again. Every mismatch suspends the turn with a report naming the version, position,
//! the saved entries and what the code called (no payload value); with `on_mismatch = fail`
//! it fails the turn for good with a message naming the workflow, version, position, the saved
//! entry and what the code called. Also: suspension by dropping the turn future, and local
//! step timeouts.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use turnwise::clock::Clock;
use turnwise::manifest::grammar::Saved;
use turnwise::manifest::CallKind;
use turnwise::prelude::*;
use turnwise::protocol::{InstanceStatus, TurnStatus, WorkflowTurn};
use turnwise::testing::TestEnv;

/// Bounds every real-time wait of these tests.
const GUARD: Duration = Duration::from_secs(10);

#[derive(Serialize, Deserialize)]
struct Yes(bool);
impl Signal for Yes {
    const NAME: &'static str = "yes";
}

#[derive(Serialize, Deserialize)]
struct No(bool);
impl Signal for No {
    const NAME: &'static str = "no";
}

/// Which body the handler runs. Version A of a test builds the saved entries; version B is the
/// changed code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Body {
    /// step `a`, then an ordinary error.
    StepAThenFail,
    /// step `a`, step `b`, then an ordinary error.
    StepsABThenFail,
    /// step `b`.
    StepB,
    /// sleep `a` for 1 s.
    SleepA,
    /// sleep `nap` for 10 s.
    Nap10,
    /// sleep `nap` for 20 s.
    Nap20,
    /// wait for `yes` under key `w`, for an hour.
    WaitYes,
    /// wait for `yes` under key `w`, for two hours.
    WaitYesLonger,
    /// wait for `no` under key `w`, for an hour.
    WaitNo,
    /// step `w`.
    StepW,
    /// step `a`, step `b`, step `a` again.
    StepsABA,
    /// step `b`, then step `a`.
    StepsBA,
    /// step `a` only, then return.
    StepAOnly,
    /// step `a` twice on a first run.
    StepATwice,
    /// a step with a key the wire refuses.
    BadKey,
}

#[derive(Default)]
struct Probe {
    /// Real executions of step bodies.
    executions: AtomicUsize,
    /// Returns of the handler with `Ok`.
    finished: AtomicUsize,
}

#[derive(Clone)]
struct Shape {
    body: Body,
    probe: Arc<Probe>,
    on_mismatch: OnMismatch,
}

impl Shape {
    /// A body with the default answer to a mismatch: suspend.
    fn new(body: Body) -> Self {
        Self {
            body,
            probe: Arc::default(),
            on_mismatch: OnMismatch::default(),
        }
    }

    /// A body that asks for a permanent failure on a mismatch.
    fn failing(body: Body) -> Self {
        Self {
            on_mismatch: OnMismatch::Fail,
            ..Self::new(body)
        }
    }
}

impl Accepts<Yes> for Shape {}
impl Accepts<No> for Shape {}

impl Workflow for Shape {
    type State = u32;
    type Message = ();
    type Reply = ();
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "shape";
    const VERSION: &'static str = "v1";
    const SIGNALS: &'static [&'static str] = &["yes", "no"];

    fn on_mismatch(&self) -> OnMismatch {
        self.on_mismatch
    }

    async fn run(&self, ctx: &mut Turn<Self>, state: u32, _msg: ()) -> TurnResult<Self> {
        let step = |p: Arc<Probe>| {
            move |_s: StepCtx| async move {
                p.executions.fetch_add(1, SeqCst);
                Ok(1u32)
            }
        };
        let hour = Duration::from_secs(3600);
        match self.body {
            Body::StepAThenFail => {
                ctx.step("a", step(self.probe.clone())).await?;
                return Err(TurnError::retry("version A fails after its steps"));
            }
            Body::StepsABThenFail => {
                ctx.step("a", step(self.probe.clone())).await?;
                ctx.step("b", step(self.probe.clone())).await?;
                return Err(TurnError::retry("version A fails after its steps"));
            }
            Body::StepB => {
                ctx.step("b", step(self.probe.clone())).await?;
            }
            Body::SleepA => ctx.sleep("a", Duration::from_secs(1)).await?,
            Body::Nap10 => ctx.sleep("nap", Duration::from_secs(10)).await?,
            Body::Nap20 => ctx.sleep("nap", Duration::from_secs(20)).await?,
            Body::WaitYes => {
                ctx.wait_for_signal::<Yes>("w", hour).await?;
            }
            Body::WaitYesLonger => {
                ctx.wait_for_signal::<Yes>("w", 2 * hour).await?;
            }
            Body::WaitNo => {
                ctx.wait_for_signal::<No>("w", hour).await?;
            }
            Body::StepW => {
                ctx.step("w", step(self.probe.clone())).await?;
            }
            Body::StepsABA => {
                ctx.step("a", step(self.probe.clone())).await?;
                ctx.step("b", step(self.probe.clone())).await?;
                ctx.step("a", step(self.probe.clone())).await?;
            }
            Body::StepsBA => {
                ctx.step("b", step(self.probe.clone())).await?;
                ctx.step("a", step(self.probe.clone())).await?;
            }
            Body::StepAOnly => {
                ctx.step("a", step(self.probe.clone())).await?;
            }
            Body::StepATwice => {
                ctx.step("a", step(self.probe.clone())).await?;
                ctx.step("a", step(self.probe.clone())).await?;
            }
            Body::BadKey => {
                ctx.step("bad key", step(self.probe.clone())).await?;
            }
        }
        self.probe.finished.fetch_add(1, SeqCst);
        Ok(Done::new(state + 1))
    }
}

/// Run version `a` of the handler on a new turn, let `advance` pass, then run version `b` of
/// the handler (same name and version, asking for a permanent failure on a mismatch) in a new
/// worker. Returns the turn and version B's probe.
async fn replay(a: Body, advance: Duration, b: Body) -> (WorkflowTurn, Arc<Probe>) {
    let (env, h, turn, second) = run_changed(a, advance, Shape::failing(b)).await;
    let worker = worker_of(&env, &second);

    // Failed for good: nothing runs again, however much time passes.
    env.clock().advance(Duration::from_secs(3600));
    assert_eq!(worker.run_until_idle().await.unwrap(), 0);
    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Failed, "{t:?}");
    assert_eq!(h.instance().await.unwrap().status, InstanceStatus::Failed);
    assert_eq!(
        t.mismatch, None,
        "a failed turn carries no suspension report"
    );
    (t, second.probe)
}

/// A worker of `wf` over the test's engine and clock.
fn worker_of(env: &TestEnv, wf: &Shape) -> Worker {
    Worker::new(env.engine().clone())
        .clock(Arc::new(env.clock().clone()) as Arc<dyn Clock>)
        .register(wf.clone())
}

/// Run version `a` of the handler on a new turn, let `advance` pass, then run `second` (same
/// name and version) once in a new worker.
async fn run_changed(
    a: Body,
    advance: Duration,
    second: Shape,
) -> (TestEnv, Handle<Shape>, u64, Shape) {
    let first = Shape::new(a);
    let env = TestEnv::new().register(first.clone());
    let h = env.start(&first, "shape-1").await.unwrap();
    let turn = h.send((), "m1").await.unwrap().number;
    assert_eq!(env.run_until_idle().await.unwrap(), 1);
    let saved = h.turn(turn).await.unwrap();
    assert!(
        !saved.steps.is_empty(),
        "version A saved entries: {saved:?}"
    );
    assert_ne!(saved.status, TurnStatus::Failed, "{saved:?}");

    let worker = worker_of(&env, &second);
    env.clock().advance(advance);
    assert_eq!(
        worker.run_until_idle().await.unwrap(),
        1,
        "version B ran the turn once"
    );
    (env, h, turn, second)
}

/// As [`replay`], with version B suspending on a mismatch (the default): the turn is suspended
/// in that attempt and stays so, however much time passes, with no attempt counted.
async fn suspended(a: Body, advance: Duration, b: Body) -> (WorkflowTurn, Arc<Probe>) {
    let (env, h, turn, second) = run_changed(a, advance, Shape::new(b)).await;
    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Suspended, "{t:?}");
    let attempt = t.attempt;
    let worker = worker_of(&env, &second);
    env.clock().advance(Duration::from_secs(24 * 3600));
    assert_eq!(worker.run_until_idle().await.unwrap(), 0, "no retry spins");
    let t = h.turn(turn).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Suspended, attempt));
    assert_eq!(
        h.instance().await.unwrap().status,
        InstanceStatus::Suspended
    );
    let report = t
        .mismatch
        .clone()
        .expect("a suspended turn carries its report");
    assert_eq!(report.version, "v1");
    assert_eq!(report.at, None, "a hand-written workflow has no manifest");
    assert!(
        report.message.contains("workflow shape v1"),
        "{}",
        report.message
    );
    (t, second.probe)
}

/// A mismatch stops the handler where it is found: its code after that never runs.
async fn mismatch(a: Body, advance: Duration, b: Body) -> (WorkflowTurn, Arc<Probe>) {
    let (t, probe) = replay(a, advance, b).await;
    assert_eq!(
        probe.finished.load(SeqCst),
        0,
        "the handler did not get past the mismatch"
    );
    (t, probe)
}

/// The failure text, checked for what every replay failure must name.
fn replay_error(t: &WorkflowTurn, position: usize) -> String {
    let err = t.error.clone().expect("a failed turn records its error");
    assert!(err.starts_with("WorkflowError: "), "{err}");
    assert!(
        err.contains("workflow shape v1"),
        "names the workflow and version: {err}"
    );
    assert!(
        err.contains(&format!("position {position}")),
        "names the position: {err}"
    );
    err
}

#[tokio::test]
async fn a_changed_step_key_fails_the_turn_for_good() {
    let (t, probe) = mismatch(Body::StepAThenFail, Duration::from_secs(1), Body::StepB).await;
    let err = replay_error(&t, 0);
    assert!(
        err.contains("step `a`") && err.contains("step `b`"),
        "expected and found: {err}"
    );
    assert_eq!(
        probe.executions.load(SeqCst),
        0,
        "the mismatched step did not run"
    );
    assert_eq!(t.attempt, 2, "the failing attempt was the retry");
}

#[tokio::test]
async fn a_changed_kind_fails_the_turn_for_good() {
    let (t, _) = mismatch(Body::StepAThenFail, Duration::from_secs(1), Body::SleepA).await;
    let err = replay_error(&t, 0);
    assert!(
        err.contains("step `a`") && err.contains("sleep `a` delay_ms=1000"),
        "{err}"
    );
}

/// A sleep's length and a signal wait's timeout are inputs: a turn saved with the old ones
/// keeps its saved deadline on the new code and finishes (the replay manifest's check calls such
/// a change `review`, not `needs-patch`).
#[tokio::test]
async fn a_changed_sleep_length_or_signal_timeout_keeps_the_saved_deadline() {
    for (a, advance, b) in [
        (Body::Nap10, Duration::from_secs(10), Body::Nap20),
        (
            Body::WaitYes,
            Duration::from_secs(3600),
            Body::WaitYesLonger,
        ),
    ] {
        let (env, h, turn, second) = run_changed(a, advance, Shape::new(b)).await;
        let worker = worker_of(&env, &second);
        worker.run_until_idle().await.unwrap();
        let t = h.turn(turn).await.unwrap();
        assert_eq!(t.status, TurnStatus::Completed, "{b:?}: {t:?}");
        assert_eq!(t.mismatch, None, "{b:?}");
        assert_eq!(second.probe.finished.load(SeqCst), 1, "{b:?}");
    }
}

#[tokio::test]
async fn a_changed_signal_name_fails_the_turn_for_good() {
    let (t, _) = mismatch(Body::WaitYes, Duration::from_secs(3600), Body::WaitNo).await;
    let err = replay_error(&t, 0);
    assert!(
        err.contains("signal=yes") && err.contains("signal=no"),
        "{err}"
    );
}

#[tokio::test]
async fn a_step_in_place_of_a_signal_wait_fails_the_turn_for_good() {
    let (t, probe) = mismatch(Body::WaitYes, Duration::from_secs(3600), Body::StepW).await;
    let err = replay_error(&t, 0);
    assert!(
        err.contains("signal `w`") && err.contains("step `w`"),
        "{err}"
    );
    assert_eq!(probe.executions.load(SeqCst), 0);
}

#[tokio::test]
async fn a_new_key_equal_to_a_saved_one_fails_the_turn_for_good() {
    let (t, probe) = mismatch(
        Body::StepsABThenFail,
        Duration::from_secs(1),
        Body::StepsABA,
    )
    .await;
    let err = replay_error(&t, 2);
    assert!(err.contains("`a`"), "{err}");
    assert_eq!(
        probe.executions.load(SeqCst),
        0,
        "a and b replayed, the third call never ran"
    );
    assert_eq!(t.steps.len(), 2);
}

#[tokio::test]
async fn saved_steps_left_unreplayed_fail_the_turn_for_good() {
    let (t, probe) = replay(
        Body::StepsABThenFail,
        Duration::from_secs(1),
        Body::StepAOnly,
    )
    .await;
    let err = replay_error(&t, 1);
    assert!(
        err.contains("step `b`"),
        "names the saved entry left over: {err}"
    );
    assert_eq!(probe.executions.load(SeqCst), 0);
}

fn step(key: &str) -> Saved {
    Saved::new(CallKind::Step, key)
}

#[tokio::test]
async fn a_changed_step_key_suspends_the_turn_with_its_report() {
    let (t, probe) = suspended(Body::StepAThenFail, Duration::from_secs(1), Body::StepB).await;
    let r = t.mismatch.unwrap();
    assert_eq!(r.position, 0);
    assert_eq!(r.saved, [step("a")]);
    assert_eq!(r.found, Some(step("b")));
    assert!(
        r.message.contains("step `a`") && r.message.contains("step `b`"),
        "{}",
        r.message
    );
    assert_eq!(
        probe.executions.load(SeqCst),
        0,
        "the mismatched step did not run"
    );
    assert_eq!(
        probe.finished.load(SeqCst),
        0,
        "the handler stopped at the mismatch"
    );
    assert_eq!(
        t.attempt, 2,
        "the attempt that met the mismatch was the retry; no more"
    );
    let error = t.error.unwrap();
    assert!(error.starts_with("ReplayMismatch: "), "{error}");
}

#[tokio::test]
async fn a_changed_kind_or_signal_suspends_the_turn() {
    let hour = Duration::from_secs(3600);
    let sleep = |key: &str| Saved::new(CallKind::Sleep, key);
    let wait = |name: &str| Saved::new(CallKind::Signal, "w").signal(name);
    for (a, advance, b, saved, found, needle) in [
        (
            Body::StepAThenFail,
            Duration::from_secs(1),
            Body::SleepA,
            step("a"),
            sleep("a"),
            "sleep `a` delay_ms=1000",
        ),
        (
            Body::WaitYes,
            hour,
            Body::WaitNo,
            wait("yes"),
            wait("no"),
            "signal=no",
        ),
        (
            Body::WaitYes,
            hour,
            Body::StepW,
            wait("yes"),
            step("w"),
            "step `w`",
        ),
    ] {
        let (t, probe) = suspended(a, advance, b).await;
        let r = t.mismatch.unwrap();
        assert_eq!(
            (r.position, &r.saved, &r.found),
            (0, &vec![saved], &Some(found)),
            "{b:?}"
        );
        assert!(r.message.contains(needle), "{b:?}: {}", r.message);
        assert_eq!(probe.executions.load(SeqCst), 0, "{b:?}");
        assert_eq!(probe.finished.load(SeqCst), 0, "{b:?}");
    }
}

#[tokio::test]
async fn a_saved_key_met_at_another_position_suspends_the_turn() {
    let (t, probe) = suspended(Body::StepsABThenFail, Duration::from_secs(1), Body::StepsBA).await;
    let r = t.mismatch.unwrap();
    assert_eq!((r.position, r.found), (0, Some(step("b"))));
    assert_eq!(r.saved, [step("a"), step("b")]);
    assert!(
        r.message.contains("`b` is saved at position 1"),
        "{}",
        r.message
    );
    assert_eq!(
        probe.executions.load(SeqCst),
        0,
        "no step ran after the divergence"
    );
}

#[tokio::test]
async fn a_key_used_twice_is_a_bug_of_the_code_not_a_mismatch() {
    let (_env, h, turn, _) = run_changed(
        Body::StepsABThenFail,
        Duration::from_secs(1),
        Shape::new(Body::StepsABA),
    )
    .await;
    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Failed, "{t:?}");
    assert_eq!(t.mismatch, None);
    assert!(t.error.unwrap().contains("`a` is used twice"));
}

#[tokio::test]
async fn saved_steps_left_over_suspend_the_turn() {
    let (t, probe) = suspended(
        Body::StepsABThenFail,
        Duration::from_secs(1),
        Body::StepAOnly,
    )
    .await;
    let r = t.mismatch.unwrap();
    assert_eq!((r.position, r.found), (1, None), "the handler returned");
    assert!(r.message.contains("step `b`"), "{}", r.message);
    assert_eq!(probe.executions.load(SeqCst), 0);
}

#[tokio::test]
async fn step_keys_are_unique_and_valid_on_a_first_run_too() {
    for (body, needle) in [
        (Body::StepATwice, "`a` is used twice"),
        (Body::BadKey, "\"bad key\" is invalid"),
    ] {
        let wf = Shape::new(body);
        let env = TestEnv::new().register(wf.clone());
        let h = env.start(&wf, "shape-1").await.unwrap();
        let turn = h.send((), "m1").await.unwrap().number;
        env.run_until_idle().await.unwrap();
        let t = h.turn(turn).await.unwrap();
        assert_eq!(t.status, TurnStatus::Failed, "{body:?}: {t:?}");
        assert_eq!(t.attempt, 1, "{body:?}: no retry");
        let err = t.error.clone().unwrap();
        assert!(
            err.starts_with("WorkflowError: ") && err.contains(needle),
            "{body:?}: {err}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Suspension by dropping: no code after a suspending await runs, whatever the handler does with
// the error.

#[derive(Default)]
struct AfterProbe {
    /// Side effects of code after the durable call.
    after: AtomicUsize,
    /// Real executions of the timed step.
    executions: AtomicUsize,
}

#[derive(Clone, Default)]
struct Stubborn(Arc<AfterProbe>);

impl Accepts<Yes> for Stubborn {}

#[derive(Serialize, Deserialize, Clone, Copy, Debug)]
enum Call {
    Sleep,
    Wait,
    /// A step with a 200 ms timeout that runs for 30 s the first time.
    Timeout,
    /// A step with a 150 ms heartbeat timeout that reports nothing for 30 s the first time.
    HeartbeatTimeout,
    /// A step with a 1 s heartbeat timeout that runs 1.5 s, reporting progress every 100 ms.
    Progressing,
}

impl Workflow for Stubborn {
    type State = Vec<String>;
    type Message = Call;
    type Reply = ();
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "stubborn";
    const VERSION: &'static str = "v1";
    const SIGNALS: &'static [&'static str] = &["yes"];

    async fn run(
        &self,
        ctx: &mut Turn<Self>,
        mut state: Vec<String>,
        call: Call,
    ) -> TurnResult<Self> {
        let probe = self.0.clone();
        let slow = move |_s: StepCtx| async move {
            if probe.executions.fetch_add(1, SeqCst) == 0 {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            Ok(())
        };
        let probe = self.0.clone();
        let progressing = move |s: StepCtx| async move {
            probe.executions.fetch_add(1, SeqCst);
            for i in 0..15 {
                s.progress("working", i, Some(15), "items");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(())
        };
        // Every result is ignored on purpose: suspension must not depend on error handling.
        let outcome = match call {
            Call::Sleep => format!("{:?}", ctx.sleep("nap", Duration::from_secs(3600)).await),
            Call::Wait => {
                let r = ctx
                    .wait_for_signal::<Yes>("ok", Duration::from_secs(3600))
                    .await;
                format!("{:?}", r.map(|s| s.map(|y| y.0)))
            }
            Call::Timeout => format!(
                "{:?}",
                ctx.step("slow", slow)
                    .timeout(Duration::from_millis(200))
                    .await
            ),
            Call::HeartbeatTimeout => {
                let r = ctx
                    .step("quiet", slow)
                    .heartbeat_timeout(Duration::from_millis(150))
                    .await;
                format!("{r:?}")
            }
            Call::Progressing => {
                let r = ctx
                    .step("busy", progressing)
                    .heartbeat_timeout(Duration::from_secs(1))
                    .await;
                format!("{r:?}")
            }
        };
        self.0.after.fetch_add(1, SeqCst);
        state.push(outcome);
        Ok(Done::new(state))
    }
}

#[tokio::test]
async fn code_after_a_sleep_that_is_not_due_never_runs() {
    let wf = Stubborn::default();
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "stubborn-1").await.unwrap();
    let turn = h.send(Call::Sleep, "m1").await.unwrap().number;

    env.run_until_idle().await.unwrap();
    assert_eq!(
        wf.0.after.load(SeqCst),
        0,
        "the handler was dropped at the sleep"
    );
    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Waiting, "{t:?}");
    assert_eq!(t.error, None, "a suspension sends no failure");

    env.advance(Duration::from_secs(3599)).await.unwrap();
    assert_eq!(wf.0.after.load(SeqCst), 0);
    env.advance(Duration::from_secs(1)).await.unwrap();
    assert_eq!(
        wf.0.after.load(SeqCst),
        1,
        "the re-run replays the sleep and goes on, once"
    );
    let t = h.turn(turn).await.unwrap();
    assert_eq!(
        (t.status, t.attempt),
        (TurnStatus::Completed, 1),
        "a sleep counts no attempt"
    );
    assert_eq!(h.state().await.unwrap(), vec!["Ok(())".to_owned()]);
}

#[tokio::test]
async fn code_after_a_suspending_signal_wait_never_runs() {
    let wf = Stubborn::default();
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "stubborn-1").await.unwrap();
    let turn = h.send(Call::Wait, "m1").await.unwrap().number;

    env.run_until_idle().await.unwrap();
    assert_eq!(
        wf.0.after.load(SeqCst),
        0,
        "the handler was dropped at the wait"
    );
    assert_eq!(h.turn(turn).await.unwrap().status, TurnStatus::Waiting);

    h.signal(turn, Yes(true), "sig-1").await.unwrap();
    env.run_until_idle().await.unwrap();
    assert_eq!(wf.0.after.load(SeqCst), 1);
    assert_eq!(h.state().await.unwrap(), vec!["Ok(Some(true))".to_owned()]);
}

#[tokio::test]
async fn a_step_timeout_abandons_the_attempt_and_sends_nothing() {
    let wf = Stubborn::default();
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "stubborn-1").await.unwrap();
    let turn = h.send(Call::Timeout, "m1").await.unwrap().number;

    let started = Instant::now();
    let ran = tokio::time::timeout(GUARD, env.run_until_idle())
        .await
        .expect("abandoned in time")
        .unwrap();
    assert_eq!(ran, 1);
    // Cut at its timeout: not before the 200 ms, and far sooner than the step's own 30 s (the
    // bound leaves a loaded machine 1.8 s of slack).
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(200),
        "the step was cut after {took:?}, before its 200 ms timeout"
    );
    assert!(
        took < Duration::from_secs(2),
        "the 30 s step was cut after {took:?}, not near its 200 ms timeout"
    );
    assert_eq!(wf.0.after.load(SeqCst), 0, "no code after the step ran");
    let t = h.turn(turn).await.unwrap();
    assert_eq!(
        t.status,
        TurnStatus::Running,
        "nothing was sent: the engine still sees the attempt: {t:?}"
    );
    assert_eq!((t.attempt, t.error.as_deref()), (1, None));
    assert!(t.steps.is_empty());

    // The engine expires the operation at its deadline and schedules the retry (1 s backoff).
    env.advance(Duration::from_millis(200)).await.unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Queued, "{t:?}");
    assert_eq!(
        t.error.as_deref(),
        Some("step `slow` ran past its timeout of 200 ms")
    );
    env.advance(Duration::from_secs(1)).await.unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Completed, 2), "{t:?}");
    assert_eq!(wf.0.executions.load(SeqCst), 2);
    assert_eq!(wf.0.after.load(SeqCst), 1);
    assert_eq!(h.state().await.unwrap(), vec!["Ok(())".to_owned()]);
}

#[tokio::test]
async fn a_heartbeat_timeout_abandons_the_attempt_and_sends_nothing() {
    let wf = Stubborn::default();
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "stubborn-1").await.unwrap();
    let turn = h.send(Call::HeartbeatTimeout, "m1").await.unwrap().number;

    tokio::time::timeout(GUARD, env.run_until_idle())
        .await
        .expect("abandoned in time")
        .unwrap();
    assert_eq!(wf.0.after.load(SeqCst), 0);
    let t = h.turn(turn).await.unwrap();
    assert_eq!(
        (t.status, t.error.as_deref()),
        (TurnStatus::Running, None),
        "{t:?}"
    );

    env.advance(Duration::from_millis(150)).await.unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Queued, "{t:?}");
    let err = t.error.unwrap();
    assert!(
        err.contains("step `quiet`") && err.contains("heartbeat timeout of 150 ms"),
        "{err}"
    );
    env.advance(Duration::from_secs(1)).await.unwrap();
    assert_eq!(h.turn(turn).await.unwrap().status, TurnStatus::Completed);
}

#[tokio::test]
async fn progress_writes_keep_a_heartbeat_timeout_from_firing() {
    let wf = Stubborn::default();
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "stubborn-1").await.unwrap();
    let turn = h.send(Call::Progressing, "m1").await.unwrap().number;

    tokio::time::timeout(GUARD, env.run_until_idle())
        .await
        .expect("finished in time")
        .unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Completed, 1), "{t:?}");
    assert_eq!(wf.0.executions.load(SeqCst), 1);
    assert_eq!(h.state().await.unwrap(), vec!["Ok(())".to_owned()]);
}
