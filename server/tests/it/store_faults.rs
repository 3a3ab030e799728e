//! The `turnwise` binary and its SQLite file: a second server on the same file refuses to
//! start, naming the file and the running server's pid; the database files deleted under a
//! running server make writes and `/status` answer `503 store_unavailable`, logged once.

#![cfg(unix)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

/// Bounds every wait of these tests.
const PATIENCE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_on_the_same_file_exits_naming_the_file_and_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("turnwise.db");
    let (mut first, addr) = spawn_binary(&db, "127.0.0.1:0", None);
    let api = Api::new(format!("http://{addr}"), None);
    api.create("held-1", 60_000).await;

    let mut second = Command::new(env!("CARGO_BIN_EXE_turnwise"))
        .args(["serve", "--db"])
        .arg(&db)
        .args(["--bind", "127.0.0.1:0"])
        .env_remove("TURNWISE_API_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_exit(&mut second, PATIENCE).expect("the second server exits by itself");
    let out = second.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!status.success(), "the second server: {status}\n{stderr}");
    assert!(stderr.contains(&db.display().to_string()), "{stderr}");
    assert!(
        stderr.contains(&format!("another process (pid {},", first.id())),
        "{stderr}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("listening"),
        "the second server listened"
    );
    // The first one serves on, untouched.
    assert_eq!(api.snapshot("held-1").await["instance"]["id"], "held-1");

    // Killed, its lock is gone with it: a new server starts on the file, with its data.
    first.kill();
    let (_third, addr) = spawn_binary(&db, "127.0.0.1:0", None);
    let api = Api::new(format!("http://{addr}"), None);
    assert_eq!(api.snapshot("held-1").await["instance"]["id"], "held-1");
}

/// The binary on `db` with its stderr collected: the process, its address, the lines, and the
/// thread collecting them, which ends once the process is gone and every line is in.
fn spawn_logging(
    db: &Path,
) -> (
    ServerProcess,
    String,
    Arc<Mutex<Vec<String>>>,
    std::thread::JoinHandle<()>,
) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_turnwise"))
        .args(["serve", "--db"])
        .arg(db)
        .args(["--bind", "127.0.0.1:0"])
        .env_remove("TURNWISE_API_TOKEN")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let stderr = child.stderr.take().unwrap();
    let lines = log.clone();
    let collecting = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            lines.lock().unwrap().push(line);
        }
    });
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(addr) = line.strip_prefix("turnwise listening on http://") {
                let _ = tx.send(addr.to_owned());
            }
        }
    });
    let child = ServerProcess(child);
    let addr = rx
        .recv_timeout(PATIENCE)
        .unwrap_or_else(|_| panic!("the server did not listen: {:?}", log.lock().unwrap()));
    (child, addr, log, collecting)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_database_files_make_writes_and_status_answer_503() {
    let dir = tempfile::tempdir().unwrap();
    let db = std::fs::canonicalize(dir.path())
        .unwrap()
        .join("turnwise.db");
    let (mut server, addr, log, collecting) = spawn_logging(&db);
    let api = Api::new(format!("http://{addr}"), None);
    api.create("f-1", 60_000).await;
    api.send("f-1", "m1", json!(1)).await;
    let status = api.get("/v1/workflows/status").await.ok();
    assert_eq!(status["status"], "ok");
    assert_eq!(status["instances"], 1);

    for suffix in ["", "-wal", "-shm"] {
        let mut file = db.clone().into_os_string();
        file.push(suffix);
        std::fs::remove_file(&file).unwrap();
    }

    let refused = api
        .post(
            "/v1/workflows/instances/message",
            json!({"workflow_id": "f-1", "id": "m2", "message": 2}),
        )
        .await
        .err(503, "store_unavailable");
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("turnwise.db"), "{message}");
    assert!(message.contains("was deleted"), "{message}");
    assert!(message.contains("restart"), "{message}");
    let status = api
        .get("/v1/workflows/status")
        .await
        .err(503, "store_unavailable");
    assert!(
        status["message"].as_str().unwrap().contains("was deleted"),
        "{status}"
    );
    // Still refused: the condition stays.
    api.post(
        "/v1/workflows/instances",
        json!({"id": "f-2", "workflow_type": "counter", "version": "v1", "state": {}}),
    )
    .await
    .err(503, "store_unavailable");

    // Logged at error level, once. Seen once, the log is read to its end (the server stopped,
    // every line it wrote collected, its shutdown's too) and every line reporting it is
    // counted.
    let reports = |lines: &[String]| {
        lines
            .iter()
            .filter(|l| l.contains("ERROR") && l.contains("was deleted"))
            .count()
    };
    let until = Instant::now() + PATIENCE;
    while reports(&log.lock().unwrap()) == 0 {
        assert!(
            Instant::now() < until,
            "the deleted file was never logged: {:?}",
            log.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A graceful stop: whatever the server logs is written out before it exits.
    let term = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    wait_exit(&mut server.0, PATIENCE).expect("the server exits after SIGTERM");
    collecting.join().unwrap();
    let lines = log.lock().unwrap().clone();
    assert_eq!(reports(&lines), 1, "logged once: {lines:?}");
}
