//! The walkthrough of docs/postgres.md, minus the HTTP nodes (server/tests/it/multi_node.rs
//! covers those): `setup`, two `worker` processes on one PostgreSQL schema, debits admitted with
//! `send`, and `show`. The test waits until every message was run and nothing is left queued or
//! running, checks that nothing changes afterwards, and then compares the messages the
//! application journalled (its `entries` table, written in the debit's transaction) with the
//! messages sent: each debited exactly once, the balances to match, and both worker processes
//! to have run turns. (Which worker claims a turn is a race; should one have taken every turn,
//! a few more debits are sent until both ran one, and the test fails if that never happens.)
//! Skipped with a printed line when there is no database (except in CI).

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use turnwise::protocol::{HistoryQuery, TurnStatus};
use turnwise::testing::TestPostgres;
use turnwise::{Backend, Engine};

const BIN: &str = env!("CARGO_BIN_EXE_example-ledger");
const WORKERS: [&str; 2] = ["worker-1", "worker-2"];
const START_CENTS: i64 = 10_000;
/// How long draining may take on a loaded machine before the test gives up.
const DRAIN_LIMIT: Duration = Duration::from_secs(60);
/// After draining, how long the workers keep running while nothing may change.
const SETTLE: Duration = Duration::from_secs(2);
/// Which worker claims a turn is a race: should one worker have taken every turn of the first
/// rounds, up to this many more rounds are sent (each a message per account) until both ran.
const EXTRA_ROUNDS: u32 = 8;

fn ledger(args: &[&str], url: &str) -> Output {
    let out = Command::new(BIN)
        .args(args)
        .args(["--db", url])
        .output()
        .expect("run example-ledger");
    assert!(
        out.status.success(),
        "example-ledger {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Kills the worker processes however the test ends.
struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One finished turn of an account, as its history tells it.
#[derive(Debug, PartialEq)]
struct Ran {
    message_id: String,
    status: TurnStatus,
    worker: Option<String>,
}

/// Everything the test compares, read at one moment.
#[derive(Debug, PartialEq)]
struct Snapshot {
    /// Per account: unfinished turns, and the finished ones by number.
    pending: BTreeMap<String, u64>,
    history: BTreeMap<String, BTreeMap<u64, Ran>>,
    /// Per account: `(cents, debits)` from `accounts`.
    balances: BTreeMap<String, (i64, i64)>,
    /// The journal, `(account, turn, cents)`, sorted.
    entries: Vec<(String, i64, i64)>,
}

/// Wait until every message sent has a finished turn and nothing is queued or running.
async fn drain(
    engine: &Engine,
    db: &tokio_postgres::Client,
    sent: &BTreeMap<&str, BTreeMap<String, i64>>,
) -> Snapshot {
    let accounts: Vec<&str> = sent.keys().copied().collect();
    let give_up = Instant::now() + DRAIN_LIMIT;
    loop {
        let now = snapshot(engine, db, &accounts).await;
        let done = accounts
            .iter()
            .all(|&acct| now.pending[acct] == 0 && now.history[acct].len() >= sent[acct].len());
        if done {
            return now;
        }
        assert!(
            Instant::now() < give_up,
            "the messages were not all run within {DRAIN_LIMIT:?}: {now:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Round `i`: a debit of each account, `a<i>` of 100 cents and `b<i>` of 25.
fn send_round(url: &str, sent: &mut BTreeMap<&str, BTreeMap<String, i64>>, i: u32) {
    for (acct, prefix, cents) in [("acct-1", "a", 100), ("acct-2", "b", 25)] {
        let id = format!("{prefix}{i}");
        ledger(&["send", acct, &id, &cents.to_string()], url);
        sent.entry(acct).or_default().insert(id, cents);
    }
}

/// The workers named in the snapshot's history.
fn workers_that_ran(s: &Snapshot) -> BTreeSet<&str> {
    s.history
        .values()
        .flat_map(BTreeMap::values)
        .filter_map(|t| t.worker.as_deref())
        .collect()
}

async fn snapshot(engine: &Engine, db: &tokio_postgres::Client, accounts: &[&str]) -> Snapshot {
    let mut pending = BTreeMap::new();
    let mut history = BTreeMap::new();
    for &acct in accounts {
        let inst = engine.get_instance(acct).await.expect("read the instance");
        pending.insert(acct.to_owned(), inst.pending_messages);
        let page = engine
            .history(HistoryQuery {
                id: acct.into(),
                after: None,
                limit: Some(50),
            })
            .await
            .expect("read the history");
        let turns = page
            .turns
            .into_iter()
            .map(|t| {
                let ran = Ran {
                    message_id: t.message_id,
                    status: t.status,
                    worker: t.worker,
                };
                (t.number, ran)
            })
            .collect();
        history.insert(acct.to_owned(), turns);
    }
    let balances = db
        .query("SELECT id, cents, debits FROM accounts", &[])
        .await
        .expect("read accounts")
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    let entries = db
        .query(
            "SELECT account, turn, cents FROM entries ORDER BY account, turn, cents",
            &[],
        )
        .await
        .expect("read entries")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    Snapshot {
        pending,
        history,
        balances,
        entries,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_worker_processes_debit_each_message_once() {
    let Some(pg) = TestPostgres::start("example_ledger").await else {
        return;
    };
    let url = pg.url();
    ledger(
        &[
            "setup",
            "--accounts",
            "2",
            "--cents",
            &START_CENTS.to_string(),
        ],
        &url,
    );
    let workers = Workers(
        WORKERS
            .iter()
            .map(|id| {
                Command::new(BIN)
                    .args(["worker", "--db", &url, "--id", id])
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("start a worker")
            })
            .collect(),
    );
    let engine = Engine::connect(&url).await.expect("connect an engine");
    let (db, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect to the application's tables");
    tokio::spawn(connection);

    // What is sent: per account, message id -> cents.
    let mut sent: BTreeMap<&str, BTreeMap<String, i64>> = BTreeMap::new();
    for i in 1..=4 {
        send_round(&url, &mut sent, i);
    }
    // A repeated message id is the same message: not debited twice.
    ledger(&["send", "acct-1", "a1", "100"], &url);

    // Drain: every message sent has a finished turn, and nothing is queued or running.
    let mut round = 4;
    let drained = loop {
        let drained = drain(&engine, &db, &sent).await;
        if workers_that_ran(&drained).len() >= WORKERS.len() || round >= 4 + EXTRA_ROUNDS {
            break drained;
        }
        round += 1;
        send_round(&url, &mut sent, round);
    };
    let accounts: Vec<&str> = sent.keys().copied().collect();
    // Settle: with both workers still running, nothing more happens.
    let settled = Instant::now() + SETTLE;
    while Instant::now() < settled {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = snapshot(&engine, &db, &accounts).await;
        assert_eq!(now, drained, "something changed after the inboxes drained");
    }
    drop(workers);

    // Each account's history: exactly the messages sent, each once, all completed.
    let mut ran_by: BTreeMap<&str, usize> = BTreeMap::new();
    for &acct in &accounts {
        let turns = &drained.history[acct];
        let ids: Vec<&str> = turns.values().map(|t| t.message_id.as_str()).collect();
        let unique: BTreeSet<&str> = ids.iter().copied().collect();
        let want: BTreeSet<&str> = sent[acct].keys().map(String::as_str).collect();
        assert!(
            unique == want && ids.len() == want.len(),
            "{acct}: the turns run are {ids:?}, the messages sent {want:?}"
        );
        for (n, t) in turns {
            assert_eq!(t.status, TurnStatus::Completed, "{acct} turn {n}: {t:?}");
            let worker = t.worker.as_deref().unwrap_or("(none)");
            let known = WORKERS.iter().find(|w| **w == worker);
            let known = known.unwrap_or_else(|| panic!("{acct} turn {n} was run by {worker}"));
            *ran_by.entry(known).or_default() += 1;
        }
    }
    // The journal: which message each debit applied, by the turn that carried it.
    let mut debited: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    for (acct, turn, cents) in &drained.entries {
        let acct = accounts
            .iter()
            .copied()
            .find(|a| a == acct)
            .unwrap_or_else(|| panic!("a debit of unknown account {acct}"));
        let message = u64::try_from(*turn)
            .ok()
            .and_then(|n| drained.history[acct].get(&n))
            .map_or_else(
                || panic!("{acct}: a debit for turn {turn}, which did not run"),
                |t| t.message_id.as_str(),
            );
        assert_eq!(
            Some(cents),
            sent[acct].get(message),
            "{acct}: the debit for {message} took the wrong amount"
        );
        *debited.entry(acct).or_default().entry(message).or_default() += 1;
    }
    for &acct in &accounts {
        let want: BTreeMap<&str, usize> = sent[acct].keys().map(|id| (id.as_str(), 1)).collect();
        assert_eq!(
            debited.get(acct),
            Some(&want),
            "{acct}: times each message was debited (the journal), against each message sent once"
        );
        let total: i64 = sent[acct].values().sum();
        let count = i64::try_from(sent[acct].len()).expect("a small count");
        assert_eq!(
            drained.balances[acct],
            (START_CENTS - total, count),
            "{acct}: (cents, debits) in `accounts`"
        );
    }
    // Both worker processes took part.
    println!("turns per worker: {ran_by:?}");
    for w in WORKERS {
        assert!(
            ran_by.contains_key(w),
            "{w} ran no turn; turns per worker: {ran_by:?}"
        );
    }

    // `show` tells the same story.
    let shown = String::from_utf8(ledger(&["show"], &url).stdout).unwrap();
    for &acct in &accounts {
        let total: i64 = sent[acct].values().sum();
        let line = format!(
            "{acct}: {} cents after {} debits",
            START_CENTS - total,
            sent[acct].len()
        );
        assert!(shown.contains(&line), "`show` lacks {line:?}:\n{shown}");
    }
}
