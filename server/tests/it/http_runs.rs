//! The runs routes as raw JSON: `GET /v1/workflows/instances/runs` (the list envelope, newest
//! first, `next_cursor` passed back as `cursor`), `/runs/get?run=` and `/runs/stats?hours=`,
//! and their refusals.

use crate::common;

use common::*;
use serde_json::{json, Value};
use turnwise::Engine;

/// Run one claimed counter turn to completion: one run.
async fn run_one(api: &Api, id: &str, message_id: &str) {
    api.send(id, message_id, json!({"add": 1})).await;
    let task = api.claim(0).await;
    assert!(task.is_object(), "a turn to claim: {task}");
    api.post(
        "/v1/workflows/turns/complete",
        with(&lease(&task), json!({"state": {"count": 1}, "result": 1})),
    )
    .await
    .ok();
}

#[track_caller]
fn assert_run(r: &Value) {
    for key in [
        "id",
        "workflow_id",
        "workflow_type",
        "version",
        "namespace",
        "turn",
        "attempt",
        "message_id",
        "started_at_ms",
        "ended_at_ms",
        "outcome",
        "turn_status",
        "queue_before",
        "queue_after",
        "steps",
        "phases",
    ] {
        assert!(r.get(key).is_some(), "run lacks `{key}`: {r}");
    }
}

#[tokio::test]
async fn runs_routes_have_the_list_envelope_and_cursors() {
    let server = start(Engine::in_memory(), None).await;
    let api = &server.api;
    api.create("c-1", 60_000).await;
    api.create("c-2", 60_000).await;
    for i in 1..=3 {
        run_one(api, "c-1", &format!("m{i}")).await;
    }
    run_one(api, "c-2", "m1").await;

    let page = api
        .get("/v1/workflows/instances/runs?id=c-1&limit=2")
        .await
        .ok();
    let runs = page["runs"].as_array().expect("`runs` is a list");
    assert_eq!(runs.len(), 2, "{page}");
    runs.iter().for_each(assert_run);
    assert_eq!(runs[0]["turn"], 3, "newest first: {page}");
    assert_eq!(runs[1]["turn"], 2);
    assert_eq!(runs[0]["outcome"], "completed");
    assert_eq!(runs[0]["workflow_type"], "counter");
    assert_eq!(page["has_more"], true);
    let cursor = page["next_cursor"].as_str().expect("a next_cursor");
    assert_eq!(cursor, runs[1]["id"], "the cursor is the last run's id");

    let next = api
        .get(&format!(
            "/v1/workflows/instances/runs?id=c-1&limit=2&cursor={cursor}"
        ))
        .await
        .ok();
    assert_eq!(next["runs"].as_array().unwrap().len(), 1, "{next}");
    assert_eq!(next["runs"][0]["turn"], 1);
    assert!(next.get("next_cursor").is_none(), "the last page: {next}");
    assert_eq!(next["has_more"], false);

    let everything = api.get("/v1/workflows/instances/runs").await.ok();
    assert_eq!(
        everything["runs"].as_array().unwrap().len(),
        4,
        "without `id`, the namespace's runs: {everything}"
    );

    let id = runs[0]["id"].as_str().unwrap();
    let one = api
        .get(&format!("/v1/workflows/instances/runs/get?run={id}"))
        .await
        .ok();
    assert_eq!(&one, &runs[0], "one run reads as it is listed");

    let stats = api
        .get("/v1/workflows/instances/runs/stats?hours=3")
        .await
        .ok();
    assert_eq!(stats["hours"], 3);
    let hours = stats["by_hour"].as_array().unwrap();
    assert_eq!(hours.len(), 3, "{stats}");
    let total: u64 = hours.iter().map(|h| h["runs"].as_u64().unwrap()).sum();
    assert_eq!(total, 4, "{stats}");
    assert_eq!(hours[2]["outcomes"]["completed"], 4, "{stats}");
    let default = api.get("/v1/workflows/instances/runs/stats").await.ok();
    assert_eq!(default["hours"], 24, "24 hours by default");

    api.get("/v1/workflows/instances/runs/get?run=nope")
        .await
        .err(404, "not_found");
    api.get("/v1/workflows/instances/runs/get")
        .await
        .err(400, "invalid_request");
    api.get("/v1/workflows/instances/runs?limit=0")
        .await
        .err(400, "invalid_request");
    api.get("/v1/workflows/instances/runs/stats?hours=721")
        .await
        .err(400, "invalid_request");
}
