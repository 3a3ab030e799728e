//! Child workflows across SIGKILL, over a SQLite file: a process dies while a parent turn waits
//! for its child, or between the child's completion and the delivery of its outcome. A new
//! process over the same file finishes the work, and the parent gets the reply exactly once:
//! one message admitted to the child, one delivery on the parent's turn, one reply.
//!
//! Each test re-runs this binary as a child process (an `#[ignore]`d test selected by its full
//! name, [`common::test_name`]), which reports its progress as marked lines on stdout.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use turnwise::prelude::*;
use turnwise::protocol::TurnStatus;

use crate::common::{self, GUARD};

const ENV_DB: &str = "TURNWISE_CHILD_CRASH_DB";
const ENV_BLOCK: &str = "TURNWISE_CHILD_CRASH_BLOCK";
const MARK: &str = "@@child-crash ";
/// How long the test waits for a line of the child process.
const PATIENCE: Duration = Duration::from_secs(30);
const LEASE: Duration = Duration::from_millis(500);

/// The child workflow: doubles the number in a step. With [`ENV_BLOCK`] set, the step says so
/// and never ends (the process is killed there).
struct Kid;

impl Workflow for Kid {
    type State = u64;
    type Message = u64;
    type Reply = u64;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "crash-kid";
    const VERSION: &'static str = "v1";

    fn options(&self) -> WorkflowOptions {
        WorkflowOptions::default().lease(LEASE)
    }

    async fn run(&self, ctx: &mut Turn<Self>, runs: u64, n: u64) -> TurnResult<Self> {
        let doubled = ctx
            .step("double", move |_s| async move {
                if std::env::var_os(ENV_BLOCK).is_some() {
                    emit("kid-running");
                    std::future::pending::<()>().await;
                }
                Ok(n * 2)
            })
            .await?;
        Ok(Done::new(runs + 1).reply(doubled))
    }
}

/// The parent: asks `kid-1` to double the number and replies with the double.
struct Parent;

impl Workflow for Parent {
    type State = u64;
    type Message = u64;
    type Reply = u64;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "crash-parent";
    const VERSION: &'static str = "v1";

    fn options(&self) -> WorkflowOptions {
        WorkflowOptions::default().lease(LEASE)
    }

    async fn run(&self, ctx: &mut Turn<Self>, total: u64, n: u64) -> TurnResult<Self> {
        let doubled = ctx.call_child("ask", &Kid, "kid-1", n).await?;
        Ok(Done::new(total + doubled).reply(doubled))
    }
}

fn emit(event: &str) {
    println!("{MARK}{event}");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Run the child process `name` over `db` (with `block` for [`ENV_BLOCK`]) until it prints
/// `event`, then SIGKILL it.
fn run_and_kill(name: &str, db: &Path, block: bool, event: &str) {
    let exe = std::env::current_exe().expect("the test binary");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", &common::test_name(module_path!(), name)])
        .args(["--nocapture", "--ignored"])
        .env(ENV_DB, db)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if block {
        cmd.env(ENV_BLOCK, "1");
    }
    let mut child: Child = cmd.spawn().expect("spawning the child process");
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().expect("piped stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let want = format!("{MARK}{event}");
    let mut seen = Vec::new();
    loop {
        match rx.recv_timeout(PATIENCE) {
            Ok(line) if line.contains(&want) => break,
            Ok(line) => seen.push(line),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{name}: no `{event}` within {PATIENCE:?}; output:\n{}",
                    seen.join("\n")
                );
            }
        }
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaping the killed process");
}

/// After the crash: a new engine and worker over the same file finish the work. Checks that
/// the parent replied once with the double, that the child admitted one message, and that
/// the parent's turn holds one delivery.
async fn finish_and_check(db: &Path) {
    let engine = turnwise::Engine::open(db).await.expect("reopening the db");
    let worker = Worker::new(engine.clone())
        .register(Parent)
        .register(Kid)
        .concurrency(2)
        .claim_wait(Duration::from_millis(100))
        .run_async();
    let parent = Parent.handle(&engine, "parent-1");
    let reply = tokio::time::timeout(GUARD, parent.result(1)).await;
    assert_eq!(reply.expect("the parent replied in time").unwrap(), 42);
    worker.stop().await.unwrap();

    assert_eq!(parent.state().await.unwrap(), 42);
    let t = parent.turn(1).await.unwrap();
    let signals = t.signals.unwrap_or_default();
    assert_eq!(signals.len(), 1, "one delivery: {signals:?}");
    let kid = Kid.handle(&engine, "kid-1");
    let inst = kid.instance().await.unwrap();
    assert_eq!(
        (inst.completed_turns, inst.pending_messages),
        (1, 0),
        "the child admitted one message: {inst:?}"
    );
    assert_eq!(kid.reply(1).await.unwrap(), Some(42));
    let record = engine
        .store()
        .load_instance(engine.ns(), "kid-1")
        .await
        .unwrap()
        .expect("the child's record");
    assert!(record.outbox.is_empty(), "delivered: {:?}", record.outbox);
}

fn temp_db(tag: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = dir.path().join(format!("{tag}.db"));
    (dir, db)
}

#[test]
fn sigkill_while_the_parent_waits_for_its_child() {
    let (_dir, db) = temp_db("waits");
    run_and_kill("child_crash_waits", &db, true, "kid-running");
    runtime().block_on(finish_and_check(&db));
}

#[test]
fn sigkill_between_the_childs_completion_and_the_delivery() {
    let (_dir, db) = temp_db("held");
    run_and_kill("child_crash_held", &db, false, "kid-done");
    runtime().block_on(async {
        // The crash left the outcome in the child's outbox, and the parent waiting.
        let engine = turnwise::Engine::open(&db).await.unwrap();
        let record = engine
            .store()
            .load_instance(engine.ns(), "kid-1")
            .await
            .unwrap()
            .expect("the child's record");
        assert_eq!(record.outbox.len(), 1, "{record:?}");
        let parent = Parent.handle(&engine, "parent-1");
        assert_eq!(parent.turn(1).await.unwrap().status, TurnStatus::Waiting);
        drop(parent);
        drop(engine);
        finish_and_check(&db).await;
    });
}

/// Child process of `sigkill_while_the_parent_waits_for_its_child`: runs the parent and the
/// child until the child's step blocks, and is killed there.
#[test]
#[ignore = "child process of sigkill_while_the_parent_waits_for_its_child"]
fn child_crash_waits() {
    let Some(db) = std::env::var_os(ENV_DB) else {
        return;
    };
    runtime().block_on(async move {
        let engine = turnwise::Engine::open(&db).await.expect("opening the db");
        let parent = Parent.start(&engine, "parent-1").await.unwrap();
        parent.send(21, "m1").await.unwrap();
        let worker = Worker::new(engine)
            .register(Parent)
            .register(Kid)
            .concurrency(2);
        worker.run().await.unwrap();
    });
}

/// Child process of `sigkill_between_the_childs_completion_and_the_delivery`: holds back
/// deliveries, runs until the child's turn completed with its outcome in the outbox, says so,
/// and is killed.
#[test]
#[ignore = "child process of sigkill_between_the_childs_completion_and_the_delivery"]
fn child_crash_held() {
    let Some(db) = std::env::var_os(ENV_DB) else {
        return;
    };
    runtime().block_on(async move {
        let engine = turnwise::Engine::open(&db).await.expect("opening the db");
        engine.hold_child_deliveries(true);
        let parent = Parent.start(&engine, "parent-1").await.unwrap();
        parent.send(21, "m1").await.unwrap();
        let worker = Worker::new(engine.clone()).register(Parent).register(Kid);
        worker.run_until_idle().await.unwrap();
        let kid = Kid.handle(&engine, "kid-1");
        assert_eq!(kid.reply(1).await.unwrap(), Some(42));
        emit("kid-done");
        tokio::time::sleep(PATIENCE).await;
    });
}
