//! Bad input over HTTP: each is refused with the documented status and error code in the full
//! envelope, and nothing is written (checked by reading everything back through the API).

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::*;
use reqwest::Method;
use serde_json::{json, Value};
use turnwise::Engine;

const TOKEN: &str = "s3cret-token";

/// Every route the server answers, with a body that is valid enough to get past auth.
fn every_route() -> Vec<(Method, &'static str)> {
    use Method as M;
    vec![
        (M::POST, "/v1/workflows/instances"),
        (M::GET, "/v1/workflows/instances"),
        (M::GET, "/v1/workflows/instances/get?id=c-1"),
        (M::POST, "/v1/workflows/instances/message"),
        (M::GET, "/v1/workflows/instances/inbox?id=c-1"),
        (M::GET, "/v1/workflows/inbox?workflow_type=counter"),
        (M::POST, "/v1/workflows/instances/control"),
        (M::POST, "/v1/workflows/instances/delete"),
        (M::GET, "/v1/workflows/instances/history?id=c-1"),
        (M::GET, "/v1/workflows/instances/turn?id=c-1&turn=1"),
        (M::POST, "/v1/workflows/turns/claim"),
        (M::POST, "/v1/workflows/turns/operation"),
        (M::POST, "/v1/workflows/turns/progress"),
        (M::POST, "/v1/workflows/turns/checkpoint"),
        (M::POST, "/v1/workflows/turns/wait-signal"),
        (M::POST, "/v1/workflows/turns/signal"),
        (M::POST, "/v1/workflows/turns/complete"),
        (M::POST, "/v1/workflows/turns/fail"),
        (M::POST, "/v1/workflows/turns/heartbeat"),
        (M::POST, "/v1/workflows/turns/execution-credential"),
        (M::POST, "/v1/workflows/blobs?workflow_id=c-1"),
        (M::GET, "/v1/workflows/blobs?key=x"),
        (M::GET, "/v1/workflows/status"),
        (M::GET, "/v1/workflows/schemas"),
        (M::POST, "/v1/workflows/schemas"),
        (M::GET, "/v1/nowhere"),
    ]
}

/// The POST routes that take a JSON body.
fn post_routes() -> Vec<&'static str> {
    every_route()
        .into_iter()
        .filter(|(m, p)| *m == Method::POST && !p.contains("blobs") && !p.contains("credential"))
        .map(|(_, p)| p)
        .collect()
}

/// A server with one instance `c-1` holding one claimed turn; answers the server and the task.
async fn with_claimed_turn() -> (InProcess, Value) {
    let srv = start(Engine::in_memory(), Some(TOKEN)).await;
    srv.api.create("c-1", 60_000).await;
    srv.api.send("c-1", "m1", json!({"add": 1})).await;
    let task = srv.api.claim(0).await;
    assert!(task.is_object());
    (srv, task)
}

#[tokio::test]
async fn every_route_requires_the_token() {
    let (srv, _) = with_claimed_turn().await;
    let before = srv.api.snapshot("c-1").await;
    for (method, path) in every_route() {
        let body = (method == Method::POST).then(|| br#"{"workflow_id":"c-1"}"#.to_vec());
        let none = srv
            .api
            .try_raw(method.clone(), path, body.clone(), None)
            .await
            .unwrap();
        let e = none.err(401, "unauthorized");
        assert!(e["message"].as_str().unwrap().contains("Bearer"), "{e}");
        let wrong = srv
            .api
            .try_raw(method.clone(), path, body.clone(), Some("not-the-token"))
            .await
            .unwrap();
        wrong.err(401, "unauthorized");
    }
    // A scheme other than Bearer is refused too.
    let basic = srv
        .api
        .http
        .get(format!("{}/v1/workflows/status", srv.api.base))
        .header("authorization", format!("Basic {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status().as_u16(), 401);
    assert_eq!(srv.api.snapshot("c-1").await, before, "nothing was written");
    // The right token gets past authentication everywhere.
    for (method, path) in every_route() {
        let body = (method == Method::POST).then(|| br#"{"workflow_id":"c-2"}"#.to_vec());
        let right = srv
            .api
            .try_raw(method.clone(), path, body, Some(TOKEN))
            .await
            .unwrap();
        assert_ne!(right.status.as_u16(), 401, "{method} {path}: {right:?}");
    }
}

#[tokio::test]
async fn malformed_json_is_400_everywhere() {
    let (srv, _) = with_claimed_turn().await;
    let before = srv.api.snapshot("c-1").await;
    for path in post_routes() {
        for body in [
            &br#"{"workflow_id": "c-1","#[..],
            b"not json",
            b"",
            b"[1, 2]",
            br#"{"workflow_id": "c-1", "workflow_id": "c-1"}"#,
            b"{\"workflow_id\": \"c-\xff\"}",
        ] {
            let a = srv.api.raw(Method::POST, path, Some(body.to_vec())).await;
            a.err(400, "invalid_request");
        }
        // Trailing data after a complete request.
        let body = br#"{"workflow_id":"c-1","id":"m2","message":1,"worker":"w","workflows":[],"action":"pause","turn":1,"token":"t"} trailing"#;
        let e = srv
            .api
            .raw(Method::POST, path, Some(body.to_vec()))
            .await
            .err(400, "invalid_request");
        assert!(
            e["message"].as_str().unwrap().contains("JSON") || e["param"].is_string(),
            "{e}"
        );
    }
    assert_eq!(srv.api.snapshot("c-1").await, before, "nothing was written");
}

#[tokio::test]
async fn a_body_is_json_whatever_its_content_type() {
    let srv = start(Engine::in_memory(), Some(TOKEN)).await;
    let res = srv
        .api
        .http
        .post(format!(
            "{}/v1/workflows/instances?graph=main",
            srv.api.base
        ))
        .bearer_auth(TOKEN)
        .header("content-type", "text/plain")
        .body(r#"{"id":"c-2","workflow_type":"counter","version":"v1"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
}

#[tokio::test]
async fn wrong_field_types_name_the_field() {
    let (srv, task) = with_claimed_turn().await;
    let l = lease(&task);
    let before = srv.api.snapshot("c-1").await;
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "/v1/workflows/instances",
            json!({"id": 5, "workflow_type": "counter", "version": "v1"}),
            "id",
        ),
        (
            "/v1/workflows/instances",
            json!({"id": "c-9", "workflow_type": "counter", "version": "v1", "lease_ms": "long"}),
            "lease_ms",
        ),
        (
            "/v1/workflows/instances",
            json!({"id": "c-9", "workflow_type": "counter", "version": "v1", "on_exhausted": "explode"}),
            "on_exhausted",
        ),
        (
            "/v1/workflows/instances/message",
            json!({"workflow_id": ["c-1"], "id": "m2", "message": 1}),
            "workflow_id",
        ),
        (
            "/v1/workflows/instances/message",
            json!({"workflow_id": "c-1", "message": 1}),
            "id",
        ),
        (
            "/v1/workflows/instances/message",
            json!({"workflow_id": "c-1", "id": "m2", "message": 1, "origin": {"kind": 7}}),
            "origin.kind",
        ),
        (
            "/v1/workflows/instances/control",
            json!({"workflow_id": "c-1", "action": "explode"}),
            "action",
        ),
        (
            "/v1/workflows/turns/claim",
            json!({"worker": "w", "wait_ms": "soon", "workflows": []}),
            "wait_ms",
        ),
        (
            "/v1/workflows/turns/claim",
            json!({"worker": "w", "wait_ms": 0, "workflows": [{"workflow_type": "counter"}]}),
            "workflows[0].version",
        ),
        (
            "/v1/workflows/turns/operation",
            with(
                &l,
                json!({"turn": "1", "position": 0, "key": "a", "kind": "step", "timeout_ms": 1000}),
            ),
            "turn",
        ),
        (
            "/v1/workflows/turns/operation",
            with(
                &l,
                json!({"position": -1, "key": "a", "kind": "step", "timeout_ms": 1000}),
            ),
            "position",
        ),
        (
            "/v1/workflows/turns/checkpoint",
            with(&l, json!({"position": 0, "key": "a", "kind": "nap"})),
            "kind",
        ),
        (
            "/v1/workflows/turns/checkpoint",
            with(
                &l,
                json!({"token": 5, "position": 0, "key": "a", "kind": "step"}),
            ),
            "token",
        ),
        (
            "/v1/workflows/turns/progress",
            with(
                &l,
                json!({"key": "a", "sequence": 1.5, "details": null, "checkpoint": null}),
            ),
            "sequence",
        ),
        (
            "/v1/workflows/turns/wait-signal",
            with(&l, json!({"position": 0, "key": "w", "name": "n"})),
            "timeout_ms",
        ),
        (
            "/v1/workflows/turns/signal",
            json!({"workflow_id": "c-1", "turn": 1, "id": "s1", "name": false, "value": 1}),
            "name",
        ),
        (
            "/v1/workflows/turns/complete",
            with(&l, json!({"state": {}, "continuation": "next"})),
            "continuation",
        ),
        (
            "/v1/workflows/turns/fail",
            with(&l, json!({"error": "boom", "non_retryable": "yes"})),
            "non_retryable",
        ),
        (
            "/v1/workflows/turns/heartbeat",
            json!({"workflow_id": "c-1", "turn": 1}),
            "token",
        ),
    ];
    for (path, body, param) in cases {
        let e = srv
            .api
            .post(path, body.clone())
            .await
            .err(400, "invalid_request");
        assert_eq!(e["param"], param, "{path} {body}: {e}");
        assert!(
            e["message"].as_str().unwrap().contains(param),
            "the message names the field: {e}"
        );
    }
    // Query parameters too.
    let e = srv
        .api
        .get("/v1/workflows/instances/history?id=c-1&limit=many")
        .await
        .err(400, "invalid_request");
    assert_eq!(e["param"], "limit");
    let e = srv
        .api
        .get("/v1/workflows/instances/get")
        .await
        .err(400, "invalid_request");
    assert_eq!(e["param"], "id");
    let e = srv
        .api
        .get("/v1/workflows/instances/turn?id=c-1&turn=-3")
        .await
        .err(400, "invalid_request");
    assert_eq!(e["param"], "turn");
    assert_eq!(srv.api.snapshot("c-1").await, before, "nothing was written");
}

/// A negative number in any time or duration field is `400 invalid_request` naming the field,
/// and nothing is written: an unsigned field is refused when the body is read, a time by the
/// engine's range check (`turnwise::validate::Times`).
#[tokio::test]
async fn negative_times_and_durations_name_the_field() {
    let (srv, task) = with_claimed_turn().await;
    let l = lease(&task);
    let before = srv.api.snapshot("c-1").await;
    let schedule =
        |spec: Value| json!({"workflow_id": "c-1", "name": "s", "spec": spec, "message": 1});
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "/v1/workflows/instances",
            json!({"id": "c-9", "workflow_type": "counter", "version": "v1", "lease_ms": -1}),
            "lease_ms",
        ),
        (
            "/v1/workflows/turns/claim",
            json!({"worker": "w", "workflows": [{"workflow_type": "counter", "version": "v1"}], "wait_ms": -1}),
            "wait_ms",
        ),
        (
            "/v1/workflows/turns/operation",
            with(
                &l,
                json!({"position": 0, "key": "a", "kind": "step", "timeout_ms": -1}),
            ),
            "timeout_ms",
        ),
        (
            "/v1/workflows/turns/operation",
            with(
                &l,
                json!({"position": 0, "key": "a", "kind": "step", "timeout_ms": 1000, "heartbeat_timeout_ms": -1}),
            ),
            "heartbeat_timeout_ms",
        ),
        (
            "/v1/workflows/turns/checkpoint",
            with(
                &l,
                json!({"position": 0, "key": "nap", "kind": "sleep", "delay_ms": -1}),
            ),
            "delay_ms",
        ),
        (
            "/v1/workflows/turns/wait-signal",
            with(
                &l,
                json!({"position": 0, "key": "w", "name": "n", "timeout_ms": -1}),
            ),
            "timeout_ms",
        ),
        (
            "/v1/workflows/turns/fail",
            with(
                &l,
                json!({"error": "WorkflowWait: later", "retry_at_ms": -1}),
            ),
            "retry_at_ms",
        ),
        (
            "/v1/workflows/schedules",
            schedule(json!({"kind": "once", "at_ms": -1})),
            "spec.at_ms",
        ),
        (
            "/v1/workflows/schedules",
            schedule(json!({"kind": "after", "delay_ms": -1})),
            "spec.delay_ms",
        ),
        (
            "/v1/workflows/schedules",
            schedule(json!({"kind": "every", "every_ms": -1})),
            "spec.every_ms",
        ),
        (
            "/v1/workflows/schedules",
            schedule(json!({"kind": "every", "every_ms": 60000, "anchor_ms": -1})),
            "spec.anchor_ms",
        ),
    ];
    for (path, body, param) in cases {
        let e = srv
            .api
            .post(path, body.clone())
            .await
            .err(400, "invalid_request");
        assert_eq!(e["param"], param, "{path} {body}: {e}");
        assert!(
            e["message"].as_str().unwrap().contains(param),
            "the message names the field: {e}"
        );
    }
    let e = srv
        .api
        .get("/v1/workflows/instances/turn?id=c-1&turn=1&wait_ms=-1")
        .await
        .err(400, "invalid_request");
    assert_eq!(e["param"], "wait_ms", "{e}");
    assert_eq!(srv.api.snapshot("c-1").await, before, "nothing was written");
    let listed = srv.api.get("/v1/workflows/schedules?workflow_id=c-1").await;
    assert_eq!(
        listed.ok()["schedules"],
        json!([]),
        "no schedule was created"
    );
}

#[tokio::test]
async fn oversized_bodies_are_413() {
    let (srv, task) = with_claimed_turn().await;
    let before = srv.api.snapshot("c-1").await;
    // Over the 1 MiB body limit, on every route that takes a body.
    let huge = format!(
        r#"{{"workflow_id":"c-1","id":"m2","message":"{}"}}"#,
        "x".repeat(1024 * 1024 + 10)
    );
    for path in post_routes() {
        let e = srv
            .api
            .raw(Method::POST, path, Some(huge.clone().into_bytes()))
            .await
            .err(413, "payload_too_large");
        assert!(e["message"].as_str().unwrap().contains("larger"), "{e}");
    }
    // Under the body limit but over a value's limit: the engine's 413 names the value.
    let e = srv
        .api
        .post(
            "/v1/workflows/instances/message",
            json!({"workflow_id": "c-1", "id": "m2", "message": "x".repeat(40 * 1024)}),
        )
        .await
        .err(413, "payload_too_large");
    assert_eq!(e["param"], "message");
    let e = srv
        .api
        .post(
            "/v1/workflows/turns/checkpoint",
            with(
                &lease(&task),
                json!({"position": 0, "key": "big", "kind": "step", "output": "y".repeat(70 * 1024)}),
            ),
        )
        .await
        .err(413, "payload_too_large");
    assert_eq!(e["param"], "output");
    let e = srv
        .api
        .post(
            "/v1/workflows/turns/signal",
            json!({"workflow_id": "c-1", "turn": 1, "id": "s1", "name": "n", "value": "z".repeat(33 * 1024)}),
        )
        .await
        .err(413, "payload_too_large");
    assert!(e["param"].is_string());
    assert_eq!(srv.api.snapshot("c-1").await, before, "nothing was written");
}

#[tokio::test]
async fn invalid_ids_and_keys_are_400() {
    let (srv, task) = with_claimed_turn().await;
    let l = lease(&task);
    let before = srv.api.snapshot("c-1").await;
    let long = "a".repeat(129);
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "/v1/workflows/instances",
            json!({"id": "bad id", "workflow_type": "counter", "version": "v1"}),
            "id",
        ),
        (
            "/v1/workflows/instances",
            json!({"id": long, "workflow_type": "counter", "version": "v1"}),
            "id",
        ),
        (
            "/v1/workflows/instances",
            json!({"id": "", "workflow_type": "counter", "version": "v1"}),
            "id",
        ),
        (
            "/v1/workflows/instances",
            json!({"id": "c-3", "workflow_type": "count/er", "version": "v1"}),
            "workflow_type",
        ),
        (
            "/v1/workflows/instances/message",
            json!({"workflow_id": "c-1", "id": "a/b", "message": 1}),
            "id",
        ),
        (
            "/v1/workflows/turns/signal",
            json!({"workflow_id": "c-1", "turn": 1, "id": "s1", "name": "no spaces", "value": 1}),
            "name",
        ),
        (
            "/v1/workflows/turns/signal",
            json!({"workflow_id": "c-1", "turn": 1, "id": "s 1", "name": "ok", "value": 1}),
            "id",
        ),
        (
            "/v1/workflows/turns/checkpoint",
            with(
                &l,
                json!({"position": 0, "key": "bad key", "kind": "step", "output": 1}),
            ),
            "key",
        ),
        (
            "/v1/workflows/turns/operation",
            with(
                &l,
                json!({"position": 0, "key": "é", "kind": "step", "timeout_ms": 1000}),
            ),
            "key",
        ),
        (
            "/v1/workflows/turns/wait-signal",
            with(
                &l,
                json!({"position": 0, "key": "w", "name": "bad name", "timeout_ms": 1000}),
            ),
            "name",
        ),
        (
            "/v1/workflows/turns/claim",
            json!({"worker": "w", "wait_ms": 0, "workflows": [{"workflow_type": "bad type", "version": "v1"}]}),
            "workflows.workflow_type",
        ),
    ];
    for (path, body, param) in cases {
        let e = srv
            .api
            .post(path, body.clone())
            .await
            .err(400, "invalid_request");
        assert_eq!(e["param"], param, "{path} {body}: {e}");
    }
    // A bad `graph` or `stack` is refused before anything is addressed.
    let bad_graph = srv.api.scoped("graph=no%20spaces");
    let e = bad_graph
        .get("/v1/workflows/instances/get?id=c-1")
        .await
        .err(400, "invalid_request");
    assert_eq!(e["param"], "graph");
    let bad_stack = srv.api.scoped("graph=main&stack=a/b");
    let e = bad_stack
        .post(
            "/v1/workflows/instances",
            json!({"id": "c-4", "workflow_type": "counter", "version": "v1"}),
        )
        .await
        .err(400, "invalid_request");
    assert_eq!(e["param"], "stack");
    assert_eq!(srv.api.snapshot("c-1").await, before, "nothing was written");
    srv.api
        .get("/v1/workflows/instances/get?id=c-4")
        .await
        .err(404, "not_found");
}

#[tokio::test]
async fn a_stale_token_is_409_on_every_turn_route() {
    let srv = start(Engine::in_memory(), Some(TOKEN)).await;
    let api = &srv.api;
    // A short lease, so the first claim's token goes stale and a second claim takes the turn.
    api.create("c-1", 200).await;
    api.send("c-1", "m1", json!({"add": 1})).await;
    let first = api.claim(0).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let second = api.claim(5_000).await;
    assert_eq!(second["turn"]["number"], 1);
    assert_ne!(second["token"], first["token"]);
    let stale = lease(&first);
    // The holder starts a step, so progress has an operation to address.
    api.post(
        "/v1/workflows/turns/operation",
        with(
            &lease(&second),
            json!({"position": 0, "key": "a", "kind": "step", "timeout_ms": 60000}),
        ),
    )
    .await
    .ok();
    let before = api.snapshot("c-1").await;
    let turn_before = api
        .get("/v1/workflows/instances/turn?id=c-1&turn=1")
        .await
        .ok();
    let cases: Vec<(&str, Value)> = vec![
        (
            "/v1/workflows/turns/operation",
            with(
                &stale,
                json!({"position": 0, "key": "a", "kind": "step", "timeout_ms": 60000}),
            ),
        ),
        (
            "/v1/workflows/turns/progress",
            with(
                &stale,
                json!({"key": "a", "sequence": 1, "details": {"phase": "p", "done": 1}, "checkpoint": 1}),
            ),
        ),
        (
            "/v1/workflows/turns/checkpoint",
            with(
                &stale,
                json!({"position": 0, "key": "a", "kind": "step", "output": 1}),
            ),
        ),
        (
            "/v1/workflows/turns/checkpoint",
            with(
                &stale,
                json!({"position": 0, "key": "nap", "kind": "sleep", "delay_ms": 10}),
            ),
        ),
        (
            "/v1/workflows/turns/wait-signal",
            with(
                &stale,
                json!({"position": 0, "key": "w", "name": "n", "timeout_ms": 1000}),
            ),
        ),
        (
            "/v1/workflows/turns/complete",
            with(&stale, json!({"state": {"count": 99}, "result": 99})),
        ),
        (
            "/v1/workflows/turns/fail",
            with(&stale, json!({"error": "boom", "non_retryable": true})),
        ),
        ("/v1/workflows/turns/heartbeat", stale.clone()),
    ];
    for (path, body) in &cases {
        api.post(path, body.clone())
            .await
            .err(409, "turn_lease_lost");
    }
    // An invented token and an unknown instance are refused the same way: no token holds a
    // turn that is not there.
    let invented = json!({"workflow_id": "c-1", "turn": 1, "token": "wt_invented"});
    api.post("/v1/workflows/turns/heartbeat", invented)
        .await
        .err(409, "turn_lease_lost");
    let unknown = json!({"workflow_id": "nobody", "turn": 1, "token": "wt_x"});
    api.post("/v1/workflows/turns/heartbeat", unknown)
        .await
        .err(409, "turn_lease_lost");
    assert_eq!(api.snapshot("c-1").await, before, "nothing was written");
    let turn_after = api
        .get("/v1/workflows/instances/turn?id=c-1&turn=1")
        .await
        .ok();
    assert_eq!(turn_after, turn_before);
    // The holder carries on.
    api.post("/v1/workflows/turns/heartbeat", lease(&second))
        .await
        .ok();
}

#[tokio::test]
async fn messages_and_signals_that_fail_their_schema_are_400() {
    let (srv, task) = with_claimed_turn().await;
    let api = &srv.api;
    api.post(
        "/v1/workflows/schemas",
        json!({
            "workflow_type": "counter", "version": "v1",
            "message": {"type": "object", "required": ["add"],
                        "properties": {"add": {"type": "integer", "minimum": 0}}},
            "signals": {"approval": {"type": "object", "required": ["approved"],
                                     "properties": {"approved": {"type": "boolean"}}}}
        }),
    )
    .await
    .ok();
    // The turn waits for a signal, so a valid signal would resolve it.
    api.post(
        "/v1/workflows/turns/wait-signal",
        with(
            &lease(&task),
            json!({"position": 0, "key": "review", "name": "approval", "timeout_ms": 60000}),
        ),
    )
    .await
    .ok();
    let before = api.snapshot("c-1").await;
    let turn_before = api
        .get("/v1/workflows/instances/turn?id=c-1&turn=1")
        .await
        .ok();

    let e = api
        .post(
            "/v1/workflows/instances/message",
            json!({"workflow_id": "c-1", "id": "m2", "message": {"add": "two"}}),
        )
        .await
        .err(400, "schema_validation_failed");
    assert_eq!(e["param"], "message/add");
    assert_eq!(e["details"]["errors"][0]["instance_path"], "/add");
    assert!(e["message"].as_str().unwrap().contains("/add"), "{e}");
    let e = api
        .post(
            "/v1/workflows/instances/message",
            json!({"workflow_id": "c-1", "id": "m2", "message": {"sub": 1}}),
        )
        .await
        .err(400, "schema_validation_failed");
    assert_eq!(e["param"], "message");
    let e = api
        .post(
            "/v1/workflows/instances/message",
            json!({"workflow_id": "c-1", "id": "m2", "message": {"add": -1}}),
        )
        .await
        .err(400, "schema_validation_failed");
    assert_eq!(e["param"], "message/add");

    let e = api
        .post(
            "/v1/workflows/turns/signal",
            json!({"workflow_id": "c-1", "turn": 1, "id": "s1", "name": "approval",
                   "value": {"approved": "yes"}}),
        )
        .await
        .err(400, "schema_validation_failed");
    assert_eq!(e["param"], "value/approved");
    // A name the schema does not declare is refused, listing the declared ones.
    let e = api
        .post(
            "/v1/workflows/turns/signal",
            json!({"workflow_id": "c-1", "turn": 1, "id": "s2", "name": "other", "value": "anything"}),
        )
        .await
        .err(400, "invalid_request");
    assert_eq!(e["param"], "name", "{e}");
    let said = e["message"].as_str().unwrap();
    assert!(
        said.contains("`other`") && said.contains("it declares `approval`"),
        "{e}"
    );
    assert_eq!(api.snapshot("c-1").await, before, "nothing was written");
    assert_eq!(
        api.get("/v1/workflows/instances/turn?id=c-1&turn=1")
            .await
            .ok(),
        turn_before
    );

    // Valid ones are admitted; an unregistered type is not checked.
    api.send("c-1", "m2", json!({"add": 3})).await;
    api.post(
        "/v1/workflows/turns/signal",
        json!({"workflow_id": "c-1", "turn": 1, "id": "s1", "name": "approval",
               "value": {"approved": true}}),
    )
    .await
    .ok();
    api.post(
        "/v1/workflows/instances",
        json!({"id": "free-1", "workflow_type": "unregistered", "version": "v1"}),
    )
    .await
    .ok();
    api.post(
        "/v1/workflows/instances/message",
        json!({"workflow_id": "free-1", "id": "m1", "message": {"add": "two"}}),
    )
    .await
    .ok();

    // A schema that is not a schema is refused at registration.
    let e = api
        .post(
            "/v1/workflows/schemas",
            json!({"workflow_type": "counter", "version": "v2", "message": {"type": "no-such-type"}}),
        )
        .await
        .err(400, "invalid_request");
    assert_eq!(e["param"], "message");
    api.post(
        "/v1/workflows/schemas",
        json!({"workflow_type": "counter", "version": 5}),
    )
    .await
    .err(400, "invalid_request");
}

#[tokio::test]
async fn unknown_and_unsupported_routes_answer_an_envelope() {
    let srv = start(Engine::in_memory(), Some(TOKEN)).await;
    srv.api
        .get("/v1/workflows/nothing-here")
        .await
        .err(404, "not_found");
    srv.api
        .raw(Method::DELETE, "/v1/workflows/instances", None)
        .await
        .err(405, "method_not_allowed");
    for path in [
        "/v1/workflows/turns/execution-credential",
        "/v1/workflows/blobs?workflow_id=c-1",
        "/v1/workflows/activities/reason",
    ] {
        let e = srv
            .api
            .post(path, json!({}))
            .await
            .err(501, "not_supported");
        assert_eq!(e["retryable"], false, "the client must not retry it");
    }
    // A claim asking for execution credentials is refused, not retried.
    srv.api
        .post(
            "/v1/workflows/turns/claim",
            json!({"worker": "w", "wait_ms": 0, "include_execution_credential": true,
                   "workflows": [{"workflow_type": "counter", "version": "v1"}]}),
        )
        .await
        .err(400, "invalid_request");
}

#[test]
fn the_binary_refuses_a_public_address_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let out = Command::new(env!("CARGO_BIN_EXE_turnwise"))
        .args(["serve", "--db"])
        .arg(&db)
        .args(["--bind", "0.0.0.0:0"])
        .env_remove("TURNWISE_API_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("without an API token"), "{stderr}");
    assert!(stderr.contains("TURNWISE_API_TOKEN"), "{stderr}");
    assert!(!db.exists(), "it refused before opening the database");

    // An empty token counts as none.
    let out = Command::new(env!("CARGO_BIN_EXE_turnwise"))
        .args(["serve", "--db"])
        .arg(&db)
        .args(["--bind", "0.0.0.0:0"])
        .env("TURNWISE_API_TOKEN", "")
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[tokio::test]
async fn the_binary_takes_its_token_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_turnwise"));
    cmd.args(["serve", "--db"])
        .arg(&db)
        .args(["--bind", "127.0.0.1:0"])
        .env("TURNWISE_API_TOKEN", "from-env")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped());
    let mut child = ServerProcess(cmd.spawn().unwrap());
    let stdout = child.0.stdout.take().unwrap();
    let addr = {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap();
        line.trim()
            .strip_prefix("turnwise listening on ")
            .expect("the listening line")
            .to_owned()
    };
    let api = Api::new(addr, Some("from-env"));
    api.get("/v1/workflows/status").await.ok();
    api.try_raw(Method::GET, "/v1/workflows/status", None, None)
        .await
        .unwrap()
        .err(401, "unauthorized");
    child.kill();
}
