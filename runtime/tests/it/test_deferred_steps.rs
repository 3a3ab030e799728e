//! A finished step's checkpoint travels with the worker's next durable call: consecutive steps
//! and the completion share writes, a step is saved before the handler waits on anything
//! else, and a step finished before a failure, a sleep or a signal wait is replayed, not run
//! again.

#![cfg(feature = "sqlite")]

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use turnwise::prelude::*;
use turnwise::store::SqliteStore;
use turnwise::worker::RunningWorker;
use turnwise::{Engine, EngineConfig};

use crate::common::{eventually, GUARD};

/// Three steps in a row, then the reply; `pause`, when set, is awaited between the first and
/// the second step (a wait on something that is not the backend).
#[derive(Clone, Default)]
struct Three {
    pause: Option<Arc<Notify>>,
    runs: Arc<AtomicUsize>,
    /// Executions of each step's body, by position.
    executed: Arc<[AtomicUsize; 3]>,
    /// Fail the first attempt after its last step, with a retryable error.
    fail_first: bool,
}

impl Workflow for Three {
    type State = u64;
    type Message = u64;
    type Reply = u64;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "three";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, state: u64, n: u64) -> TurnResult<Self> {
        let run = self.runs.fetch_add(1, SeqCst) + 1;
        let mut total = 0;
        for (i, key) in ["a", "b", "c"].into_iter().enumerate() {
            let executed = self.executed.clone();
            total += ctx
                .step(key, move |_s| async move {
                    executed[i].fetch_add(1, SeqCst);
                    Ok(n + i as u64)
                })
                .await?;
            if let (0, Some(pause)) = (i, &self.pause) {
                pause.notified().await;
            }
        }
        if self.fail_first && run == 1 {
            Err(std::io::Error::other("after the last step"))?;
        }
        Ok(Done::new(state + total).reply(total))
    }
}

async fn engine_over_sqlite(dir: &tempfile::TempDir) -> (Engine, SqliteStore) {
    let store = SqliteStore::open(&dir.path().join("deferred.db"))
        .await
        .expect("open the store");
    let mut config = EngineConfig::default();
    // A failed attempt is retried after 10 ms instead of a second.
    config.backoff_base = Duration::from_millis(10);
    let engine = Engine::new(store.clone(), turnwise::clock::SystemClock, config);
    (engine, store)
}

fn run_worker(engine: &Engine, wf: Three) -> RunningWorker {
    Worker::new(engine.clone())
        .claim_wait(Duration::from_millis(200))
        .register(wf)
        .run_async()
}

#[tokio::test]
async fn consecutive_steps_and_the_completion_share_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, store) = engine_over_sqlite(&dir).await;
    let wf = Three::default();
    let worker = run_worker(&engine, wf.clone());
    let h = wf.start(&engine, "deferred-1").await.unwrap();
    // The first call also registers the schema and sets the worker up.
    assert_eq!(h.call(1, "m1").await.unwrap(), 1 + 2 + 3);

    let before = store.stats().write_sets;
    assert_eq!(h.call(10, "m2").await.unwrap(), 10 + 11 + 12);
    let writes = store.stats().write_sets - before;
    // Admission, claim, the first step's start, then each step's checkpoint with the next
    // step's start or with the completion: six write sets, where saving each step apart
    // takes nine.
    assert_eq!(writes, 6, "write sets for one turn of three steps");

    let turn = h.turn(2).await.unwrap();
    let saved: Vec<_> = turn
        .steps
        .iter()
        .map(|s| (s.key.as_str(), s.output.clone()))
        .collect();
    assert_eq!(
        saved,
        [
            ("a", serde_json::json!(10)),
            ("b", serde_json::json!(11)),
            ("c", serde_json::json!(12))
        ],
        "every step is saved with its output"
    );
    for (i, n) in wf.executed.iter().enumerate() {
        assert_eq!(n.load(SeqCst), 2, "step {i} ran once per turn");
    }
    worker.stop().await.unwrap();
}

#[tokio::test]
async fn a_step_is_saved_before_the_handler_waits_on_anything_else() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _store) = engine_over_sqlite(&dir).await;
    let pause = Arc::new(Notify::new());
    let wf = Three {
        pause: Some(pause.clone()),
        ..Three::default()
    };
    let worker = run_worker(&engine, wf.clone());
    let h = wf.start(&engine, "deferred-2").await.unwrap();
    let number = h.send(5, "m1").await.unwrap().number;

    // The handler waits after step `a`, on a future the backend knows nothing of: step `a`
    // is saved while it waits, not deferred to the next step.
    let turn = eventually("step `a` saved while the handler waits", || {
        let h = &h;
        async move {
            let turn = h.turn(number).await.ok()?;
            (turn.steps.len() == 1).then_some(turn)
        }
    })
    .await;
    assert_eq!(turn.steps[0].key, "a");
    assert_eq!(turn.steps[0].output, serde_json::json!(5));
    assert!(
        turn.operation.is_none(),
        "no step is running while the handler waits"
    );

    pause.notify_one();
    let reply = tokio::time::timeout(GUARD, h.result(number))
        .await
        .expect("the turn completes once the handler goes on")
        .unwrap();
    assert_eq!(reply, 5 + 6 + 7);
    assert_eq!(h.turn(number).await.unwrap().steps.len(), 3);
    worker.stop().await.unwrap();
}

#[tokio::test]
async fn steps_finished_before_a_failure_are_replayed_not_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _store) = engine_over_sqlite(&dir).await;
    let wf = Three {
        fail_first: true,
        ..Three::default()
    };
    let worker = run_worker(&engine, wf.clone());
    let h = wf.start(&engine, "deferred-3").await.unwrap();
    // The first attempt fails after its last step, whose checkpoint was deferred to the
    // completion: it is saved before the failure is reported, so the retry replays it.
    let reply = tokio::time::timeout(GUARD, h.call(1, "m1"))
        .await
        .expect("the retried turn completes")
        .unwrap();
    assert_eq!(reply, 1 + 2 + 3);
    assert_eq!(wf.runs.load(SeqCst), 2, "one failed attempt, one retry");
    for (i, n) in wf.executed.iter().enumerate() {
        assert_eq!(n.load(SeqCst), 1, "step {i} ran once, then was replayed");
    }
    worker.stop().await.unwrap();
}
