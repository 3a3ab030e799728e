//! The raw JSON of the wire: the counter exchange of the wire reference (§6) and its sleep and
//! signal variants, checked key by key, plus scoping, long-poll wake-ups and shutdown.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};
use turnwise::Engine;

const TURN_STATUSES: &[&str] = &[
    "queued",
    "running",
    "waiting",
    "completed",
    "failed",
    "cancelled",
];
const INSTANCE_STATUSES: &[&str] = &["idle", "queued", "running", "waiting", "failed", "paused"];

/// Every required key of a `WorkflowTurn` is present, nullable ones included, and enums are
/// within their sets.
#[track_caller]
fn assert_turn(t: &Value) {
    for key in [
        "workflow_id",
        "number",
        "message_id",
        "message",
        "version",
        "status",
        "attempt",
        "sequence",
        "created_at_ms",
        "updated_at_ms",
        "ready_at_ms",
        "steps",
        "result",
        "state_after",
    ] {
        assert!(t.get(key).is_some(), "turn lacks `{key}`: {t}");
    }
    assert!(
        TURN_STATUSES.contains(&t["status"].as_str().unwrap()),
        "{t}"
    );
    for s in t["steps"].as_array().unwrap() {
        assert_step(s);
    }
}

#[track_caller]
fn assert_step(s: &Value) {
    for key in ["key", "kind", "output", "at_ms"] {
        assert!(s.get(key).is_some(), "step lacks `{key}`: {s}");
    }
    match s["kind"].as_str().unwrap() {
        "step" => {
            assert!(
                s.get("delay_ms").is_none(),
                "a plain step has no delay_ms: {s}"
            );
            assert!(
                s.get("signal_name").is_none(),
                "a plain step has no signal_name: {s}"
            );
        }
        "sleep" => {
            assert!(s.get("delay_ms").is_some(), "{s}");
            assert!(s.get("signal_name").is_none(), "{s}");
        }
        "signal" => {
            assert!(s.get("delay_ms").is_some(), "{s}");
            assert!(s.get("signal_name").is_some(), "{s}");
        }
        other => panic!("unknown step kind {other}"),
    }
}

#[track_caller]
fn assert_instance(i: &Value) {
    for key in [
        "id",
        "workflow_type",
        "version",
        "state",
        "status",
        "pending_messages",
        "completed_turns",
        "history_through",
        "sequence",
        "created_at_ms",
        "updated_at_ms",
    ] {
        assert!(i.get(key).is_some(), "instance lacks `{key}`: {i}");
    }
    assert!(
        INSTANCE_STATUSES.contains(&i["status"].as_str().unwrap()),
        "{i}"
    );
    if let Some(t) = i.get("current_turn") {
        assert_turn(t);
    }
}

#[tokio::test]
async fn counter_exchange_has_the_wire_shapes() {
    let srv = start(Engine::in_memory(), Some("lbb_sk_test_local")).await;
    let api = &srv.api;

    // 1. create
    let inst = api.create("counter-1", 60_000).await;
    assert_instance(&inst);
    assert_eq!(inst["status"], "idle");
    assert_eq!(inst["state"], json!({"count": 0}));

    // An identical repeat succeeds.
    api.create("counter-1", 60_000).await;

    // 2. message: a validated WorkflowTurn with its nullable fields present.
    let turn = api.send("counter-1", "request-1", json!({"add": 2})).await;
    assert_turn(&turn);
    assert_eq!(turn["status"], "queued");
    assert_eq!(turn["attempt"], 0);
    assert_eq!(turn["result"], Value::Null);
    assert_eq!(turn["state_after"], Value::Null);
    assert_eq!(turn["steps"], json!([]));
    // A repeat answers the same turn.
    let again = api.send("counter-1", "request-1", json!({"add": 2})).await;
    assert_eq!(again["number"], turn["number"]);

    // 3. claim
    let task = api.claim(10_000).await;
    for key in [
        "workflow_type",
        "state",
        "token",
        "lease_ms",
        "effect_prefix",
        "turn",
    ] {
        assert!(task.get(key).is_some(), "task lacks `{key}`: {task}");
    }
    assert_eq!(task["workflow_type"], "counter");
    assert_eq!(task["state"], json!({"count": 0}));
    assert!(task["lease_ms"].is_u64(), "lease_ms is an integer");
    assert_eq!(task["lease_ms"], 60_000);
    let prefix = task["effect_prefix"].as_str().unwrap();
    assert!(!prefix.contains('/') && !prefix.is_empty());
    assert_turn(&task["turn"]);
    assert_eq!(task["turn"]["status"], "running");
    assert_eq!(task["turn"]["attempt"], 1);
    assert_eq!(task["turn"]["message"], json!({"add": 2}));
    assert!(task["turn"]["run"]["id"].as_str().is_some());
    let lease = lease(&task);

    // 4. operation: the answer carries operation.checkpoint (null) and details (null).
    let op = api
        .post(
            "/v1/workflows/turns/operation",
            with(
                &lease,
                json!({"position": 0, "key": "add", "kind": "step", "timeout_ms": 300000}),
            ),
        )
        .await
        .ok();
    assert_turn(&op);
    let operation = &op["operation"];
    for key in [
        "key",
        "kind",
        "attempt",
        "started_at_ms",
        "timeout_ms",
        "deadline_ms",
        "last_heartbeat_ms",
        "sequence",
        "details",
        "checkpoint",
    ] {
        assert!(
            operation.get(key).is_some(),
            "operation lacks `{key}`: {operation}"
        );
    }
    assert_eq!(operation["checkpoint"], Value::Null);
    assert!(operation.get("heartbeat_timeout_ms").is_none());

    // A progress write and its exact repeat.
    let progress = with(
        &lease,
        json!({"key": "add", "sequence": 1, "details": {"phase": "adding", "done": 0}, "checkpoint": null}),
    );
    api.post("/v1/workflows/turns/progress", progress.clone())
        .await
        .ok();
    api.post("/v1/workflows/turns/progress", progress)
        .await
        .ok();

    // 5. checkpoint: the saved step echoes exactly what was sent.
    let cp = with(
        &lease,
        json!({"position": 0, "key": "add", "kind": "step", "output": 2}),
    );
    let saved = api
        .post("/v1/workflows/turns/checkpoint", cp.clone())
        .await
        .ok();
    assert_turn(&saved);
    let step = &saved["steps"][0];
    assert_eq!(step["key"], "add");
    assert_eq!(step["kind"], "step");
    assert_eq!(step["output"], 2);
    assert!(step.get("delay_ms").is_none() && step.get("signal_name").is_none());
    // An exact repeat succeeds.
    api.post("/v1/workflows/turns/checkpoint", cp).await.ok();

    // A step without `output` is saved with `"output": null`.
    let none = api
        .post(
            "/v1/workflows/turns/checkpoint",
            with(&lease, json!({"position": 1, "key": "log", "kind": "step"})),
        )
        .await
        .ok();
    assert_eq!(none["steps"][1]["output"], Value::Null);
    assert!(none["steps"][1].get("output").is_some());

    // Heartbeat.
    assert_turn(
        &api.post("/v1/workflows/turns/heartbeat", lease.clone())
            .await
            .ok(),
    );

    // 6. complete, and its byte-identical repeat.
    let complete =
        serde_json::to_vec(&with(&lease, json!({"result": 2, "state": {"count": 2}}))).unwrap();
    let done = api
        .raw(
            reqwest::Method::POST,
            "/v1/workflows/turns/complete",
            Some(complete.clone()),
        )
        .await
        .ok();
    assert_turn(&done);
    assert_eq!(done["status"], "completed");
    assert_eq!(done["result"], 2);
    assert_eq!(done["state_after"], json!({"count": 2}));
    api.raw(
        reqwest::Method::POST,
        "/v1/workflows/turns/complete",
        Some(complete),
    )
    .await
    .ok();

    // 7. an idle claim answers exactly {"task": null}.
    let idle = api
        .post(
            "/v1/workflows/turns/claim",
            json!({"worker": "w", "wait_ms": 0, "workflows": [{"workflow_type": "counter", "version": "v1"}]}),
        )
        .await
        .ok();
    assert_eq!(idle, json!({"task": null}));

    // 8. status, inbox, history, single turn, list, type inbox.
    let inst = api
        .get("/v1/workflows/instances/get?id=counter-1")
        .await
        .ok();
    assert_instance(&inst);
    assert_eq!(inst["state"], json!({"count": 2}));
    assert_eq!(inst["status"], "idle");
    assert_eq!(inst["completed_turns"], 1);
    assert_eq!(inst["history_through"], 1);

    let inbox = api
        .get("/v1/workflows/instances/inbox?id=counter-1&payloads=true")
        .await
        .ok();
    for key in [
        "workflow_id",
        "workflow_type",
        "version",
        "status",
        "pending_messages",
        "messages",
    ] {
        assert!(inbox.get(key).is_some(), "inbox lacks `{key}`: {inbox}");
    }
    assert_eq!(inbox["messages"], json!([]));

    let history = api
        .get("/v1/workflows/instances/history?id=counter-1")
        .await
        .ok();
    let turns = history["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1);
    assert_turn(&turns[0]);
    assert_eq!(turns[0]["result"], 2);

    let one = api
        .get("/v1/workflows/instances/turn?id=counter-1&turn=1")
        .await
        .ok();
    assert_turn(&one);

    let list = api.get("/v1/workflows/instances").await.ok();
    assert_eq!(list["instances"].as_array().unwrap().len(), 1);
    assert_instance(&list["instances"][0]);

    let by_type = api
        .get("/v1/workflows/inbox?workflow_type=counter&version=v1")
        .await
        .ok();
    for key in ["workflow_type", "identities", "with_messages", "instances"] {
        assert!(by_type.get(key).is_some(), "{by_type}");
    }
    assert_eq!(by_type["identities"], 1);

    // Delete, then a repeat.
    let del = api
        .post(
            "/v1/workflows/instances/delete",
            json!({"workflow_id": "counter-1"}),
        )
        .await
        .ok();
    assert_eq!(del, json!({"deleted": true}));
    let del = api
        .post(
            "/v1/workflows/instances/delete",
            json!({"workflow_id": "counter-1"}),
        )
        .await
        .ok();
    assert_eq!(del, json!({"deleted": false}));
}

#[tokio::test]
async fn sleep_and_signal_variants_have_the_wire_shapes() {
    let srv = start(Engine::in_memory(), None).await;
    let api = &srv.api;
    api.create("review-1", 60_000).await;
    api.send("review-1", "m1", json!({"add": 1})).await;

    // A sleep: saved with delay_ms, no output key beyond null, no signal_name; the turn waits.
    let task = api.claim(0).await;
    let l = lease(&task);
    let slept = api
        .post(
            "/v1/workflows/turns/checkpoint",
            with(
                &l,
                json!({"position": 0, "key": "cool-down", "kind": "sleep", "delay_ms": 50}),
            ),
        )
        .await
        .ok();
    let s = &slept["steps"][0];
    assert_step(s);
    assert_eq!(s["delay_ms"], 50);
    assert_eq!(s["output"], Value::Null);
    assert!(s["wake_at_ms"].is_i64() || s["wake_at_ms"].is_u64());
    assert_eq!(slept["status"], "waiting");

    // Due again: the next claim replays the sleep with a new token and the same attempt.
    let task2 = api.claim(5_000).await;
    assert_ne!(task2["token"], task["token"]);
    assert_eq!(task2["turn"]["attempt"], task["turn"]["attempt"]);
    assert_eq!(task2["effect_prefix"], task["effect_prefix"]);
    assert_eq!(task2["turn"]["steps"][0], *s);
    let l2 = lease(&task2);

    // A signal wait with nothing buffered suspends the turn.
    let waiting = api
        .post(
            "/v1/workflows/turns/wait-signal",
            with(
                &l2,
                json!({"position": 1, "key": "review", "name": "approval", "timeout_ms": 86400000}),
            ),
        )
        .await
        .ok();
    assert_eq!(waiting["status"], "waiting");
    let w = &waiting["steps"][1];
    assert_step(w);
    assert_eq!(w["kind"], "signal");
    assert_eq!(w["signal_name"], "approval");
    assert_eq!(w["delay_ms"], 86400000);
    assert_eq!(w["output"], Value::Null);

    // The app's signal answers a WorkflowTurn; the turn is offered again with the value.
    let signalled = api
        .post(
            "/v1/workflows/turns/signal",
            json!({"workflow_id": "review-1", "turn": 1, "id": "ev-1", "name": "approval",
                   "value": {"approved": true}}),
        )
        .await
        .ok();
    assert_turn(&signalled);
    let task3 = api.claim(5_000).await;
    assert_eq!(
        task3["turn"]["steps"][1]["output"],
        json!({"received": true, "value": {"approved": true}})
    );
    assert_eq!(task3["turn"]["attempt"], task["turn"]["attempt"]);
    let l3 = lease(&task3);

    // A continuation: the next message joins the inbox tail with a server-made id and origin.
    let done = api
        .post(
            "/v1/workflows/turns/complete",
            with(
                &l3,
                json!({"state": {"count": 1}, "continuation": {"message": {"add": 5}}}),
            ),
        )
        .await
        .ok();
    assert_eq!(done["continued_to"], 2);
    assert_eq!(done["result"], Value::Null);
    let task4 = api.claim(5_000).await;
    assert_eq!(task4["turn"]["number"], 2);
    assert_eq!(task4["turn"]["message"], json!({"add": 5}));
    assert_eq!(task4["turn"]["origin"]["kind"], "continuation");
    assert_eq!(task4["state"], json!({"count": 1}));

    // A fail with retry_at_ms and non_retryable false is accepted.
    let failed = api
        .post(
            "/v1/workflows/turns/fail",
            with(
                &lease(&task4),
                json!({"error": "the worker stopped and released the turn", "non_retryable": false,
                       "retry_at_ms": 1}),
            ),
        )
        .await
        .ok();
    assert_turn(&failed);
}

#[tokio::test]
async fn big_numbers_and_unicode_survive_the_round_trip() {
    let srv = start(Engine::in_memory(), None).await;
    let api = &srv.api;
    api.create("n-1", 60_000).await;
    let body = br#"{"workflow_id":"n-1","id":"m1","message":{"big":123456789012345678901234567890,"f":0.1000000000000000055511151231257827,"s":"\u00e9t\u00e9 \ud83d\ude00"}}"#;
    let turn = api
        .raw(
            reqwest::Method::POST,
            "/v1/workflows/instances/message",
            Some(body.to_vec()),
        )
        .await
        .ok();
    let text = serde_json::to_string(&turn["message"]).unwrap();
    assert!(text.contains("123456789012345678901234567890"), "{text}");
    assert!(
        text.contains("0.1000000000000000055511151231257827"),
        "{text}"
    );
    assert_eq!(turn["message"]["s"], "été 😀");
}

#[tokio::test]
async fn graph_and_stack_address_separate_namespaces() {
    let srv = start(Engine::in_memory(), None).await;
    let main = srv.api.scoped("graph=main");
    let other = srv.api.scoped("graph=other");
    let staged = srv.api.scoped("graph=main&stack=prod");
    let default = srv.api.scoped("");
    main.create("same-id", 60_000).await;
    main.send("same-id", "m1", json!({"add": 1})).await;
    for api in [&other, &staged, &default] {
        api.get("/v1/workflows/instances/get?id=same-id")
            .await
            .err(404, "not_found");
        // Nothing to claim there either.
        assert_eq!(api.claim(0).await, Value::Null);
    }
    // The same id is a different instance in another namespace.
    staged.create("same-id", 60_000).await;
    let s = staged.get("/v1/workflows/status").await.ok();
    assert_eq!(s["namespace"], "main@prod");
    assert_eq!(s["instances"], 1);
    assert_eq!(s["pending_messages"], 0);
    let m = main.get("/v1/workflows/status").await.ok();
    assert_eq!(m["namespace"], "main");
    assert_eq!(m["pending_messages"], 1);
    assert_eq!(m["instances_by_status"]["queued"], 1);
    let d = default.get("/v1/workflows/status").await.ok();
    assert_eq!(d["namespace"], "default");
    assert_eq!(d["instances"], 0);
    // A later `graph` overrides an earlier one, as the client's per-call parameters do.
    let overridden = srv.api.scoped("graph=other&graph=main");
    overridden
        .get("/v1/workflows/instances/get?id=same-id")
        .await
        .ok();
}

#[tokio::test]
async fn a_waiting_claim_is_woken_by_a_message() {
    let srv = start(Engine::in_memory(), None).await;
    let api = srv.api.clone();
    api.create("wake-1", 60_000).await;
    let claimer = api.clone();
    let started = Instant::now();
    let waiting = tokio::spawn(async move { claimer.claim(10_000).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "an idle claim waits");
    api.send("wake-1", "m1", json!({"add": 1})).await;
    let task = waiting.await.unwrap();
    assert_eq!(task["turn"]["message_id"], "m1");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "woken by the message, not by the timeout: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_idle_claim_waits_about_wait_ms() {
    let srv = start(Engine::in_memory(), None).await;
    let started = Instant::now();
    assert_eq!(srv.api.claim(1_500).await, Value::Null);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1_400) && took < Duration::from_secs(4),
        "{took:?}"
    );
}

#[tokio::test]
async fn shutdown_answers_waiting_claims_and_stops() {
    let srv = start(Engine::in_memory(), None).await;
    let claimer = srv.api.clone();
    let waiting = tokio::spawn(async move { claimer.claim(10_000).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    srv.shutdown.trigger();
    assert_eq!(waiting.await.unwrap(), Value::Null);
    tokio::time::timeout(Duration::from_secs(5), srv.task)
        .await
        .expect("the server stops soon after the signal")
        .unwrap()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[tokio::test]
async fn schemas_are_registered_and_served() {
    let srv = start(Engine::in_memory(), None).await;
    let api = &srv.api;
    let doc = json!({
        "workflow_type": "counter", "version": "v1",
        "message": {"type": "object", "required": ["add"], "properties": {"add": {"type": "integer"}}},
        "signals": {"approval": {"type": "object", "properties": {"approved": {"type": "boolean"}}}},
        "state": {"type": "object"},
        "reply": {"type": "integer"}
    });
    let registered = api.post("/v1/workflows/schemas", doc.clone()).await.ok();
    assert_eq!(registered["message"], doc["message"]);
    let one = api
        .get("/v1/workflows/schemas?workflow_type=counter&version=v1")
        .await
        .ok();
    assert_eq!(one["signals"], doc["signals"]);
    assert_eq!(one["reply"], doc["reply"]);
    let all = api.get("/v1/workflows/schemas").await.ok();
    assert_eq!(all["schemas"].as_array().unwrap().len(), 1);
    // Per namespace.
    let other = api.scoped("graph=other");
    assert_eq!(
        other.get("/v1/workflows/schemas").await.ok()["schemas"],
        json!([])
    );
    other
        .get("/v1/workflows/schemas?workflow_type=counter&version=v1")
        .await
        .err(404, "not_found");
}
