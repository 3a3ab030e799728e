//! A worker killed with SIGKILL in the middle of a fan-out (engine over the SQLite store): the
//! members saved before the kill are replayed, only the unsaved ones run again, with the same
//! effect ids, and the turn completes with every member saved once, in order.
//!
//! The test binary re-runs itself as the child ([`parallel_crash_child`]). Each member writes a
//! line to a ledger file (the stand-in for an external effect) with its key and effect id. In
//! the first child, members `fetch.0` to `fetch.3` finish at once and members `fetch.4` to
//! `fetch.7` start and then hang; when the turn shows four saved steps and the four hanging
//! members have started, the child prints `ready` and the parent kills it. A second child, after
//! the first one's lease ran out, finishes the turn.

#![cfg(feature = "sqlite")]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use serde_json::json;
use turnwise::prelude::*;
use turnwise::protocol::*;

use crate::common::{self, KillOnDrop, GUARD};

const DB_ENV: &str = "TURNWISE_PARALLEL_CRASH_DB";
const LEDGER_ENV: &str = "TURNWISE_PARALLEL_CRASH_LEDGER";
const HANG_ENV: &str = "TURNWISE_PARALLEL_CRASH_HANG";
const INSTANCE: &str = "fan-crash";
const ITEMS: u64 = 8;
/// Members from this index on hang in the first child.
const HANG_FROM: u64 = 4;

/// Members of the hanging child that have started their hang.
static HANGING: AtomicUsize = AtomicUsize::new(0);

/// Append `line` to the ledger file.
fn record(line: &str) -> std::io::Result<()> {
    let path = std::env::var_os(LEDGER_ENV).ok_or_else(|| std::io::Error::other("no ledger"))?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.write_all(format!("{line}\n").as_bytes())?;
    f.flush()
}

#[derive(Clone)]
struct FanCrash;

impl Workflow for FanCrash {
    type State = u64;
    type Message = u64;
    type Reply = Vec<u64>;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "fan-crash";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, state: u64, items: u64) -> TurnResult<Self> {
        let hang = std::env::var_os(HANG_ENV).is_some();
        let out = ctx
            .fan_out("fetch", 0..items, |s, i| async move {
                if hang && i >= HANG_FROM {
                    record(&format!("start {} {}", s.key(), s.effect_id()))?;
                    HANGING.fetch_add(1, SeqCst);
                    std::future::pending::<()>().await;
                }
                record(&format!("run {} {}", s.key(), s.effect_id()))?;
                Ok(i * 10)
            })
            .await?;
        Ok(Done::new(state + 1).reply(out))
    }
}

#[test]
#[ignore = "child process of a_sigkill_during_a_fan_out_reruns_only_the_unsaved_members"]
fn parallel_crash_child() {
    let Some(path) = std::env::var_os(DB_ENV) else {
        return; // run by hand with --ignored: nothing to do
    };
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    runtime.block_on(async move {
        tokio::time::timeout(GUARD, child(Path::new(&path)))
            .await
            .expect("the child finished within the guard");
    });
}

async fn child(path: &Path) {
    let engine = Engine::open(path).await.expect("open the SQLite file");
    engine
        .create_instance(CreateInstanceRequest {
            id: INSTANCE.into(),
            workflow_type: "fan-crash".into(),
            version: "v1".into(),
            state: json!(0),
            // Short, so that the second child takes the turn over soon after the kill.
            lease_ms: Some(200),
            max_attempts: Some(10),
            on_exhausted: None,
        })
        .await
        .expect("create the instance (idempotent)");
    engine
        .send_message(MessageRequest {
            workflow_id: INSTANCE.into(),
            id: "m-1".into(),
            message: json!(ITEMS),
            origin: None,
        })
        .await
        .expect("send the message (deduplicated)");
    let worker = Worker::new(engine.clone()).register(FanCrash);
    if std::env::var_os(HANG_ENV).is_some() {
        let watcher = engine.clone();
        tokio::spawn(async move {
            loop {
                let t = watcher
                    .turn(TurnQuery {
                        id: INSTANCE.into(),
                        turn: 1,
                    })
                    .await
                    .expect("read the turn");
                if t.steps.len() == HANG_FROM as usize
                    && HANGING.load(SeqCst) == (ITEMS - HANG_FROM) as usize
                {
                    println!("ready");
                    std::io::stdout().flush().expect("stdout");
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
    }
    loop {
        worker.run_until_idle().await.expect("run the worker");
        let t = engine
            .turn(TurnQuery {
                id: INSTANCE.into(),
                turn: 1,
            })
            .await
            .expect("read the turn");
        if t.status.is_outcome() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn spawn_child(db: &Path, ledger: &Path, hang: bool) -> KillOnDrop {
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
    cmd.args([
        "--exact",
        &common::test_name(module_path!(), "parallel_crash_child"),
        "--nocapture",
        "--ignored",
    ])
    .env(DB_ENV, db)
    .env(LEDGER_ENV, ledger)
    .env_remove(HANG_ENV)
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    if hang {
        cmd.env(HANG_ENV, "1");
    }
    KillOnDrop(cmd.spawn().expect("spawn the child"))
}

/// The ledger's lines, split into `(what, key, effect id)`.
fn ledger(path: &PathBuf) -> Vec<(String, String, String)> {
    std::fs::read_to_string(path)
        .expect("read the ledger")
        .lines()
        .map(|l| {
            let parts: Vec<&str> = l.split(' ').collect();
            assert_eq!(parts.len(), 3, "a whole ledger line: {l:?}");
            (parts[0].into(), parts[1].into(), parts[2].into())
        })
        .collect()
}

#[test]
fn a_sigkill_during_a_fan_out_reruns_only_the_unsaved_members() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let db = dir.path().join("fan.db");
    let ledger_path = dir.path().join("ledger.txt");

    // The first child: four members saved, four hanging; killed once it says so.
    let mut first = spawn_child(&db, &ledger_path, true);
    let stdout = first.0.stdout.take().expect("the child's stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    loop {
        let line = rx
            .recv_timeout(GUARD)
            .expect("the first child reports four saved members and four hanging");
        if line == "ready" {
            break;
        }
    }
    first.0.kill().expect("SIGKILL the first child");
    let status = first.0.wait().expect("reap the first child");
    assert!(!status.success(), "the first child was killed");

    let before = ledger(&ledger_path);
    let ran = |lines: &[(String, String, String)], what: &str| -> Vec<String> {
        let mut keys: Vec<String> = lines
            .iter()
            .filter(|l| l.0 == what)
            .map(|l| l.1.clone())
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(
        ran(&before, "run"),
        ["fetch.0", "fetch.1", "fetch.2", "fetch.3"]
    );
    assert_eq!(
        ran(&before, "start"),
        ["fetch.4", "fetch.5", "fetch.6", "fetch.7"]
    );

    // The second child finishes the turn after the first one's lease ran out.
    let mut second = spawn_child(&db, &ledger_path, false);
    let status = second.0.wait().expect("wait for the second child");
    assert!(status.success(), "the second child finishes the turn");

    let after = ledger(&ledger_path);
    // Every execution counted, across both children (not the distinct keys): each member ran
    // to its end exactly once.
    let mut runs: BTreeMap<&str, usize> = BTreeMap::new();
    for (what, key, _) in &after {
        if what == "run" {
            *runs.entry(key).or_default() += 1;
        }
    }
    let keys: Vec<String> = (0..ITEMS).map(|i| format!("fetch.{i}")).collect();
    let once: BTreeMap<&str, usize> = keys.iter().map(|k| (k.as_str(), 1)).collect();
    assert_eq!(
        runs, once,
        "every member ran to its end exactly once (runs by key): {after:?}"
    );
    let new = &after[before.len()..];
    assert_eq!(
        ran(new, "run"),
        ["fetch.4", "fetch.5", "fetch.6", "fetch.7"],
        "only the unsaved members ran again: {new:?}"
    );
    for (_, key, id) in new {
        let first_id = before
            .iter()
            .find(|l| l.1 == *key)
            .map(|l| l.2.clone())
            .expect("the member started in the first child");
        assert_eq!(*id, first_id, "{key} runs again under its first effect id");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let engine = Engine::open(&db).await.expect("open the SQLite file");
        let t = engine
            .turn(TurnQuery {
                id: INSTANCE.into(),
                turn: 1,
            })
            .await
            .expect("read the turn");
        assert_eq!(t.status, TurnStatus::Completed, "{t:?}");
        assert_eq!(
            t.attempt, 2,
            "one attempt was killed, the next finished: {t:?}"
        );
        let saved: Vec<(String, serde_json::Value)> = t
            .steps
            .iter()
            .map(|s| (s.key.clone(), s.output.clone()))
            .collect();
        let want: Vec<(String, serde_json::Value)> = (0..ITEMS)
            .map(|i| (format!("fetch.{i}"), json!(i * 10)))
            .collect();
        assert_eq!(saved, want, "every member saved once, in order");
        assert_eq!(
            t.result,
            json!((0..ITEMS).map(|i| i * 10).collect::<Vec<_>>())
        );
    });
}
