//! The worker through the public API: concurrent slots, lease heartbeats, stopping (drain,
//! release), lost turns, and claims of versions it cannot run. Real-time waits are bounded by
//! [`GUARD`]; every due time of the engine is on the manual clock.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::{Barrier, Notify};
use turnwise::clock::Clock;
use turnwise::prelude::*;
use turnwise::protocol::*;
use turnwise::testing::TestEnv;

use crate::common;
use common::{eventually, GUARD};

#[derive(Default)]
struct Probe {
    /// Real executions of the step.
    executions: AtomicUsize,
    /// Steps running right now, and the most ever at once.
    in_flight: AtomicUsize,
    most: AtomicUsize,
    /// Code after the step ran.
    after: AtomicUsize,
    entered: Notify,
    gate: Notify,
}

/// How the step behaves.
#[derive(Clone)]
enum Hold {
    /// Meet the other turns at a barrier (fails after [`GUARD`] if they never come).
    Barrier(Arc<Barrier>),
    /// Wait for the gate on the first execution.
    GateOnce,
    /// Return at once.
    Nothing,
}

#[derive(Clone)]
struct Held {
    probe: Arc<Probe>,
    hold: Hold,
    options: WorkflowOptions,
}

impl Held {
    fn new(hold: Hold) -> Self {
        Self {
            probe: Arc::default(),
            hold,
            options: WorkflowOptions::default(),
        }
    }
}

impl Workflow for Held {
    type State = u32;
    type Message = u32;
    type Reply = u32;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "held";
    const VERSION: &'static str = "v1";

    fn options(&self) -> WorkflowOptions {
        self.options.clone()
    }

    async fn run(&self, ctx: &mut Turn<Self>, state: u32, n: u32) -> TurnResult<Self> {
        let probe = self.probe.clone();
        let hold = self.hold.clone();
        let n = ctx
            .step("work", |_s| async move {
                let first = probe.executions.fetch_add(1, SeqCst) == 0;
                let now = probe.in_flight.fetch_add(1, SeqCst) + 1;
                probe.most.fetch_max(now, SeqCst);
                probe.entered.notify_one();
                let held = match hold {
                    Hold::Barrier(b) => tokio::time::timeout(GUARD, b.wait()).await.map(drop),
                    Hold::GateOnce if first => {
                        tokio::time::timeout(GUARD, probe.gate.notified()).await
                    }
                    _ => Ok(()),
                };
                probe.in_flight.fetch_sub(1, SeqCst);
                held.map_err(|_| TurnError::permanent("the step was held past the guard"))?;
                Ok(n)
            })
            .await?;
        self.probe.after.fetch_add(1, SeqCst);
        Ok(Done::new(state + n).reply(n))
    }
}

#[tokio::test]
async fn concurrency_runs_turns_of_several_instances_at_once() {
    let wf = Held::new(Hold::Barrier(Arc::new(Barrier::new(4))));
    let env = TestEnv::new().register(wf.clone());
    let mut handles = Vec::new();
    for i in 0..4 {
        let h = env.start(&wf, &format!("held-{i}")).await.unwrap();
        h.send(i, "m1").await.unwrap();
        handles.push(h);
    }

    let running = env
        .worker()
        .clone()
        .concurrency(4)
        .claim_wait(Duration::from_millis(50))
        .run_async();
    for h in &handles {
        let t = eventually("the turn to finish", || async {
            let t = h.turn(1).await.unwrap();
            matches!(t.status, TurnStatus::Completed | TurnStatus::Failed).then_some(t)
        })
        .await;
        assert_eq!(
            t.status,
            TurnStatus::Completed,
            "all four met at the barrier: {t:?}"
        );
    }
    tokio::time::timeout(GUARD, running.stop())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(wf.probe.most.load(SeqCst), 4);
    assert_eq!(wf.probe.executions.load(SeqCst), 4);
}

#[tokio::test]
async fn the_worker_heartbeats_the_lease_every_third_of_it() {
    const LEASE: Duration = Duration::from_millis(1500);
    let mut wf = Held::new(Hold::GateOnce);
    wf.options = WorkflowOptions::default().lease(LEASE);
    let env = TestEnv::new();
    // The worker talks to the engine through a backend that notes when each beat arrives.
    let spy = Spy::new(env.engine().clone(), false);
    let h = wf.start(&spy, "held-1").await.unwrap();
    h.send(1, "m1").await.unwrap();
    let worker = Worker::new(spy.clone())
        .clock(Arc::new(env.clock().clone()) as Arc<dyn Clock>)
        .register(wf.clone());

    let run = tokio::spawn(async move { worker.run_once().await });
    tokio::time::timeout(GUARD, wf.probe.entered.notified())
        .await
        .unwrap();
    let claimed = env.clock().now_ms();
    assert_eq!(h.turn(1).await.unwrap().deadline_ms, Some(claimed + 1500));

    // Beats come in real time, each a third of the lease (500 ms) after the last one was
    // answered: never sooner, and on a loaded machine perhaps later. So every gap is at least
    // a third, and the shortest is under half the lease (a beat every half lease, or slower,
    // would make every gap 750 ms or more).
    let beats = eventually("four heartbeats", || async {
        let beats = spy.beats();
        (beats.len() >= 4).then_some(beats)
    })
    .await;
    let gaps: Vec<Duration> = beats.windows(2).map(|w| w[1] - w[0]).collect();
    let third = LEASE / 3;
    assert!(
        gaps.iter().all(|g| *g >= third - Duration::from_millis(5)),
        "a beat came sooner than a third of the lease ({third:?}) after the last: {gaps:?}"
    );
    let shortest = gaps.iter().min().copied().unwrap();
    assert!(
        shortest < LEASE / 2,
        "no two beats were within half the lease ({:?}) of each other: {gaps:?}",
        LEASE / 2
    );

    // Within the lease on the engine's clock; a beat extends it from the engine's now.
    env.clock().advance(Duration::from_millis(1000));
    let deadline = eventually("a heartbeat", || async {
        let d = h.turn(1).await.unwrap().deadline_ms.unwrap();
        (d > claimed + 1500).then_some(d)
    })
    .await;
    assert_eq!(deadline, claimed + 1000 + 1500);

    wf.probe.gate.notify_one();
    tokio::time::timeout(GUARD, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(h.turn(1).await.unwrap().status, TurnStatus::Completed);
}

#[tokio::test]
async fn stop_drains_a_held_turn_to_its_end() {
    let wf = Held::new(Hold::GateOnce);
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "held-1").await.unwrap();
    h.send(5, "m1").await.unwrap();
    h.send(6, "m2").await.unwrap();

    let running = env
        .worker()
        .clone()
        .claim_wait(Duration::from_millis(50))
        .run_async();
    tokio::time::timeout(GUARD, wf.probe.entered.notified())
        .await
        .unwrap();
    let (stopped, ()) = tokio::join!(tokio::time::timeout(GUARD, running.stop()), async {
        // stop() was asked first (join! polls it first); the turn is still held.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(h.turn(1).await.unwrap().status, TurnStatus::Running);
        wf.probe.gate.notify_one();
    });
    stopped.unwrap().unwrap();

    let t = h.turn(1).await.unwrap();
    assert_eq!(
        (t.status, t.attempt),
        (TurnStatus::Completed, 1),
        "drained, not released: {t:?}"
    );
    assert_eq!(h.state().await.unwrap(), 5);
    assert_eq!(
        h.turn(2).await.unwrap().status,
        TurnStatus::Queued,
        "no new claim while stopping"
    );
}

/// A stopped worker's release: the turn waits a second, with its attempt not counted.
async fn assert_released(env: &TestEnv, h: &Handle<Held>, wf: &Held, released_at: i64) {
    let t = h.turn(1).await.unwrap();
    assert_eq!(t.status, TurnStatus::Waiting, "{t:?}");
    assert_eq!(
        t.error.as_deref(),
        Some("the worker stopped and released the turn")
    );
    assert_eq!(
        t.wait.as_ref().map(|w| w.until_ms),
        Some(released_at + 1000)
    );
    assert_eq!(
        wf.probe.after.load(SeqCst),
        0,
        "the handler was dropped in the step"
    );

    assert_eq!(env.advance(Duration::from_millis(999)).await.unwrap(), 0);
    assert_eq!(env.advance(Duration::from_millis(1)).await.unwrap(), 1);
    let t = h.turn(1).await.unwrap();
    assert_eq!(
        (t.status, t.attempt),
        (TurnStatus::Completed, 1),
        "a release counts no attempt: {t:?}"
    );
    assert_eq!(wf.probe.executions.load(SeqCst), 2);
}

/// How long stopping an idle worker may take: far below the engine's longest claim wait
/// (10 s), which `stop` and `stop_now` used to wait out. A behaviour bound, not a benchmark.
const IDLE_STOP_BOUND: Duration = Duration::from_secs(2);

#[tokio::test]
async fn an_idle_worker_stops_without_waiting_out_its_claim() {
    let wf = Held::new(Hold::Nothing);
    let env = TestEnv::new().register(wf.clone());
    for graceful in [true, false] {
        let running = env
            .worker()
            .clone()
            .concurrency(2)
            .claim_wait(Duration::from_secs(60))
            .run_async();
        // Let both slots' claims reach their long wait on the empty engine.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let started = std::time::Instant::now();
        let stopped = if graceful {
            tokio::time::timeout(IDLE_STOP_BOUND, running.stop()).await
        } else {
            tokio::time::timeout(IDLE_STOP_BOUND, running.stop_now()).await
        };
        let which = if graceful { "stop" } else { "stop_now" };
        stopped
            .unwrap_or_else(|_| panic!("{which}() of an idle worker took over {IDLE_STOP_BOUND:?}"))
            .unwrap();
        println!(
            "{which}() of an idle worker returned after {:?}",
            started.elapsed()
        );
    }
    // The stopped worker's claims are gone: a message sent now is claimed by another worker,
    // on its first attempt, with no lease to wait out.
    let h = env.start(&wf, "after-stop").await.unwrap();
    h.send(7, "m1").await.unwrap();
    assert_eq!(env.run_until_idle().await.unwrap(), 1);
    let t = h.turn(1).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Completed, 1), "{t:?}");
}

#[tokio::test]
async fn stop_now_releases_a_held_turn_with_a_retry_time() {
    let wf = Held::new(Hold::GateOnce);
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "held-1").await.unwrap();
    h.send(5, "m1").await.unwrap();

    let running = env
        .worker()
        .clone()
        .claim_wait(Duration::from_millis(50))
        .run_async();
    tokio::time::timeout(GUARD, wf.probe.entered.notified())
        .await
        .unwrap();
    let now = env.clock().now_ms();
    tokio::time::timeout(GUARD, running.stop_now())
        .await
        .unwrap()
        .unwrap();
    assert_released(&env, &h, &wf, now).await;
}

#[tokio::test]
async fn stop_releases_what_is_still_held_after_the_drain_time() {
    let wf = Held::new(Hold::GateOnce);
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "held-1").await.unwrap();
    h.send(5, "m1").await.unwrap();

    let worker = env
        .worker()
        .clone()
        .claim_wait(Duration::from_millis(50))
        .drain(Duration::from_millis(200));
    let running = worker.run_async();
    tokio::time::timeout(GUARD, wf.probe.entered.notified())
        .await
        .unwrap();
    let now = env.clock().now_ms();
    tokio::time::timeout(GUARD, running.stop())
        .await
        .unwrap()
        .unwrap();
    assert_released(&env, &h, &wf, now).await;
}

#[tokio::test]
async fn a_turn_cancelled_while_held_stops_silently() {
    let wf = Held::new(Hold::GateOnce);
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "held-1").await.unwrap();
    h.send(5, "m1").await.unwrap();

    let worker = env.worker().clone();
    let run = tokio::spawn(async move { worker.run_once().await });
    tokio::time::timeout(GUARD, wf.probe.entered.notified())
        .await
        .unwrap();
    h.cancel_turn(1).await.unwrap();
    wf.probe.gate.notify_one();
    assert!(tokio::time::timeout(GUARD, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap());

    // The step's checkpoint, held for the completion while the handler's code after the step
    // ran (code between durable calls, which writes nothing), was refused with the
    // completion (the lease is gone): nothing was saved, no failure was reported over the
    // cancellation.
    let t = h.turn(1).await.unwrap();
    assert_eq!(t.status, TurnStatus::Cancelled, "{t:?}");
    assert!(t.steps.is_empty());
    assert_eq!(t.error, None);
    assert_eq!(wf.probe.after.load(SeqCst), 1);
    assert_eq!(h.state().await.unwrap(), 0);
}

#[tokio::test]
async fn a_turn_whose_lease_expired_is_run_again_by_the_next_claim() {
    let wf = Held::new(Hold::GateOnce);
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "held-1").await.unwrap();
    h.send(5, "m1").await.unwrap();

    let worker = env.worker().clone();
    let run = tokio::spawn(async move { worker.run_once().await });
    tokio::time::timeout(GUARD, wf.probe.entered.notified())
        .await
        .unwrap();
    // The lease (60 s) runs out on the engine's clock; another claim takes the turn.
    env.clock().advance(Duration::from_secs(60));
    assert_eq!(env.run_until_idle().await.unwrap(), 1);
    let t = h.turn(1).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Completed, 2), "{t:?}");
    assert!(t.error.unwrap().contains("the lease expired"));

    // The first holder's late checkpoint, sent with its completion, is refused and it stops
    // without a word.
    wf.probe.gate.notify_one();
    assert!(tokio::time::timeout(GUARD, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap());
    let t = h.turn(1).await.unwrap();
    assert_eq!((t.status, t.steps.len()), (TurnStatus::Completed, 1));
    assert_eq!(
        wf.probe.after.load(SeqCst),
        2,
        "both attempts went past the step; only the second one's completion was taken"
    );
    assert_eq!(h.state().await.unwrap(), 5);
}

/// Panics on message 0.
struct Panicky;

impl Workflow for Panicky {
    type State = u32;
    type Message = u32;
    type Reply = u32;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "panicky";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, state: u32, n: u32) -> TurnResult<Self> {
        let n = ctx
            .step("check", |_s| async move {
                assert!(n != 0, "message zero");
                Ok(n)
            })
            .await?;
        Ok(Done::new(state + n))
    }
}

#[tokio::test]
async fn a_panicking_handler_fails_its_attempt_and_the_worker_goes_on() {
    let env = TestEnv::new().register(Panicky);
    let bad = env.start(&Panicky, "panicky-1").await.unwrap();
    let good = env.start(&Panicky, "panicky-2").await.unwrap();
    bad.send(0, "m1").await.unwrap();

    // One slot: a panic that took the slot down would stop the whole worker.
    let running = env
        .worker()
        .clone()
        .claim_wait(Duration::from_millis(50))
        .run_async();
    let t = eventually("the failed attempt", || async {
        let t = bad.turn(1).await.unwrap();
        t.error.is_some().then_some(t)
    })
    .await;
    assert_eq!(
        (t.status, t.attempt),
        (TurnStatus::Queued, 1),
        "retried like an ordinary error: {t:?}"
    );
    assert_eq!(
        t.error.as_deref(),
        Some("Error: the handler panicked: message zero")
    );

    good.send(2, "m1").await.unwrap();
    eventually("the next turn", || async {
        (good.turn(1).await.unwrap().status == TurnStatus::Completed).then_some(())
    })
    .await;
    tokio::time::timeout(GUARD, running.stop())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(good.state().await.unwrap(), 2);
}

// ---------------------------------------------------------------------------------------------
// A claim of a version the worker did not register.

/// A backend that forwards every call to the engine and notes when each heartbeat arrives.
/// With `widen` it also claims `held v2` for the worker, as a misbehaving server could hand
/// out a version the worker never asked for.
#[derive(Clone)]
struct Spy {
    engine: Engine,
    widen: bool,
    /// The real time at which each heartbeat arrived, in order.
    beats: Arc<Mutex<Vec<Instant>>>,
}

impl Spy {
    fn new(engine: Engine, widen: bool) -> Self {
        Self {
            engine,
            widen,
            beats: Arc::default(),
        }
    }

    fn beats(&self) -> Vec<Instant> {
        self.beats.lock().unwrap().clone()
    }
}

#[async_trait]
impl Backend for Spy {
    async fn create_instance(
        &self,
        req: CreateInstanceRequest,
    ) -> turnwise::Result<WorkflowInstance> {
        self.engine.create_instance(req).await
    }
    async fn send_message(&self, req: MessageRequest) -> turnwise::Result<WorkflowTurn> {
        self.engine.send_message(req).await
    }
    async fn get_instance(&self, id: &str) -> turnwise::Result<WorkflowInstance> {
        self.engine.get_instance(id).await
    }
    async fn runs(&self, query: RunsQuery) -> turnwise::Result<RunPage> {
        self.engine.runs(query).await
    }
    async fn run(&self, run_id: &str) -> turnwise::Result<WorkflowRun> {
        self.engine.run(run_id).await
    }
    async fn run_stats(&self, hours: u32) -> turnwise::Result<RunStats> {
        self.engine.run_stats(hours).await
    }
    async fn list_instances(&self, query: ListInstancesQuery) -> turnwise::Result<InstanceList> {
        self.engine.list_instances(query).await
    }
    async fn instance_inbox(&self, query: InboxQuery) -> turnwise::Result<InboxResponse> {
        self.engine.instance_inbox(query).await
    }
    async fn type_inbox(&self, query: TypeInboxQuery) -> turnwise::Result<TypeInboxResponse> {
        self.engine.type_inbox(query).await
    }
    async fn history(&self, query: HistoryQuery) -> turnwise::Result<HistoryResponse> {
        self.engine.history(query).await
    }
    async fn turn(&self, query: TurnQuery) -> turnwise::Result<WorkflowTurn> {
        self.engine.turn(query).await
    }
    async fn control(&self, req: ControlRequest) -> turnwise::Result<WorkflowInstance> {
        self.engine.control(req).await
    }
    async fn delete_instance(&self, req: DeleteRequest) -> turnwise::Result<DeleteResponse> {
        self.engine.delete_instance(req).await
    }
    async fn claim(&self, mut req: ClaimRequest) -> turnwise::Result<ClaimResponse> {
        if self.widen {
            req.workflows.push(WorkflowRef::new("held", "v2"));
        }
        self.engine.claim(req).await
    }
    async fn operation(&self, req: OperationRequest) -> turnwise::Result<WorkflowTurn> {
        self.engine.operation(req).await
    }
    async fn progress(&self, req: ProgressRequest) -> turnwise::Result<WorkflowTurn> {
        self.engine.progress(req).await
    }
    async fn checkpoint(&self, req: CheckpointRequest) -> turnwise::Result<WorkflowTurn> {
        self.engine.checkpoint(req).await
    }
    async fn wait_signal(&self, req: WaitSignalRequest) -> turnwise::Result<WorkflowTurn> {
        self.engine.wait_signal(req).await
    }
    async fn signal(&self, req: SignalRequest) -> turnwise::Result<WorkflowTurn> {
        self.engine.signal(req).await
    }
    async fn complete(&self, req: CompleteRequest) -> turnwise::Result<WorkflowTurn> {
        self.engine.complete(req).await
    }
    async fn fail(&self, req: FailRequest) -> turnwise::Result<WorkflowTurn> {
        self.engine.fail(req).await
    }
    async fn heartbeat(&self, lease: Lease) -> turnwise::Result<WorkflowTurn> {
        self.beats.lock().unwrap().push(Instant::now());
        self.engine.heartbeat(lease).await
    }
}

/// The spy keeps the defaults: the worker's heartbeats reach `Backend::heartbeat`.
impl WorkerBackend for Spy {}

/// `held` under version v2, which the worker below does not register.
struct HeldV2;

impl Workflow for HeldV2 {
    type State = u32;
    type Message = u32;
    type Reply = u32;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "held";
    const VERSION: &'static str = "v2";

    async fn run(&self, _ctx: &mut Turn<Self>, state: u32, _n: u32) -> TurnResult<Self> {
        Ok(Done::new(state))
    }
}

#[tokio::test]
async fn a_claim_of_an_unregistered_version_is_never_failed() {
    let env = TestEnv::new();
    let widened = Spy::new(env.engine().clone(), true);
    let h = HeldV2.start(&widened, "held-v2").await.unwrap();
    h.send(1, "m1").await.unwrap();
    let worker = Worker::new(widened)
        .clock(Arc::new(env.clock().clone()) as Arc<dyn Clock>)
        .register(Held::new(Hold::Nothing));

    assert!(worker.run_once().await.unwrap(), "the v2 turn was claimed");
    let t = h.turn(1).await.unwrap();
    assert_eq!(
        (t.status, t.attempt, t.error.as_deref()),
        (TurnStatus::Running, 1, None),
        "nothing sent: {t:?}"
    );

    // Only the lease expiry ends the attempt; the turn is ready again, not failed.
    env.clock().advance(Duration::from_secs(59));
    assert_eq!(h.turn(1).await.unwrap().status, TurnStatus::Running);
    env.clock().advance(Duration::from_secs(1));
    let t = h.turn(1).await.unwrap();
    assert_eq!(t.status, TurnStatus::Queued, "{t:?}");
    assert!(t.error.unwrap().contains("the lease expired"));

    // A worker that has the version runs it.
    let right = Worker::new(env.engine().clone()).register(HeldV2);
    assert_eq!(right.run_until_idle().await.unwrap(), 1);
    assert_eq!(h.turn(1).await.unwrap().status, TurnStatus::Completed);
}
