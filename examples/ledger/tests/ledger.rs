//! The walkthrough of docs/postgres.md, minus the HTTP nodes (server/tests/it/multi_node.rs
//! covers those): `setup`, two `worker` processes on one PostgreSQL schema, debits admitted with
//! `send`, and `show`. Every debit lands once, and each turn was run by one of the two workers.
//! Skipped with a printed line when there is no database (except in CI).

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use turnwise::testing::TestPostgres;

const BIN: &str = env!("CARGO_BIN_EXE_example-ledger");

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_worker_processes_debit_each_message_once() {
    let Some(db) = TestPostgres::start("example_ledger").await else {
        return;
    };
    let url = db.url();
    ledger(&["setup", "--accounts", "2", "--cents", "10000"], &url);
    let workers = Workers(
        ["worker-1", "worker-2"]
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
    for i in 1..=4 {
        ledger(&["send", "acct-1", &format!("a{i}"), "100"], &url);
        ledger(&["send", "acct-2", &format!("b{i}"), "25"], &url);
    }
    // A repeated message id is the same message: not debited twice.
    ledger(&["send", "acct-1", "a1", "100"], &url);

    let give_up = Instant::now() + Duration::from_secs(20);
    let shown = loop {
        let out = String::from_utf8(ledger(&["show"], &url).stdout).unwrap();
        if out.contains("acct-1: 9600 cents after 4 debits")
            && out.contains("acct-2: 9900 cents after 4 debits")
        {
            break out;
        }
        assert!(
            Instant::now() < give_up,
            "the debits never all landed:\n{out}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    drop(workers);
    let turns: Vec<&str> = shown.lines().filter(|l| l.contains(" turn ")).collect();
    assert_eq!(turns.len(), 8, "{shown}");
    for line in turns {
        assert!(
            line.ends_with("run by worker-1") || line.ends_with("run by worker-2"),
            "{line}"
        );
    }
}
