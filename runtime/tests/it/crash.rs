//! Crash safety of the embedded default (engine over the SQLite store).
//!
//! A child process writing turns is killed with SIGKILL repeatedly at random moments; after each
//! kill the SQLite file opens, every acknowledged write is there, no turn is half-applied, and
//! no message is lost or duplicated.
//!
//! The test binary re-executes itself as the child: [`crash_sigkill`] spawns
//! `<this test binary> --exact crash::crash_child --nocapture --ignored` with
//! `TURNWISE_CRASH_DB` set, and [`crash_child`] then runs a worker loop over that file, printing
//! one `ack …` line after every acknowledged call. The parent collects those lines, kills the
//! child after a random delay, opens the file itself and checks the file against every
//! acknowledgement it saw so far.
//!
//! The workload is one instance, `crash-1`, whose turn `k` handles message `m-<k>`: two steps,
//! each saved with output `k`, then a completion with state
//! `{"count": previous count + k, "turns": previous turns + 1}`. So after `n` completed turns the
//! state must be `{"count": n(n+1)/2, "turns": n}`, and each turn's `state_after` is that of
//! its own number.
//!
//! Set `TURNWISE_CRASH_SEED` to replay the kill delays of an earlier run (the seed is printed).

#![cfg(feature = "sqlite")]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{KillOnDrop, Rng};
use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::{Backend, Engine, Error};

const DB_ENV: &str = "TURNWISE_CRASH_DB";
const SEED_ENV: &str = "TURNWISE_CRASH_SEED";
const INSTANCE: &str = "crash-1";
const STEPS: usize = 2;
/// As short as allowed, so that the next child re-claims a turn its killed predecessor held
/// within 100 ms instead of spending its short life waiting.
const LEASE_MS: u64 = 100;

/// Kill rounds (more if no turn completed yet).
const ROUNDS: usize = 20;
/// Kill delay after spawning the child, in ms.
const MIN_DELAY_MS: u64 = 50;
const MAX_DELAY_MS: u64 = 400;
/// No new round starts after this long, whatever the round count.
const TIME_BUDGET: Duration = Duration::from_secs(40);
/// A child nobody killed exits by itself after this long (if the parent died first).
const CHILD_LIFETIME: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// The child.

#[test]
#[ignore = "child process of crash_sigkill"]
fn crash_child() {
    let Some(path) = std::env::var_os(DB_ENV) else {
        return; // run by hand with --ignored: nothing to do
    };
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    runtime.block_on(async move {
        tokio::select! {
            r = child_loop(Path::new(&path)) => r.expect("the crash child failed"),
            () = tokio::time::sleep(CHILD_LIFETIME) => {}
        }
    });
}

fn ack(line: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ack {line}").expect("stdout");
    out.flush().expect("stdout");
}

async fn child_loop(path: &Path) -> Result<(), Error> {
    let engine = Engine::open(path).await?;
    engine
        .create_instance(CreateInstanceRequest {
            id: INSTANCE.into(),
            workflow_type: "crash".into(),
            version: "v1".into(),
            state: json!({"count": 0, "turns": 0}),
            lease_ms: Some(LEASE_MS),
            // Every kill mid-turn costs that turn an attempt; never let one run out.
            max_attempts: Some(100),
            on_exhausted: None,
        })
        .await?;
    loop {
        let inst = engine.get_instance(INSTANCE).await?;
        if inst.pending_messages == 0 {
            // Turn numbers follow message numbers: the next message is m-<next turn number>.
            let k = inst.history_through + 1;
            engine
                .send_message(MessageRequest {
                    workflow_id: INSTANCE.into(),
                    id: format!("m-{k}"),
                    message: json!({"k": k}),
                    origin: None,
                })
                .await?;
            ack(format_args!("msg m-{k}"));
        }
        match run_head(&engine).await {
            Ok(()) => {}
            // Our lease ran out under load (no heartbeats): claim the turn again and resume.
            Err(Error::LeaseLost { .. }) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Claim the inbox head (waiting for a dead predecessor's lease to run out), replay its saved
/// steps, save the missing ones and complete it.
async fn run_head(engine: &Engine) -> Result<(), Error> {
    let task = loop {
        let claim = ClaimRequest {
            worker: format!("child-{}", std::process::id()),
            workflows: vec![WorkflowRef::new("crash", "v1")],
            wait_ms: 2_000,
            include_execution_credential: None,
        };
        if let Some(task) = engine.claim(claim).await?.task {
            break task;
        }
    };
    let k = task.turn.number;
    assert_eq!(
        task.turn.message_id,
        format!("m-{k}"),
        "turn {k} holds the wrong message"
    );
    let lease = Lease {
        workflow_id: INSTANCE.into(),
        turn: k,
        token: task.token.clone(),
    };
    for position in 0..STEPS {
        if let Some(saved) = task.turn.steps.get(position) {
            // Replay: the step is already saved; its output must be the one we would compute.
            assert_eq!(
                saved.output,
                json!(k),
                "replayed step {position} of turn {k}"
            );
            continue;
        }
        let key = format!("s{position}");
        engine
            .operation(OperationRequest {
                lease: lease.clone(),
                position: position as u32,
                key: key.clone(),
                kind: OperationKind::Step,
                timeout_ms: 60_000,
                heartbeat_timeout_ms: None,
            })
            .await?;
        engine
            .checkpoint(CheckpointRequest {
                lease: lease.clone(),
                position: position as u32,
                key: key.clone(),
                kind: CheckpointKind::Step,
                output: json!(k),
                delay_ms: None,
            })
            .await?;
        ack(format_args!("step m-{k} {key}"));
    }
    let count = task.state["count"].as_u64().expect("state.count") + k;
    let turns = task.state["turns"].as_u64().expect("state.turns") + 1;
    engine
        .complete(CompleteRequest {
            lease,
            state: json!({"count": count, "turns": turns}),
            result: json!(count),
            continuation: None,
            usage: None,
            results: None,
        })
        .await?;
    ack(format_args!("done m-{k} {count}"));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The parent.

/// Everything the children acknowledged, over all rounds.
#[derive(Debug, Default)]
struct Acks {
    /// Admitted messages, by number.
    messages: BTreeSet<u64>,
    /// Saved steps: (message number, position).
    steps: BTreeSet<(u64, usize)>,
    /// Completed turns: message number → acknowledged count.
    done: BTreeMap<u64, u64>,
}

impl Acks {
    fn record(&mut self, line: &str) {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let number = |m: &str| -> u64 {
            m.strip_prefix("m-")
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("bad message id in ack line `{line}`"))
        };
        match parts.as_slice() {
            ["ack", "msg", m] => {
                self.messages.insert(number(m));
            }
            ["ack", "step", m, s] => {
                let position = s
                    .strip_prefix('s')
                    .and_then(|p| p.parse().ok())
                    .unwrap_or_else(|| panic!("bad step in ack line `{line}`"));
                self.steps.insert((number(m), position));
            }
            ["ack", "done", m, count] => {
                let count: u64 = count.parse().expect("ack count");
                let k = number(m);
                if let Some(prev) = self.done.insert(k, count) {
                    assert_eq!(prev, count, "turn {k} was acknowledged with two counts");
                }
            }
            _ => panic!("unexpected ack line `{line}`"),
        }
    }
}

#[test]
fn crash_sigkill() {
    let mut rng = Rng::seeded("crash_sigkill", SEED_ENV);
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("crash.db");
    let exe = std::env::current_exe().expect("the test binary");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");

    let started = Instant::now();
    let mut acks = Acks::default();
    let mut rounds = 0;
    // On a very loaded machine early rounds may end before a child got anything done: keep
    // going (within the time budget) until at least one turn was acknowledged complete.
    while (rounds < ROUNDS || acks.done.is_empty()) && started.elapsed() < TIME_BUDGET {
        rounds += 1;
        let delay = rng.between(MIN_DELAY_MS, MAX_DELAY_MS);
        let mut child = KillOnDrop(
            Command::new(&exe)
                .arg("--exact")
                .arg(crate::common::test_name(module_path!(), "crash_child"))
                .args(["--nocapture", "--ignored"])
                .env(DB_ENV, &path)
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("spawn the crash child"),
        );
        let stdout = child.0.stdout.take().expect("child stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let lines = lines.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stdout);
                let mut line = String::new();
                // Only whole lines count: a line cut short by the kill was never acknowledged.
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                    if line.ends_with('\n') && line.starts_with("ack ") {
                        lines.lock().unwrap().push(line.trim_end().to_string());
                    }
                    line.clear();
                }
            })
        };
        std::thread::sleep(Duration::from_millis(delay));
        let still_running = child.0.try_wait().expect("child status").is_none();
        assert!(
            still_running,
            "the crash child exited by itself before the kill (round {rounds}); see its stderr"
        );
        child.0.kill().expect("SIGKILL the child"); // SIGKILL on Unix
        child.0.wait().expect("reap the child");
        reader.join().expect("the stdout reader");
        let new = std::mem::take(&mut *lines.lock().unwrap());
        for line in &new {
            acks.record(line);
        }
        let summary = runtime.block_on(verify(&path, &acks));
        println!(
            "round {rounds}: killed after {delay} ms, {} new acks; file: {summary}",
            new.len()
        );
    }
    println!(
        "crash_sigkill: {rounds} rounds in {:.1} s; acknowledged {} messages, {} steps, {} completions",
        started.elapsed().as_secs_f64(),
        acks.messages.len(),
        acks.steps.len(),
        acks.done.len()
    );
    assert!(rounds >= 3, "too few rounds ran in the time budget");
    assert!(
        !acks.done.is_empty(),
        "no child ever completed a turn: the test checked nothing"
    );
}

/// Open the file with a fresh engine and check it against every acknowledgement so far.
async fn verify(path: &Path, acks: &Acks) -> String {
    let engine = Engine::open(path)
        .await
        .expect("the SQLite file opens after a SIGKILL");
    let inst = match engine.get_instance(INSTANCE).await {
        Ok(inst) => inst,
        Err(Error::NotFound { .. }) => {
            // Killed before the instance was created: then nothing can have been acknowledged.
            assert!(
                acks.messages.is_empty(),
                "messages were acknowledged but instance `{INSTANCE}` is gone"
            );
            return "no instance yet".into();
        }
        Err(e) => panic!("reading the instance: {e}"),
    };

    // Every turn, finished and pending, by number.
    let mut turns: BTreeMap<u64, WorkflowTurn> = BTreeMap::new();
    let mut after = None;
    loop {
        let page = engine
            .history(HistoryQuery {
                id: INSTANCE.into(),
                after,
                limit: Some(50),
            })
            .await
            .expect("read history");
        for t in page.turns {
            let n = t.number;
            assert!(
                turns.insert(n, t).is_none(),
                "turn {n} listed twice in history"
            );
        }
        match page.next_after {
            Some(a) => after = Some(a),
            None => break,
        }
    }
    let finished = turns.len() as u64;
    let inbox = engine
        .instance_inbox(InboxQuery {
            id: INSTANCE.into(),
            after: None,
            limit: Some(100),
            payloads: false,
        })
        .await
        .expect("read the inbox");
    assert_eq!(inbox.pending_messages, inbox.messages.len() as u64);
    for m in &inbox.messages {
        let t = engine
            .turn(TurnQuery {
                id: INSTANCE.into(),
                turn: m.turn,
            })
            .await
            .expect("read a pending turn");
        assert!(
            t.finished_at_ms.is_none(),
            "turn {} is in the inbox and finished",
            t.number
        );
        let n = t.number;
        assert!(
            turns.insert(n, t).is_none(),
            "turn {n} is both in history and in the inbox"
        );
    }

    // History is contiguous from turn 1 (retention keeps everything here), every turn holds
    // its own message (so message ids are unique and none was admitted twice), and only the
    // child's one-at-a-time loop shape is possible: at most one unfinished turn, after history.
    let numbers: Vec<u64> = turns.keys().copied().collect();
    let expected: Vec<u64> = (1..=numbers.len() as u64).collect();
    assert_eq!(numbers, expected, "turn numbers are not contiguous from 1");
    let ids: BTreeSet<&str> = turns.values().map(|t| t.message_id.as_str()).collect();
    assert_eq!(ids.len(), turns.len(), "a message id appears twice");
    for (n, t) in &turns {
        assert_eq!(
            t.message_id,
            format!("m-{n}"),
            "turn {n} holds another message"
        );
    }
    assert_eq!(inst.completed_turns, finished, "completed_turns vs history");
    assert_eq!(inst.history_through, finished, "history_through vs history");
    assert!(inbox.pending_messages <= 1, "more than one unfinished turn");
    for (n, t) in &turns {
        let in_history = *n <= finished;
        assert_eq!(
            t.finished_at_ms.is_some(),
            in_history,
            "turn {n} out of order"
        );
    }

    // Every turn is all-or-nothing: a finished turn has both steps and its own state; an
    // unfinished one has at most its steps and no state.
    let mut count = 0;
    for (&n, t) in &turns {
        assert!(
            t.steps.len() <= STEPS,
            "turn {n} has {} steps",
            t.steps.len()
        );
        for (i, s) in t.steps.iter().enumerate() {
            assert_eq!(s.key, format!("s{i}"), "turn {n} step {i} key");
            assert_eq!(s.output, json!(n), "turn {n} step {i} output");
        }
        if n <= finished {
            count += n;
            assert_eq!(t.status, TurnStatus::Completed, "turn {n} status");
            assert_eq!(t.steps.len(), STEPS, "completed turn {n} is missing steps");
            assert_eq!(
                t.state_after,
                json!({"count": count, "turns": n}),
                "turn {n} state_after"
            );
        } else {
            assert_ne!(
                t.status,
                TurnStatus::Completed,
                "pending turn {n} is completed"
            );
            assert_eq!(t.state_after, Value::Null, "pending turn {n} has a state");
        }
    }
    // The instance state is exactly the sum over completed turns: nothing half-applied.
    assert_eq!(
        inst.state,
        json!({"count": count, "turns": finished}),
        "instance state vs completed turns"
    );

    // Every acknowledged write is there.
    for &k in &acks.messages {
        assert!(
            turns.contains_key(&k),
            "acknowledged message m-{k} was lost"
        );
    }
    for &(k, s) in &acks.steps {
        let t = turns
            .get(&k)
            .unwrap_or_else(|| panic!("turn of acknowledged step m-{k} s{s} was lost"));
        assert!(
            s < t.steps.len(),
            "acknowledged step s{s} of m-{k} was lost (turn has {} steps)",
            t.steps.len()
        );
    }
    for (&k, &acked) in &acks.done {
        let t = turns
            .get(&k)
            .unwrap_or_else(|| panic!("acknowledged completion m-{k} was lost"));
        assert_eq!(
            t.status,
            TurnStatus::Completed,
            "acknowledged completion m-{k}"
        );
        assert_eq!(
            t.state_after,
            json!({"count": acked, "turns": k}),
            "acknowledged state of m-{k}"
        );
    }
    drop(engine);
    format!(
        "{finished} completed turns, {} pending, count {count}",
        inbox.pending_messages
    )
}
