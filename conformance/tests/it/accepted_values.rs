//! Every acknowledged write stays readable on the embedded default (engine over SQLite), after
//! a graceful restart and after a SIGKILL: generated JSON values (deep, wide, long strings,
//! unicode, big and exotic numbers) through every value-carrying call, read back through every
//! read once the file is opened again. (`server/tests/it/accepted_values.rs` does the same over
//! HTTP against the `turnwise` binary.)
//!
//! The SIGKILL test re-executes this test binary as the child (`values_child`), which climbs
//! the values of a seed and prints `ack <index> <stage>` after each acknowledged call; the
//! parent kills it at a random moment, opens the file and checks every acknowledgement. A round
//! fails unless the child reached its kill point still running and acknowledged something (a
//! child that died early checks nothing). Set `TURNWISE_VALUES_SEED` to replay a run (the seed
//! is printed).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use turnwise::Engine;
use turnwise_conformance::values::{self, instance_id, Stage};

const DB_ENV: &str = "TURNWISE_VALUES_DB";
const SEED_ENV: &str = "TURNWISE_VALUES_SEED";
/// Values per run.
const VALUES: usize = 48;
/// Kill rounds of the SIGKILL test, each on a new file with its own values.
const ROUNDS: u64 = 4;
/// A child nobody killed exits by itself after this long.
const CHILD_LIFETIME: Duration = Duration::from_secs(60);

fn seed() -> u64 {
    values::seed_from_env(SEED_ENV)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_values_survive_a_graceful_restart() {
    let seed = seed();
    println!("seed {seed} (set {SEED_ENV} to replay)");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("values.db");
    let values = values::values(seed, VALUES);
    let mut reached = Vec::new();
    {
        let engine = Engine::open(&path).await.expect("open the store");
        for (i, v) in values.iter().enumerate() {
            let climbed = values::climb(&engine, &instance_id(i), v, |_| {}).await;
            assert!(
                climbed.error.is_none(),
                "value {i} (seed {seed}) was refused: {:?}\nthe value: {v}",
                climbed.error
            );
            reached.push(climbed.reached);
        }
    } // the engine and its store close here: a graceful stop
    let engine = Engine::open(&path).await.expect("open the store again");
    for (i, v) in values.iter().enumerate() {
        values::check(&engine, &instance_id(i), v, reached[i]).await;
    }
    values::check_listings(&engine, VALUES).await;
}

#[test]
#[ignore = "child process of generated_values_survive_sigkill"]
fn values_child() {
    let (Some(path), Some(seed)) = (std::env::var_os(DB_ENV), std::env::var(SEED_ENV).ok()) else {
        return; // run by hand with --ignored: nothing to do
    };
    let seed: u64 = seed.parse().expect("a numeric seed");
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    runtime.block_on(async move {
        let engine = Engine::open(Path::new(&path))
            .await
            .expect("open the store");
        let work = async {
            for (i, v) in values::values(seed, VALUES).iter().enumerate() {
                let climbed = values::climb(&engine, &instance_id(i), v, |stage| {
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ack {i} {}", stage.name()).expect("stdout");
                    out.flush().expect("stdout");
                })
                .await;
                if let Some(e) = climbed.error {
                    panic!("value {i} (seed {seed}) was refused: {e}\nthe value: {v}");
                }
            }
            println!("done");
            // Wait to be killed: a child that wrote nothing after its last acknowledgement.
            std::future::pending::<()>().await;
        };
        tokio::select! {
            () = work => {}
            () = tokio::time::sleep(CHILD_LIFETIME) => {}
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_values_survive_sigkill() {
    let base = seed();
    println!("seed {base} (set {SEED_ENV} to replay)");
    let exe = std::env::current_exe().expect("the test binary");
    let dir = tempfile::tempdir().unwrap();
    for round in 0..ROUNDS {
        let seed = base.wrapping_add(round);
        let path = dir.path().join(format!("values-{round}.db"));
        let mut child = Command::new(&exe)
            .arg("--exact")
            .arg(crate::common::test_name(module_path!(), "values_child"))
            .args(["--nocapture", "--ignored"])
            .env(DB_ENV, &path)
            .env(SEED_ENV, seed.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the child");
        // Kill after a number of acknowledgements chosen from the seed: somewhere in the middle
        // of a value's climb, or (the last round) after the whole run.
        let total = VALUES * Stage::ALL.len();
        let kill_after = if round + 1 == ROUNDS {
            usize::MAX
        } else {
            1 + (seed as usize % (total - 1))
        };
        let mut acks: BTreeMap<usize, Stage> = BTreeMap::new();
        let mut seen = 0;
        let mut done = false;
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let give_up = Instant::now() + CHILD_LIFETIME;
        for line in lines {
            let line = line.expect("the child's output");
            if line == "done" {
                done = true;
                break;
            }
            let Some(rest) = line.strip_prefix("ack ") else {
                continue;
            };
            let (i, stage) = rest.split_once(' ').expect("ack <index> <stage>");
            let stage = Stage::parse(stage).expect("a stage name");
            acks.insert(i.parse().expect("an index"), stage);
            seen += 1;
            if seen >= kill_after || Instant::now() > give_up {
                break;
            }
        }
        // Progress before safety: the child reached the kill point (its `kill_after`-th
        // acknowledgement, or the end of the run in the last round) and is still running, so
        // the kill lands on a live process that acknowledged something.
        let reached = if kill_after == usize::MAX {
            done
        } else {
            seen >= kill_after
        };
        let status = child.try_wait().expect("the child's status");
        assert!(
            reached && status.is_none(),
            "round {round} (seed {seed}): the child did not reach the kill point alive: \
             {seen} acknowledgements of {kill_after} wanted, done: {done}, exit status: \
             {status:?} (see its stderr)"
        );
        // SIGKILL: no chance to flush or close anything.
        child.kill().expect("kill the child");
        child.wait().expect("reap the child");
        println!("round {round}: killed after {seen} acknowledgements");
        assert!(
            !acks.is_empty(),
            "round {round} (seed {seed}): killed with nothing acknowledged: nothing to check"
        );

        let engine = Engine::open(&path)
            .await
            .expect("the store opens after a SIGKILL");
        let values = values::values(seed, VALUES);
        for (i, v) in values.iter().enumerate() {
            values::check(&engine, &instance_id(i), v, acks.get(&i).copied()).await;
        }
        values::check_listings(&engine, acks.len()).await;
    }
}
