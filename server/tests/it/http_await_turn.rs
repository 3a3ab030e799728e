//! The turn route's `wait_ms` (a turnwise extension) on the wire: a waiting read is answered by
//! the completion of its turn, a shutdown answers it at once with the turn as it is, and a
//! `wait_ms` that is not a number is refused naming it.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::json;
use tokio::time::Instant;
use turnwise::Engine;

#[tokio::test]
async fn a_waiting_read_is_answered_by_the_completion() {
    let srv = start(Engine::in_memory(), None).await;
    let api = srv.api.clone();
    api.create("await-1", 60_000).await;
    api.send("await-1", "m1", json!({"add": 2})).await;

    let reader = api.clone();
    let asked = Instant::now();
    let waiting = tokio::spawn(async move {
        reader
            .get("/v1/workflows/instances/turn?id=await-1&turn=1&wait_ms=2000")
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "a read with wait_ms waits while the turn has no outcome"
    );

    let task = api.claim(0).await;
    assert_eq!(task["turn"]["number"], 1);
    api.post(
        "/v1/workflows/turns/complete",
        with(&lease(&task), json!({"state": {"count": 2}, "result": 2})),
    )
    .await
    .ok();

    // Well before its 2 s wait could run out: only the completion answers it in time.
    let answer = tokio::time::timeout_at(asked + Duration::from_millis(1_800), waiting)
        .await
        .expect("the waiting read is answered by the completion, not by its wait_ms of 2 s")
        .expect("the reading task");
    let t = answer.ok();
    assert_eq!(t["status"], "completed");
    assert_eq!(t["result"], 2);
    assert_eq!(t["state_after"], json!({"count": 2}));
    assert_eq!(t["message_id"], "m1");
}

#[tokio::test]
async fn shutdown_answers_a_waiting_read_with_the_turn_as_it_is() {
    let srv = start(Engine::in_memory(), None).await;
    let api = srv.api.clone();
    api.create("await-1", 60_000).await;
    api.send("await-1", "m1", json!({"add": 2})).await;

    let reader = api.clone();
    let waiting = tokio::spawn(async move {
        reader
            .get("/v1/workflows/instances/turn?id=await-1&turn=1&wait_ms=10000")
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "the read waits for an outcome");

    srv.shutdown.trigger();
    let answer = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("a shutdown answers a waiting read without holding its 10 s wait")
        .expect("the reading task");
    let t = answer.ok();
    assert_eq!(t["status"], "queued", "the turn as it is");
    assert_eq!(t["number"], 1);
    tokio::time::timeout(Duration::from_secs(5), srv.task)
        .await
        .expect("the server stops soon after the signal")
        .expect("the server task")
        .expect("the server ends cleanly");
}

#[tokio::test]
async fn a_wait_ms_that_is_not_a_count_of_milliseconds_is_400() {
    let srv = start(Engine::in_memory(), None).await;
    let api = &srv.api;
    api.create("await-1", 60_000).await;
    api.send("await-1", "m1", json!(null)).await;
    let before = api.snapshot("await-1").await;
    for wait in ["abc", "-5", "1.5", ""] {
        let e = api
            .get(&format!(
                "/v1/workflows/instances/turn?id=await-1&turn=1&wait_ms={wait}"
            ))
            .await
            .err(400, "invalid_request");
        assert_eq!(e["param"], "wait_ms", "wait_ms={wait}: {e}");
        assert!(
            e["message"].as_str().unwrap().contains("wait_ms"),
            "wait_ms={wait}: the message names the parameter: {e}"
        );
    }
    assert_eq!(api.snapshot("await-1").await, before, "nothing was written");
}
