//! Real worker processes, real signals (wire §3.10–3.12).
//!
//! Every parent test re-runs this test binary as its child worker (`current_exe()` with
//! `--exact worker_process::<child> --nocapture --ignored`); a child test does nothing unless its environment
//! variables are set. Children print one `@@tw <event>` line per event on stdout, which the
//! parent reads on threads and waits for, always with a generous timeout. An SQLite file is
//! written by one process at a time: the parent opens it only while no child runs.
//!
//! - `sigterm_drains_held_turn`: SIGTERM lets the held turn finish, claims nothing more and the
//!   worker exits by itself.
//! - `drain_timeout_releases_turn`: a turn still held when the drain time ends is released
//!   (a retry wait of one second, no attempt counted).
//! - `sigint_releases_at_once`: SIGINT releases the held turn without draining.
//! - `sigkill_again_and_again_loses_nothing`: worker processes are SIGKILLed mid-turn, again and
//!   again; another worker finishes; saved steps never rerun, interrupted steps rerun with the
//!   same effect id, and the final state is exactly the fold of every message.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::common::Rng;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;
use turnwise::protocol::{CheckpointKind, InstanceStatus, TurnStatus, WorkflowTurn};

/// How long the parent waits for anything a child should do soon.
const PATIENCE: Duration = Duration::from_secs(20);
/// A child that is still alive after this exits by itself.
const CHILD_WATCHDOG: Duration = Duration::from_secs(60);
/// The event marker on a child's stdout (libtest may print before it on the same line).
const MARK: &str = "@@tw ";

const ENV_DB: &str = "TURNWISE_WP_DB";
const ENV_GATE: &str = "TURNWISE_WP_GATE";
const ENV_DRAIN_MS: &str = "TURNWISE_WP_DRAIN_MS";
const ENV_LOG: &str = "TURNWISE_WP_LOG";
/// Set to replay the crash test's kill schedule.
const ENV_SEED: &str = "TURNWISE_CRASH_SEED";

const RELEASED: &str = "the worker stopped and released the turn";

// ---------------------------------------------------------------------------------------------
// Shared helpers

/// Print one event line on stdout, flushed (in a child only: the parent runs the same
/// workflows in-process to finish and inspect, quietly).
fn emit(event: &str) {
    if std::env::var_os(ENV_DB).is_none() {
        return;
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(format!("{MARK}{event}\n").as_bytes());
    let _ = out.flush();
}

/// Append one line to a log file and put it on disk before going on.
fn append(path: &Path, line: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.write_all(format!("{line}\n").as_bytes())?;
    f.flush()?;
    f.sync_data()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Exit the process if it is still running after `after` (a child never outlives its test).
fn watchdog(after: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(after);
        emit("watchdog: exiting");
        std::process::exit(3);
    });
}

/// A tracing subscriber that prints every event as a `log` line, so the parent sees when the
/// worker itself has handled a signal.
struct EventLog;

impl tracing::Subscriber for EventLog {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Fields(String);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    let _ = write!(self.0, " {value:?}");
                } else {
                    let _ = write!(self.0, " {}={value:?}", field.name());
                }
            }
        }
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        emit(&format!("log {}{}", event.metadata().level(), fields.0));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// A child process of this test binary, with its output lines arriving on a channel.
struct ChildProc {
    name: &'static str,
    child: Child,
    lines: mpsc::Receiver<String>,
    /// Every line read so far (events and libtest's own output), for checks and diagnostics.
    seen: Vec<String>,
    exited: Option<ExitStatus>,
}

impl ChildProc {
    fn spawn(name: &'static str, envs: &[(&str, OsString)]) -> Self {
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut cmd = Command::new(exe);
        cmd.arg("--exact")
            .arg(crate::common::test_name(module_path!(), name))
            .args(["--nocapture", "--ignored"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawning the child worker");
        let (tx, lines) = mpsc::channel();
        fn pump(from: impl Read + Send + 'static, prefix: &'static str, tx: mpsc::Sender<String>) {
            std::thread::spawn(move || {
                for line in BufReader::new(from).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(format!("{prefix}{line}")).is_err() {
                        break;
                    }
                }
            });
        }
        pump(child.stdout.take().expect("piped stdout"), "", tx.clone());
        pump(child.stderr.take().expect("piped stderr"), "stderr: ", tx);
        Self {
            name,
            child,
            lines,
            seen: Vec::new(),
            exited: None,
        }
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    fn events(&self) -> impl Iterator<Item = &str> {
        self.seen
            .iter()
            .filter_map(|l| l.find(MARK).map(|i| &l[i + MARK.len()..]))
    }

    fn transcript(&self) -> String {
        self.seen.join("\n")
    }

    /// Wait for an event matching `want`; `None` when the child ended or `within` passed.
    fn try_wait_event(&mut self, within: Duration, want: impl Fn(&str) -> bool) -> Option<String> {
        let until = Instant::now() + within;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let event = line.find(MARK).map(|i| line[i + MARK.len()..].to_owned());
                    self.seen.push(line);
                    if let Some(e) = event.filter(|e| want(e)) {
                        return Some(e);
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    fn wait_event(&mut self, what: &str, want: impl Fn(&str) -> bool) -> String {
        match self.try_wait_event(PATIENCE, want) {
            Some(e) => e,
            None => panic!(
                "{}: no event `{what}` within {PATIENCE:?}; output:\n{}",
                self.name,
                self.transcript()
            ),
        }
    }

    /// `kill -<sig> <pid>`.
    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([format!("-{sig}"), self.pid()])
            .status()
            .expect("running kill");
        assert!(
            status.success(),
            "kill -{sig} {} failed: {status}",
            self.pid()
        );
    }

    /// Wait until the child has closed its output and exited.
    fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let until = Instant::now() + within;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "{}: still running after {within:?}; output:\n{}",
                        self.name,
                        self.transcript()
                    )
                }
            }
        }
        let status = self.child.wait().expect("waiting for the child");
        self.exited = Some(status);
        status
    }

    /// SIGKILL and reap.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let status = self.child.wait().expect("waiting for the killed child");
        self.exited = Some(status);
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(line);
        }
    }
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Signals: a turn whose only step waits for a gate file

#[derive(Serialize, Deserialize, Default, Debug, PartialEq)]
struct Total {
    total: u64,
}

/// One step that waits until the gate file exists (polled every 20 ms, 30 s at most).
struct Gated {
    gate: PathBuf,
}

impl Workflow for Gated {
    type State = Total;
    type Message = u64;
    type Reply = u64;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "gated";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, state: Total, add: u64) -> TurnResult<Self> {
        let gate = self.gate.clone();
        let turn = ctx.turn_number();
        let add = ctx
            .step("wait-gate", move |_s| async move {
                emit(&format!("step-started turn={turn}"));
                let give_up = Instant::now() + Duration::from_secs(30);
                while !gate.exists() {
                    if Instant::now() > give_up {
                        return Err(TurnError::retry("the gate never opened"));
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                emit(&format!("step-done turn={turn}"));
                Ok(add)
            })
            .await?;
        let total = state.total + add;
        Ok(Done::new(Total { total }).reply(total))
    }
}

/// The child of the signal tests: `Worker::run()` over the db until a signal stops it.
#[test]
#[ignore = "child process of sigterm_drains_held_turn, drain_timeout_releases_turn and sigint_releases_at_once"]
fn child_signal_worker() {
    let Some(db) = std::env::var_os(ENV_DB) else {
        return;
    };
    let gate = PathBuf::from(std::env::var_os(ENV_GATE).expect("the gate path"));
    let drain: u64 = std::env::var(ENV_DRAIN_MS)
        .expect("the drain time")
        .parse()
        .expect("drain ms");
    watchdog(CHILD_WATCHDOG);
    tracing::subscriber::set_global_default(EventLog).expect("the only subscriber");
    runtime().block_on(async move {
        let engine = Engine::open(&db).await.expect("opening the db");
        let worker = Worker::new(engine)
            .register(Gated { gate })
            .id("signal-child")
            .concurrency(1)
            .drain(Duration::from_millis(drain));
        emit("worker-running");
        let r = worker.run().await;
        emit(&format!("worker-returned ok={}", r.is_ok()));
        r.expect("the worker ends without error");
    });
}

/// Create instance `gated-1` with two messages (1 and 2) and close the db again.
fn setup_gated(db: &Path, gate: &Path) {
    runtime().block_on(async {
        let engine = Engine::open(db).await.unwrap();
        let h = Gated {
            gate: gate.to_owned(),
        }
        .start(&engine, "gated-1")
        .await
        .unwrap();
        h.send(1, "m1").await.unwrap();
        h.send(2, "m2").await.unwrap();
    });
}

/// Read both turns and the instance, in the parent, with no child running.
fn read_gated(db: &Path, gate: &Path) -> (WorkflowTurn, WorkflowTurn, Total) {
    runtime().block_on(async {
        let engine = Engine::open(db).await.unwrap();
        let h = Gated {
            gate: gate.to_owned(),
        }
        .handle(&engine, "gated-1");
        (
            h.turn(1).await.unwrap(),
            h.turn(2).await.unwrap(),
            h.state().await.unwrap(),
        )
    })
}

/// Turn 2 was admitted before the signal and never claimed.
fn assert_untouched(t2: &WorkflowTurn, child: &ChildProc) {
    assert_eq!(t2.status, TurnStatus::Queued, "turn 2: {t2:?}");
    assert_eq!(t2.attempt, 0, "turn 2 was claimed after the signal: {t2:?}");
    assert!(t2.steps.is_empty() && t2.worker.is_none(), "turn 2: {t2:?}");
    assert!(
        !child.events().any(|e| e.starts_with("step-started turn=2")),
        "turn 2 ran after the signal:\n{}",
        child.transcript()
    );
}

/// Turn 1 was released by the stop: a retry wait of exactly one second, no attempt counted,
/// the release error, nothing saved.
fn assert_released(t1: &WorkflowTurn) {
    assert_eq!(t1.status, TurnStatus::Waiting, "turn 1: {t1:?}");
    assert_eq!(t1.error.as_deref(), Some(RELEASED), "turn 1: {t1:?}");
    let wait = t1
        .wait
        .as_ref()
        .unwrap_or_else(|| panic!("turn 1 has no wait: {t1:?}"));
    assert_eq!(wait.reason, None, "a release is a retry wait: {t1:?}");
    assert_eq!(
        wait.until_ms - wait.since_ms,
        1000,
        "released for one second: {t1:?}"
    );
    assert_eq!(t1.ready_at_ms, wait.until_ms);
    assert_eq!(t1.attempt, 1, "the release counted an attempt: {t1:?}");
    assert!(t1.steps.is_empty(), "the step never finished: {t1:?}");
}

/// After a release: the turn is claimable again (woken now) and finishes without another
/// attempt being counted; then turn 2 runs too.
fn finish_released(db: &Path, gate: &Path) {
    std::fs::write(gate, b"open").unwrap();
    runtime().block_on(async {
        let engine = Engine::open(db).await.unwrap();
        let h = Gated {
            gate: gate.to_owned(),
        }
        .handle(&engine, "gated-1");
        h.wake().await.unwrap();
        let worker = Worker::new(engine.clone()).register(Gated {
            gate: gate.to_owned(),
        });
        assert_eq!(worker.run_until_idle().await.unwrap(), 2);
        let t1 = h.turn(1).await.unwrap();
        assert_eq!(
            (t1.status, t1.attempt),
            (TurnStatus::Completed, 1),
            "turn 1: {t1:?}"
        );
        assert_eq!(h.state().await.unwrap(), Total { total: 3 });
    });
}

/// Spawn the signal child over a fresh db and wait until it runs turn 1's step.
fn start_signal_child(dir: &Path, drain: Duration) -> (PathBuf, PathBuf, ChildProc) {
    let db = dir.join("turnwise.db");
    let gate = dir.join("gate");
    setup_gated(&db, &gate);
    let mut child = ChildProc::spawn(
        "child_signal_worker",
        &[
            (ENV_DB, db.clone().into()),
            (ENV_GATE, gate.clone().into()),
            (ENV_DRAIN_MS, drain.as_millis().to_string().into()),
        ],
    );
    child.wait_event("step-started turn=1", |e| e == "step-started turn=1");
    (db, gate, child)
}

#[test]
fn sigterm_drains_held_turn() {
    let dir = tempfile::tempdir().unwrap();
    let (db, gate, mut child) = start_signal_child(dir.path(), Duration::from_secs(10));
    child.signal("TERM");
    // The worker has taken the SIGTERM (it logs it as it starts draining) before the step may end.
    child.wait_event("SIGTERM handled", |e| {
        e.starts_with("log ") && e.contains("SIGTERM")
    });
    let opened = Instant::now();
    std::fs::write(&gate, b"open").unwrap();
    let status = child.wait_exit(PATIENCE);
    let took = opened.elapsed();
    assert!(
        status.success(),
        "the child failed: {status}\n{}",
        child.transcript()
    );
    assert!(
        took < Duration::from_secs(5),
        "the worker waited out its drain ({took:?}) instead of exiting"
    );
    assert!(
        child.events().any(|e| e == "step-done turn=1"),
        "{}",
        child.transcript()
    );
    assert!(
        child.events().any(|e| e == "worker-returned ok=true"),
        "{}",
        child.transcript()
    );

    let (t1, t2, state) = read_gated(&db, &gate);
    assert_eq!(t1.status, TurnStatus::Completed, "turn 1: {t1:?}");
    assert_eq!(t1.attempt, 1, "turn 1: {t1:?}");
    assert_eq!(t1.result, serde_json::json!(1));
    assert_eq!(t1.steps.len(), 1);
    assert_eq!(state, Total { total: 1 });
    assert_untouched(&t2, &child);
}

#[test]
fn drain_timeout_releases_turn() {
    let dir = tempfile::tempdir().unwrap();
    let (db, gate, mut child) = start_signal_child(dir.path(), Duration::from_millis(500));
    let signalled = Instant::now();
    child.signal("TERM");
    let status = child.wait_exit(PATIENCE);
    let took = signalled.elapsed();
    assert!(
        status.success(),
        "the child failed: {status}\n{}",
        child.transcript()
    );
    assert!(
        took >= Duration::from_millis(500),
        "released before the drain time ended ({took:?})"
    );
    assert!(
        took < Duration::from_secs(5),
        "the drain time was not kept ({took:?})"
    );
    assert!(
        !child.events().any(|e| e.starts_with("step-done")),
        "{}",
        child.transcript()
    );

    let (t1, t2, state) = read_gated(&db, &gate);
    assert_released(&t1);
    assert_eq!(state, Total { total: 0 });
    assert_untouched(&t2, &child);
    finish_released(&db, &gate);
}

#[test]
fn sigint_releases_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (db, gate, mut child) = start_signal_child(dir.path(), Duration::from_secs(10));
    let signalled = Instant::now();
    child.signal("INT");
    let status = child.wait_exit(PATIENCE);
    let took = signalled.elapsed();
    assert!(
        status.success(),
        "the child failed: {status}\n{}",
        child.transcript()
    );
    assert!(
        took < Duration::from_secs(3),
        "SIGINT did not release at once ({took:?})"
    );
    assert!(
        child
            .events()
            .any(|e| e.starts_with("log ") && e.contains("SIGINT")),
        "{}",
        child.transcript()
    );
    assert!(
        !child.events().any(|e| e.starts_with("step-done")),
        "{}",
        child.transcript()
    );

    let (t1, t2, state) = read_gated(&db, &gate);
    assert_released(&t1);
    assert_eq!(state, Total { total: 0 });
    assert_untouched(&t2, &child);
    finish_released(&db, &gate);
}

// ---------------------------------------------------------------------------------------------
// Crashes: SIGKILL a worker process mid-turn, again and again

const INSTANCE: &str = "crash-1";
const MESSAGES: u64 = 20;
const KEYS: [&str; 3] = ["a", "b", "c"];
const MIN_ROUNDS: usize = 10;
const MAX_ROUNDS: usize = 25;

#[derive(Serialize, Deserialize, Default, Debug, PartialEq, Clone, Copy)]
struct Fold {
    acc: u64,
    count: u64,
}

fn message(i: u64) -> u64 {
    i * 7 + 3
}

/// A step's output: a function of the step key and its input only.
fn step_out(key: &str, input: u64) -> u64 {
    match key {
        "a" => input * 2 + 1,
        "b" => (input * 3) ^ 0x55,
        "c" => input + 1000,
        _ => unreachable!("unknown key {key}"),
    }
}

/// The outputs of a, b and c for a message.
fn outputs(m: u64) -> [u64; 3] {
    let a = step_out("a", m);
    let b = step_out("b", a);
    [a, b, step_out("c", b)]
}

/// Order-sensitive, so a lost, doubled or reordered turn shows.
fn fold(state: Fold, c: u64) -> Fold {
    Fold {
        acc: state.acc.wrapping_mul(1_000_003).wrapping_add(c),
        count: state.count + 1,
    }
}

/// A random 5–40 ms, from a per-process generator.
fn step_pause() -> Duration {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let mut x = STATE.load(Ordering::Relaxed);
    if x == 0 {
        x = crate::common::clock_seed();
    }
    let mut rng = Rng::new(x);
    let ms = rng.between(5, 40);
    STATE.store(rng.state(), Ordering::Relaxed);
    Duration::from_millis(ms)
}

/// Three steps per turn; each step body logs an `effect` line, after a `saved-before` line
/// saying that the step before it is saved: a step's body runs only once its operation was
/// written, and the step before it is saved in that same write (its checkpoint travels with
/// the next durable call). Turn `t`'s first step thus proves turn `t - 1`'s last one saved.
struct Crashy {
    log: PathBuf,
}

impl Workflow for Crashy {
    type State = Fold;
    type Message = u64;
    type Reply = u64;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "crashy";
    const VERSION: &'static str = "v1";

    fn options(&self) -> WorkflowOptions {
        WorkflowOptions::default()
            .lease(Duration::from_millis(300))
            .max_attempts(100)
    }

    async fn run(&self, ctx: &mut Turn<Self>, state: Fold, m: u64) -> TurnResult<Self> {
        let turn = ctx.turn_number();
        let mut input = m;
        for key in KEYS {
            let log = self.log.clone();
            let out = ctx
                .step(key, move |s| async move {
                    append(&log, &format!("saved-before turn={turn} key={key}"))?;
                    let out = step_out(key, input);
                    let line = format!("effect {} turn={turn} key={key} out={out}", s.effect_id());
                    append(&log, &line)?;
                    emit(&line);
                    tokio::time::sleep(step_pause()).await;
                    Ok(out)
                })
                .await?;
            input = out;
        }
        Ok(Done::new(fold(state, input)).reply(input))
    }
}

/// The crash test's child: `Worker::run()` until it is killed.
#[test]
#[ignore = "child process of sigkill_again_and_again_loses_nothing"]
fn child_crash_worker() {
    let Some(db) = std::env::var_os(ENV_DB) else {
        return;
    };
    let log = PathBuf::from(std::env::var_os(ENV_LOG).expect("the log path"));
    watchdog(CHILD_WATCHDOG);
    runtime().block_on(async move {
        let engine = Engine::open(&db).await.expect("opening the db");
        let worker = Worker::new(engine).register(Crashy { log }).concurrency(1);
        emit("worker-running");
        worker.run().await.expect("the worker ends without error");
    });
}

#[derive(Debug)]
enum Entry {
    Effect {
        id: String,
        turn: u64,
        key: String,
        out: u64,
    },
    /// The step before `key` of `turn` is saved (for `a`: the last step of `turn - 1`).
    SavedBefore { turn: u64, key: String },
}

impl Entry {
    /// The step (turn, index in [`KEYS`]) a `saved-before` line proves saved, if any.
    fn saved_step(&self) -> Option<(u64, usize)> {
        let Entry::SavedBefore { turn, key } = self else {
            return None;
        };
        match KEYS.iter().position(|k| k == key) {
            Some(0) if *turn > 1 => Some((turn - 1, KEYS.len() - 1)),
            Some(0) => None,
            Some(k) => Some((*turn, k - 1)),
            None => panic!("unknown key in {self:?}"),
        }
    }
}

fn malformed<T>(line: &str) -> T {
    panic!("malformed log line {line:?}")
}

fn read_log(path: &Path) -> Vec<Entry> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|line| {
            let field = |w: &str, name: &str| -> u64 {
                w.strip_prefix(name)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| malformed(line))
            };
            match line.split(' ').collect::<Vec<_>>().as_slice() {
                ["effect", id, turn, key, out] => Entry::Effect {
                    id: (*id).to_owned(),
                    turn: field(turn, "turn="),
                    key: key
                        .strip_prefix("key=")
                        .unwrap_or_else(|| malformed(line))
                        .to_owned(),
                    out: field(out, "out="),
                },
                ["saved-before", turn, key] => Entry::SavedBefore {
                    turn: field(turn, "turn="),
                    key: key
                        .strip_prefix("key=")
                        .unwrap_or_else(|| malformed(line))
                        .to_owned(),
                },
                _ => malformed(line),
            }
        })
        .collect()
}

/// Effect ids with more than one `effect` line: steps interrupted and run again.
fn rerun_ids(log: &[Entry]) -> usize {
    let mut runs: HashMap<&str, usize> = HashMap::new();
    for e in log {
        if let Entry::Effect { id, .. } = e {
            *runs.entry(id).or_default() += 1;
        }
    }
    runs.values().filter(|n| **n > 1).count()
}

#[test]
fn sigkill_again_and_again_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("turnwise.db");
    let log = dir.path().join("effects.log");
    let mut rng = Rng::seeded("sigkill_again_and_again_loses_nothing", ENV_SEED);

    runtime().block_on(async {
        let engine = Engine::open(&db).await.unwrap();
        let h = Crashy { log: log.clone() }
            .start(&engine, INSTANCE)
            .await
            .unwrap();
        for i in 1..=MESSAGES {
            h.send(message(i), format!("m{i}")).await.unwrap();
        }
    });

    // Kill rounds: each child runs a random 50–300 ms from its first step, then is SIGKILLed.
    let envs = [(ENV_DB, db.clone().into()), (ENV_LOG, log.clone().into())];
    let mut rounds = 0;
    loop {
        rounds += 1;
        let mut child = ChildProc::spawn("child_crash_worker", &envs);
        let working = child.try_wait_event(Duration::from_secs(5), |e| e.starts_with("effect "));
        let ran = rng.between(50, 300);
        if working.is_some() {
            std::thread::sleep(Duration::from_millis(ran));
        }
        child.kill();
        assert!(
            child.events().any(|e| e == "worker-running"),
            "round {rounds}: the child never ran:\n{}",
            child.transcript()
        );
        let entries = read_log(&log);
        let reruns = rerun_ids(&entries);
        let saved_c = entries
            .iter()
            .filter_map(Entry::saved_step)
            .filter(|(_, k)| *k == KEYS.len() - 1)
            .collect::<HashSet<_>>()
            .len();
        println!(
            "round {rounds}: {} ms after the first step, killed ({}); {} log lines, {reruns} step(s) rerun so far, \
             {saved_c} turn(s) saved their last step",
            if working.is_some() { ran } else { 0 },
            child.exited.map_or("?".into(), |s| s.to_string()),
            entries.len(),
        );
        // The last turn's last step has no later step to prove it saved.
        if working.is_none() || saved_c as u64 >= MESSAGES - 1 {
            break; // nothing left to interrupt
        }
        if rounds >= MAX_ROUNDS || (rounds >= MIN_ROUNDS && reruns > 0) {
            break;
        }
    }

    // Another worker (in this process, the only one on the file now) finishes every turn.
    runtime().block_on(async {
        let engine = Engine::open(&db).await.unwrap();
        let h = Crashy { log: log.clone() }.handle(&engine, INSTANCE);
        let worker = Worker::new(engine.clone()).register(Crashy { log: log.clone() }).id("finisher");
        let give_up = Instant::now() + Duration::from_secs(30);
        loop {
            worker.run_until_idle().await.unwrap();
            let inst = h.instance().await.unwrap();
            if inst.pending_messages == 0 {
                break;
            }
            assert_ne!(inst.status, InstanceStatus::Failed, "a turn failed for good: {inst:?}");
            assert!(Instant::now() < give_up, "turns left unfinished after 30 s: {inst:?}");
            // A killed holder's lease (300 ms) has to run out first.
            tokio::time::sleep(Duration::from_millis(25)).await;
        }

        // The db: every turn completed once, in order, with exactly the expected steps.
        let inst = h.instance().await.unwrap();
        assert_eq!(inst.completed_turns, MESSAGES, "{inst:?}");
        let mut expected = Fold::default();
        for i in 1..=MESSAGES {
            expected = fold(expected, outputs(message(i))[2]);
        }
        assert_eq!(h.state().await.unwrap(), expected, "the final state is not the fold of all messages");
        let history = h.history(None).await.unwrap();
        assert_eq!(history.turns.len() as u64, MESSAGES);
        let mut prefixes = BTreeMap::new();
        for (i, t) in (1..=MESSAGES).zip(&history.turns) {
            let want = outputs(message(i));
            assert_eq!((t.number, t.status), (i, TurnStatus::Completed), "turn {i}: {t:?}");
            assert_eq!(t.message, serde_json::json!(message(i)));
            assert_eq!(t.result, serde_json::json!(want[2]), "turn {i}");
            let steps: Vec<(&str, CheckpointKind, serde_json::Value)> =
                t.steps.iter().map(|s| (s.key.as_str(), s.kind, s.output.clone())).collect();
            let want_steps: Vec<(&str, CheckpointKind, serde_json::Value)> =
                KEYS.iter().zip(want).map(|(k, o)| (*k, CheckpointKind::Step, serde_json::json!(o))).collect();
            assert_eq!(steps, want_steps, "turn {i}'s saved steps");
            let record = engine.store().load_turn(engine.ns(), INSTANCE, i).await.unwrap().unwrap();
            prefixes.insert(i, record.effect_prefix);
        }
        let attempts: Vec<u32> = history.turns.iter().map(|t| t.attempt).collect();
        println!("attempts per turn: {attempts:?}");

        // The log: effect ids are `<effect_prefix>/<key>`, one per step across attempts; no
        // step ran again once a later step proved it saved; every step ran before that proof.
        // (The outputs saved are checked against the history above.)
        let entries = read_log(&log);
        let mut first_saved: HashMap<(u64, usize), usize> = HashMap::new();
        for (n, e) in entries.iter().enumerate() {
            if let Some(step) = e.saved_step() {
                first_saved.entry(step).or_insert(n);
            }
        }
        let mut runs: BTreeMap<(u64, usize), usize> = BTreeMap::new();
        for (n, e) in entries.iter().enumerate() {
            match e {
                Entry::Effect { id, turn, key, out } => {
                    let k = KEYS.iter().position(|k| k == key).unwrap_or_else(|| panic!("unknown key in {e:?}"));
                    let prefix = prefixes.get(turn).unwrap_or_else(|| panic!("unknown turn in {e:?}"));
                    assert_eq!(*id, format!("{prefix}/{key}"), "line {n}: the effect id of turn {turn} step {key}");
                    assert_eq!(*out, outputs(message(*turn))[k], "line {n}: {e:?}");
                    if let Some(saved) = first_saved.get(&(*turn, k)) {
                        assert!(n < *saved, "line {n}: step {id} ran again after it was saved (line {saved})");
                    }
                    *runs.entry((*turn, k)).or_default() += 1;
                }
                Entry::SavedBefore { .. } => {
                    if let Some(step) = e.saved_step() {
                        assert!(runs.contains_key(&step), "line {n}: step {step:?} was saved but never ran");
                    }
                }
            }
        }
        assert_eq!(runs.len() as u64, MESSAGES * 3, "every step ran");
        assert_eq!(
            first_saved.len() as u64,
            MESSAGES * 3 - 1,
            "every step but the last turn's last one was proved saved by a later step"
        );
        let reran = runs.values().filter(|n| **n > 1).count();
        println!(
            "{rounds} kill rounds; {} effect lines for {} steps; {reran} interrupted step(s) reran with their effect id",
            runs.values().sum::<usize>(),
            runs.len()
        );
        assert!(reran > 0, "no kill interrupted a step in {rounds} rounds (seed {}): nothing was proven about reruns", rng.seed());
    });
}
