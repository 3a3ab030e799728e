//! The SQLite store and its files: one store per file (a lock on `<db>.lock`, held for the
//! store's life, released by the kernel when its process dies), and storage faults made loud (a
//! database file or write-ahead log deleted or replaced under a running store, a write that
//! fails) instead of writes answered and then lost.
//!
//! The children these tests start are this test binary run again with `--exact
//! store_files::<child> --ignored`, as in `crash.rs` and `store_journal.rs`.

#![cfg(all(feature = "sqlite", unix))]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::json;
use turnwise::store::*;

use crate::common;

const NS: &str = "default";

fn write(revision: u64) -> WriteSet {
    WriteSet {
        ns: NS.into(),
        id: "a".into(),
        expected_revision: revision.checked_sub(1).filter(|r| *r > 0),
        instance: Some(common::instance_record(NS, "a", revision)),
        turns: Vec::new(),
        retention: None,
        runs: Vec::new(),
        prune_runs_before: None,
        durability: Durability::Durable,
    }
}

fn wal(db: &Path) -> PathBuf {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

fn lock_file(db: &Path) -> PathBuf {
    let mut lock = db.as_os_str().to_owned();
    lock.push(".lock");
    PathBuf::from(lock)
}

// ---------------------------------------------------------------------------------------------
// One store per file

#[tokio::test]
async fn a_second_open_in_the_same_process_fails_at_once_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("one.db");
    // A pid left in the lock file by a process long gone locks nothing.
    std::fs::write(lock_file(&db), "999999999\n").unwrap();
    let first = SqliteStore::open(&db).await.unwrap();
    first.commit(write(1)).await.unwrap();

    let err = SqliteStore::open(&db).await.unwrap_err();
    let StoreError::Locked { path, lock, pid } = &err else {
        panic!("a second open: {err:?}");
    };
    assert_eq!(path, &db);
    assert_eq!(lock.file_name(), lock_file(&db).file_name());
    assert_eq!(*pid, Some(std::process::id()), "{err}");
    let message = err.to_string();
    assert!(message.contains(&db.display().to_string()), "{message}");
    assert!(
        message.contains("already open in this process"),
        "{message}"
    );

    // Through the engine, and under another name of the same file.
    let err = turnwise::Engine::open(&db).await.unwrap_err();
    assert_eq!(err.code(), "store_unavailable", "{err}");
    assert!(err.to_string().contains("one.db"), "{err}");
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&db, &link).unwrap();
    let err = SqliteStore::open(&link).await.unwrap_err();
    assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");

    // A clone shares the lock; dropping the last handle releases it.
    let clone = first.clone();
    drop(first);
    assert!(
        SqliteStore::open(&db).await.is_err(),
        "a clone still holds it"
    );
    drop(clone);
    let again = SqliteStore::open(&db).await.unwrap();
    assert_eq!(
        again
            .load_instance(NS, "a")
            .await
            .unwrap()
            .map(|i| i.revision),
        Some(1)
    );
    let pid = std::fs::read_to_string(lock_file(&db)).unwrap();
    assert_eq!(pid.trim(), std::process::id().to_string());
}

const HOLDER_DB: &str = "TURNWISE_FILES_HOLDER_DB";

/// The child of the cross-process lock tests: opens the store, writes revisions 1 to 3, says
/// `holding <pid>` and waits (reading stdin) until the parent kills it.
#[test]
#[ignore = "child process of the store_files lock tests"]
fn holder_child() {
    let Some(db) = std::env::var_os(HOLDER_DB) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let store = SqliteStore::open(Path::new(&db)).await.unwrap();
        for revision in 1..=3 {
            store.commit(write(revision)).await.unwrap();
        }
        let mut out = std::io::stdout().lock();
        writeln!(out, "holding {}", std::process::id()).unwrap();
        out.flush().unwrap();
        drop(out);
        // Blocks until the parent kills this process (or dies itself, closing the pipe).
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        drop(store);
    });
}

/// Start `holder_child` on `db` and wait until it holds the store.
fn start_holder(db: &Path) -> Child {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .arg("--exact")
        .arg(common::test_name(module_path!(), "holder_child"))
        .args(["--nocapture", "--ignored"])
        .env(HOLDER_DB, db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        match lines.next() {
            Some(line) => {
                let line = line.unwrap();
                if let Some(pid) = line.strip_prefix("holding ") {
                    assert_eq!(pid, child.id().to_string());
                    // Drain the rest, so that the child's last words meet no closed pipe.
                    std::thread::spawn(move || lines.for_each(drop));
                    return child;
                }
            }
            None => {
                let status = child.wait().unwrap();
                panic!("the holder exited before holding the store: {status}");
            }
        }
    }
}

#[tokio::test]
async fn a_second_open_while_another_process_holds_the_file_names_its_pid() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("held.db");
    let mut holder = start_holder(&db);

    let err = SqliteStore::open(&db).await.unwrap_err();
    let StoreError::Locked { path, pid, .. } = &err else {
        panic!("an open of a held file: {err:?}");
    };
    assert_eq!(path, &db);
    assert_eq!(*pid, Some(holder.id()), "{err}");
    let message = err.to_string();
    assert!(message.contains(&db.display().to_string()), "{message}");
    assert!(
        message.contains(&format!("another process (pid {},", holder.id())),
        "{message}"
    );

    // A graceful end releases the lock too.
    drop(holder.stdin.take());
    assert!(holder.wait().unwrap().success());
    let store = SqliteStore::open(&db).await.unwrap();
    assert_eq!(
        store
            .load_instance(NS, "a")
            .await
            .unwrap()
            .map(|i| i.revision),
        Some(3)
    );
}

#[tokio::test]
async fn after_a_sigkill_of_the_holder_the_file_opens_with_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("killed.db");
    let mut holder = start_holder(&db);
    assert!(matches!(
        SqliteStore::open(&db).await,
        Err(StoreError::Locked { .. })
    ));
    holder.kill().unwrap(); // SIGKILL
    holder.wait().unwrap();
    // The dead holder's pid is still in the lock file; it locks nothing.
    let left = std::fs::read_to_string(lock_file(&db)).unwrap();
    assert_eq!(left.trim(), holder.id().to_string());

    let store = SqliteStore::open(&db).await.unwrap();
    assert_eq!(
        store.load_instance(NS, "a").await.unwrap(),
        Some(common::instance_record(NS, "a", 3)),
        "every acknowledged write of the killed holder"
    );
    store.commit(write(4)).await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Storage faults

/// Both ways a durable write is synced: on the sync thread, and in the `COMMIT`.
fn variants() -> [(&'static str, SqliteOptions); 2] {
    [
        ("sync thread", SqliteOptions::default()),
        (
            "sync in COMMIT",
            SqliteOptions::default().with_sync_thread(false),
        ),
    ]
}

/// After `fault` changed the files under a store that wrote revision 1: the next write, every
/// later one and `health` fail with a store error naming `file` and saying what to do.
async fn refused_after(
    name: &str,
    db: &Path,
    options: SqliteOptions,
    fault: impl FnOnce(),
    file: &Path,
    change: &str,
) {
    let store = SqliteStore::open_with(db, options).await.unwrap();
    store.commit(write(1)).await.unwrap();
    assert_eq!(store.health().await, Ok(()), "{name}");
    fault();
    for revision in [2, 2] {
        let err = store.commit(write(revision)).await.unwrap_err();
        let CommitError::Store(e) = &err else {
            panic!("{name}: a write after the fault: {err:?}");
        };
        let message = e.to_string();
        assert!(
            message.contains(&file.display().to_string()) && message.contains(change),
            "{name}: {message}"
        );
        assert!(message.contains("restart the process"), "{name}: {message}");
    }
    let mut relaxed = write(2);
    relaxed.durability = Durability::Relaxed;
    assert!(store.commit(relaxed).await.is_err(), "{name}: relaxed");
    let err = store.health().await.unwrap_err();
    assert!(err.to_string().contains(change), "{name}: {err}");
    // Through the engine: a store error, 503 `store_unavailable` on the wire.
    let engine = turnwise::Engine::new(
        store.clone(),
        turnwise::clock::SystemClock,
        turnwise::EngineConfig::default(),
    );
    let err = engine.health().await.unwrap_err();
    assert_eq!((err.status(), err.code()), (503, "store_unavailable"));
}

#[tokio::test]
async fn a_deleted_write_ahead_log_stops_writes_and_health() {
    for (name, options) in variants() {
        let dir = tempfile::tempdir().unwrap();
        let db = std::fs::canonicalize(dir.path()).unwrap().join("wal.db");
        let log = wal(&db);
        let fault = || std::fs::remove_file(&log).unwrap();
        refused_after(name, &db, options, fault, &log, "was deleted").await;
    }
}

#[tokio::test]
async fn a_replaced_database_file_stops_writes_and_health() {
    for (name, options) in variants() {
        let dir = tempfile::tempdir().unwrap();
        let db = std::fs::canonicalize(dir.path()).unwrap().join("main.db");
        let other = dir.path().join("other.db");
        std::fs::write(&other, b"").unwrap();
        let fault = || std::fs::rename(&other, &db).unwrap();
        refused_after(name, &db, options, fault, &db, "was replaced").await;
    }
}

#[tokio::test]
async fn a_deleted_database_file_is_noticed_by_health_without_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = std::fs::canonicalize(dir.path()).unwrap().join("gone.db");
    let store = SqliteStore::open(&db).await.unwrap();
    store.commit(write(1)).await.unwrap();
    std::fs::remove_file(&db).unwrap();
    let err = store.health().await.unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("the database file {} was deleted", db.display())),
        "{err}"
    );
    assert!(store.commit(write(2)).await.is_err());
}

const FULL_DIR: &str = "TURNWISE_FILES_FULL_DIR";

/// The child of `a_failed_write_makes_the_store_unhealthy_until_a_write_succeeds`, run with a
/// file-size limit of a few MiB (`ulimit -f`) and `SIGXFSZ` ignored, so that a write past the
/// limit fails as on a full disk.
#[test]
#[ignore = "child process of a_failed_write_makes_the_store_unhealthy_until_a_write_succeeds"]
fn full_disk_child() {
    let Some(dir) = std::env::var_os(FULL_DIR) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let store = SqliteStore::open(&Path::new(&dir).join("full.db"))
            .await
            .unwrap();
        store.commit(write(1)).await.unwrap();
        assert_eq!(store.health().await, Ok(()));
        // Too large for the limit: the write fails, and so does health.
        let mut big = write(2);
        if let Some(i) = big.instance.as_mut() {
            i.state = json!("x".repeat(12 << 20));
        }
        let err = store.commit(big).await.unwrap_err();
        assert!(matches!(err, CommitError::Store(_)), "{err:?}");
        let unhealthy = store.health().await.unwrap_err();
        assert!(
            unhealthy.to_string().contains("the last write failed"),
            "{unhealthy}"
        );
        // Health stays down until a write succeeds.
        assert!(store.health().await.is_err());
        store.commit(write(2)).await.unwrap();
        assert_eq!(store.health().await, Ok(()));
        println!("full-disk-child done");
    });
}

#[test]
fn a_failed_write_makes_the_store_unhealthy_until_a_write_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    // 8192 blocks: 4 MiB in dash's 512-byte blocks, 8 MiB in bash's 1 KiB ones.
    let out = Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 8192 && exec \"$@\"")
        .arg("sh")
        .arg(std::env::current_exe().unwrap())
        .arg("--exact")
        .arg(common::test_name(module_path!(), "full_disk_child"))
        .args(["--nocapture", "--ignored"])
        .env(FULL_DIR, dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("full-disk-child done"),
        "the child failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
