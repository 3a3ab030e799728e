//! Steps through the public API: a step runs once and replays its decoded saved value, effect
//! ids, the saved entries of a turn, the step limit, heartbeats with resume cursors, and
//! progress.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Notify;
use turnwise::prelude::*;
use turnwise::protocol::{CheckpointKind, InstanceStatus, TurnStatus};
use turnwise::testing::TestEnv;

use crate::common;
use common::{eventually, GUARD};

// ---------------------------------------------------------------------------------------------
// A step runs once; its value is the decoded saved value, on the first run too.

/// A step output with a field that never reaches the store. It round-trips as JSON, but the
/// value the step returned (`scratch: 99`) differs from the decoded one (`scratch: 0`), so a
/// test can tell which one the handler got.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct Quote {
    price: u64,
    #[serde(skip)]
    scratch: u64,
}

#[derive(Default)]
struct OnceProbe {
    /// Real executions of the step body.
    executions: AtomicUsize,
    /// Runs of the handler (attempts, including replays).
    runs: AtomicUsize,
    /// What `ctx.step` returned on each run.
    seen: Mutex<Vec<Quote>>,
}

#[derive(Clone, Default)]
struct Once(Arc<OnceProbe>);

impl Workflow for Once {
    type State = u64;
    type Message = u64;
    type Reply = u64;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "once";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, state: u64, add: u64) -> TurnResult<Self> {
        let run = self.0.runs.fetch_add(1, SeqCst) + 1;
        let probe = self.0.clone();
        let quote = ctx
            .step("quote", |_s| async move {
                probe.executions.fetch_add(1, SeqCst);
                Ok(Quote {
                    price: 7 + add,
                    scratch: 99,
                })
            })
            .await?;
        self.0.seen.lock().unwrap().push(quote.clone());
        if run == 1 {
            // An ordinary error after the step: the attempt is retried with backoff.
            Err(std::io::Error::other("after the step"))?;
        }
        Ok(Done::new(state + quote.price).reply(quote.price))
    }
}

#[tokio::test]
async fn a_step_runs_once_and_replays_the_decoded_saved_value() {
    let wf = Once::default();
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "once-1").await.unwrap();
    let turn = h.send(3, "m1").await.unwrap().number;

    env.run_until_idle().await.unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!(
        t.status,
        TurnStatus::Queued,
        "the ordinary error is retried: {t:?}"
    );
    assert_eq!(t.attempt, 1);
    assert_eq!(t.error.as_deref(), Some("Error: after the step"));
    assert_eq!(t.steps.len(), 1);
    assert_eq!(
        (t.steps[0].key.as_str(), t.steps[0].kind),
        ("quote", CheckpointKind::Step)
    );
    assert_eq!(
        t.steps[0].output,
        json!({"price": 10}),
        "the store holds the encoded output"
    );
    assert_eq!(wf.0.executions.load(SeqCst), 1);

    // Nothing runs before the backoff (1 s) is over.
    assert_eq!(env.advance(Duration::from_millis(999)).await.unwrap(), 0);
    assert_eq!(wf.0.runs.load(SeqCst), 1);
    env.advance(Duration::from_millis(1)).await.unwrap();

    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Completed, "{t:?}");
    assert_eq!(t.attempt, 2);
    assert_eq!(wf.0.runs.load(SeqCst), 2);
    assert_eq!(
        wf.0.executions.load(SeqCst),
        1,
        "the step body ran once across both attempts"
    );
    let seen = wf.0.seen.lock().unwrap().clone();
    let decoded = Quote {
        price: 10,
        scratch: 0,
    };
    assert_eq!(
        seen[0], decoded,
        "the first run returns the decoded value, not the raw one"
    );
    assert_eq!(
        seen[1], seen[0],
        "the replay returns what the first run returned"
    );
    assert_eq!(h.reply(turn).await.unwrap(), Some(10));
    assert_eq!(h.state().await.unwrap(), 10);
}

// ---------------------------------------------------------------------------------------------
// Saved entries: steps, sleeps, in order, exactly as checkpointed.

#[derive(Clone, Default)]
struct Entries;

impl Workflow for Entries {
    type State = Vec<String>;
    type Message = String;
    type Reply = String;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "entries";
    const VERSION: &'static str = "v1";

    async fn run(
        &self,
        ctx: &mut Turn<Self>,
        mut state: Vec<String>,
        msg: String,
    ) -> TurnResult<Self> {
        let a = ctx
            .step("a", |_s| async move { Ok(format!("{msg}-a")) })
            .await?;
        ctx.sleep("nap", Duration::from_secs(5)).await?;
        let b = ctx
            .step("b", |_s| async move { Ok(json!({"n": [1, 2], "s": "x"})) })
            .await?;
        state.push(a.clone());
        Ok(Done::new(state).reply(format!("{a}/{b}")))
    }
}

#[tokio::test]
async fn a_turn_saves_its_steps_and_sleeps_in_order() {
    let env = TestEnv::new().register(Entries);
    let h = env.start(&Entries, "entries-1").await.unwrap();
    let turn = h.send("hi".into(), "m1").await.unwrap().number;
    env.run_until_idle().await.unwrap();
    env.advance(Duration::from_secs(5)).await.unwrap();

    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Completed, "{t:?}");
    let got: Vec<_> = t
        .steps
        .iter()
        .map(|s| {
            (
                s.key.as_str(),
                s.kind,
                s.output.clone(),
                s.delay_ms,
                s.signal_name.clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("a", CheckpointKind::Step, json!("hi-a"), None, None),
            ("nap", CheckpointKind::Sleep, json!(null), Some(5000), None),
            (
                "b",
                CheckpointKind::Step,
                json!({"n": [1, 2], "s": "x"}),
                None,
                None
            ),
        ]
    );
    assert_eq!(
        h.reply(turn).await.unwrap().as_deref(),
        Some(r#"hi-a/{"n":[1,2],"s":"x"}"#)
    );
}

// ---------------------------------------------------------------------------------------------
// Effect ids.

#[derive(Default)]
struct EffectProbe {
    /// `StepCtx::effect_id` of every real execution of step `charge`.
    step_ids: Mutex<Vec<String>>,
    /// `Turn::effect_id("charge")` on every run of the handler.
    ctx_ids: Mutex<Vec<String>>,
    /// `StepCtx::effect_id` of step `receipt`.
    receipt_ids: Mutex<Vec<String>>,
    /// The step key and fence seen inside the step: (key, workflow id, turn).
    fences: Mutex<Vec<(String, String, u64)>>,
    executions: AtomicUsize,
}

#[derive(Clone, Default)]
struct Effects(Arc<EffectProbe>);

impl Workflow for Effects {
    type State = u64;
    type Message = u64;
    type Reply = String;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "effects";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, state: u64, msg: u64) -> TurnResult<Self> {
        assert_eq!(ctx.workflow_id(), "effects-1");
        assert_eq!(ctx.turn_number(), msg, "message n is sent as turn n");
        self.0.ctx_ids.lock().unwrap().push(ctx.effect_id("charge"));
        let probe = self.0.clone();
        let id = ctx
            .step("charge", |s| async move {
                probe
                    .step_ids
                    .lock()
                    .unwrap()
                    .push(s.effect_id().to_owned());
                let fence = s.fence();
                let seen = (s.key().to_owned(), fence.workflow_id.clone(), fence.turn);
                probe.fences.lock().unwrap().push(seen);
                // The first execution ever fails inside the step: the attempt is retried and
                // the step runs again under the same effect id.
                if probe.executions.fetch_add(1, SeqCst) == 0 {
                    return Err(TurnError::retry("the payment provider timed out"));
                }
                Ok(s.effect_id().to_owned())
            })
            .await?;
        let probe = self.0.clone();
        ctx.step("receipt", |s| async move {
            probe
                .receipt_ids
                .lock()
                .unwrap()
                .push(s.effect_id().to_owned());
            Ok(())
        })
        .await?;
        Ok(Done::new(state + msg).reply(id))
    }
}

#[tokio::test]
async fn effect_ids_are_prefix_slash_key_stable_across_attempts_and_new_per_turn() {
    let wf = Effects::default();
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "effects-1").await.unwrap();
    let t1 = h.send(1, "m1").await.unwrap().number;
    let t2 = h.send(2, "m2").await.unwrap().number;

    env.run_until_idle().await.unwrap();
    assert_eq!(h.turn(t1).await.unwrap().attempt, 1);
    env.advance(Duration::from_secs(1)).await.unwrap();
    assert_eq!(h.turn(t1).await.unwrap().status, TurnStatus::Completed);
    assert_eq!(h.turn(t2).await.unwrap().status, TurnStatus::Completed);

    let step_ids = wf.0.step_ids.lock().unwrap().clone();
    let ctx_ids = wf.0.ctx_ids.lock().unwrap().clone();
    let receipts = wf.0.receipt_ids.lock().unwrap().clone();
    assert_eq!(
        step_ids.len(),
        3,
        "two attempts of turn 1, one of turn 2: {step_ids:?}"
    );
    assert_eq!(
        step_ids[0], step_ids[1],
        "identical across attempts of a turn"
    );
    assert_ne!(step_ids[1], step_ids[2], "different across turns");
    assert_eq!(
        ctx_ids, step_ids,
        "Turn::effect_id agrees with StepCtx::effect_id"
    );

    for (id, receipt) in [(&step_ids[1], &receipts[0]), (&step_ids[2], &receipts[1])] {
        let (prefix, key) = id.split_once('/').expect("<effect_prefix>/<key>");
        assert_eq!(key, "charge");
        assert!(!prefix.is_empty(), "{id}");
        assert_eq!(
            receipt,
            &format!("{prefix}/receipt"),
            "one prefix for every step of a turn"
        );
    }
    // The saved output is the effect id the step saw, and the reply is that output.
    assert_eq!(h.reply(t1).await.unwrap(), Some(step_ids[1].clone()));
    assert_eq!(
        h.turn(t1).await.unwrap().steps[0].output,
        json!(step_ids[1])
    );

    let fences = wf.0.fences.lock().unwrap().clone();
    assert_eq!(fences[0], ("charge".to_owned(), "effects-1".to_owned(), t1));
    assert_eq!(fences[2], ("charge".to_owned(), "effects-1".to_owned(), t2));
}

// ---------------------------------------------------------------------------------------------
// The step limit.

#[derive(Clone, Default)]
struct Many;

impl Workflow for Many {
    type State = u64;
    type Message = usize;
    type Reply = u64;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "many";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, _state: u64, steps: usize) -> TurnResult<Self> {
        let mut sum = 0;
        for i in 0..steps {
            sum += ctx
                .step(format!("s{i}"), |_s| async move { Ok(i as u64) })
                .await?;
        }
        Ok(Done::new(sum).reply(sum))
    }
}

#[tokio::test]
async fn a_turn_holds_at_most_64_steps() {
    let env = TestEnv::new().register(Many);
    let h = env.start(&Many, "many-1").await.unwrap();
    let ok = h.send(64, "sixty-four").await.unwrap().number;
    let over = h.send(65, "sixty-five").await.unwrap().number;
    env.run_until_idle().await.unwrap();

    assert_eq!(h.reply(ok).await.unwrap(), Some((0..64).sum()));
    let t = h.turn(over).await.unwrap();
    assert_eq!(t.status, TurnStatus::Failed, "{t:?}");
    assert_eq!(
        t.attempt, 1,
        "the limit fails the turn for good, with no retry"
    );
    let err = t.error.unwrap();
    assert!(err.starts_with("WorkflowError: "), "{err}");
    assert!(
        err.contains("position 64") && err.contains("64 steps"),
        "{err}"
    );
    assert_eq!(t.steps.len(), 64);
}

// ---------------------------------------------------------------------------------------------
// Heartbeats and resume cursors.

#[derive(Default)]
struct CursorProbe {
    /// `checkpoint::<u32>()` at the start of every execution of the step.
    cursors: Mutex<Vec<Option<u32>>>,
    executions: AtomicUsize,
}

#[derive(Clone, Default)]
struct Crawl(Arc<CursorProbe>);

impl Workflow for Crawl {
    type State = u32;
    type Message = u32;
    type Reply = u32;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "crawl";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, _state: u32, pages: u32) -> TurnResult<Self> {
        let probe = self.0.clone();
        let read = ctx
            .step("crawl", |s| async move {
                let start = s.checkpoint::<u32>();
                probe.cursors.lock().unwrap().push(start);
                let first = probe.executions.fetch_add(1, SeqCst) == 0;
                let mut read = 0;
                for page in start.unwrap_or(0)..pages {
                    s.progress(
                        "reading pages",
                        u64::from(page),
                        Some(u64::from(pages)),
                        "pages",
                    );
                    read += 1;
                    s.heartbeat(page + 1).await?;
                    // The first execution crashes after page 2 is saved.
                    if first && page == 2 {
                        return Err(TurnError::retry("the crawler crashed"));
                    }
                }
                Ok(read)
            })
            .await?;
        Ok(Done::new(read).reply(read))
    }
}

#[tokio::test]
async fn a_heartbeat_cursor_is_read_back_by_the_next_attempt_of_the_step() {
    let wf = Crawl::default();
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "crawl-1").await.unwrap();
    let turn = h.send(5, "m1").await.unwrap().number;

    env.run_until_idle().await.unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Queued, "{t:?}");
    assert_eq!(t.error.as_deref(), Some("Error: the crawler crashed"));
    assert!(t.steps.is_empty(), "the step was not saved");

    env.advance(Duration::from_secs(1)).await.unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Completed, "{t:?}");
    assert_eq!(*wf.0.cursors.lock().unwrap(), vec![None, Some(3)]);
    // Pages 3 and 4 were read by the second execution.
    assert_eq!(h.reply(turn).await.unwrap(), Some(2));
}

// ---------------------------------------------------------------------------------------------
// Progress.

#[derive(Default)]
struct ProgressProbe {
    entered: Notify,
    gate: Notify,
    executions: AtomicUsize,
}

#[derive(Clone, Default)]
struct Report(Arc<ProgressProbe>);

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
enum Mode {
    /// Report progress, wait for the gate, finish.
    Gated,
    /// Report progress, then fail (ordinary error) on the first execution.
    FailOnce,
    /// Report progress with an empty phase.
    EmptyPhase,
    /// Report progress with a unit the convention refuses.
    BadUnit,
    /// Report progress, save a resume cursor with a heartbeat, then fail on the first execution.
    HeartbeatThenFail,
}

impl Workflow for Report {
    type State = ();
    type Message = Mode;
    type Reply = ();
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "report";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, _state: (), mode: Mode) -> TurnResult<Self> {
        let probe = self.0.clone();
        ctx.step("index", |s| async move {
            let n = probe.executions.fetch_add(1, SeqCst);
            match mode {
                Mode::Gated => {
                    s.progress("indexing", 1, Some(3), "documents");
                    probe.entered.notify_one();
                    probe.gate.notified().await;
                }
                Mode::FailOnce => {
                    s.progress("indexing", 2, Some(3), "documents");
                    if n == 0 {
                        return Err(TurnError::retry("index unavailable"));
                    }
                }
                Mode::HeartbeatThenFail => {
                    s.progress("indexing", 2, Some(3), "documents");
                    s.heartbeat(2u32).await?;
                    if n == 0 {
                        return Err(TurnError::retry("index unavailable"));
                    }
                }
                Mode::EmptyPhase => s.progress("", 1, None, ""),
                Mode::BadUnit => s.progress("indexing", 1, None, "docs!"),
            }
            Ok(())
        })
        .kind(OperationKind::Tool)
        .await?;
        Ok(Done::new(()))
    }
}

#[tokio::test]
async fn progress_shows_on_the_instance_while_the_step_runs() {
    let wf = Report::default();
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "report-1").await.unwrap();
    let turn = h.send(Mode::Gated, "m1").await.unwrap().number;

    let worker = env.worker().clone();
    let running = tokio::spawn(async move { worker.run_once().await });
    tokio::time::timeout(GUARD, wf.0.entered.notified())
        .await
        .expect("the step started");

    let inst = eventually("progress on the instance", || async {
        let inst = h.instance().await.unwrap();
        inst.progress.is_some().then_some(inst)
    })
    .await;
    let p = inst.progress.clone().unwrap();
    assert_eq!(
        (p.phase.as_str(), p.done, p.total, p.unit.as_deref()),
        ("indexing", 1, Some(3), Some("documents"))
    );
    assert_eq!(inst.status, InstanceStatus::Running);
    let op = inst
        .current_turn
        .as_ref()
        .unwrap()
        .operation
        .clone()
        .expect("a running operation");
    assert_eq!((op.key.as_str(), op.kind), ("index", OperationKind::Tool));
    assert_eq!(op.sequence, 1, "one progress write so far");

    wf.0.gate.notify_one();
    assert!(tokio::time::timeout(GUARD, running)
        .await
        .unwrap()
        .unwrap()
        .unwrap());
    assert_eq!(h.turn(turn).await.unwrap().status, TurnStatus::Completed);
    assert!(
        h.instance().await.unwrap().progress.is_none(),
        "progress only shows while running"
    );
}

#[tokio::test]
async fn a_retried_turn_keeps_the_last_progress_of_its_failed_step() {
    let wf = Report::default();
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "report-2").await.unwrap();
    let turn = h.send(Mode::FailOnce, "m1").await.unwrap().number;

    env.run_until_idle().await.unwrap();
    let t = h.turn(turn).await.unwrap();
    assert_eq!(t.status, TurnStatus::Queued, "{t:?}");
    let p = t.progress.expect("the last progress of the failed attempt");
    assert_eq!(
        (p.phase.as_str(), p.done, p.total, p.unit.as_deref()),
        ("indexing", 2, Some(3), Some("documents"))
    );

    env.advance(Duration::from_secs(1)).await.unwrap();
    assert_eq!(h.turn(turn).await.unwrap().status, TurnStatus::Completed);
    assert_eq!(wf.0.executions.load(SeqCst), 2);
}

#[tokio::test]
async fn a_heartbeat_keeps_the_progress_it_follows() {
    let wf = Report::default();
    let env = TestEnv::new().register(wf.clone());
    let h = env.start(&wf, "report-hb").await.unwrap();
    let turn = h.send(Mode::HeartbeatThenFail, "m1").await.unwrap().number;

    env.run_until_idle().await.unwrap();
    let t = h.turn(turn).await.unwrap();
    let p = t
        .progress
        .expect("the heartbeat repeated the last progress details instead of wiping them");
    assert_eq!((p.phase.as_str(), p.done), ("indexing", 2));
}

#[tokio::test]
async fn progress_that_breaks_the_convention_fails_the_step_for_good() {
    let wf = Report::default();
    let env = TestEnv::new().register(wf.clone());
    for (id, mode, field) in [
        ("empty-phase", Mode::EmptyPhase, "phase"),
        ("bad-unit", Mode::BadUnit, "unit"),
    ] {
        let h = env.start(&wf, id).await.unwrap();
        let turn = h.send(mode, "m1").await.unwrap().number;
        env.run_until_idle().await.unwrap();
        let t = h.turn(turn).await.unwrap();
        assert_eq!(t.status, TurnStatus::Failed, "{t:?}");
        assert_eq!(t.attempt, 1, "no retry");
        let err = t.error.unwrap();
        assert!(err.starts_with("WorkflowError: step `index`"), "{err}");
        assert!(err.contains(&format!("progress `{field}`")), "{err}");
        assert!(t.steps.is_empty(), "the step was not saved");
    }
}
