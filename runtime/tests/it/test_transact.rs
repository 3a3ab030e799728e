//! Transactional steps (`Turn::transact`) on the PostgreSQL store: the step's SQL and its saved
//! output commit together. Each test has a schema of its own (`TestPostgres`), with a `ledger`
//! table *without* a unique key, so a second insert of one effect would show as a second row.
//!
//! The crash tests re-run this test binary as a child (`transact_child`) that runs a worker and
//! aborts the process at a point named by `TURNWISE_TRANSACT_CRASH`: after the step's SQL ran
//! and before its transaction committed, or after it committed and before the turn completed.
//! A second child without a crash point then finishes the turn, after the first one's lease
//! ran out; the ledger must hold the effect exactly once.

#![cfg(feature = "postgres")]

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use serde_json::json;
use turnwise::clock::SystemClock;
use turnwise::prelude::*;
use turnwise::protocol::*;
use turnwise::store::MemoryStore;
use turnwise::testing::TestPostgres;
use turnwise::EngineConfig;

use crate::common;
use common::{forwarding_backend, GUARD};

const CRASH_ENV: &str = "TURNWISE_TRANSACT_CRASH";
const URL_ENV: &str = "TURNWISE_TRANSACT_URL";
const CREATE_LEDGER: &str =
    "CREATE TABLE ledger (effect_id text NOT NULL, cents bigint NOT NULL, attempt bigint)";

/// Abort the process here when the crash test says so.
fn crash_point(at: &str) {
    if std::env::var(CRASH_ENV).as_deref() == Ok(at) {
        eprintln!("transact_child: aborting at {at}");
        std::process::abort();
    }
}

/// How many times the `flaky` workflow's closure and handler have run, in this process.
static CLOSURE_RUNS: AtomicUsize = AtomicUsize::new(0);
static HANDLER_RUNS: AtomicUsize = AtomicUsize::new(0);

/// Debit `cents` in a transactional step, then reply with it.
#[workflow(name = "ledger", version = "v1")]
async fn ledger(ctx: &mut Turn, state: u64, cents: i64) -> Result<Done<u64, i64>, TurnError> {
    let debited = ctx
        .transact("debit", move |tx| async move {
            let effect = tx.effect_id().to_owned();
            tx.execute(
                "INSERT INTO ledger (effect_id, cents) VALUES ($1, $2)",
                &[&effect, &cents],
            )
            .await?;
            crash_point("after-sql");
            Ok(cents)
        })
        .await?;
    crash_point("after-commit");
    Ok(Done::new(state + 1).reply(debited))
}

/// Like `ledger`, but the closure's first run fails after its insert, and the handler's first
/// run after the step fails too: both attempts must leave one row.
#[workflow(name = "flaky", version = "v1")]
async fn flaky(ctx: &mut Turn, state: u64, cents: i64) -> Result<Done<u64, i64>, TurnError> {
    let debited = ctx
        .transact("debit", move |tx| async move {
            let effect = tx.effect_id().to_owned();
            tx.execute(
                "INSERT INTO ledger (effect_id, cents) VALUES ($1, $2)",
                &[&effect, &cents],
            )
            .await?;
            if CLOSURE_RUNS.fetch_add(1, SeqCst) == 0 {
                return Err(TurnError::retry("the first run of the closure fails"));
            }
            Ok(cents)
        })
        .await?;
    if HANDLER_RUNS.fetch_add(1, SeqCst) == 0 {
        return Err(TurnError::retry("the first attempt past the step fails"));
    }
    Ok(Done::new(state + 1).reply(debited))
}

/// A statement error inside the closure: the transaction is aborted, the attempt fails.
#[workflow(name = "bad-sql", version = "v1")]
async fn bad_sql(ctx: &mut Turn, state: u64, _cents: i64) -> Result<Done<u64, i64>, TurnError> {
    let n = ctx
        .transact("debit", |tx| async move {
            tx.execute("INSERT INTO no_such_table VALUES (1)", &[])
                .await?;
            Ok(1i64)
        })
        .await?;
    Ok(Done::new(state + 1).reply(n))
}

fn config() -> EngineConfig {
    let mut c = EngineConfig::default();
    c.backoff_base = Duration::from_millis(10);
    c.backoff_max = Duration::from_millis(10);
    c
}

/// A direct connection to the test schema, for the test's own reads.
async fn sql(db: &TestPostgres) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&db.url(), tokio_postgres::NoTls)
        .await
        .expect("connect to the test schema");
    tokio::spawn(connection);
    client
}

/// `(effect_id, rows)` of the ledger, by effect id.
async fn ledger_rows(client: &tokio_postgres::Client) -> Vec<(String, i64)> {
    client
        .query(
            "SELECT effect_id, count(*) FROM ledger GROUP BY effect_id ORDER BY effect_id",
            &[],
        )
        .await
        .expect("read the ledger")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

async fn create(engine: &Engine, id: &str, workflow_type: &str, lease_ms: u64) {
    engine
        .create_instance(CreateInstanceRequest {
            id: id.into(),
            workflow_type: workflow_type.into(),
            version: "v1".into(),
            state: json!(0),
            lease_ms: Some(lease_ms),
            max_attempts: Some(10),
            on_exhausted: None,
        })
        .await
        .expect("create the instance");
}

async fn send(engine: &Engine, id: &str, message_id: &str, cents: i64) -> WorkflowTurn {
    engine
        .send_message(MessageRequest {
            workflow_id: id.into(),
            id: message_id.into(),
            message: json!(cents),
            origin: None,
        })
        .await
        .expect("send")
}

/// Run the worker until the turn has an outcome (retries wait out their backoff).
async fn finish(worker: &Worker, engine: &Engine, id: &str, turn: u64) -> WorkflowTurn {
    let give_up = tokio::time::Instant::now() + GUARD;
    loop {
        worker.run_until_idle().await.expect("run the worker");
        let t = engine
            .turn(TurnQuery {
                id: id.into(),
                turn,
            })
            .await
            .expect("read the turn");
        if t.status.is_outcome() {
            return t;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "turn {turn} never finished: {t:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_transactional_step_commits_its_sql_with_its_saved_output() {
    let Some(db) = TestPostgres::start("transact_commits").await else {
        return;
    };
    let client = sql(&db).await;
    client.batch_execute(CREATE_LEDGER).await.unwrap();
    let engine = Engine::postgres(db.store().await, SystemClock, config());
    create(&engine, "acct-1", "ledger", 60_000).await;
    for (i, cents) in [100, 250, 75].into_iter().enumerate() {
        send(&engine, "acct-1", &format!("m{i}"), cents).await;
    }
    let worker = Worker::new(engine.clone()).register(ledger);
    for n in 1..=3 {
        let t = finish(&worker, &engine, "acct-1", n).await;
        assert_eq!(t.status, TurnStatus::Completed, "{t:?}");
        assert_eq!(t.steps.len(), 1);
        assert_eq!(t.steps[0].key, "debit");
        assert_eq!(t.result, t.steps[0].output, "the reply is the saved output");
    }
    let rows = ledger_rows(&client).await;
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows
        .iter()
        .all(|(effect, n)| *n == 1 && effect.ends_with("/debit")));
    let total: i64 = client
        .query_one("SELECT sum(cents)::bigint FROM ledger", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(total, 425);
}

#[tokio::test]
async fn a_failed_closure_rolls_back_and_a_saved_step_is_not_run_again() {
    let Some(db) = TestPostgres::start("transact_retries").await else {
        return;
    };
    let client = sql(&db).await;
    client.batch_execute(CREATE_LEDGER).await.unwrap();
    let engine = Engine::postgres(db.store().await, SystemClock, config());
    create(&engine, "acct-2", "flaky", 60_000).await;
    send(&engine, "acct-2", "m1", 40).await;
    let worker = Worker::new(engine.clone()).register(flaky);
    let t = finish(&worker, &engine, "acct-2", 1).await;
    assert_eq!(t.status, TurnStatus::Completed, "{t:?}");
    // Attempt 1: the closure inserted and failed (rolled back). Attempt 2: the closure ran
    // again and committed, then the handler failed. Attempt 3: the step replayed.
    assert_eq!(t.attempt, 3, "{t:?}");
    assert_eq!(CLOSURE_RUNS.load(SeqCst), 2);
    assert_eq!(HANDLER_RUNS.load(SeqCst), 2);
    let rows = ledger_rows(&client).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].1, 1, "one row for the one effect: {rows:?}");
}

#[tokio::test]
async fn a_statement_error_fails_the_attempt_and_saves_nothing() {
    let Some(db) = TestPostgres::start("transact_bad_sql").await else {
        return;
    };
    let engine = Engine::postgres(db.store().await, SystemClock, config());
    create(&engine, "acct-3", "bad-sql", 60_000).await;
    send(&engine, "acct-3", "m1", 1).await;
    let worker = Worker::new(engine.clone()).register(bad_sql);
    worker.run_until_idle().await.unwrap();
    let t = engine
        .turn(TurnQuery {
            id: "acct-3".into(),
            turn: 1,
        })
        .await
        .unwrap();
    assert!(t.steps.is_empty(), "nothing saved: {t:?}");
    let error = t.error.unwrap_or_default();
    assert!(error.contains("no_such_table"), "{error}");
    // The pool's connections are usable afterwards: the aborted transaction was rolled back.
    let healthy = Engine::postgres(db.store().await, SystemClock, config());
    healthy.get_instance("acct-3").await.unwrap();
    engine.get_instance("acct-3").await.unwrap();
}

#[tokio::test]
async fn a_transactional_step_on_another_store_fails_the_turn_saying_why() {
    let engine = Engine::new(MemoryStore::new(), SystemClock, config());
    create(&engine, "acct-4", "ledger", 60_000).await;
    send(&engine, "acct-4", "m1", 1).await;
    let worker = Worker::new(engine.clone()).register(ledger);
    let t = finish(&worker, &engine, "acct-4", 1).await;
    assert_eq!((t.status, t.attempt), (TurnStatus::Failed, 1), "{t:?}");
    let error = t.error.unwrap_or_default();
    assert!(
        error.contains("transactional step `debit` needs a backend that offers step transactions"),
        "{error}"
    );
}

/// `Engine::new` takes any store and keeps no capability of it: over a `PostgresStore` the
/// engine offers no step transactions, and the turn's error names the constructor that does.
#[tokio::test]
async fn an_engine_built_with_new_over_postgres_names_engine_postgres() {
    let Some(db) = TestPostgres::start("transact_new").await else {
        return;
    };
    let engine = Engine::new(db.store().await, SystemClock, config());
    create(&engine, "acct-5", "ledger", 60_000).await;
    send(&engine, "acct-5", "m1", 1).await;
    let worker = Worker::new(engine.clone()).register(ledger);
    let t = finish(&worker, &engine, "acct-5", 1).await;
    assert_eq!((t.status, t.attempt), (TurnStatus::Failed, 1), "{t:?}");
    let error = t.error.unwrap_or_default();
    assert!(
        error.contains("nor does an engine built with Engine::new")
            && error.contains("Engine::postgres(store, clock, config)"),
        "{error}"
    );
}

// A user's wrapper around the engine that forwards the step-transaction capability, and one
// that keeps the default (it offers none).
forwarding_backend!(Forwards {} {} {
    fn step_transactions(&self) -> Option<turnwise::store::StepTransactions> {
        self.engine.step_transactions()
    }
});
forwarding_backend!(Keeps {} {});

/// A worker finds step transactions through its backend's capability, whatever wraps the
/// engine: `Arc<Engine>` forwards it, as does a wrapper that forwards it; a wrapper that keeps
/// the default fails the turn saying what the step needs.
#[tokio::test]
async fn a_transactional_step_runs_through_arc_engine_and_a_forwarding_wrapper() {
    let Some(db) = TestPostgres::start("transact_wrappers").await else {
        return;
    };
    let client = sql(&db).await;
    client.batch_execute(CREATE_LEDGER).await.unwrap();
    let engine = Engine::postgres(db.store().await, SystemClock, config());
    let workers = [
        ("arc-1", Worker::new(std::sync::Arc::new(engine.clone()))),
        ("forwards-1", Worker::new(Forwards::new(engine.clone()))),
        ("keeps-1", Worker::new(Keeps::new(engine.clone()))),
    ];
    // One instance at a time, so that each worker runs only its own.
    let mut outcomes = Vec::new();
    for (id, worker) in workers {
        create(&engine, id, "ledger", 60_000).await;
        send(&engine, id, "m1", 5).await;
        let worker = worker.register(ledger);
        outcomes.push((id, finish(&worker, &engine, id, 1).await));
    }
    for (id, t) in &outcomes[..2] {
        assert_eq!(t.status, TurnStatus::Completed, "{id}: {t:?}");
    }
    let (id, t) = &outcomes[2];
    assert_eq!(t.status, TurnStatus::Failed, "{id}: {t:?}");
    let error = t.error.clone().unwrap_or_default();
    assert!(
        error.contains("needs a backend that offers step transactions"),
        "{id}: {error}"
    );
    let rows = ledger_rows(&client).await;
    assert!(
        rows.iter().all(|(_, n)| *n == 1),
        "each debit once: {rows:?}"
    );
    let effects: Vec<String> = rows.into_iter().map(|(e, _)| e).collect();
    assert_eq!(
        effects.len(),
        2,
        "one debit each for arc-1 and forwards-1: {effects:?}"
    );
}

// ---- crashes --------------------------------------------------------------------------------

#[test]
#[ignore = "child process of the transact crash tests"]
fn transact_child() {
    let Ok(url) = std::env::var(URL_ENV) else {
        return; // run by hand with --ignored: nothing to do
    };
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    runtime.block_on(async move {
        let engine = Engine::connect(&url).await.expect("connect");
        let worker = Worker::new(engine.clone()).register(ledger);
        // Until the turn finishes (the parent waits for this process to exit).
        finish(&worker, &engine, "acct-crash", 1).await;
    });
}

async fn crash_then_finish(point: &str) {
    let Some(db) = TestPostgres::start(&format!("transact_crash_{point}")).await else {
        return;
    };
    let client = sql(&db).await;
    client.batch_execute(CREATE_LEDGER).await.unwrap();
    let engine = Engine::postgres(db.store().await, SystemClock, config());
    // A lease short enough that the second child takes the turn over within seconds, and long
    // enough that its own heartbeats keep it on a loaded machine (at 300 ms a late beat lost
    // the lease and a third attempt finished).
    create(&engine, "acct-crash", "ledger", 2_000).await;
    send(&engine, "acct-crash", "m1", 500).await;

    let crashed = tokio::task::spawn_blocking({
        let point = point.to_owned();
        let db_url = db.url();
        move || (child_at(&db_url, Some(&point)), point)
    })
    .await
    .unwrap();
    assert!(
        !crashed.0.success(),
        "the first child must die at {}",
        crashed.1
    );
    let after_crash = ledger_rows(&client).await;
    let expected_after_crash = if point == "after-commit" { 1 } else { 0 };
    assert_eq!(
        after_crash.len(),
        expected_after_crash,
        "the ledger after a crash at {point}: {after_crash:?}"
    );

    let finished = tokio::task::spawn_blocking({
        let db_url = db.url();
        move || child_at(&db_url, None)
    })
    .await
    .unwrap();
    assert!(finished.success(), "the second child finishes the turn");
    let t = engine
        .turn(TurnQuery {
            id: "acct-crash".into(),
            turn: 1,
        })
        .await
        .unwrap();
    assert_eq!(t.status, TurnStatus::Completed, "{t:?}");
    assert_eq!(t.attempt, 2, "one attempt died, the next finished: {t:?}");
    let rows = ledger_rows(&client).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        rows[0].1, 1,
        "the effect exactly once after a crash at {point}: {rows:?}"
    );
}

/// Run `transact_child` as a child process on the schema at `url`, aborting at `crash`.
fn child_at(url: &str, crash: Option<&str>) -> std::process::ExitStatus {
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
    cmd.args([
        "--exact",
        &common::test_name(module_path!(), "transact_child"),
        "--nocapture",
        "--ignored",
    ])
    .env(URL_ENV, url)
    .env_remove(CRASH_ENV);
    if let Some(at) = crash {
        cmd.env(CRASH_ENV, at);
    }
    cmd.status().expect("run the child")
}

#[tokio::test]
async fn a_crash_between_the_sql_and_the_commit_leaves_the_effect_once() {
    crash_then_finish("after-sql").await;
}

#[tokio::test]
async fn a_crash_after_the_commit_leaves_the_effect_once() {
    crash_then_finish("after-commit").await;
}
