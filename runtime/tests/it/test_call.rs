//! `Handle::call` and `Handle::result` through the public API, with a real `Worker` in the
//! background over the engine on the in-memory store and on SQLite (a fresh file per test):
//! the reply, a handler that fails for good, an operator's cancel, a turn without a reply, a
//! repeated message id, an unknown turn; and the polling fallback over a backend that cannot
//! wait ([`Backend::await_turn`] left at its default).

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use turnwise::prelude::*;
use turnwise::protocol::*;
use turnwise::{Error, RunningWorker};

use crate::common;
use crate::common::forwarding_backend;
use common::{eventually, GUARD};

const DAY: Duration = Duration::from_secs(24 * 3600);

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct Approval {
    by: String,
}

impl Signal for Approval {
    const NAME: &'static str = "approval";
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
enum Ask {
    /// Reply with twice the number.
    Double(u64),
    /// Fail for good with this message.
    Refuse(String),
    /// Wait a day for an approval, then reply with 1.
    Approve,
    /// End without a reply, continuing with `Double` of the number.
    Forward(u64),
    /// Hold in a step until the gate opens, then reply with the number.
    Gated(u64),
}

#[derive(Default)]
struct Probe {
    /// Runs of the handler, replays included.
    runs: AtomicUsize,
    /// Opened by the test to let a `Gated` step finish.
    gate: Notify,
}

#[derive(Clone, Default)]
struct Caller(Arc<Probe>);

impl Accepts<Approval> for Caller {}

impl Workflow for Caller {
    type State = u64;
    type Message = Ask;
    type Reply = u64;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "caller";
    const VERSION: &'static str = "v1";
    const SIGNALS: &'static [&'static str] = &["approval"];

    async fn run(&self, ctx: &mut Turn<Self>, turns: u64, ask: Ask) -> TurnResult<Self> {
        self.0.runs.fetch_add(1, SeqCst);
        let done = Done::new(turns + 1);
        match ask {
            Ask::Double(n) => Ok(done.reply(n * 2)),
            Ask::Refuse(why) => Err(WorkflowError::new(why).into()),
            Ask::Approve => {
                ctx.wait_for_signal::<Approval>("approval", DAY).await?;
                Ok(done.reply(1))
            }
            Ask::Forward(n) => Ok(done.continue_with(Ask::Double(n))),
            Ask::Gated(n) => {
                let probe = self.0.clone();
                let n = ctx
                    .step("gate", |_s| async move {
                        tokio::time::timeout(GUARD, probe.gate.notified())
                            .await
                            .map_err(|_| TurnError::permanent("the gate never opened"))?;
                        Ok(n)
                    })
                    .await?;
                Ok(done.reply(n))
            }
        }
    }
}

/// A worker running `wf` on `engine` in the background, and a handle on instance `id`.
async fn serve(engine: &Engine, wf: &Caller, id: &str) -> (RunningWorker, Handle<Caller>) {
    let worker = Worker::new(engine.clone())
        .register(wf.clone())
        .claim_wait(Duration::from_millis(200))
        .run_async();
    let h = wf.start(engine, id).await.expect("start the instance");
    (worker, h)
}

async fn stop(worker: RunningWorker) {
    tokio::time::timeout(GUARD, worker.stop())
        .await
        .expect("the worker stops")
        .expect("the worker ends cleanly");
}

/// `call` or `result`, bounded by [`GUARD`].
async fn bounded<T>(what: &str, call: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, call)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {GUARD:?}"))
}

/// Each case once on the engine over the in-memory store, once over a SQLite file.
macro_rules! on_each_store {
    ($($case:ident),* $(,)?) => {
        mod in_memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(turnwise::Engine::in_memory()).await;
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let dir = tempfile::tempdir().expect("a temporary directory");
                    let engine = turnwise::Engine::open(dir.path().join("call.db"))
                        .await
                        .expect("open the SQLite store");
                    super::$case(engine).await;
                }
            )*
        }
    };
}

on_each_store! {
    call_answers_the_reply,
    a_permanent_failure_is_failed_with_the_message,
    a_cancel_while_waiting_for_a_signal_is_cancelled,
    a_turn_without_a_reply_is_no_reply,
    a_repeated_message_id_answers_the_same_reply_without_running_again,
    result_of_an_unknown_turn_is_not_found,
}

async fn call_answers_the_reply(engine: Engine) {
    let wf = Caller::default();
    let (worker, h) = serve(&engine, &wf, "call-1").await;
    let reply = bounded("call", h.call(Ask::Double(21), "m1")).await;
    assert_eq!(reply.unwrap(), 42);
    let t = h.turn(1).await.unwrap();
    assert_eq!(
        (t.status, t.message_id.as_str()),
        (TurnStatus::Completed, "m1")
    );
    assert_eq!(
        h.state().await.unwrap(),
        1,
        "the turn ran and saved its state"
    );
    // `result` of the finished turn answers the same reply.
    assert_eq!(bounded("result", h.result(1)).await.unwrap(), 42);
    stop(worker).await;
}

async fn a_permanent_failure_is_failed_with_the_message(engine: Engine) {
    let wf = Caller::default();
    let (worker, h) = serve(&engine, &wf, "call-1").await;
    let err = bounded("call", h.call(Ask::Refuse("no stock".into()), "m1"))
        .await
        .unwrap_err();
    match &err {
        CallError::Failed {
            workflow_id,
            turn,
            error,
        } => {
            assert_eq!((workflow_id.as_str(), *turn), ("call-1", 1));
            assert!(
                error.contains("no stock"),
                "the handler's message is kept: {error}"
            );
        }
        other => panic!("expected CallError::Failed, got {other:?}"),
    }
    assert!(err.to_string().contains("no stock"), "{err}");
    assert_eq!(
        wf.0.runs.load(SeqCst),
        1,
        "a permanent failure is not retried"
    );
    assert_eq!(h.turn(1).await.unwrap().status, TurnStatus::Failed);
    stop(worker).await;
}

async fn a_cancel_while_waiting_for_a_signal_is_cancelled(engine: Engine) {
    let wf = Caller::default();
    let (worker, h) = serve(&engine, &wf, "call-1").await;
    let caller = h.clone();
    let call = tokio::spawn(async move { caller.call(Ask::Approve, "m1").await });
    eventually("the turn to wait for its signal", || async {
        let t = h.turn(1).await.ok()?;
        (t.status == TurnStatus::Waiting).then_some(())
    })
    .await;
    assert!(!call.is_finished(), "a waiting turn has no outcome yet");

    h.cancel_turn(1).await.unwrap();
    let err = bounded("call", call).await.unwrap().unwrap_err();
    match err {
        CallError::Cancelled { workflow_id, turn } => {
            assert_eq!((workflow_id.as_str(), turn), ("call-1", 1));
        }
        other => panic!("expected CallError::Cancelled, got {other:?}"),
    }
    assert_eq!(
        h.state().await.unwrap(),
        0,
        "a cancelled turn leaves the state"
    );
    stop(worker).await;
}

async fn a_turn_without_a_reply_is_no_reply(engine: Engine) {
    let wf = Caller::default();
    let (worker, h) = serve(&engine, &wf, "call-1").await;
    let err = bounded("call", h.call(Ask::Forward(5), "m1"))
        .await
        .unwrap_err();
    match err {
        CallError::NoReply { workflow_id, turn } => {
            assert_eq!((workflow_id.as_str(), turn), ("call-1", 1));
        }
        other => panic!("expected CallError::NoReply, got {other:?}"),
    }
    let t = h.turn(1).await.unwrap();
    assert_eq!(t.status, TurnStatus::Completed, "the turn itself completed");
    assert_eq!(t.continued_to, Some(2));
    assert_eq!(
        bounded("result", h.result(2)).await.unwrap(),
        10,
        "the continuation replies"
    );
    stop(worker).await;
}

async fn a_repeated_message_id_answers_the_same_reply_without_running_again(engine: Engine) {
    let wf = Caller::default();
    let (worker, h) = serve(&engine, &wf, "call-1").await;
    assert_eq!(
        bounded("call", h.call(Ask::Double(4), "m1")).await.unwrap(),
        8
    );
    assert_eq!(wf.0.runs.load(SeqCst), 1);
    assert_eq!(
        bounded("repeated call", h.call(Ask::Double(4), "m1"))
            .await
            .unwrap(),
        8,
        "the same reply"
    );
    assert_eq!(
        wf.0.runs.load(SeqCst),
        1,
        "a repeated message id does not run the turn again"
    );
    assert_eq!(h.instance().await.unwrap().completed_turns, 1);
    assert_eq!(h.state().await.unwrap(), 1);

    // Another message id is another turn.
    assert_eq!(
        bounded("call", h.call(Ask::Double(4), "m2")).await.unwrap(),
        8
    );
    assert_eq!(wf.0.runs.load(SeqCst), 2);
    assert_eq!(h.state().await.unwrap(), 2);
    stop(worker).await;
}

async fn result_of_an_unknown_turn_is_not_found(engine: Engine) {
    let wf = Caller::default();
    let (worker, h) = serve(&engine, &wf, "call-1").await;
    for (handle, turn) in [
        (h.clone(), 1),
        (h.clone(), 99),
        (wf.handle(&engine, "nobody"), 1),
    ] {
        match bounded("result", handle.result(turn)).await {
            Err(CallError::Backend(Error::NotFound { .. })) => {}
            other => panic!(
                "result of turn {turn} of `{}`, which does not exist: expected \
                 CallError::Backend(NotFound), got {other:?}",
                handle.id()
            ),
        }
    }
    stop(worker).await;
}

// ---------------------------------------------------------------------------------------------
// Backends that wait, and one that cannot.

// A backend that cannot wait: `await_turn` is the trait's default, one read at once.
forwarding_backend!(CannotWait {} {});

// A backend that waits: `await_turn` goes to the engine's.
forwarding_backend!(Waits { awaits: Arc<AtomicUsize> } {
    async fn await_turn(
        &self,
        query: TurnQuery,
        wait: Duration,
    ) -> turnwise::Result<WorkflowTurn> {
        self.awaits.fetch_add(1, SeqCst);
        self.engine.await_turn(query, wait).await
    }
});

/// Start a `Gated` call through `backend`, wait until the handler holds at the gate, let the
/// call wait `held` longer, then open the gate; answers the reply.
async fn gated_call<B: WorkerBackend + Clone + 'static>(
    engine: &Engine,
    backend: &B,
    held: Duration,
) -> u64 {
    let wf = Caller::default();
    let worker = Worker::new(engine.clone())
        .register(wf.clone())
        .claim_wait(Duration::from_millis(200))
        .run_async();
    let h = wf.start(backend, "gated-1").await.unwrap();
    let caller = h.clone();
    let call = tokio::spawn(async move { caller.call(Ask::Gated(7), "m1").await });
    eventually("the handler to hold at the gate", || async {
        (wf.0.runs.load(SeqCst) == 1).then_some(())
    })
    .await;
    tokio::time::sleep(held).await;
    assert!(!call.is_finished(), "the turn is held: no outcome yet");
    wf.0.gate.notify_one();
    let reply = bounded("the gated call", call)
        .await
        .expect("the call task")
        .expect("the call answers the reply");
    stop(worker).await;
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_reads_again_where_the_backend_cannot_wait() {
    let engine = Engine::in_memory();
    let backend = CannotWait::new(engine.clone());
    let reply = gated_call(&engine, &backend, Duration::from_millis(300)).await;
    assert_eq!(reply, 7, "the reply, though the backend never waits");
    let reads = backend.reads.load(SeqCst);
    assert!(
        reads >= 3,
        "without a waiting await_turn, result must read the turn again until it has an \
         outcome; it read {reads} time(s)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_waits_on_a_backend_that_can() {
    let engine = Engine::in_memory();
    let backend = Waits::new(engine.clone());
    let reply = gated_call(&engine, &backend, Duration::from_millis(300)).await;
    assert_eq!(reply, 7);
    assert_eq!(
        (backend.awaits.load(SeqCst), backend.reads.load(SeqCst)),
        (1, 0),
        "one await, woken by the completion, and no reads in between (awaits, reads)"
    );
}
