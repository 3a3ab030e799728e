//! Schedules survive SIGKILL: each firing is admitted exactly once, none lost, none doubled.
//!
//! The test binary re-executes itself as the child ([`schedule_crash_child`]), which opens an
//! engine over a SQLite file with a manual clock, keeps one instance with an interval schedule
//! (`tick`, every second from a fixed anchor, catch-up `all`), and loops: set its clock to the
//! schedule's next fire time, then claim and complete every ready turn, printing `ack <message
//! id>` after each completion. The parent kills the child with SIGKILL at random moments (so
//! some kills land between a firing's admission and its claim, some inside the commits), starts
//! another, and after the last round opens the file and checks that the admitted message ids
//! are exactly the occurrences `schedule/tick/<anchor + k s>` for k = 1..=n, each once, in
//! order from the first (history retention is off, so no turn may be missing), that the schedule
//! counts n firings and no skip, and that every acknowledged firing is there.
//!
//! Set `TURNWISE_SCHEDULE_CRASH_SEED` to replay the kill delays of an earlier run (the seed is
//! printed).

#![cfg(feature = "sqlite")]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{KillOnDrop, Rng};
use serde_json::json;
use turnwise::clock::ManualClock;
use turnwise::protocol::*;
use turnwise::store::SqliteStore;
use turnwise::{Backend, Engine, EngineConfig, Error, RetentionPolicy};

const DB_ENV: &str = "TURNWISE_SCHEDULE_CRASH_DB";
const SEED_ENV: &str = "TURNWISE_SCHEDULE_CRASH_SEED";
const INSTANCE: &str = "sched-1";
/// 2026-01-01T00:00:00Z: the schedule's anchor; occurrences are a second apart from it.
const ANCHOR: i64 = 1_767_225_600_000;
const EVERY_MS: u64 = 1000;
const ROUNDS: usize = 12;
const MIN_DELAY_MS: u64 = 30;
const MAX_DELAY_MS: u64 = 300;
const TIME_BUDGET: Duration = Duration::from_secs(30);
const CHILD_LIFETIME: Duration = Duration::from_secs(20);

async fn open(path: &Path) -> Result<(Engine, ManualClock), Error> {
    let store = SqliteStore::open(path).await?;
    let clock = ManualClock::new(ANCHOR);
    // Keep every turn: then a missing firing is lost, never pruned.
    let mut config = EngineConfig::default();
    config.retention = RetentionPolicy {
        keep_turns: 0,
        keep_for: Duration::ZERO,
    };
    Ok((Engine::new(store, clock.clone(), config), clock))
}

#[test]
#[ignore = "child process of schedule_crash_sigkill"]
fn schedule_crash_child() {
    let Some(path) = std::env::var_os(DB_ENV) else {
        return; // run by hand with --ignored: nothing to do
    };
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    runtime.block_on(async move {
        tokio::select! {
            r = child_loop(Path::new(&path)) => r.expect("the schedule crash child failed"),
            () = tokio::time::sleep(CHILD_LIFETIME) => {}
        }
    });
}

async fn child_loop(path: &Path) -> Result<(), Error> {
    let (engine, clock) = open(path).await?;
    engine
        .create_instance(CreateInstanceRequest {
            id: INSTANCE.into(),
            workflow_type: "sched".into(),
            version: "v1".into(),
            state: json!({"turns": 0}),
            // A killed child's lease runs out after one step of the clock.
            lease_ms: Some(100),
            max_attempts: Some(100),
            on_exhausted: None,
        })
        .await?;
    engine
        .create_schedule(CreateScheduleRequest {
            workflow_id: INSTANCE.into(),
            name: "tick".into(),
            spec: ScheduleSpec::Every {
                every_ms: EVERY_MS,
                anchor_ms: Some(ANCHOR),
            },
            message: json!({"tick": true}),
            catch_up: CatchUp::All,
        })
        .await?;
    loop {
        let s = engine.get_schedule(INSTANCE, "tick").await?;
        clock.set(
            s.next_fire_ms
                .expect("an interval always has a next fire time"),
        );
        loop {
            let claim = ClaimRequest {
                worker: format!("child-{}", std::process::id()),
                workflows: vec![WorkflowRef::new("sched", "v1")],
                wait_ms: 0,
                include_execution_credential: None,
            };
            let Some(task) = engine.claim(claim).await?.task else {
                break;
            };
            let turns = task.state["turns"].as_u64().unwrap_or(0);
            let done = engine
                .complete(CompleteRequest {
                    lease: Lease {
                        workflow_id: INSTANCE.into(),
                        turn: task.turn.number,
                        token: task.token.clone(),
                    },
                    state: json!({"turns": turns + 1}),
                    result: json!(null),
                    continuation: None,
                    usage: None,
                    results: None,
                })
                .await;
            match done {
                Ok(_) => println!("ack {}", task.turn.message_id),
                Err(Error::LeaseLost { .. }) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[test]
fn schedule_crash_sigkill() {
    let mut rng = Rng::seeded("schedule_crash_sigkill", SEED_ENV);
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("sched.db");
    let exe = std::env::current_exe().expect("the test binary");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let started = Instant::now();
    let mut acked = BTreeSet::new();
    let mut rounds = 0;
    while (rounds < ROUNDS || acked.is_empty()) && started.elapsed() < TIME_BUDGET {
        rounds += 1;
        let mut child = KillOnDrop(
            Command::new(&exe)
                .arg("--exact")
                .arg(crate::common::test_name(
                    module_path!(),
                    "schedule_crash_child",
                ))
                .args(["--nocapture", "--ignored"])
                .env(DB_ENV, &path)
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("spawn the child"),
        );
        let stdout = child.0.stdout.take().expect("child stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if let Some(id) = line.strip_prefix("ack ") {
                        lines.lock().unwrap().push(id.to_owned());
                    }
                }
            })
        };
        // On a loaded machine a child may need longer than the longest delay to get going:
        // rounds past ROUNDS without an acknowledgement wait longer each time.
        let patience = 250 * rounds.saturating_sub(ROUNDS).min(20) as u64;
        let delay = MIN_DELAY_MS + rng.next() % (MAX_DELAY_MS - MIN_DELAY_MS) + patience;
        std::thread::sleep(Duration::from_millis(delay));
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("the child ended by itself ({status}) before it was killed; see its stderr");
        }
        child.0.kill().expect("SIGKILL the child");
        child.0.wait().expect("reap the child");
        reader.join().expect("the stdout reader");
        acked.extend(std::mem::take(&mut *lines.lock().unwrap()));
        let n = runtime.block_on(verify(&path, &acked));
        println!("round {rounds}: killed after {delay} ms; {n} firings admitted");
    }
    assert!(
        !acked.is_empty(),
        "no child completed a firing in {rounds} rounds"
    );
}

/// Open the file and check the firings admitted so far; answers how many.
async fn verify(path: &Path, acked: &BTreeSet<String>) -> usize {
    let (engine, _clock) = open(path).await.expect("open the store after the kill");
    let Ok(s) = engine.get_schedule(INSTANCE, "tick").await else {
        // Killed before the schedule was created.
        assert!(acked.is_empty());
        return 0;
    };
    let mut ids = Vec::new();
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
        ids.extend(page.turns.iter().map(|t| (t.number, t.message_id.clone())));
        match page.turns.last() {
            Some(t) if page.turns.len() == 50 => after = Some(t.number),
            _ => break,
        }
    }
    let inbox = engine
        .instance_inbox(InboxQuery {
            id: INSTANCE.into(),
            after: None,
            limit: Some(50),
            payloads: false,
        })
        .await
        .expect("read the inbox");
    ids.extend(
        inbox
            .messages
            .iter()
            .map(|m| (m.turn, m.message_id.clone())),
    );
    // Turn k is the k-th occurrence: turn numbers follow admissions, and only firings are
    // admitted. Retention is off, so every turn from the first on is there.
    let admitted = ids.last().map_or(0, |(n, _)| *n);
    let want: Vec<(u64, String)> = (1..=admitted)
        .map(|k| (k, firing_id("tick", ANCHOR + k as i64 * EVERY_MS as i64)))
        .collect();
    assert_eq!(
        ids, want,
        "each occurrence admitted once, in order, from the first, none missing"
    );
    assert_eq!(s.fired, admitted, "the schedule counts what was admitted");
    assert_eq!(s.skipped, 0);
    assert_eq!(
        s.next_fire_ms,
        Some(ANCHOR + (admitted as i64 + 1) * EVERY_MS as i64),
        "the schedule advanced exactly past the admitted firings"
    );
    let kept: BTreeSet<&String> = ids.iter().map(|(_, id)| id).collect();
    for id in acked {
        assert!(kept.contains(id), "acknowledged firing {id} is missing");
    }
    admitted as usize
}
