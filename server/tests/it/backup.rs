//! `turnwise backup`: a copy taken while a server runs and a client writes restores to a store
//! whose reads hold every message acknowledged before the backup began, and the server goes on
//! undisturbed; a PostgreSQL URL, a missing database and an existing destination are refused.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;
use crate::config::{refused, turnwise};
use serde_json::json;
use turnwise::store::{InstanceFilter, SqliteStore, Store, TurnRange};

/// Instances the load spreads its messages over (each holds at most 128 unfinished turns).
const INSTANCES: usize = 16;
/// The load stops by itself after this many messages.
const MAX_MESSAGES: usize = 16 * 120;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_under_load_holds_every_message_acknowledged_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("turnwise.db");
    let out = dir.path().join("backup.db");
    let (_server, addr) = spawn_binary(&db, "127.0.0.1:0", None);
    let api = Api::new(format!("http://{addr}"), None);
    for i in 0..INSTANCES {
        api.create(&format!("b-{i}"), 60_000).await;
    }

    // A client sending messages in a loop, recording each acknowledged one.
    let acked = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (api, acked, stop) = (api.clone(), acked.clone(), stop.clone());
        tokio::spawn(async move {
            for n in 0..MAX_MESSAGES {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let id = format!("b-{}", n % INSTANCES);
                let message_id = format!("m-{n}");
                api.send(&id, &message_id, json!({"add": 1})).await;
                acked.lock().unwrap().push((id, message_id));
            }
        })
    };
    let acked_count = || acked.lock().unwrap().len();
    while acked_count() < 100 {
        assert!(!load.is_finished(), "the load stopped early");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let before: Vec<(String, String)> = acked.lock().unwrap().clone();
    // As docs/operations.md shows it, in the database's directory.
    let mut backup = turnwise(
        &["backup", "--db", "turnwise.db", "--out", "backup.db"],
        &[],
    );
    backup.current_dir(dir.path());
    let output = tokio::task::spawn_blocking(move || {
        let mut child = backup.spawn().unwrap();
        let status = wait_exit(&mut child, Duration::from_secs(60));
        let _ = child.kill();
        let mut said = (String::new(), String::new());
        std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut said.0).unwrap();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut said.1).unwrap();
        (status, said)
    })
    .await
    .unwrap();
    let (status, (stdout, stderr)) = output;
    assert!(
        status.is_some_and(|s| s.success()),
        "backup: {status:?} {stdout} {stderr}"
    );
    assert!(
        stdout.starts_with("backed up turnwise.db to backup.db: ")
            && stdout.trim_end().ends_with(" bytes, integrity checked"),
        "{stdout}"
    );

    // The server was not disturbed: it still takes writes, and is ready.
    let after_backup = acked_count();
    while acked_count() <= after_backup && !load.is_finished() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::Relaxed);
    load.await.unwrap();
    assert_eq!(api.get("/readyz").await.ok(), json!({"status": "ok"}));
    api.send("b-0", "after-the-backup", json!({"add": 1})).await;

    // The copy opens as a store; read all of it through the store's reads.
    let store = SqliteStore::open(&out).await.expect("the backup opens");
    let ns = "main";
    let mut instances = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_instances(
                ns,
                InstanceFilter {
                    after: after.clone(),
                    limit: 5,
                    ..InstanceFilter::default()
                },
            )
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        after = Some(last.id.clone());
        instances.extend(page);
    }
    assert_eq!(instances.len(), INSTANCES);
    let mut kept = BTreeSet::new();
    for inst in &instances {
        assert_eq!(
            store.load_instance(ns, &inst.id).await.unwrap().as_ref(),
            Some(inst)
        );
        let mut numbers = Vec::new();
        for finished in [false, true] {
            let mut after = None;
            loop {
                let turns = store
                    .list_turns(
                        ns,
                        &inst.id,
                        TurnRange {
                            finished,
                            after,
                            limit: 50,
                        },
                    )
                    .await
                    .unwrap();
                let Some(last) = turns.last() else { break };
                after = Some(last.number);
                for turn in turns {
                    assert_eq!(
                        store.load_turn(ns, &inst.id, turn.number).await.unwrap(),
                        Some(turn.clone())
                    );
                    numbers.push(turn.number);
                    kept.insert((inst.id.clone(), turn.message_id.clone()));
                }
            }
        }
        // No worker ran: every turn is in the inbox, numbered from 1, as the record says.
        numbers.sort_unstable();
        assert_eq!(numbers, inst.pending, "{}", inst.id);
        assert_eq!(numbers, (1..=numbers.len() as u64).collect::<Vec<_>>());
    }
    for (id, message_id) in &before {
        assert!(
            kept.contains(&(id.clone(), message_id.clone())),
            "{message_id} of {id} was acknowledged before the backup began but is not in it"
        );
        let turn = store.find_message(ns, id, message_id).await.unwrap();
        assert_eq!(turn.map(|t| t.message_id), Some(message_id.clone()));
    }
    assert!(
        !kept.contains(&("b-0".to_owned(), "after-the-backup".to_owned())),
        "the copy is of the time of the backup"
    );
    drop(store);

    // Restore as docs/operations.md says: with the server stopped, the copy over the file and
    // the old write-ahead log removed; a server started on it serves the copy.
    drop(_server);
    let restore = std::process::Command::new("sh")
        .args([
            "-c",
            "cp backup.db turnwise.db && rm -f turnwise.db-wal turnwise.db-shm",
        ])
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert!(restore.success());
    let (_restored, addr) = spawn_binary(&db, "127.0.0.1:0", None);
    let restored = Api::new(format!("http://{addr}"), None);
    let (id, message_id) = before.last().unwrap();
    let inbox = restored
        .get(&format!("/v1/workflows/instances/inbox?id={id}&limit=100"))
        .await
        .ok();
    assert!(
        inbox["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["message_id"] == message_id.as_str()),
        "{inbox}"
    );
}

#[test]
fn a_backup_is_refused_for_a_postgres_url_a_missing_file_or_an_existing_copy() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("backup.db");
    let out = out.to_str().unwrap();

    let (code, stderr) = refused(
        &[
            "backup",
            "--db",
            "postgres://turnwise:secret@127.0.0.1/turnwise",
            "--out",
            out,
        ],
        &[],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("pg_dump"), "{stderr}");
    assert!(!stderr.contains("secret"), "{stderr}");

    // A scheme that is no store: refused by the engine's driver table, naming the known ones.
    let (code, stderr) = refused(
        &["backup", "--db", "mysql://127.0.0.1/turnwise", "--out", out],
        &[],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("`mysql://` is not a store"), "{stderr}");

    let missing = dir.path().join("missing.db");
    let (code, stderr) = refused(
        &["backup", "--db", missing.to_str().unwrap(), "--out", out],
        &[],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no database file"), "{stderr}");
    assert!(!missing.exists(), "no database was created");

    let existing = dir.path().join("existing.db");
    std::fs::write(&existing, "keep me").unwrap();
    let (code, stderr) = refused(
        &[
            "backup",
            "--db",
            existing.to_str().unwrap(),
            "--out",
            existing.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("exists already"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep me");
}
