//! The `turnwise` binary killed in the middle of a worker's turns (SIGKILL), then started again
//! on the same file and port: every acknowledged message, step, signal and completion is there,
//! and the worker carries on. Also a graceful stop (SIGTERM) with a claim waiting.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

const TOKEN: &str = "restart-token";

/// Claim a turn of `workflow_type` v1.
async fn claim(api: &Api, workflow_type: &str, wait_ms: u64) -> Value {
    api.post(
        "/v1/workflows/turns/claim",
        json!({"worker": "w", "wait_ms": wait_ms,
               "workflows": [{"workflow_type": workflow_type, "version": "v1"}]}),
    )
    .await
    .ok()["task"]
        .clone()
}

async fn create(api: &Api, id: &str, workflow_type: &str, lease_ms: u64) {
    api.post(
        "/v1/workflows/instances",
        json!({"id": id, "workflow_type": workflow_type, "version": "v1",
               "state": {"count": 0}, "lease_ms": lease_ms, "max_attempts": 5}),
    )
    .await
    .ok();
}

/// Run a step: start its operation, then save its output.
async fn step(api: &Api, lease: &Value, position: u64, key: &str, output: Value) {
    api.post(
        "/v1/workflows/turns/operation",
        with(
            lease,
            json!({"position": position, "key": key, "kind": "step", "timeout_ms": 60000}),
        ),
    )
    .await
    .ok();
    api.post(
        "/v1/workflows/turns/checkpoint",
        with(
            lease,
            json!({"position": position, "key": key, "kind": "step", "output": output}),
        ),
    )
    .await
    .ok();
}

fn kill(server: &mut ServerProcess) {
    // `Child::kill` is SIGKILL on Unix: no chance to flush or clean up.
    server.kill();
}

/// Send `body` until the server answers (as a worker's retries do while it is down).
async fn post_until_answered(api: &Api, path: &str, body: Value, limit: Duration) -> Answer {
    let until = Instant::now() + limit;
    loop {
        let bytes = serde_json::to_vec(&body).unwrap();
        match api
            .try_raw(
                reqwest::Method::POST,
                path,
                Some(bytes),
                api.token.as_deref(),
            )
            .await
        {
            Ok(a) => return a,
            Err(e) if Instant::now() < until => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the server did not come back: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_mid_turn_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("turnwise.db");
    let (mut server, addr) = spawn_binary(&db, "127.0.0.1:0", Some(TOKEN));
    let api = Api::new(format!("http://{addr}"), Some(TOKEN));

    // Turn 1 completes; turn 2 saves a step; a third message and a signal for it are admitted.
    create(&api, "c-1", "counter", 60_000).await;
    api.send("c-1", "m1", json!({"add": 2})).await;
    api.send("c-1", "m2", json!({"add": 3})).await;
    let t1 = claim(&api, "counter", 0).await;
    let l1 = lease(&t1);
    step(&api, &l1, 0, "add", json!(2)).await;
    api.post(
        "/v1/workflows/turns/complete",
        with(&l1, json!({"state": {"count": 2}, "result": 2})),
    )
    .await
    .ok();
    let t2 = claim(&api, "counter", 0).await;
    assert_eq!(t2["turn"]["number"], 2);
    let l2 = lease(&t2);
    step(&api, &l2, 0, "add", json!(3)).await;
    api.send("c-1", "m3", json!({"add": 4})).await;
    api.post(
        "/v1/workflows/turns/signal",
        json!({"workflow_id": "c-1", "turn": 3, "id": "s1", "name": "go", "value": {"ok": true}}),
    )
    .await
    .ok();

    kill(&mut server);

    // While the server is down, the worker's heartbeat keeps trying, as a worker's retries do.
    let down = Api::new(format!("http://{addr}"), Some(TOKEN));
    let beat = {
        let down = down.clone();
        let l2 = l2.clone();
        tokio::spawn(async move {
            post_until_answered(
                &down,
                "/v1/workflows/turns/heartbeat",
                l2,
                Duration::from_secs(30),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (mut server, addr2) = {
        let db = db.clone();
        let addr = addr.clone();
        tokio::task::spawn_blocking(move || spawn_binary(&db, &addr, Some(TOKEN)))
            .await
            .unwrap()
    };
    assert_eq!(addr2, addr, "restarted on the same port");
    // The held lease survived the kill: the worker carries on with its token.
    let beat = beat.await.unwrap();
    assert_eq!(beat.status.as_u16(), 200, "{beat:?}");

    let api = Api::new(format!("http://{addr}"), Some(TOKEN));
    let inst = api.get("/v1/workflows/instances/get?id=c-1").await.ok();
    assert_eq!(
        inst["state"],
        json!({"count": 2}),
        "the completion is there"
    );
    assert_eq!(inst["completed_turns"], 1);
    assert_eq!(inst["pending_messages"], 2, "turn 2 and the third message");
    let history = api.get("/v1/workflows/instances/history?id=c-1").await.ok();
    assert_eq!(history["turns"][0]["result"], 2);
    assert_eq!(history["turns"][0]["state_after"], json!({"count": 2}));
    let turn2 = api
        .get("/v1/workflows/instances/turn?id=c-1&turn=2")
        .await
        .ok();
    assert_eq!(turn2["steps"][0]["key"], "add");
    assert_eq!(turn2["steps"][0]["output"], 3, "the step is there");
    let turn3 = api
        .get("/v1/workflows/instances/turn?id=c-1&turn=3")
        .await
        .ok();
    assert_eq!(turn3["message"], json!({"add": 4}), "the message is there");
    assert_eq!(turn3["signals"][0]["id"], "s1", "the signal is there");

    // The worker finishes turn 2 with the token it had, then runs turn 3.
    api.post(
        "/v1/workflows/turns/complete",
        with(&l2, json!({"state": {"count": 5}, "result": 5})),
    )
    .await
    .ok();
    let t3 = claim(&api, "counter", 5_000).await;
    assert_eq!(t3["turn"]["number"], 3);
    assert_eq!(t3["state"], json!({"count": 5}));
    let l3 = lease(&t3);
    let got = api
        .post(
            "/v1/workflows/turns/wait-signal",
            with(
                &l3,
                json!({"position": 0, "key": "wait", "name": "go", "timeout_ms": 60000}),
            ),
        )
        .await
        .ok();
    assert_eq!(
        got["steps"][0]["output"],
        json!({"received": true, "value": {"ok": true}})
    );
    api.post(
        "/v1/workflows/turns/complete",
        with(&l3, json!({"state": {"count": 9}, "result": 9})),
    )
    .await
    .ok();

    // A second instance with a short lease: killed mid-turn, its lease runs out while the
    // server is down, and the turn is claimed again with its saved step.
    create(&api, "short-1", "quick", 400).await;
    api.send("short-1", "m1", json!({"add": 1})).await;
    let q1 = claim(&api, "quick", 0).await;
    let ql1 = lease(&q1);
    step(&api, &ql1, 0, "add", json!(1)).await;
    kill(&mut server);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (mut server, _) = {
        let db = db.clone();
        let addr = addr.clone();
        tokio::task::spawn_blocking(move || spawn_binary(&db, &addr, Some(TOKEN)))
            .await
            .unwrap()
    };
    let api = Api::new(format!("http://{addr}"), Some(TOKEN));
    api.post("/v1/workflows/turns/heartbeat", ql1.clone())
        .await
        .err(409, "turn_lease_lost");
    let q2 = claim(&api, "quick", 5_000).await;
    assert_eq!(q2["turn"]["number"], 1);
    assert_ne!(q2["token"], q1["token"]);
    assert_eq!(
        q2["turn"]["attempt"], 2,
        "an expired lease counts an attempt"
    );
    assert_eq!(q2["effect_prefix"], q1["effect_prefix"]);
    assert_eq!(
        q2["turn"]["steps"][0]["output"], 1,
        "the saved step replays"
    );
    api.post(
        "/v1/workflows/turns/complete",
        with(&lease(&q2), json!({"state": {"count": 1}, "result": 1})),
    )
    .await
    .ok();

    let inst = api.get("/v1/workflows/instances/get?id=c-1").await.ok();
    assert_eq!(inst["state"], json!({"count": 9}));
    assert_eq!(inst["completed_turns"], 3);
    assert_eq!(inst["status"], "idle");
    let inst = api.get("/v1/workflows/instances/get?id=short-1").await.ok();
    assert_eq!(inst["state"], json!({"count": 1}));
    kill(&mut server);
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_answers_the_waiting_claim_and_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("turnwise.db");
    let (mut server, addr) = spawn_binary(&db, "127.0.0.1:0", None);
    let api = Api::new(format!("http://{addr}"), None);
    create(&api, "c-1", "counter", 60_000).await;
    let claimer = api.clone();
    let waiting = tokio::spawn(async move { claim(&claimer, "other", 10_000).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    api.send("c-1", "m1", json!({"add": 1})).await;

    let started = Instant::now();
    let term = std::process::Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    assert_eq!(waiting.await.unwrap(), Value::Null, "the claim is answered");
    let status =
        tokio::task::spawn_blocking(move || wait_exit(&mut server.0, Duration::from_secs(10)))
            .await
            .unwrap()
            .expect("the server exits after SIGTERM");
    assert!(status.success(), "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(5));

    // The message acknowledged before the stop is there after a restart.
    let (mut server, addr) = spawn_binary(&db, "127.0.0.1:0", None);
    let api = Api::new(format!("http://{addr}"), None);
    let inst = api.get("/v1/workflows/instances/get?id=c-1").await.ok();
    assert_eq!(inst["pending_messages"], 1);
    kill(&mut server);
}
