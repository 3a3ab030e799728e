//! Every acknowledged write stays readable over HTTP: generated JSON values (deep, wide, long
//! strings, unicode, big and exotic numbers) through every value-carrying route of the
//! `turnwise` binary, then read back through every read route after a graceful restart
//! (SIGTERM) and after SIGKILLs at random moments. The client is the `Http` backend; the
//! workload is the conformance crate's `values` module (`conformance/tests/it/accepted_values.rs`
//! runs it on the embedded engine).
//!
//! Set `TURNWISE_VALUES_SEED` to replay a run (the seed is printed).

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use turnwise::Http;
use turnwise_conformance::values::{self, instance_id, Stage};

const SEED_ENV: &str = "TURNWISE_VALUES_SEED";
/// Values per run.
const VALUES: usize = 32;
/// SIGKILL rounds, each on a new file with its own values.
const ROUNDS: u64 = 3;

fn seed() -> u64 {
    values::seed_from_env(SEED_ENV)
}

/// A client that does not retry: a killed server ends the climb at once.
fn client(addr: &str) -> Http {
    Http::builder(format!("http://{addr}"))
        .max_retries(0)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("an HTTP client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_values_survive_a_graceful_restart() {
    let seed = seed();
    println!("seed {seed} (set {SEED_ENV} to replay)");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("values.db");
    let values = values::values(seed, VALUES);
    let (mut server, addr) = spawn_binary(&db, "127.0.0.1:0", None);
    let http = client(&addr);
    let mut reached = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let climbed = values::climb(&http, &instance_id(i), v, |_| {}).await;
        assert!(
            climbed.error.is_none(),
            "value {i} (seed {seed}) was refused: {:?}\nthe value: {v}",
            climbed.error
        );
        reached.push(climbed.reached);
    }
    let term = std::process::Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let status =
        tokio::task::spawn_blocking(move || wait_exit(&mut server.0, Duration::from_secs(20)))
            .await
            .unwrap()
            .expect("the server exits after SIGTERM");
    assert!(status.success(), "{status:?}");

    let (mut server, addr) = spawn_binary(&db, "127.0.0.1:0", None);
    let http = client(&addr);
    for (i, v) in values.iter().enumerate() {
        values::check(&http, &instance_id(i), v, reached[i]).await;
    }
    values::check_listings(&http, VALUES).await;
    server.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_values_survive_sigkill() {
    let base = seed();
    println!("seed {base} (set {SEED_ENV} to replay)");
    let dir = tempfile::tempdir().unwrap();
    for round in 0..ROUNDS {
        let seed = base.wrapping_add(round);
        let db = dir.path().join(format!("values-{round}.db"));
        let values = values::values(seed, VALUES);
        let (server, addr) = spawn_binary(&db, "127.0.0.1:0", None);
        let server = Arc::new(Mutex::new(server));
        // Kill after a number of acknowledgements chosen from the seed, from the client's own
        // acknowledgement callback, while the next request is about to go out.
        let total = VALUES * Stage::ALL.len();
        let kill_after = 1 + (seed as usize % (total - 1));
        let acks: Arc<Mutex<BTreeMap<usize, Stage>>> = Arc::default();
        let http = client(&addr);
        let mut seen = 0;
        'climb: for (i, v) in values.iter().enumerate() {
            let climbed = values::climb(&http, &instance_id(i), v, |stage| {
                acks.lock().unwrap().insert(i, stage);
                seen += 1;
                if seen == kill_after {
                    server.lock().unwrap().kill(); // SIGKILL
                }
            })
            .await;
            if let Some(e) = climbed.error {
                assert!(
                    seen >= kill_after,
                    "value {i} (seed {seed}) failed before the kill: {e}\nthe value: {v}"
                );
                break 'climb;
            }
        }
        server.lock().unwrap().kill();
        println!("round {round}: killed after {seen} acknowledgements");

        let (mut server, addr) = spawn_binary(&db, "127.0.0.1:0", None);
        let http = client(&addr);
        let acks = acks.lock().unwrap().clone();
        for (i, v) in values.iter().enumerate() {
            values::check(&http, &instance_id(i), v, acks.get(&i).copied()).await;
        }
        values::check_listings(&http, acks.len()).await;
        server.kill();
    }
}
